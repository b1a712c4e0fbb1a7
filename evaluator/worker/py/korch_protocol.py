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
