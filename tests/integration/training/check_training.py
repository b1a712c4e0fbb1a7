#!/usr/bin/env python3
"""An independent reader of korch's training exports (issue 46): it reads the
store with its own SQL (Python's sqlite3) and says what the RL and SFT exports
must hold, then compares them with what `korch export` wrote.

RL: one record per scored action in order (each turn with code, then the
fallback SUBMIT of a final no turn names); a SUBMIT's reward is its report's,
a CHECK's 0; return_i = sum_{j>=i} gamma^(j-i) r_j; the verdict and its class.
SFT: one record per episode whose final scored code (the final's turn, or for a
fallback the latest turn with the scored code), its live epoch cut at that
turn's reply, de-duplicated by the code's sha in episode-id order.

usage: check_training.py DB CAMPAIGN_ID RL.jsonl SFT.jsonl GAMMA
Prints one JSON line of counts; exits non-zero on the first difference."""
import json
import sqlite3
import sys

DB, CAMPAIGN, RL, SFT, GAMMA = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
HACK_LIKE = {"no_kernel", "rule_violation", "impossible_timing"}
FAILED = {"compile_error", "runtime_error", "incorrect", "timeout"}


def fail(what):
    print("FAIL:", what, file=sys.stderr)
    sys.exit(1)


def verdict_class(v):
    if not v:
        return None
    if v == "ok":
        return "ok"
    if v in HACK_LIKE:
        return "hack_like"
    if v in FAILED:
        return "failed"
    return "not_judged"


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


db = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
db.row_factory = sqlite3.Row
episodes = [r["id"] for r in db.execute(
    "SELECT id FROM episodes WHERE campaign_id = ? ORDER BY id", (CAMPAIGN,))]


def report(request_id):
    row = db.execute("SELECT report_json FROM evaluations WHERE request_id = ? AND state = 'done'",
                     (request_id,)).fetchone()
    return json.loads(row["report_json"]) if row else None


def scored_turn(ep, final, turns):
    """(turn row, fallback) of the code the final scored, or (None, False)."""
    if final is None or not final["request_id"]:
        return None, False
    for t in turns:
        if t["eval_request_id"] == final["request_id"]:
            return t, False
    ev = db.execute("SELECT code_sha FROM evaluations WHERE request_id = ?",
                    (final["request_id"],)).fetchone()
    source = None
    for t in turns:
        if ev and t["code_sha"] == ev["code_sha"]:
            source = t
    return source, source is not None


rl = read_jsonl(RL)
sft = read_jsonl(SFT)
rl_by_ep = {}
for r in rl:
    rl_by_ep.setdefault(r["episode_id"], []).append(r)
sft_by_ep = {r["metadata"]["episode_id"]: r for r in sft}

counts = {"rl": 0, "sft": 0, "check_then_submit_same_code": 0, "fallback_rl": 0,
          "fallback_sft": 0, "hack_like": 0, "rewarded_submits": 0}
seen_sha = set()
for ep in episodes:
    turns = db.execute(
        "SELECT turn, action, code, code_sha, eval_request_id, eval_status, model_id FROM turns "
        "WHERE episode_id = ? AND parse_status = 'code' ORDER BY turn", (ep,)).fetchall()
    final = db.execute("SELECT reason, request_id, verdict, reward, correct FROM finals "
                       "WHERE episode_id = ?", (ep,)).fetchone()
    # --- RL ---
    want = []
    for t in turns:
        rep = report(t["eval_request_id"]) if t["eval_request_id"] else None
        submit = t["action"] == "submit"
        want.append({"turn": t["turn"], "action": t["action"], "fallback": False, "code": t["code"],
                     "request_id": t["eval_request_id"], "verdict": t["eval_status"] or None,
                     "reward": rep["reward"] if submit and rep else 0.0, "model_id": t["model_id"]})
    source, fallback = scored_turn(ep, final, turns)
    if fallback:
        rep = report(final["request_id"])
        want.append({"turn": source["turn"], "action": "submit", "fallback": True,
                     "code": source["code"], "request_id": final["request_id"],
                     "verdict": final["verdict"], "reward": rep["reward"] if rep else 0.0,
                     "model_id": source["model_id"]})
    g = 0.0
    for w in reversed(want):
        g = w["reward"] + GAMMA * g
        w["return"] = g
    got = rl_by_ep.get(ep, [])
    if len(got) != len(want):
        fail(f"{ep}: {len(got)} RL records, the store says {len(want)}")
    for i, (w, r) in enumerate(zip(want, got)):
        for k in ("turn", "action", "fallback", "code", "request_id", "verdict", "model_id"):
            if r[k] != w[k]:
                fail(f"{ep} step {i}: {k} is {r[k]!r}, the store says {w[k]!r}")
        if r["step"] != i:
            fail(f"{ep}: step {r['step']} at {i}")
        if abs(r["reward"] - w["reward"]) > 1e-9 or abs(r["return"] - w["return"]) > 1e-9:
            fail(f"{ep} step {i}: reward/return {r['reward']}/{r['return']}, "
                 f"want {w['reward']}/{w['return']}")
        if r["verdict_class"] != verdict_class(w["verdict"]):
            fail(f"{ep} step {i}: verdict_class {r['verdict_class']} for {w['verdict']}")
        counts["hack_like"] += r["verdict_class"] == "hack_like"
        counts["fallback_rl"] += w["fallback"]
    shas = [(t["code_sha"], t["action"]) for t in turns]
    counts["check_then_submit_same_code"] += any(
        a == "check" and (s, "submit") in shas for s, a in shas)
    # The rewarded SUBMIT is in the RL export, with its reward.
    if final is not None and final["request_id"]:
        hits = [r for r in got if r["request_id"] == final["request_id"] and r["action"] == "submit"]
        if len(hits) != 1 or abs(hits[0]["reward"] - final["reward"]) > 1e-9:
            fail(f"{ep}: the final's SUBMIT {final['request_id']} is not one RL record "
                 f"with its reward {final['reward']}: {hits}")
        counts["rewarded_submits"] += 1
    counts["rl"] += len(got)
    # --- SFT ---
    expect = None
    if source is not None:
        epoch = db.execute("SELECT MAX(epoch) AS e FROM messages WHERE episode_id = ?",
                           (ep,)).fetchone()["e"]
        msgs = db.execute("SELECT role, content, turn FROM messages WHERE episode_id = ? AND "
                          "epoch = ? ORDER BY seq", (ep, epoch)).fetchall()
        cut = None
        for i, m in enumerate(msgs):
            if m["role"] == "assistant" and m["turn"] == source["turn"]:
                cut = i + 1
        if cut is not None and source["code_sha"] not in seen_sha:
            seen_sha.add(source["code_sha"])
            expect = [{"role": m["role"], "content": m["content"]} for m in msgs[:cut]]
    rec = sft_by_ep.get(ep)
    if (rec is None) != (expect is None):
        fail(f"{ep}: SFT record {'missing' if rec is None else 'unexpected'}")
    if rec is not None:
        if rec["messages"] != expect:
            fail(f"{ep}: SFT messages differ from the store's live epoch cut at turn "
                 f"{source['turn']}")
        if source["code"] not in rec["messages"][-1]["content"]:
            fail(f"{ep}: the SFT record's last reply is not the scored code")
        md = rec["metadata"]
        if md["fallback"] != fallback or md["verdict"] != final["verdict"] or \
                md["verdict_class"] != verdict_class(final["verdict"]) or \
                md["code_turn"] != source["turn"]:
            fail(f"{ep}: SFT metadata {md}")
        counts["sft"] += 1
        counts["fallback_sft"] += fallback
if len(rl) != counts["rl"] or len(sft) != counts["sft"]:
    fail(f"records of other episodes: rl {len(rl)} vs {counts['rl']}, sft {len(sft)} vs {counts['sft']}")
print(json.dumps(counts))
