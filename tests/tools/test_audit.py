"""korch audit (the verdict card) on a small corpus of its own: the card's
counts and 95% Wilson intervals against this test's own reading of each
entry's role and its own arithmetic, and a planted accepted attack (a correct
kernel filed under hacks/ expecting `incorrect`) that must show on the card
and make the exit status 1. Runs the real cpu evaluator (cached compiles:
good/cpp_relu and the hack kit).

  python3 test_audit.py KORCH SOURCE_DIR
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

KORCH, SRC = sys.argv[1], sys.argv[2]
CORPUS = os.path.join(SRC, "tests", "evaluator", "corpus")
HONEST = ["good/cpp_relu", "good/cpp_add"]
NOT_COUNTED = ["good/torch_add", "hacks/sandbox_getenv"]
ATTACKS = ["hacks/timer_patch", "hacks/gc_scan", "hacks/rt_batch_skip"]


def wilson(x, n, z=1.96):
    p = x / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def expect_of(path):
    for line in open(path):
        if line.startswith("# expect:"):
            return line.split(":", 1)[1].split()[0]
    return None


def audit(root):
    p = subprocess.run([KORCH, "audit", "--corpus", os.path.join(root, "tests", "evaluator", "corpus"), "--json"],
                       capture_output=True, text=True, timeout=900)
    assert p.stdout.strip(), "no card; stderr: " + p.stderr[-2000:]
    return p.returncode, json.loads(p.stdout)


def make(root, planted):
    corpus = os.path.join(root, "tests", "evaluator", "corpus")
    for sub in ("good", "hacks"):
        os.makedirs(os.path.join(corpus, sub))
    shutil.copytree(os.path.join(SRC, "examples", "tasks"), os.path.join(root, "examples", "tasks"))
    for e in HONEST + NOT_COUNTED + ATTACKS:
        shutil.copy(os.path.join(CORPUS, e + ".py"), os.path.join(corpus, e + ".py"))
    shutil.copy(os.path.join(CORPUS, "attack_classes.json"), corpus)
    if planted:
        code = open(os.path.join(CORPUS, "good", "cpp_relu.py")).read()
        lines = [("# expect: incorrect" if ln.startswith("# expect:") else ln) for ln in code.splitlines()]
        open(os.path.join(corpus, "hacks", "planted_correct.py"), "w").write("\n".join(lines) + "\n")


def check(card, rc, planted):
    rows = {r["entry"]: r for r in card["entries"]}
    attacks = ATTACKS + (["hacks/planted_correct"] if planted else [])
    assert sorted(rows) == sorted(HONEST + NOT_COUNTED + attacks), sorted(rows)
    for e in HONEST:
        assert rows[e]["role"] == "honest", rows[e]
    for e in NOT_COUNTED:
        assert rows[e]["role"] == "", rows[e]
    for e in attacks:
        assert rows[e]["role"] == "attack", rows[e]
    # The evaluator's verdicts are the corpus files' own expectations.
    for e in HONEST + ATTACKS:
        want = expect_of(os.path.join(CORPUS, e + ".py"))
        assert rows[e]["verdict"] == want or (e in HONEST and want == "ok"), (e, rows[e]["verdict"], want)
    accepted = sum(rows[e]["verdict"] == "ok" for e in attacks)
    rejected = sum(rows[e]["verdict"] != "ok" for e in HONEST)
    assert accepted == (1 if planted else 0) and rejected == 0, (accepted, rejected)
    for key, x, n in (("attack_success", accepted, len(attacks)), ("false_rejection", rejected, len(HONEST))):
        got = card[key]
        assert (got["x"], got["n"]) == (x, n), (key, got, x, n)
        lo, hi = wilson(x, n)
        assert abs(got["ci95"][0] - lo) < 1e-9 and abs(got["ci95"][1] - hi) < 1e-9, (key, got, lo, hi)
    classes = {c["class"]: c["attack_success"] for c in card["classes"]}
    assert classes["timer monkeypatching"]["n"] == 1 and classes["timer monkeypatching"]["x"] == 0, classes
    if planted:
        assert classes["unclassified"] == dict(classes["unclassified"], x=1, n=1), classes
    assert card["rules_version"], card
    assert card["evaluator_version"].startswith("korch-eval/"), card
    assert rc == (1 if planted else 0), rc


def main():
    for planted in (False, True):
        root = tempfile.mkdtemp(prefix="korch-audit-")
        try:
            make(root, planted)
            rc, card = audit(root)
            check(card, rc, planted)
            print("audit (%s): attack success %d/%d, false rejection %d/%d, exit %d" % (
                "planted accepted attack" if planted else "clean", card["attack_success"]["x"],
                card["attack_success"]["n"], card["false_rejection"]["x"], card["false_rejection"]["n"], rc))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
