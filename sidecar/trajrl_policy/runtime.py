"""The sidecar runtime: an OpenAI-compatible server (aiohttp) in front of the meter (httpx), and the
Context a policy's handle() receives. One process serves one episode; every turn is one JSON line
on stdout (the policy log); tracebacks also go to stderr."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import signal
import sys
import time
import traceback
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit, urlunsplit

# httpx's command-line entry point (httpx._main) pulls in rich and click: a third of httpx's
# import time, paid at every episode's start, for a CLI a sidecar never runs. Marked absent, httpx
# falls back to its own stub (a policy that imported httpx first keeps the real one).
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

import httpx  # noqa: E402
from aiohttp import web  # noqa: E402

from .signals import DEFAULT_STALL_S, compute_signals, prefix_key, SESSION_PREFIX
from .sse import (
    RawEventSplitter,
    SSEParser,
    StreamAssembler,
    completion_body,
    error_body,
    is_usage_only_event,
    new_completion_id,
    normalise_message,
    render_chunks,
    sse_event,
)

BUDGET_HEADER = "x-trajrl-budget-remaining-usd"
MAX_REQUEST_BYTES = 64 * 1024 * 1024  # Hermes resends the whole conversation every turn
MAX_SESSIONS = 256


class StartupError(Exception):
    """The runtime cannot start (bad environment, bad policy object). Printed on stderr, exit 2."""


class UpstreamError(Exception):
    """The upstream (the meter) refused or failed a call. Uncaught in handle(), the agent receives the
    same HTTP status and OpenAI error body; a policy may catch it (e.g. 402: the cap is reached)."""

    def __init__(self, status: int, body: dict[str, Any], model: str | None = None) -> None:
        self.status = status
        self.body = body
        self.model = model
        err = body.get("error") if isinstance(body, dict) else None
        self.type = err.get("type") if isinstance(err, dict) else None
        self.code = err.get("code") if isinstance(err, dict) else None
        message = err.get("message") if isinstance(err, dict) else None
        super().__init__(f"upstream HTTP {status}: {message or body}")


class UpstreamUnavailable(UpstreamError):
    """No answer from the upstream: connection refused, timeout, or a stream cut mid-way."""


class Policy:
    """Subclass and override `async def handle(self, req, ctx)`. The default sends every request to
    the model named in it (DEFAULT_MODEL when the agent asked for "auto")."""

    async def handle(self, req: dict[str, Any], ctx: "Context") -> Any:
        return await ctx.upstream(req)


class StreamedReply(dict):
    """What ctx.upstream returns after streaming to the agent: the answer it streamed, shaped as a
    chat.completion (choices[0].message assembled from the chunks). Already delivered; return it."""

    streamed = True


class Rendered:
    """A message the policy assembled; the runtime delivers it (SSE when the agent asked for a stream).
    Awaitable, so both `return ctx.render(m)` and `return await ctx.render(m)` work."""

    def __init__(self, message: dict[str, Any], model: str) -> None:
        self.message = message
        self.model = model

    async def _self(self) -> "Rendered":
        return self

    def __await__(self):  # type: ignore[no-untyped-def]
        return self._self().__await__()


@dataclass
class Settings:
    port: int
    host: str
    upstream_url: str
    token: str | None
    default_model: str
    timeout_s: float

    @staticmethod
    def from_env(env: dict[str, str] | None = None, port: int | None = None, host: str | None = None) -> "Settings":
        e = dict(os.environ if env is None else env)
        raw_port = e.get("POLICY_PORT", "").strip() or "8800"
        if port is None:
            try:
                port = int(raw_port)
            except ValueError:
                raise StartupError(f"POLICY_PORT must be an integer, got {raw_port!r}") from None
        if not 0 <= port <= 65535:
            raise StartupError(f"POLICY_PORT out of range: {port}")
        upstream = e.get("UPSTREAM_URL", "").strip().rstrip("/")
        if not upstream:
            raise StartupError("UPSTREAM_URL is not set (the meter's base URL, e.g. http://meter:8790/v1)")
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise StartupError(f"UPSTREAM_URL must be an http(s) URL, got {safe_url(upstream)!r}")
        raw_timeout = e.get("UPSTREAM_TIMEOUT_S", "").strip() or "600"
        try:
            timeout_s = float(raw_timeout)
        except ValueError:
            raise StartupError(f"UPSTREAM_TIMEOUT_S must be a number, got {raw_timeout!r}") from None
        if timeout_s <= 0:
            raise StartupError("UPSTREAM_TIMEOUT_S must be > 0")
        return Settings(
            port=port,
            host=host or e.get("POLICY_HOST", "").strip() or "0.0.0.0",
            upstream_url=upstream,
            token=e.get("EPISODE_TOKEN") or None,
            default_model=e.get("DEFAULT_MODEL", "").strip() or "qwen3.8-27b",
            timeout_s=timeout_s,
        )


def safe_url(url: str) -> str:
    """A URL without credentials or query string, for logs."""
    try:
        p = urlsplit(url)
        host = p.hostname or ""
        netloc = f"{host}:{p.port}" if p.port else host
        return urlunsplit((p.scheme, netloc, p.path, "", ""))
    except ValueError:
        return "[unparseable-url]"


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def emit(line: dict[str, Any]) -> None:
    """One JSON line on stdout: the policy log."""
    try:
        sys.stdout.write(json.dumps(line, ensure_ascii=False, default=str, separators=(",", ":")) + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        pass  # nobody is reading the log any more; serving matters more


# --- sessions -------------------------------------------------------------------------------------


class Session:
    def __init__(self, key: str, prefix_len: int, seq: int) -> None:
        self.key = key
        self.prefix_len = prefix_len
        self.seq = seq
        self.data: dict[str, Any] = {}
        self.turns = 0
        self.last_end: float | None = None


class SessionStore:
    """Sessions by the digest of the first five messages. A conversation shorter than five messages
    opens a provisional session keyed by what it has; when the same conversation arrives longer, the
    provisional session is promoted to the longer key (so state set on turn 1 survives), and its
    short key is freed for the next new conversation."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self._by_key: OrderedDict[str, Session] = OrderedDict()
        self._max = max_sessions
        self._seq = 0

    def __len__(self) -> int:
        return len(self._by_key)

    def resolve(self, messages: list[Any]) -> Session:
        n = min(SESSION_PREFIX, len(messages))
        key = prefix_key(messages, n)
        found = self._by_key.get(key)
        if found is not None:
            self._by_key.move_to_end(key)
            return found
        for k in range(n - 1, 0, -1):
            short = prefix_key(messages, k)
            s = self._by_key.get(short)
            if s is not None and s.prefix_len == k:
                del self._by_key[short]
                s.key, s.prefix_len = key, n
                self._by_key[key] = s
                return s
        self._seq += 1
        s = Session(key, n, self._seq)
        self._by_key[key] = s
        while len(self._by_key) > self._max:
            self._by_key.popitem(last=False)
        return s


# --- the context ----------------------------------------------------------------------------------


class Context:
    """What handle() gets besides the request: upstream access, session state, signals, budget."""

    def __init__(
        self,
        runtime: "Runtime",
        request: web.Request,
        messages: list[Any],
        session: Session,
        gap_s: float | None,
        agent_stream: bool,
        include_usage: bool,
    ) -> None:
        self._rt = runtime
        self._request = request
        self._messages = messages
        self._session = session
        self._gap_s = gap_s
        self._signals: dict[float, list[str]] = {}
        self._log: dict[str, Any] = {}
        self._response: web.StreamResponse | None = None
        self._response_done = False
        self._ttfb: float | None = None
        self._t_end: float | None = None
        self.calls: list[dict[str, Any]] = []
        #: state that persists across the turns of one agent session
        self.session: dict[str, Any] = session.data
        self.session_key: str = session.key
        #: 1 for the first request of the session
        self.turn: int = session.turns
        #: the agent asked for a streamed answer
        self.stream: bool = agent_stream
        self.include_usage: bool = include_usage
        self.default_model: str = runtime.settings.default_model

    @property
    def remaining_usd(self) -> float | None:
        """The episode budget left, as the meter last reported it (None until known)."""
        return self._rt.remaining_usd

    @property
    def messages(self) -> list[Any]:
        """The conversation as the agent sent it (a copy; edits to req do not change it)."""
        return self._messages

    def signals(self, stall_s: float | None = None) -> list[str]:
        """Signals of the transcript ("stall", "len", "toolerr", "noprog", "repeat"); see README."""
        key = DEFAULT_STALL_S if stall_s is None else float(stall_s)
        if key not in self._signals:
            self._signals[key] = compute_signals(self._messages, gap_s=self._gap_s, stall_s=key)
        return list(self._signals[key])

    def log(self, **fields: Any) -> None:
        """Extra fields for this turn's log line (under "policy")."""
        self._log.update(fields)

    # -- model calls --

    def _model_of(self, model: Any) -> str:
        return model if isinstance(model, str) and model and model != "auto" else self.default_model

    def _record(self, model: str, kind: str, status: int | str, t0: float, usage: Any) -> None:
        rec: dict[str, Any] = {"model": model, "kind": kind, "status": status, "ms": round((time.perf_counter() - t0) * 1000, 1)}
        if isinstance(usage, dict):
            for k in ("prompt_tokens", "completion_tokens"):
                if isinstance(usage.get(k), int):
                    rec[k] = usage[k]
        self.calls.append(rec)

    async def upstream(self, req: dict[str, Any]) -> dict[str, Any]:
        """Send req to the upstream. If it asks for a stream, the model's SSE goes to the agent chunk for
        chunk as it arrives and a StreamedReply (already delivered) is returned; else the JSON body."""
        if not isinstance(req, dict):
            raise TypeError("ctx.upstream expects the request dict")
        req["model"] = self._model_of(req.get("model"))
        if req.get("stream") is True:
            return await self._stream(req)
        return await self._post_json(req, "upstream")

    async def call(
        self,
        model: str,
        messages: list[Any],
        max_tokens: int | None = None,
        temperature: float | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """A non-streamed extra call (advisers, judges, samplers): returns the completed assistant message."""
        body: dict[str, Any] = {"model": self._model_of(model), "messages": messages}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if temperature is not None:
            body["temperature"] = temperature
        body.update(extra)
        body["stream"] = False
        data = await self._post_json(body, "call")
        try:
            message = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise UpstreamError(
                502, error_body("upstream answer has no choices[0].message", type_="upstream_error"), body["model"]
            ) from None
        return message

    def render(self, message: Any) -> Rendered:
        """Answer the agent with an assembled message (a dict, or a string as the content)."""
        last = next((c["model"] for c in reversed(self.calls) if c.get("status") == 200), "auto")
        return Rendered(normalise_message(message), last)

    async def _post_json(self, body: dict[str, Any], kind: str) -> dict[str, Any]:
        rt = self._rt
        model = body["model"]
        t0 = time.perf_counter()
        try:
            r = await rt.client.post(rt.settings.upstream_url + "/chat/completions", json=body, headers=rt.headers)
        except httpx.TimeoutException as e:
            self._record(model, kind, "timeout", t0, None)
            raise UpstreamUnavailable(504, error_body(f"upstream timed out: {type(e).__name__}", type_="upstream_timeout"), model) from None
        except httpx.HTTPError as e:
            self._record(model, kind, "unreachable", t0, None)
            raise UpstreamUnavailable(502, error_body(f"upstream unreachable: {type(e).__name__}: {e}", type_="upstream_unreachable"), model) from None
        rt.note_budget_header(r.headers.get(BUDGET_HEADER))
        data = _json_or_none(r.content)
        if r.status_code >= 400:
            self._record(model, kind, r.status_code, t0, None)
            if not (isinstance(data, dict) and isinstance(data.get("error"), dict)):
                data = error_body(r.text[:2000] or f"HTTP {r.status_code}", type_="upstream_error")
            raise UpstreamError(r.status_code, data, model)
        if not isinstance(data, dict):
            self._record(model, kind, "bad_json", t0, None)
            raise UpstreamError(502, error_body("upstream answered with something other than a JSON object", type_="upstream_error"), model)
        self._record(model, kind, r.status_code, t0, data.get("usage"))
        return data

    async def _stream(self, req: dict[str, Any]) -> StreamedReply:
        if self._response is not None:
            raise RuntimeError("the agent's stream has already started: ctx.upstream can stream once per turn (use ctx.call for extra calls)")
        rt = self._rt
        model = req["model"]
        t0 = time.perf_counter()
        assembler = StreamAssembler()
        parser = SSEParser()
        status: int | str = 200
        # Ask for the usage chunk so the turn's tokens are known; if the agent did not ask for it,
        # it does not see it (many clients index choices[0] of every chunk). Everything else passes
        # byte for byte.
        opts = req.get("stream_options")
        wants_usage = isinstance(opts, dict) and opts.get("include_usage") is True
        if not wants_usage:
            req["stream_options"] = {**(opts if isinstance(opts, dict) else {}), "include_usage": True}
        splitter = None if wants_usage else RawEventSplitter()
        try:
            async with rt.client.stream("POST", rt.settings.upstream_url + "/chat/completions", json=req, headers=rt.headers) as r:
                rt.note_budget_header(r.headers.get(BUDGET_HEADER))
                if r.status_code >= 400:
                    raw = await r.aread()
                    data = _json_or_none(raw)
                    status = r.status_code
                    if not (isinstance(data, dict) and isinstance(data.get("error"), dict)):
                        data = error_body(raw[:2000].decode("utf-8", "replace") or f"HTTP {r.status_code}", type_="upstream_error")
                    raise UpstreamError(r.status_code, data, model)
                ctype = r.headers.get("content-type", "")
                if "text/event-stream" not in ctype:
                    # The upstream ignored stream=true and sent one JSON body: deliver it as a stream.
                    data = _json_or_none(await r.aread())
                    if not isinstance(data, dict) or not data.get("choices"):
                        status = "bad_json"
                        raise UpstreamError(502, error_body("upstream answered a stream request without SSE", type_="upstream_error"), model)
                    for ev in render_chunks(
                        normalise_message(data["choices"][0].get("message") or {}),
                        model=str(data.get("model") or model),
                        completion_id=data.get("id"),
                        usage=data.get("usage"),
                        include_usage=self.include_usage,
                    ):
                        await self._write(ev)
                        for d in parser.feed(ev):
                            assembler.feed_event(d)
                else:
                    await self._start_stream()
                    try:
                        async for chunk in r.aiter_bytes():
                            if not chunk:
                                continue
                            for d in parser.feed(chunk):
                                assembler.feed_event(d)
                            if splitter is None:
                                await self._write(chunk)
                                continue
                            for ev in splitter.feed(chunk):
                                if not is_usage_only_event(ev):
                                    await self._write(ev)
                        if splitter is not None:
                            rest = splitter.close()
                            if rest:
                                await self._write(rest)
                    except ConnectionResetError:
                        status = "client_closed"
                        raise
                    except httpx.HTTPError as e:
                        status = "cut"
                        raise UpstreamUnavailable(502, error_body(f"upstream stream cut: {type(e).__name__}", type_="upstream_error"), model) from None
                    for d in parser.close():
                        assembler.feed_event(d)
                await self._finish_stream()
        except httpx.TimeoutException as e:
            status = "timeout"
            raise UpstreamUnavailable(504, error_body(f"upstream timed out: {type(e).__name__}", type_="upstream_timeout"), model) from None
        except httpx.HTTPError as e:
            status = "unreachable"
            raise UpstreamUnavailable(502, error_body(f"upstream unreachable: {type(e).__name__}: {e}", type_="upstream_unreachable"), model) from None
        finally:
            self._record(model, "upstream", status, t0, assembler.usage)
        # The header above was computed before the tokens flowed; /budget is authoritative.
        await asyncio.shield(rt.start_budget_refresh())
        message = assembler.message()
        reply = StreamedReply(
            completion_body(
                message,
                model=assembler.model or model,
                completion_id=assembler.id,
                usage=assembler.usage,
                finish_reason=assembler.finish_reason,
            )
        )
        return reply

    # -- the response to the agent --

    async def _start_stream(self) -> web.StreamResponse:
        if self._response is None:
            resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
            await resp.prepare(self._request)
            self._response = resp
        return self._response

    async def _write(self, data: bytes) -> None:
        resp = await self._start_stream()
        await resp.write(data)
        if self._ttfb is None:
            self._ttfb = time.perf_counter()

    async def _finish_stream(self) -> None:
        if self._response is not None and not self._response_done:
            self._response_done = True
            self._t_end = time.perf_counter()
            await self._response.write_eof()

    async def _respond(self, result: Any) -> web.StreamResponse:
        if self._response is not None:
            # Streamed already (ctx.upstream): whatever handle() returned cannot change it.
            if not isinstance(result, StreamedReply) and result is not None:
                self._log.setdefault("warning", "handle() returned a value after the answer was streamed; ignored")
            await self._finish_stream()
            return self._response
        if isinstance(result, web.StreamResponse):
            return result
        if isinstance(result, str):
            result = self.render(result)
        if isinstance(result, Rendered):
            return await self._deliver(result.message, model=result.model)
        if isinstance(result, dict):
            if self.stream and isinstance(result.get("choices"), list) and result["choices"]:
                choice = result["choices"][0]
                return await self._deliver(
                    normalise_message(choice.get("message") or {}),
                    model=str(result.get("model") or "auto"),
                    completion_id=result.get("id"),
                    usage=result.get("usage"),
                    finish_reason=choice.get("finish_reason"),
                )
            self._t_end = time.perf_counter()
            return web.json_response(result, dumps=_dumps)
        if result is None:
            raise TypeError("handle() returned None: return await ctx.upstream(req), or ctx.render(message)")
        raise TypeError(f"handle() returned {type(result).__name__}: return await ctx.upstream(req), a chat.completion dict, or ctx.render(message)")

    async def _deliver(
        self,
        message: dict[str, Any],
        *,
        model: str,
        completion_id: str | None = None,
        usage: dict[str, Any] | None = None,
        finish_reason: str | None = None,
    ) -> web.StreamResponse:
        usage = usage if usage is not None else self.usage()
        if not self.stream:
            self._t_end = time.perf_counter()
            return web.json_response(
                completion_body(message, model=model, completion_id=completion_id, usage=usage, finish_reason=finish_reason),
                dumps=_dumps,
            )
        for ev in render_chunks(
            message,
            model=model,
            completion_id=completion_id or new_completion_id(),
            usage=usage,
            include_usage=self.include_usage,
            finish_reason=finish_reason,
        ):
            await self._write(ev)
        await self._finish_stream()
        assert self._response is not None
        return self._response

    async def _fail(self, status: int, body: dict[str, Any]) -> web.StreamResponse:
        """An error to the agent: JSON with the status before anything was sent, else an SSE error event."""
        if self._response is None:
            self._t_end = time.perf_counter()
            return web.json_response(body, status=status, dumps=_dumps)
        if not self._response_done:
            try:
                await self._response.write(sse_event(body))
            except (ConnectionResetError, RuntimeError):
                pass
            try:
                await self._finish_stream()
            except (ConnectionResetError, RuntimeError):
                pass
        return self._response

    def usage(self) -> dict[str, int] | None:
        """Tokens of this turn's calls so far (None when no call reported usage)."""
        known = [c for c in self.calls if "prompt_tokens" in c or "completion_tokens" in c]
        if not known:
            return None
        p = sum(c.get("prompt_tokens", 0) for c in known)
        q = sum(c.get("completion_tokens", 0) for c in known)
        return {"prompt_tokens": p, "completion_tokens": q, "total_tokens": p + q}


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


def _json_or_none(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None


# --- the server -----------------------------------------------------------------------------------


class Runtime:
    def __init__(self, policy: Any, settings: Settings, *, name: str | None = None) -> None:
        self.policy = policy
        self.settings = settings
        self.name = name or type(policy).__name__
        self.sessions = SessionStore()
        self.remaining_usd: float | None = None
        self._budget_supported = True
        self._client: httpx.AsyncClient | None = None
        self._refreshing: asyncio.Task[None] | None = None
        self.headers: dict[str, str] = {"Accept": "application/json, text/event-stream"}
        if settings.token:
            self.headers["Authorization"] = f"Bearer {settings.token}"

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            s = self.settings
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(s.timeout_s, connect=10.0),
                limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
                trust_env=False,  # never route episode traffic through an ambient proxy
            )
        return self._client

    def note_budget_header(self, value: str | None) -> None:
        if value is None:
            return
        try:
            self.remaining_usd = float(value)
        except ValueError:
            pass

    def start_budget_refresh(self) -> "asyncio.Task[None]":
        """Refresh in a task the next turn can wait for: the agent has its [DONE] by now and may
        send its next request before the answer from /budget is in."""
        task = asyncio.ensure_future(self.refresh_budget())
        self._refreshing = task
        return task

    async def budget_settled(self) -> None:
        task = self._refreshing
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=6.0)

    async def refresh_budget(self) -> None:
        """GET /budget (the authoritative number after a streamed call). Missing endpoint → stop asking."""
        if not self._budget_supported:
            return
        try:
            r = await self.client.get(self.settings.upstream_url + "/budget", headers=self.headers, timeout=5.0)
        except httpx.HTTPError:
            return
        if r.status_code in (404, 405):
            self._budget_supported = False
            return
        data = _json_or_none(r.content)
        if r.status_code == 200 and isinstance(data, dict) and isinstance(data.get("remaining_usd"), (int, float)):
            self.remaining_usd = float(data["remaining_usd"])

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        app.on_cleanup.append(self._cleanup)
        return app

    async def _cleanup(self, _app: web.Application) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def _health(self, _request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "policy": self.name})

    async def _models(self, _request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": "auto", "object": "model", "created": 0, "owned_by": "trajrl-policy"}]}
        )

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        t0 = time.perf_counter()
        try:
            body = await request.json()
        except Exception:  # noqa: BLE001 - any unparseable body is the client's error
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            emit({"event": "turn", "ts": _now_iso(), "status": "bad_request", "http_status": 400,
                  "latency_ms": round((time.perf_counter() - t0) * 1000, 1)})
            return web.json_response(
                error_body("the body must be a JSON object with a messages array", type_="invalid_request_error"),
                status=400,
            )
        await self.budget_settled()
        agent_stream = body.get("stream") is True
        opts = body.get("stream_options")
        include_usage = isinstance(opts, dict) and opts.get("include_usage") is True
        messages = copy.deepcopy(body["messages"])
        session = self.sessions.resolve(messages)
        now = time.monotonic()
        gap_s = None if session.last_end is None else now - session.last_end
        session.turns += 1
        ctx = Context(self, request, messages, session, gap_s, agent_stream, include_usage)
        status, http_status, error, tb = "ok", 200, None, None
        try:
            result = await self.policy.handle(body, ctx)
            resp = await ctx._respond(result)
            http_status = resp.status
            return resp
        except UpstreamError as e:
            status, http_status, error = "upstream_error", e.status, str(e)
            return await ctx._fail(e.status, e.body)
        except asyncio.CancelledError:
            status, http_status = "client_closed", 499
            raise
        except ConnectionResetError:
            status, http_status = "client_closed", 499
            return ctx._response or web.Response(status=499)
        except Exception as e:  # noqa: BLE001 - a policy bug answers 500 and the server keeps serving
            tb = traceback.format_exc()
            error = f"{type(e).__name__}: {e}"
            status, http_status = "policy_error", 500
            sys.stderr.write(f"trajrl-policy: handle() raised on turn {ctx.turn} of session {session.key}\n{tb}")
            sys.stderr.flush()
            return await ctx._fail(500, error_body(f"policy error: {error}", type_="policy_error", code="policy_exception"))
        finally:
            session.last_end = time.monotonic()
            self._log_turn(ctx, session, t0, status, http_status, error, tb)

    def _log_turn(
        self, ctx: Context, session: Session, t0: float, status: str, http_status: int, error: str | None, tb: str | None
    ) -> None:
        end = ctx._t_end or time.perf_counter()
        usage = ctx.usage()
        models = [c["model"] for c in ctx.calls]
        line: dict[str, Any] = {
            "event": "turn",
            "ts": _now_iso(),
            "session": session.key,
            "sid": session.seq,
            "turn": ctx.turn,
            "model": models[-1] if models else None,
            "models": models,
            "calls": ctx.calls,
            "prompt_tokens": usage["prompt_tokens"] if usage else None,
            "completion_tokens": usage["completion_tokens"] if usage else None,
            "latency_ms": round((end - t0) * 1000, 1),
            "stream": ctx.stream,
            "status": status,
            "http_status": http_status,
            "remaining_usd": self.remaining_usd,
        }
        if ctx._ttfb is not None:
            line["ttfb_ms"] = round((ctx._ttfb - t0) * 1000, 1)
        if ctx._signals:
            line["signals"] = next(iter(ctx._signals.values()))  # the first set the policy asked for
        if ctx._log:
            line["policy"] = ctx._log
        if error:
            line["error"] = error
        if tb:
            line["traceback"] = tb
        emit(line)


def check_policy(policy: Any) -> None:
    handle = getattr(policy, "handle", None)
    if handle is None or not callable(handle):
        raise StartupError(f"serve() needs a policy object with an async handle(req, ctx) method, got {type(policy).__name__}")
    if not asyncio.iscoroutinefunction(handle):
        raise StartupError(f"{type(policy).__name__}.handle must be declared `async def handle(self, req, ctx)`")


async def run(policy: Any, settings: Settings, *, name: str | None = None, ready: asyncio.Event | None = None) -> None:
    """Serve until SIGTERM/SIGINT (or until cancelled)."""
    runtime = Runtime(policy, settings, name=name)
    runner = web.AppRunner(runtime.app(), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, settings.host, settings.port, reuse_address=True)
    try:
        await site.start()
    except OSError as e:
        await runner.cleanup()
        raise StartupError(f"cannot listen on {settings.host}:{settings.port}: {e.strerror or e}") from None
    port = settings.port
    server = getattr(site, "_server", None)
    if server is not None and getattr(server, "sockets", None):
        port = server.sockets[0].getsockname()[1]
    emit({"event": "listening", "ts": _now_iso(), "policy": runtime.name, "host": settings.host, "port": port,
          "upstream": safe_url(settings.upstream_url), "default_model": settings.default_model})
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    # Learn the budget early so ctx.remaining_usd is known on the first turn when the meter answers.
    budget_task = runtime.start_budget_refresh()
    if ready is not None:
        ready.set()
    try:
        await stop.wait()
    finally:
        budget_task.cancel()
        await runner.cleanup()


def serve(policy: Any, *, port: int | None = None, host: str | None = None, name: str | None = None) -> None:
    """Serve the policy on POLICY_PORT until terminated. Exits 2 with a message on stderr when it
    cannot start (bad environment, bad policy object, port taken)."""
    try:
        check_policy(policy)
        settings = Settings.from_env(port=port, host=host)
        asyncio.run(run(policy, settings, name=name))
    except StartupError as e:
        sys.stderr.write(f"trajrl-policy: {e}\n")
        sys.stderr.flush()
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        pass
