"""Checks a `korch export --format sft` file (issue #37), independently of
korch: every line against sft_schema.json (python3-jsonschema), messages in
order (system first, roles alternating after the first user message, the last
one the assistant's), no code twice, no secret. Prints a summary; exit 1 on
the first problem.
  python3 check_sft.py FILE SCHEMA [SECRET...]"""
import hashlib
import json
import re
import sys

import jsonschema


def main():
    path, schema_path, secrets = sys.argv[1], sys.argv[2], sys.argv[3:]
    schema = json.load(open(schema_path))
    validator = jsonschema.Draft202012Validator(schema)
    seen_code, n = set(), 0
    text = open(path).read()
    for s in secrets:
        if s and s in text:
            sys.exit("a secret appears in the export")
    for i, line in enumerate(text.splitlines(), 1):
        rec = json.loads(line)
        errs = sorted(validator.iter_errors(rec), key=lambda e: list(e.path))
        if errs:
            sys.exit("line %d: %s at %s" % (i, errs[0].message, list(errs[0].path)))
        roles = [m["role"] for m in rec["messages"]]
        if "system" in roles[1:]:
            sys.exit("line %d: a system message after the first" % i)
        if roles[-1] != "assistant":
            sys.exit("line %d: the last message is not the assistant's" % i)
        body = roles[1:] if roles[0] == "system" else roles
        while body and body[0] == "user" and len(body) > 1 and body[1] == "user":
            body = body[1:]  # the task may follow a context message
        for a, b in zip(body, body[1:]):
            if a == b:
                sys.exit("line %d: two %s messages in a row: %s" % (i, a, roles))
        # No code twice: korch's code_sha where the record names it, else the
        # sha256 of the last python block the assistant wrote.
        key = rec.get("metadata", {}).get("code_sha")
        if key is None:
            blocks = [b for m in rec["messages"] if m["role"] == "assistant"
                      for b in re.findall(r"```python\n(.*?)```", m["content"], re.S)]
            key = hashlib.sha256(blocks[-1].encode()).hexdigest() if blocks else None
        if key is not None:
            if key in seen_code:
                sys.exit("line %d: the same code as an earlier record" % i)
            seen_code.add(key)
        n += 1
    print("check_sft: %d records valid" % n)


if __name__ == "__main__":
    main()
