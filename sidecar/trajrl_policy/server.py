"""The OpenAI-compatible server the agent talks to (aiohttp), its upstream client (the meter), and the
sidecar's entry point: POLICY_DIR's policy.py if present (run in this process: an SDK policy calls
serve(), a raw one serves POLICY_PORT itself), else its policy.json, else pin on DEFAULT_MODEL."""

from __future__ import annotations

import asyncio
import json
import os
import runpy
import sys
import time
import traceback
from typing import Any

from aiohttp import ClientSession, ClientTimeout, web

from .context import Ctx, UpstreamResponse
from .kinds import PinPolicy, Policy, policy_from_config
from .render import Rendered
from .settings import (
    BUDGET_HEADER,
    DEFAULT_MODEL,
    EPISODE_TOKEN,
    MAX_REQUEST_BYTES,
    POLICY_DIR,
    POLICY_HOST,
    POLICY_PORT,
    UPSTREAM_AUTH,
    UPSTREAM_URL,
    log,
    loggable_url,
)
from .transcript import session_key

UPSTREAM_TIMEOUT_S = 900.0
BUDGET_TIMEOUT_S = 5.0
# The meter's own retries are not always enough under a provider's rate limits: a 429/503 is retried
# here too (up to 6 times, 1.5 s × attempt apart), and so is a stream whose first chunk is an error
# (until 8 attempts in all, 2 s × attempt apart).
BUSY_STATUSES = (429, 503)
BUSY_RETRIES = 6
BUSY_DELAY_S = 1.5
STREAM_ERROR_RETRIES = 8
STREAM_ERROR_DELAY_S = 2.0
STREAM_ERROR_WINDOW = 400  # bytes of a stream's first chunk searched for an error


def _stream_starts_with_error(first: bytes) -> bool:
    head = first[:STREAM_ERROR_WINDOW]
    return b'"error"' in head or b"concurrency" in head


def _scan_events(buf: bytes, seen: dict) -> bytes:
    """Read the complete SSE events at the start of `buf` for the turn's usage and finish reason; return
    the incomplete rest."""
    while b"\n\n" in buf:
        event, buf = buf.split(b"\n\n", 1)
        for line in event.split(b"\n"):
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            try:
                data = json.loads(line[6:])
                if data.get("usage"):
                    seen["usage"] = data["usage"]
                for choice in data.get("choices") or []:
                    if choice.get("finish_reason"):
                        seen["finish"] = choice["finish_reason"]
            except Exception:  # noqa: BLE001 - what the agent gets is the bytes, parsed or not
                pass
    return buf


class Server:
    """Serves POST /v1/chat/completions, GET /v1/models and GET /health for one policy."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.hdr = {"Authorization": f"Bearer {EPISODE_TOKEN}", "Content-Type": "application/json"}
        self.sessions: dict[str, dict] = {}
        self.remaining_usd: float | None = None
        self.app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        self.app.router.add_post("/v1/chat/completions", self.chat)
        self.app.router.add_get("/v1/models", self.models)
        self.app.router.add_get("/health", self.health)

    def hdr_for(self, auth: str | None) -> dict:
        """Headers for an upstream call: the episode token, or in passthrough mode the caller's own."""
        if UPSTREAM_AUTH == "passthrough" and auth:
            return {"Authorization": auth, "Content-Type": "application/json"}
        return self.hdr

    def note_budget(self, headers: Any) -> None:
        value = headers.get(BUDGET_HEADER)
        if value is None:
            return
        try:
            self.remaining_usd = float(value)
        except ValueError:
            pass

    async def refresh_budget(self) -> None:
        """GET /budget after a streamed call: its header was computed before the tokens flowed."""
        if UPSTREAM_AUTH == "passthrough":
            return  # a product endpoint has no episode budget
        try:
            async with ClientSession(timeout=ClientTimeout(total=BUDGET_TIMEOUT_S)) as session:
                async with session.get(f"{UPSTREAM_URL}/budget", headers=self.hdr) as r:
                    if r.status == 200:
                        self.remaining_usd = float((await r.json()).get("remaining_usd"))
        except Exception:  # noqa: BLE001 - the budget is advisory
            pass

    async def upstream(self, req: dict, sess: dict, auth: str | None = None) -> UpstreamResponse:
        """Send `req` to the meter, retrying a busy upstream; a stream is returned unread past its first
        chunk (the caller pipes it), anything else read whole."""
        stream = bool(req.get("stream"))
        if stream:
            req.setdefault("stream_options", {})["include_usage"] = True
        headers = self.hdr_for(auth)
        retries = 0
        session = ClientSession(timeout=ClientTimeout(total=UPSTREAM_TIMEOUT_S))
        try:
            while True:
                r = await session.post(f"{UPSTREAM_URL}/chat/completions", json=req, headers=headers)
                self.note_budget(r.headers)
                if r.status in BUSY_STATUSES and retries < BUSY_RETRIES:
                    await r.read()
                    r.release()
                    retries += 1
                    await asyncio.sleep(BUSY_DELAY_S * retries)
                    continue
                if r.status != 200 or not stream:
                    body = await r.read()
                    await session.close()
                    result = UpstreamResponse(r.status, dict(r.headers), False, body=body)
                    if r.status == 200:
                        try:
                            data = json.loads(body)
                            result.usage = data.get("usage")
                            result.finish = (data.get("choices") or [{}])[0].get("finish_reason")
                        except Exception:  # noqa: BLE001 - relayed as it came
                            pass
                    return result
                first = await r.content.readany()
                if _stream_starts_with_error(first) and retries < STREAM_ERROR_RETRIES:
                    r.close()  # not back to the pool: the connection may be mid-stream
                    retries += 1
                    await asyncio.sleep(STREAM_ERROR_DELAY_S * retries)
                    continue

                async def release(r: Any = r, session: ClientSession = session) -> None:
                    r.release()
                    await session.close()

                return UpstreamResponse(
                    200, dict(r.headers), True, first=first, aiter=r.content.iter_any(), release=release
                )
        except BaseException:
            await session.close()
            raise

    async def chat(self, request: web.Request) -> web.StreamResponse:
        t0 = time.time()
        body = await request.json()
        msgs = body.get("messages") or []
        key = session_key(msgs)
        sess = self.sessions.setdefault(key, {"t0": time.time(), "turn": 0})
        sess["turn"] += 1
        turn = sess["turn"]
        stream = bool(body.get("stream"))
        ctx = Ctx(self, msgs, sess, f"chatcmpl-{key}-{turn}", auth=request.headers.get("Authorization"))
        try:
            result = await self.policy.handle(body, ctx)
        except Exception as e:  # noqa: BLE001 - a policy bug answers 500; the server keeps serving
            log(event="policy_error", session=key, turn=turn, error=repr(e))
            sys.stderr.write(f"trajrl_policy: handle() raised (session {key}, turn {turn})\n{traceback.format_exc()}")
            sys.stderr.flush()
            return web.json_response({"error": {"message": f"policy error: {e!r}", "type": "policy"}}, status=500)
        model = body.get("model")
        if isinstance(result, Rendered):
            sess["last_finish"] = result.finish
            log(event="turn", session=key, turn=turn, model=result.model, rendered=True, s=round(time.time() - t0, 2))
            if stream:
                return await self._send_rendered(request, result)
            return web.Response(body=result.json(), content_type="application/json")
        if not isinstance(result, UpstreamResponse):
            message = "policy returned neither upstream() nor render()"
            return web.json_response({"error": {"message": message, "type": "policy"}}, status=500)
        if not result.stream:
            sess["last_finish"] = result.finish
            log(
                event="turn",
                session=key,
                turn=turn,
                model=model,
                status=result.status,
                finish=result.finish,
                usage=result.usage,
                s=round(time.time() - t0, 2),
            )
            content_type = (result.headers.get("Content-Type") or "application/json").split(";")[0]
            return web.Response(body=result.body, status=result.status, content_type=content_type)
        seen: dict = {"usage": None, "finish": None}
        try:
            resp = await self._pipe(request, result, seen)
        finally:
            await result.release()
        await self.refresh_budget()
        sess["last_finish"] = seen["finish"]
        log(
            event="turn",
            session=key,
            turn=turn,
            model=model,
            status=200,
            finish=seen["finish"],
            usage=seen["usage"],
            s=round(time.time() - t0, 2),
            remaining_usd=self.remaining_usd,
        )
        return resp

    async def _send_rendered(self, request: web.Request, result: Rendered) -> web.StreamResponse:
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        resp = web.StreamResponse(status=200, headers=headers)
        await resp.prepare(request)
        await resp.write(result.sse())  # after the headers: a message sse() cannot render cuts the stream
        await resp.write_eof()
        return resp

    async def _pipe(self, request: web.Request, result: UpstreamResponse, seen: dict) -> web.StreamResponse:
        """The model's stream to the agent, chunk for chunk as it arrives, bytes unchanged."""
        content_type = result.headers.get("Content-Type", "text/event-stream")
        resp = web.StreamResponse(status=200, headers={"Content-Type": content_type, "Cache-Control": "no-cache"})
        await resp.prepare(request)
        pending = b""
        async for chunk in result.chunks():
            await resp.write(chunk)
            pending = _scan_events(pending + chunk, seen)
        await resp.write_eof()
        return resp

    async def models(self, request: web.Request) -> web.Response:
        model = {"id": "auto", "object": "model", "owned_by": "policy", "policy": self.policy.name}
        return web.json_response({"object": "list", "data": [model]})

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "policy": self.policy.name})


def serve(policy: Policy, port: int = POLICY_PORT) -> None:
    """Serve `policy` on POLICY_PORT until the process is stopped. Call it at the end of policy.py."""
    server = Server(policy)
    log(event="start", policy=policy.name, port=port, upstream=loggable_url(UPSTREAM_URL))
    web.run_app(server.app, host=POLICY_HOST, port=port, print=None, access_log=None)


def _fail(message: str) -> None:
    sys.stderr.write(f"trajrl_policy: {message}\n")
    sys.stderr.flush()
    raise SystemExit(1)


def main() -> None:
    """The sidecar's entry point (`python trajrl_policy.py`)."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, POLICY_DIR)
    sys.path.insert(0, here)  # `import trajrl_policy` finds this file
    policy_py = os.path.join(POLICY_DIR, "policy.py")
    policy_json = os.path.join(POLICY_DIR, "policy.json")
    if os.path.exists(policy_py):
        runpy.run_path(policy_py, run_name="__main__")
        # Returning means it never served: the sidecar exits and the episode fails at its health check.
        sys.stderr.write("trajrl_policy: policy.py returned without serving (an SDK policy ends with serve(...))\n")
        return
    if os.path.exists(policy_json):
        try:
            with open(policy_json, encoding="utf-8") as fh:
                policy = policy_from_config(json.load(fh))
        except Exception as e:  # noqa: BLE001 - the policy cannot start: say why, exit non-zero
            _fail(f"policy.json: {type(e).__name__}: {e}")
        serve(policy)
        return
    serve(PinPolicy(DEFAULT_MODEL))


if __name__ == "__main__":
    main()
