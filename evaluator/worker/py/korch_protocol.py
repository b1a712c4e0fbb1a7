"""The job protocol's schema on the Python side (issue #36): versions and
verdicts, read from evaluator/protocol/protocol.json, the one file the C++
side's protocol_schema.hpp is generated from. A leaf module: it imports
nothing of korch's. Read once, in the zygote (the jobs' sandbox does not see
the file; they inherit the module)."""
import json
import os

_SCHEMA_PATH = os.environ.get("KORCH_PROTOCOL_SCHEMA") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "protocol", "protocol.json")

with open(_SCHEMA_PATH) as _f:
    SCHEMA = json.load(_f)

EVAL_VERSION = SCHEMA["evaluator_version"]
JOB_PROTOCOL = int(SCHEMA["job_protocol"])
VERDICTS = tuple(v["name"] for v in SCHEMA["verdicts"])
_KNOWN = frozenset(VERDICTS)


def check_verdict(name):
    """`name` if the schema knows it; a ValueError otherwise (a typo in a
    judge is a bug to see, never a verdict the daemon reads as a crash)."""
    if name not in _KNOWN:
        raise ValueError("verdict %r is not in evaluator/protocol/protocol.json (%s)"
                         % (name, ", ".join(VERDICTS)))
    return name


# ---------------------------------------------------------------- the measure result
# measure_result in protocol.json: the numbers a measure job's result carries
# (MEASURED) and the parts of its evidence the daemon decides on, one
# dataclass each (TimingHealth, CountedWork), made here from the schema as
# the daemon's structs are generated from it (protocol_types.hpp).
import dataclasses as _dc  # noqa: E402

_PY_TYPES = {"number": float, "bool": bool, "string": str, "strings": list}

MEASURED = tuple(f["name"] for f in SCHEMA["measure_result"]["measured"]["fields"])


def _dataclass(spec):
    # Every field defaults to None, "not set": evidence() writes only the
    # fields a judge set, so an unset one reads as its schema default on the
    # daemon's side.
    fields = [(f["name"], _PY_TYPES[f["type"]], _dc.field(default=None)) for f in spec["fields"]]
    cls = _dc.make_dataclass(spec["name"], fields, frozen=True)
    cls.__doc__ = "%s (%s): %s" % (spec["name"], spec["where"], spec["meaning"])
    return cls


STRUCTS = {s["name"]: _dataclass(s) for s in SCHEMA["measure_result"]["structs"]}
TimingHealth = STRUCTS["TimingHealth"]
CountedWork = STRUCTS["CountedWork"]


def evidence(cls, **fields):
    """The evidence dict of a `cls` (TimingHealth, CountedWork) with these
    fields, in the order given. A field the schema lacks is a TypeError (a
    typo in a judge is a bug to see, never a field the daemon silently
    drops); a value of the wrong kind is a TypeError too."""
    value = cls(**fields)
    for f in _dc.fields(cls):
        v = getattr(value, f.name)
        if v is None:
            continue
        if f.type is float:
            ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        else:
            ok = isinstance(v, f.type)
        if not ok:
            raise TypeError("%s.%s is %r, not %s (protocol.json)" % (cls.__name__, f.name, v,
                                                                     f.type.__name__))
    return dict(fields)


def measured(**fields):
    """The measured numbers of a result (protocol.json's measure_result.measured),
    as given; a name the schema lacks is a TypeError."""
    unknown = sorted(set(fields) - set(MEASURED))
    if unknown:
        raise TypeError("not measured fields of protocol.json: %s" % ", ".join(unknown))
    return fields
