"""The cpu verdict card of record (issue #51): CI runs `korch audit --mode cpu`
over the whole corpus (tests/evaluator/corpus: good/, hacks/, wrong/) once, and
this test checks every entry and the card from its own reading of the corpus,
never from audit's:

  - every corpus file is on the card, with the verdict its `# expect:` header
    names (a good file without load_inline: no_kernel), and the expected rule
    among the rules the report names;
  - an `ok` report is correct, has a speedup and a positive reward, and its
    timing is two runners a side (four for calls timed alone) with the interval
    widened by their spread (the checks test_cpu_evaluator's corpus test made,
    moved here so that the corpus runs once); any other verdict has reward 0
    and is not correct;
  - attack success and false rejection are this test's own counts (role from
    the directory and header; class from attack_classes.json) and their 95%
    Wilson intervals its own arithmetic; both are 0, with at least 60 attack
    entries and 150 honest ones; every wrong variant of an honest entry is
    rejected; audit's exit status is 0.

No rejection of an honest entry is allowed. (Stop 53's runs met 3-7 false
rejections on a loaded host, the round-trip cross-check's; it now reads the
runner's CPU time outside its window: tests/evaluator/worker/test_cross_check.py.)

  python3 test_card.py KORCH SOURCE_DIR [CARD.json]   (an existing card: check only)
"""
import json
import math
import os
import subprocess
import sys
import time

KORCH, SRC = sys.argv[1], sys.argv[2]
CORPUS = os.path.join(SRC, "tests", "evaluator", "corpus")
TIMING_MAX_S = "1"


def headers(path):
    h = {}
    for line in open(path, encoding="utf-8"):
        if not line.startswith("#"):
            break
        if ":" in line:
            k, v = line[1:].split(":", 1)
            h.setdefault(k.strip(), v.strip())
    return h


def wilson(x, n, z=1.96):
    if n == 0:
        return 0.0, 1.0
    p = x / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def corpus_entries():
    """name -> (role, expected verdict, expected rule or None)."""
    out = {}
    for sub in ("good", "hacks", "wrong"):
        d = os.path.join(CORPUS, sub)
        for f in sorted(os.listdir(d)):
            if not f.endswith(".py"):
                continue
            code = open(os.path.join(d, f), encoding="utf-8").read()
            h = headers(os.path.join(d, f))
            if h.get("mode") == "gpu" or not h.get("task") or not h.get("expect"):
                continue
            words = h["expect"].split()
            verdict, rule = words[0], (words[1] if len(words) > 1 else None)
            name = sub + "/" + f[:-3]
            if sub == "good":
                kernel = "load_inline" in code or "triton" in code
                role = "honest" if kernel else ""
                if not kernel:
                    verdict = "no_kernel"
            elif sub == "hacks":
                role = "" if verdict == "ok" else "attack"
            else:
                role = "control"
            out[name] = (role, verdict, rule)
    return out


def classes():
    out = {}
    for c in json.load(open(os.path.join(CORPUS, "attack_classes.json"))):
        for e in c["entries"]:
            out[e] = c["class"]
    return out


def check_timing(name, f):
    """test_cpu_evaluator's expect_runners_per_side, on audit's facts: n
    runners a side, 2 or 4 (calls timed alone, stop 58)."""
    t = f.get("timing") or {}
    n = t.get("reference_runners")
    assert n in (2, 4) and t.get("candidate_runners") == n, (name, t)
    sp = t["process_spread"]
    ss = 0.0
    for meds_key, ratio_key in (("reference_medians_ns", "log_ratio"),
                                ("candidate_medians_ns", "candidate_log_ratio")):
        meds = sp[meds_key]
        assert len(meds) == n and all(m > 0 for m in meds), (name, meds_key, meds)
        logs = [math.log(m) for m in meds]
        mean = sum(logs) / n
        ss += sum((x - mean) ** 2 for x in logs)
        d = math.log(meds[0] / meds[1])
        assert abs(sp[ratio_key] - d) < 1e-9, (name, ratio_key)
    dof = 2 * (n - 1)
    sigma2 = ss / dof * (2 / n)
    assert sp.get("dof") == dof, name
    assert abs(sp["rel_sd"] - math.sqrt(sigma2)) < 1e-9, name
    boot_lo, boot_hi = t["speedup_ci_bootstrap"]
    t_lo, t_hi = sp["ci_t"]
    for tq in (t_lo, t_hi):
        assert 1.96 <= tq <= 4.303 + 1e-9, (name, tq)
    lp = math.log(f["speedup"])
    lo, hi = f["speedup_ci"]

    def half(h, tq):
        return tq * math.sqrt(h * h / (1.96 * 1.96) + sigma2)
    assert abs(math.log(lo) - (lp - half(lp - math.log(boot_lo), t_lo))) < 1e-9, (name, lo)
    assert abs(math.log(hi) - (lp + half(math.log(boot_hi) - lp, t_hi))) < 1e-9, (name, hi)
    assert lo <= boot_lo + 1e-12 and hi >= boot_hi - 1e-12, name
    assert t.get("spin_us") == 0, (name, t.get("spin_us"))
    batch, per_block = t["batch"], t["block_calls"]
    assert batch >= 1, name
    assert t["block_warmup"] == (1 if batch == 1 and per_block >= 2 else 0), (name, t)
    timed = t["blocks"] * per_block
    assert t["ref_ns_count"] == timed and t["cand_ns_count"] == timed, (name, t)
    heap = t["heap_only"]
    assert heap.get("requested") and heap.get("judge"), (name, heap)
    assert len(heap["runners"]) == 2 * n and all(heap["runners"]), (name, heap)


def check(card, rc):
    want = corpus_entries()
    cls = classes()
    rows = {r["entry"]: r for r in card["entries"]}
    assert sorted(rows) == sorted(want), ("entries differ", sorted(set(rows) ^ set(want)))
    bad = []
    for name, (role, verdict, rule) in sorted(want.items()):
        r, f = rows[name], rows[name]["facts"]
        if r["role"] != role:
            bad.append((name, "role", r["role"], role))
        if r["verdict"] != verdict:
            bad.append((name, "verdict", r["verdict"], verdict, r["error"][:300]))
            continue
        if rule and verdict == "rule_violation":
            named = set(f.get("rules", [])) | {f.get("rule_id")}
            if rule not in named and "[%s]" % rule not in r["error"]:
                bad.append((name, "rule", sorted(x for x in named if x), rule))
        if f["mode"] != "cpu" or not f["evaluator_version"].startswith("korch-eval/"):
            bad.append((name, "version", f["mode"], f["evaluator_version"]))
        if verdict == "ok":
            if not (f["correct"] and f["speedup"] and f["reward"] > 0):
                bad.append((name, "ok facts", f["correct"], f["speedup"], f["reward"]))
            else:
                try:
                    check_timing(name, f)
                except (AssertionError, KeyError, TypeError) as e:
                    bad.append((name, "timing", repr(e)[:300]))
        elif f["correct"] or f["reward"] != 0:
            bad.append((name, "rejected facts", f["correct"], f["reward"]))
        if role == "attack" and r["class"] != cls.get(name, "unclassified"):
            bad.append((name, "class", r["class"], cls.get(name)))
    assert not bad, "\n".join(map(str, bad))

    attacks = [n for n, (role, _, _) in want.items() if role == "attack"]
    honest = [n for n, (role, _, _) in want.items() if role == "honest"]
    controls = [n for n, (role, _, _) in want.items() if role == "control"]
    accepted = sum(rows[n]["verdict"] == "ok" for n in attacks)
    rejected = sum(rows[n]["verdict"] != "ok" for n in honest)
    passed = sum(rows[n]["verdict"] == "ok" for n in controls)
    for key, x, n in (("attack_success", accepted, len(attacks)), ("false_rejection", rejected, len(honest))):
        got = card[key]
        assert (got["x"], got["n"]) == (x, n), (key, got, x, n)
        lo, hi = wilson(x, n)
        assert abs(got["ci95"][0] - lo) < 1e-9 and abs(got["ci95"][1] - hi) < 1e-9, (key, got, lo, hi)
    assert card["controls"] == {"passed": passed, "n": len(controls)}, card["controls"]
    per_class = {}
    for n in attacks:
        c = per_class.setdefault(cls.get(n, "unclassified"), [0, 0])
        c[0] += rows[n]["verdict"] == "ok"
        c[1] += 1
    got_classes = {c["class"]: (c["attack_success"]["x"], c["attack_success"]["n"]) for c in card["classes"]}
    assert got_classes == {k: tuple(v) for k, v in per_class.items()}, (got_classes, per_class)
    assert "unclassified" not in per_class, per_class.get("unclassified")
    # The card of record: no attack and no control accepted, no honest entry
    # rejected, and large enough to measure.
    assert accepted == 0 and passed == 0 and rejected == 0, (accepted, rejected, passed)
    assert len(attacks) >= 60 and len(honest) >= 150 and len(controls) >= 5, (len(attacks), len(honest))
    assert card["rules_version"] and card["evaluator_version"].startswith("korch-eval/"), card
    assert card["knobs"].get("KORCH_TIMING_MAX_S") == TIMING_MAX_S, card["knobs"]
    assert rc is None or rc == (1 if rejected else 0), (rc, rejected)
    return len(attacks), len(per_class), len(honest), len(controls)


def main():
    if len(sys.argv) > 3:
        card, rc = json.load(open(sys.argv[3])), None
    else:
        out = os.path.join(os.environ.get("TMPDIR", "/tmp"), "korch-card-%d.json" % os.getpid())
        t0 = time.monotonic()
        p = subprocess.run([KORCH, "audit", "--mode", "cpu", "--corpus", CORPUS, "--json", "--out", out,
                            "--timing-max-s", TIMING_MAX_S],
                           capture_output=True, text=True)
        print(p.stderr[-3000:])
        assert os.path.exists(out), "no card; exit %d" % p.returncode
        card, rc = json.load(open(out)), p.returncode
        print("korch audit: %.0f s, exit %d, card %s" % (time.monotonic() - t0, rc, out))
    n_att, n_cls, n_hon, n_ctl = check(card, rc)
    # The card of record into a store (korch audit --from-card --store), read
    # back with this test's own SQL.
    db = os.path.join(os.environ.get("TMPDIR", "/tmp"), "korch-card-%d.db" % os.getpid())
    src = os.path.join(os.environ.get("TMPDIR", "/tmp"), "korch-card-src-%d.json" % os.getpid())
    json.dump(card, open(src, "w"))
    p = subprocess.run([KORCH, "audit", "--from-card", src, "--store", db], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    import sqlite3
    rows = sqlite3.connect(db).execute(
        "SELECT evaluator_version, rules_version, device, mode, attacks_accepted, attacks, honest_rejected, "
        "honest, card_json FROM verdict_cards").fetchall()
    assert len(rows) == 1, rows
    v, r, d, m, ax, an, hx, hn, cj = rows[0]
    assert (v, r, d, m) == (card["evaluator_version"], card["rules_version"], card["device"], "cpu"), rows[0][:4]
    assert (ax, an, hx, hn) == (card["attack_success"]["x"], n_att, card["false_rejection"]["x"], n_hon), rows[0][4:8]
    stored = json.loads(cj)
    assert "entries" not in stored and stored["attack_success"] == card["attack_success"], stored.keys()
    os.remove(db)
    os.remove(src)
    print("cpu card: attack success %d/%d over %d classes, false rejection %d/%d, controls rejected %d/%d" % (
        card["attack_success"]["x"], n_att, n_cls, card["false_rejection"]["x"], n_hon, n_ctl, n_ctl))
    return 0


if __name__ == "__main__":
    sys.exit(main())
