#!/usr/bin/env python3
"""Schema test of examples/k8s/ (there is no cluster here; docs/cluster.md).

Checks each manifest against a JSON schema of the fields korch relies on
(a subset of the Kubernetes API: kinds, apiVersions, selectors, the Indexed
Job, GPU requests, Secret references), and the cross-file rules: every
secretKeyRef names a Secret and a key that secret.yaml defines; the workers
request nvidia.com/gpu and run `korch worker`; the coordinator runs with
evaluator.remote; no manifest but the Secret holds a password or key.
Exit 0 when every check passes; prints each failure otherwise.
"""
import pathlib
import re
import sys

import jsonschema
import yaml

K8S = pathlib.Path(__file__).resolve().parents[2] / "examples" / "k8s"

ENV = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
            "value": {"type": "string"},
            "valueFrom": {
                "type": "object",
                "minProperties": 1,
                "maxProperties": 1,
                "properties": {
                    "secretKeyRef": {
                        "type": "object",
                        "required": ["name", "key"],
                        "additionalProperties": False,
                        "properties": {"name": {"type": "string"}, "key": {"type": "string"}},
                    },
                    "fieldRef": {
                        "type": "object",
                        "required": ["fieldPath"],
                        "properties": {"fieldPath": {"type": "string"}},
                    },
                },
                "additionalProperties": False,
            },
        },
        "oneOf": [{"required": ["value"]}, {"required": ["valueFrom"]}],
        "additionalProperties": False,
    },
}
QUANTITY = {"type": ["string", "integer"], "pattern": "^[0-9]+(\\.[0-9]+)?(m|Ki|Mi|Gi|Ti)?$"}
CONTAINER = {
    "type": "object",
    "required": ["name", "image", "args"],
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
        "image": {"type": "string", "minLength": 1},
        "args": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "env": ENV,
        "ports": {"type": "array"},
        "volumeMounts": {
            "type": "array",
            "items": {"type": "object", "required": ["name", "mountPath"]},
        },
        "resources": {
            "type": "object",
            "properties": {
                "limits": {"type": "object", "additionalProperties": QUANTITY},
                "requests": {"type": "object", "additionalProperties": QUANTITY},
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}
POD_TEMPLATE = {
    "type": "object",
    "required": ["metadata", "spec"],
    "properties": {
        "metadata": {"type": "object", "required": ["labels"]},
        "spec": {
            "type": "object",
            "required": ["containers"],
            "properties": {
                "containers": {"type": "array", "items": CONTAINER, "minItems": 1},
                "restartPolicy": {"enum": ["Always", "OnFailure", "Never"]},
                "terminationGracePeriodSeconds": {"type": "integer", "minimum": 0},
                "volumes": {"type": "array", "items": {"type": "object", "required": ["name"]}},
            },
        },
    },
}
METADATA = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}},
}


def workload(spec_required, spec_properties):
    """A named object whose spec has these required keys and properties."""
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "metadata": METADATA,
            "spec": {"type": "object", "required": spec_required, "properties": spec_properties},
        },
    }


SCHEMAS = {
    ("v1", "Secret"): {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "stringData"],
        "properties": {
            "metadata": METADATA,
            "type": {"const": "Opaque"},
            "stringData": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    },
    ("apps/v1", "Deployment"): workload(
        ["replicas", "selector", "template"],
        {
            "replicas": {"const": 1},
            "selector": {"type": "object", "required": ["matchLabels"]},
            "template": POD_TEMPLATE,
        },
    ),
    ("batch/v1", "Job"): workload(
        ["completionMode", "completions", "parallelism", "template"],
        {
            "completionMode": {"const": "Indexed"},
            "completions": {"type": "integer", "minimum": 1},
            "parallelism": {"type": "integer", "minimum": 1},
            "backoffLimitPerIndex": {"type": "integer", "minimum": 0},
            "template": POD_TEMPLATE,
        },
    ),
}


def main():
    failures = []
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                docs.append((path.name, doc))
    if not docs:
        failures.append(f"no manifests in {K8S}")
    secrets = {}
    for name, doc in docs:
        key = (doc.get("apiVersion"), doc.get("kind"))
        schema = SCHEMAS.get(key)
        if schema is None:
            failures.append(f"{name}: unexpected {key}")
            continue
        for error in jsonschema.Draft202012Validator(schema).iter_errors(doc):
            failures.append(f"{name}: {doc['metadata'].get('name')}: {list(error.path)}: {error.message}")
        if doc["kind"] == "Secret":
            secrets[doc["metadata"]["name"]] = set(doc.get("stringData", {}))
        elif "password" in yaml.safe_dump(doc).lower().replace("pgpassword", ""):
            failures.append(f"{name}: a password outside the Secret")
    kinds = {doc["kind"]: doc for _, doc in docs}
    for want in ("Secret", "Deployment", "Job"):
        if want not in kinds:
            failures.append(f"no {want} among the manifests")
    for name, doc in docs:
        if doc["kind"] == "Secret":
            continue
        spec = doc["spec"]
        template = spec["template"]
        if doc["kind"] == "Deployment" and spec["selector"]["matchLabels"].items() - template["metadata"]["labels"].items():
            failures.append(f"{name}: the selector does not match the pod labels")
        for c in template["spec"]["containers"]:
            env = {e["name"]: e for e in c.get("env", [])}
            for e in env.values():
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref and ref["key"] not in secrets.get(ref["name"], set()):
                    failures.append(f"{name}: {e['name']} names {ref['name']}/{ref['key']}, which no Secret defines")
            for ref in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", " ".join(c["args"])):
                if ref not in env:
                    failures.append(f"{name}: args use $({ref}) but the container has no such env")
            if "KORCH_STORE_URL" not in env:
                failures.append(f"{name}: the container has no KORCH_STORE_URL")
            if doc["kind"] == "Job":
                if c["args"][0] != "worker" or "--gpus" not in c["args"]:
                    failures.append(f"{name}: the worker does not run `korch worker ... --gpus ...`")
                if any("STORE_URL" in a or "postgres://" in a or "postgresql://" in a for a in c["args"]):
                    failures.append(f"{name}: the store URL is on the command line (ps shows it); "
                                    "give it as KORCH_STORE_URL in the environment")
                gpus = c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
                if not isinstance(gpus, int) or gpus < 1:
                    failures.append(f"{name}: the worker requests no nvidia.com/gpu")
                if any(k in env for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")):
                    failures.append(f"{name}: workers need only the store, not LLM keys")
            if doc["kind"] == "Deployment":
                args = c["args"]
                if args[0] != "serve" or "--evaluator-remote" not in args or args[args.index("--evaluator-remote") + 1] != "true":
                    failures.append(f"{name}: the coordinator does not run korch serve with evaluator.remote")
                if "nvidia.com/gpu" in c.get("resources", {}).get("limits", {}):
                    failures.append(f"{name}: the coordinator needs no GPU")
    for f in failures:
        print("FAIL", f)
    print(f"k8s manifests: {len(docs)} documents, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
