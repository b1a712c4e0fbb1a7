#!/usr/bin/env python3
"""A trainer's network blip during an evaluation (issue 46), through korch
serve's /ws endpoint with Debian's python3-websockets.

Session A resets episode EPISODE_ID, sends a CHECK of CHECK_CODE and loses
its socket while the CHECK evaluates (the TCP connection is aborted, no close
frame). Session B reconnects with reset(episode_id=EPISODE_ID) at once, then
SUBMITs SUBMIT_CODE.

usage: openenv_reconnect_client.py PORT TOKEN TASK_FILE EPISODE_ID CHECK_CODE SUBMIT_CODE
Prints one JSON line with what B saw: the reset's observation, and the
SUBMIT's answer (or the error frame either got)."""
import asyncio
import json
import sys

import websockets

PORT, TOKEN, TASK, EPISODE, CHECK_CODE, SUBMIT_CODE = sys.argv[1:7]
URL = f"ws://127.0.0.1:{PORT}/ws"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


async def call(ws, frame):
    await ws.send(json.dumps(frame))
    return json.loads(await asyncio.wait_for(ws.recv(), 120))


async def main():
    seen = {}
    a = await websockets.connect(URL, extra_headers=HEADERS)
    r = await call(a, {"type": "reset", "data": {"task_id": TASK, "episode_id": EPISODE}})
    if r["type"] != "observation":
        print("FAIL: reset:", r, file=sys.stderr)
        sys.exit(1)
    await a.send(json.dumps({"type": "step", "data": {"code": CHECK_CODE, "action": "CHECK"}}))
    await asyncio.sleep(0.3)  # the CHECK is evaluating now
    a.transport.abort()  # the blip: no close frame, the socket is gone

    async with websockets.connect(URL, extra_headers=HEADERS) as b:
        r = await call(b, {"type": "reset", "data": {"episode_id": EPISODE}})
        seen["reset"] = r
        r = await call(b, {"type": "step", "data": {"code": SUBMIT_CODE, "action": "SUBMIT"}})
        seen["submit"] = r
    print(json.dumps(seen))


asyncio.run(main())
