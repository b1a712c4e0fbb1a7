#!/usr/bin/env python3
"""A trainer that keeps going while korch serve is killed under it (issue 46),
through the /ws endpoint with Debian's python3-websockets.

Drives EPISODES episodes at once, each a fixed script of steps (CHECK, CHECK,
SUBMIT of codes the mock evaluator scores deterministically). Whenever the
connection fails (the daemon was SIGKILLed) it reconnects and sends
reset(episode_id): the observation's `turn` says how many of its steps the
episode holds, so it sends the next one, never one twice and never skipping
one. The daemon's env port is read from PORT_FILE at each connect.

usage: openenv_chaos_client.py PORT_FILE TOKEN TASK_FILE EPISODES
Prints one JSON line: per episode the steps sent and the reconnects."""
import asyncio
import json
import sys

import websockets

PORT_FILE, TOKEN, TASK, EPISODES = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


def script(e):
    base = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
    return [
        (base + f"        return x  # ep{e} MOCK_VERDICT: incorrect\n", "CHECK"),
        (base + f"        return torch.relu(x)  # ep{e} MOCK_SPEEDUP: 1.{e}\n", "CHECK"),
        (base + f"        return torch.relu(x)  # ep{e} MOCK_SPEEDUP: 1.{e}\n", "SUBMIT"),
    ]


async def call(ws, frame):
    await ws.send(json.dumps(frame))
    return json.loads(await asyncio.wait_for(ws.recv(), 60))


async def episode(e, seen):
    steps = script(e)
    ep_id = f"chaos-ep-{e}"
    sent, reconnects = [], 0
    while True:
        try:
            port = open(PORT_FILE).read().strip()
            async with websockets.connect(f"ws://127.0.0.1:{port}/ws", extra_headers=HEADERS,
                                          open_timeout=5) as ws:
                r = await call(ws, {"type": "reset", "data": {"task_id": TASK, "episode_id": ep_id}})
                if r["type"] != "observation":
                    raise ConnectionError(f"reset: {r}")
                while True:
                    obs = r["data"]
                    done, turn = obs["done"], obs["observation"]["turn"]
                    if done:
                        seen[ep_id] = {"sent": sent, "reconnects": reconnects, "turns": turn}
                        return
                    code, action = steps[turn]  # the next step the episode does not hold
                    sent.append(turn + 1)
                    r = await call(ws, {"type": "step", "data": {"code": code, "action": action}})
                    if r["type"] != "observation":
                        raise ConnectionError(f"step: {r}")
        except (OSError, ConnectionError, asyncio.TimeoutError, websockets.WebSocketException):
            reconnects += 1
            if reconnects > 500:
                print(f"FAIL: {ep_id} never finished", file=sys.stderr)
                sys.exit(1)
            await asyncio.sleep(0.2)


async def main():
    seen = {}
    await asyncio.gather(*(episode(e, seen) for e in range(EPISODES)))
    print(json.dumps(seen))


asyncio.run(main())
