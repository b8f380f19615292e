"""What `Policy.handle(req, ctx)` works with: the context of one request (session state, signals, budget,
upstream access, extra calls, rendering) and the upstream's answer it returns."""

from __future__ import annotations

import json
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Optional

from aiohttp import ClientSession, ClientTimeout

from .render import Rendered
from .settings import UPSTREAM_URL
from .transcript import content_text, transcript_signals


class UpstreamResponse:
    """What `ctx.upstream(req)` returns; return it from `handle` and the server delivers it. A streamed
    answer is piped to the agent chunk for chunk once `handle` returns (`first`, then the rest); any other
    answer (a plain one, or an error status) is relayed as its body, with its status."""

    def __init__(
        self,
        status: int,
        headers: dict,
        stream: bool,
        first: bytes = b"",
        body: bytes = b"",
        aiter: Optional[AsyncIterator[bytes]] = None,
        release: Optional[Callable[[], Awaitable[None]]] = None,
    ) -> None:
        self.status = status
        self.headers = headers
        self.stream = stream
        self.first = first
        self.body = body
        self._aiter = aiter
        self._release = release
        self.usage: dict | None = None
        self.finish: str | None = None

    async def chunks(self) -> AsyncIterator[bytes]:
        yield self.first
        if self._aiter is not None:
            async for chunk in self._aiter:
                yield chunk

    async def release(self) -> None:
        if self._release is not None:
            await self._release()


def _call_result(
    text: str, message: dict, usage: Any, finish: Any, t0: float, status: int, error: str | None
) -> dict:
    return {
        "text": text,
        "message": message,
        "usage": usage,
        "finish": finish,
        "s": round(time.time() - t0, 2),
        "status": status,
        "error": error,
    }


class Ctx:
    """The context of one request.

    messages       the conversation as the agent sent it (the request's own list)
    session        a dict kept across the turns of one agent session: "t0" (its first turn's time),
                   "turn" (1 on its first request), "last_finish" (the previous answer's finish_reason)
    req_id         the id rendered answers carry
    remaining_usd  the episode budget left as the meter last said (None until it has said)
    """

    def __init__(self, server: Any, msgs: list[dict], sess: dict, req_id: str, auth: str | None = None) -> None:
        self._server = server
        self.messages = msgs
        self.session = sess
        self.req_id = req_id
        self.remaining_usd: float | None = server.remaining_usd
        self._auth = auth

    @property
    def hdr(self) -> dict:
        """The headers upstream calls carry (the episode token)."""
        return self._server.hdr_for(self._auth)

    def signals(self, **kw: Any) -> list[str]:
        """The transcript's signals (see transcript_signals for the keyword arguments)."""
        return transcript_signals(self.messages, self.session, **kw)

    async def upstream(self, req: dict) -> UpstreamResponse:
        """Send `req` to the meter as it is (set req["model"] first). Return the result from `handle`."""
        return await self._server.upstream(req, self.session, self._auth)

    async def call(
        self,
        model: str,
        messages: list[dict],
        max_tokens: int = 600,
        temperature: float = 0.7,
        timeout_s: float = 120.0,
        **gen: Any,
    ) -> dict:
        """One completed, non-streamed extra call (advisers, judges, samplers). Never raises: returns
        {"text", "message", "usage", "finish", "s", "status", "error"}; status 0 when no answer came."""
        body = {
            "model": model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stream": False,
            **gen,
        }
        t0 = time.time()
        try:
            async with ClientSession(timeout=ClientTimeout(total=timeout_s)) as session:
                async with session.post(f"{UPSTREAM_URL}/chat/completions", json=body, headers=self.hdr) as r:
                    status = r.status
                    raw = await r.read()
                    headers = r.headers
            self._server.note_budget(headers)
            data = json.loads(raw) if status == 200 else {}
            choice = (data.get("choices") or [{}])[0]
            message = choice.get("message") or {}
            error = None if status == 200 else raw[:300].decode("utf-8", "replace")
            return _call_result(
                content_text(message.get("content")),
                message,
                data.get("usage"),
                choice.get("finish_reason"),
                t0,
                status,
                error,
            )
        except Exception as e:  # noqa: BLE001 - an extra call that failed only loses its answer
            return _call_result("", {}, None, None, t0, 0, str(e))

    def render(
        self, message: dict, model: str = "auto", finish: str = "stop", usage: dict | None = None, stream: bool = True
    ) -> Rendered:
        """Answer with a message you assembled: delivered as a stream when the agent asked for one."""
        return Rendered(message, model, finish, usage, stream, self.req_id)
