#!/usr/bin/env python3
"""A client that speaks OpenEnv's EnvClient protocol exactly as its source
defines it, written for this test (no OpenEnv code is copied or installed).

Followed: meta-pytorch/OpenEnv at commit 685de411e5f77286b0fd94798d42c4467cf8a1bc
  src/openenv/core/env_client.py   EnvClient.__init__/connect/reset/step/state/disconnect
  src/openenv/core/utils.py        convert_to_ws_url
  src/openenv/core/generic_client.py  GenericEnvClient._step_payload/_parse_result/_parse_state
  src/openenv/core/env_server/types.py  WSErrorCode, message and response types

What that source does, and this client does the same:
  - the WebSocket URL is convert_to_ws_url(base_url) + "/ws" (base_url stripped
    of a trailing "/", http -> ws);
  - connect() opens it with a URL, an open timeout and a size limit only: no
    headers, no subprotocols (so a token can only travel in the URL);
  - reset(**kwargs) sends {"type": "reset", "data": kwargs};
    step(action) sends {"type": "step", "data": action};
    state() sends {"type": "state"} (no data); disconnect() sends
    {"type": "close"} and closes;
  - an answer of type "error" raises RuntimeError("Server error: <message>
    (code: <code>)"); observations are parsed as
    StepResult(observation=data.get("observation", {}), reward=data.get("reward"),
    done=data.get("done", False)).
On Debian's python3-websockets (10.x: websockets.connect; OpenEnv imports the
same function as websockets.asyncio.client.connect from websockets >= 13).

usage: openenv_protocol_client.py BASE_URL TOKEN [WAYS]
WAYS: the ways to send the token, comma-separated (default: query, ws_query,
header, subprotocol; header_lower sends "Authorization: bearer T"). The token
goes into the URLs as it is, never URL-encoded, as a user pastes it.
Prints one JSON line with what it saw; exits non-zero on the first surprise."""
import asyncio
import json
import sys
from dataclasses import dataclass
from typing import Any, Dict, Optional

import websockets

OPENENV_COMMIT = "685de411e5f77286b0fd94798d42c4467cf8a1bc"
CODE = ("import torch\nclass ModelNew(torch.nn.Module):\n"
        "    def forward(self, x):\n        return torch.relu(x)\n")


def convert_to_ws_url(url: str) -> str:
    ws_url = url.rstrip("/")
    if ws_url.startswith("http://"):
        ws_url = "ws://" + ws_url[7:]
    elif ws_url.startswith("https://"):
        ws_url = "wss://" + ws_url[8:]
    elif not ws_url.startswith("ws://") and not ws_url.startswith("wss://"):
        ws_url = "ws://" + ws_url
    return ws_url


@dataclass
class StepResult:
    observation: Dict[str, Any]
    reward: Optional[float]
    done: bool


class ProtocolClient:
    """EnvClient + GenericEnvClient's wire behaviour, at OPENENV_COMMIT."""

    def __init__(self, base_url, connect_timeout_s=10.0, message_timeout_s=60.0,
                 max_message_size_mb=100.0, *, extra_headers=None, subprotocols=None):
        self._ws_url = f"{convert_to_ws_url(base_url)}/ws"
        self._connect_timeout = connect_timeout_s
        self._message_timeout = message_timeout_s
        self._max_message_size = int(max_message_size_mb * 1024 * 1024)
        # Not in OpenEnv's client: only for this test's other ways to send a token.
        self._extra = {}
        if extra_headers:
            self._extra["extra_headers"] = extra_headers
        if subprotocols:
            self._extra["subprotocols"] = subprotocols
        self._ws = None

    async def connect(self):
        if self._ws is not None:
            return self
        try:
            self._ws = await websockets.connect(self._ws_url, open_timeout=self._connect_timeout,
                                                max_size=self._max_message_size, **self._extra)
        except Exception as e:
            raise ConnectionError(f"Failed to connect to {self._ws_url}: {e}") from e
        return self

    async def _send_and_receive(self, message):
        if self._ws is None:
            await self.connect()
        await self._ws.send(json.dumps(message))
        response = json.loads(await asyncio.wait_for(self._ws.recv(), timeout=self._message_timeout))
        if response.get("type") == "error":
            error_data = response.get("data", {})
            raise RuntimeError(f"Server error: {error_data.get('message', 'Unknown error')} "
                               f"(code: {error_data.get('code', 'UNKNOWN')})")
        return response

    def _parse_result(self, payload):
        return StepResult(observation=payload.get("observation", {}), reward=payload.get("reward"),
                          done=payload.get("done", False))

    async def reset(self, **kwargs):
        return self._parse_result((await self._send_and_receive({"type": "reset", "data": kwargs})).get("data", {}))

    async def step(self, action):
        return self._parse_result((await self._send_and_receive({"type": "step", "data": action})).get("data", {}))

    async def state(self):
        return (await self._send_and_receive({"type": "state"})).get("data", {})

    async def close(self):
        if self._ws is not None:
            try:
                await self._ws.send(json.dumps({"type": "close"}))
            except Exception:
                pass
            try:
                await self._ws.close()
            except Exception:
                pass
            self._ws = None


def expect(cond, what):
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)


async def episode(client, seen, key):
    """connect, reset() with no task, CHECK, SUBMIT, state, close."""
    await client.connect()
    r = await client.reset()
    obs = r.observation
    expect(r.done is False, f"{key}: reset done: {r}")
    meta = obs.get("metadata", {})
    expect(meta.get("pick", {}).get("picked_by") in ("sequential", "random"), f"{key}: metadata: {obs}")
    expect(meta.get("task_id") == obs.get("task_id"), f"{key}: metadata task: {obs}")
    expect("ModelNew" in obs.get("prompt", ""), f"{key}: prompt")
    r = await client.step({"code": CODE, "action": "CHECK"})
    expect(r.done is False and r.observation.get("turn") == 1 and r.observation.get("verdict"),
           f"{key}: CHECK: {r}")
    r = await client.step({"code": CODE, "action": "SUBMIT"})
    expect(r.done is True and r.observation.get("verdict"), f"{key}: SUBMIT: {r}")
    expect(isinstance(r.reward, (int, float)), f"{key}: reward: {r}")
    st = await client.state()
    expect(st.get("episode_id") == obs["episode_id"] and st.get("step_count") == 2 and st.get("done") is True,
           f"{key}: state: {st}")
    # A step after the end is OpenEnv's VALIDATION_ERROR, raised as the client raises it.
    try:
        await client.step({"code": CODE, "action": "CHECK"})
        expect(False, f"{key}: a step after done was answered")
    except RuntimeError as e:
        expect("(code: VALIDATION_ERROR)" in str(e), f"{key}: {e}")
    await client.close()
    seen[key] = {"episode_id": obs["episode_id"], "task_id": obs["task_id"], "pick": meta["pick"],
                 "submit_verdict": r.observation["verdict"], "reward": r.reward}


async def main():
    base, token = sys.argv[1].rstrip("/"), sys.argv[2]
    ways = sys.argv[3].split(",") if len(sys.argv) > 3 else ["query", "ws_query", "header", "subprotocol"]
    seen = {"openenv_commit": OPENENV_COMMIT}
    for way in ways:
        if way == "query":
            # 1. As OpenEnv's client is: the token in base_url's query. The
            #    client appends "/ws", so the request target is "/?token=T/ws".
            await episode(ProtocolClient(f"{base}/?token={token}"), seen, "query")
        elif way == "ws_query":
            # 2. The explicit form of the same: /ws?token=T (a client that sets its URL).
            c = ProtocolClient(base)
            c._ws_url = f"{convert_to_ws_url(base)}/ws?token={token}"
            await episode(c, seen, "ws_query")
        elif way in ("header", "header_lower"):
            # 3. A header (the scheme in either case, RFC 7235).
            scheme = "Bearer" if way == "header" else "bearer"
            await episode(ProtocolClient(base, extra_headers={"Authorization": f"{scheme} {token}"}), seen, way)
        elif way == "subprotocol":
            # 4. A subprotocol.
            await episode(ProtocolClient(base, subprotocols=[f"bearer.{token}"]), seen, "subprotocol")
        else:
            expect(False, f"unknown way {way}")
    # Without a token, or with a wrong one: refused at the handshake (HTTP 401).
    for key, url in (("no_token", base), ("wrong_token", f"{base}/?token=wrong-{token}")):
        try:
            await ProtocolClient(url).connect()
            expect(False, f"{key}: connected")
        except ConnectionError as e:
            expect("401" in str(e), f"{key}: {e}")
            seen[key] = 401
    print(json.dumps(seen))


asyncio.run(main())
