#!/usr/bin/env python3
"""An independent OpenEnv client (Debian's python3-websockets) for korch serve's
/ws endpoint. Speaks the protocol OpenEnv's EnvClient speaks: text frames
{"type": "reset"|"step"|"state"|"close", "data": ...} answered by
{"type": "observation"|"state"|"error", "data": ...}.

usage: openenv_client.py PORT TOKEN TASK_FILE MAX_SESSIONS
Prints one JSON line with what it saw; exits non-zero on the first protocol
surprise (with a message on stderr)."""
import asyncio
import json
import sys

import websockets

PORT, TOKEN, TASK, MAX_SESSIONS = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
URL = f"ws://127.0.0.1:{PORT}/ws"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
CODE = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"


def expect(cond, what):
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)


async def call(ws, frame):
    await ws.send(frame if isinstance(frame, str) else json.dumps(frame))
    return json.loads(await asyncio.wait_for(ws.recv(), 120))


async def main():
    seen = {}
    async with websockets.connect(URL, extra_headers=HEADERS) as ws:
        # A malformed frame: an error frame, and the connection stays usable.
        r = await call(ws, "{not json")
        expect(r["type"] == "error" and r["data"]["code"] == "INVALID_JSON", f"malformed frame: {r}")
        r = await call(ws, {"type": "dance", "data": {}})
        expect(r["type"] == "error" and r["data"]["code"] == "UNKNOWN_TYPE", f"unknown type: {r}")
        r = await call(ws, {"type": "step", "data": {"code": CODE, "action": "CHECK"}})
        expect(r["type"] == "error" and r["data"]["code"] == "VALIDATION_ERROR", f"step before reset: {r}")
        r = await call(ws, {"type": "state", "data": {}})
        expect(r["type"] == "state" and r["data"]["episode_id"] is None, f"state before reset: {r}")

        r = await call(ws, {"type": "reset", "data": {"seed": 7, "task_id": TASK}})
        expect(r["type"] == "observation", f"reset: {r}")
        obs = r["data"]
        expect(obs["done"] is False and obs["reward"] == 0, f"reset obs: {obs}")
        episode = obs["observation"]["episode_id"]
        expect("ModelNew" in obs["observation"]["prompt"], "the prompt names ModelNew")
        seen["episode_id"] = episode

        r = await call(ws, {"type": "step", "data": {"code": CODE, "action": "BOGUS"}})
        expect(r["type"] == "error" and r["data"]["code"] == "VALIDATION_ERROR", f"bad action: {r}")
        for i in range(2):
            r = await call(ws, {"type": "step", "data": {"code": CODE + f"# v{i}\n", "action": "CHECK"}})
            expect(r["type"] == "observation", f"check {i}: {r}")
            d = r["data"]
            expect(d["done"] is False, f"a CHECK does not end the episode: {d}")
            expect(d["observation"]["turn"] == i + 1, f"turn: {d}")
            expect(d["observation"]["verdict"], f"a CHECK has a verdict: {d}")
            expect(d["observation"]["feedback"], f"a CHECK has feedback: {d}")
        r = await call(ws, {"type": "state", "data": {}})
        expect(r["type"] == "state" and r["data"]["step_count"] == 2 and r["data"]["episode_id"] == episode,
               f"state: {r}")
        r = await call(ws, {"type": "step", "data": {"code": CODE, "action": "SUBMIT"}})
        expect(r["type"] == "observation" and r["data"]["done"] is True, f"submit: {r}")
        seen["submit_verdict"] = r["data"]["observation"]["verdict"]
        seen["submit_reward"] = r["data"]["reward"]
        r = await call(ws, {"type": "step", "data": {"code": CODE, "action": "CHECK"}})
        expect(r["type"] == "error" and r["data"]["code"] == "VALIDATION_ERROR", f"step after done: {r}")

        # The capacity cap: MAX_SESSIONS open (this one included), one more is refused.
        others = [await websockets.connect(URL, extra_headers=HEADERS) for _ in range(MAX_SESSIONS - 1)]
        for o in others:
            r = await call(o, {"type": "state", "data": {}})
            expect(r["type"] == "state", f"session within the cap: {r}")
        extra = await websockets.connect(URL, extra_headers=HEADERS)
        r = json.loads(await asyncio.wait_for(extra.recv(), 30))
        expect(r["type"] == "error" and r["data"]["code"] == "CAPACITY_REACHED", f"over the cap: {r}")
        await extra.close()
        for o in others:
            await o.close()

        await ws.send(json.dumps({"type": "close", "data": {}}))
        try:
            await asyncio.wait_for(ws.recv(), 10)
            expect(False, "the server answered close with a frame")
        except websockets.ConnectionClosed:
            pass
    # Without a token the upgrade is refused.
    try:
        async with websockets.connect(URL):
            expect(False, "connected without a token")
    except websockets.InvalidStatusCode as e:
        expect(e.status_code == 401, f"no token: {e.status_code}")
    seen["ok"] = True
    print(json.dumps(seen))


asyncio.run(main())
