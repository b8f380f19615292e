#!/usr/bin/env python3
"""trajrl_policy: the SDK and runtime of TrajectoryRL fusion policies (SN11 Season 2).

The validator runs this file in the policy sidecar, next to the miner's pack files (POLICY_DIR): it
serves an OpenAI-compatible /v1/chat/completions (model "auto") to the agent and sends every model
call to the validator's meter (UPSTREAM_URL, bearer EPISODE_TOKEN), the sidecar's only way out.
Its surface and behaviour are those of the reference runtime (trajectoryrl/policy/runtime/
trajrl_policy.py): a policy written for one runs unchanged on the other.

A policy is one of:
  policy.json   {"kind": "pin", "model": "glm-5.3-flash"}
                {"kind": "escalate", "cheap": "glm-5.3-flash", "strong": "kimi-k3", "signals": ["stall", "toolerr"]}
                {"kind": "advisers", "writer": "kimi-k3", "advisers": ["deepseek-v4.1-flash", "glm-5.3-flash"]}
  policy.py     on this SDK:
                    from trajrl_policy import Policy, serve
                    class Mine(Policy):
                        async def handle(self, req, ctx):
                            req["model"] = "kimi-k3" if "toolerr" in ctx.signals() else "glm-5.3-flash"
                            return await ctx.upstream(req)
                    serve(Mine())
                or raw: it serves /v1/chat/completions and /v1/models on POLICY_PORT itself.
  neither       pin on DEFAULT_MODEL.

Run it:  POLICY_PORT=8800 POLICY_DIR=./my_policy UPSTREAM_URL=https://api.engy.ai/v1 EPISODE_TOKEN=...
         python trajrl_policy.py
Environment: POLICY_PORT (8800), UPSTREAM_URL, EPISODE_TOKEN, POLICY_DIR (/policy), POLICY_LOG (a file
for the log lines; stdout when unset), DEFAULT_MODEL, UPSTREAM_AUTH (token | passthrough).
Third-party imports: aiohttp only.
"""
# Generated from sidecar/trajrl_policy/ by src/policy/sdk-bundle.ts (npm run sdk:bundle): edit those.
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import runpy
import sys
import time
import traceback
from aiohttp import ClientSession, ClientTimeout, web
from typing import Any, AsyncIterator, Awaitable, Callable, Optional
from urllib.parse import urlsplit, urlunsplit


# ------------------------------------------------------------------------------------------------
# settings
# What the validator hands the sidecar through its environment, read once at import as the reference
# runtime reads it (a policy may read these names too), and the policy log.
# ------------------------------------------------------------------------------------------------

POLICY_PORT = int(os.environ.get("POLICY_PORT", "8800"))
UPSTREAM_URL = os.environ.get("UPSTREAM_URL", "http://meter:8790/v1").rstrip("/")
EPISODE_TOKEN = os.environ.get("EPISODE_TOKEN", "")
POLICY_DIR = os.environ.get("POLICY_DIR", "/policy")
POLICY_LOG = os.environ.get("POLICY_LOG", "")
DEFAULT_MODEL = os.environ.get("DEFAULT_MODEL", "qwen3.8-27b")
# "token" (the validator's sidecar): every upstream call carries EPISODE_TOKEN. "passthrough": the
# caller's own Authorization header is forwarded instead (a policy served as a product endpoint).
UPSTREAM_AUTH = os.environ.get("UPSTREAM_AUTH", "token")
# Ours, not the reference runtime's: `trajrl-validator policy serve` listens on loopback only.
POLICY_HOST = os.environ.get("POLICY_HOST", "0.0.0.0")

BUDGET_HEADER = "x-trajrl-budget-remaining-usd"
MAX_REQUEST_BYTES = 64 * 1024 * 1024  # the agent resends the whole conversation every turn

# Opened for the life of the process; append, so a policy.py importing this module again shares it.
_policy_log_file = open(POLICY_LOG, "a") if POLICY_LOG else None  # noqa: SIM115


def log(**fields: Any) -> None:
    """One JSON line in the policy log (POLICY_LOG, else stdout): kept with the episode's artifacts."""
    fields.setdefault("ts", round(time.time(), 3))
    line = json.dumps(fields, default=str)
    if _policy_log_file is not None:
        _policy_log_file.write(line + "\n")
        _policy_log_file.flush()
    else:
        print(line, flush=True)


def loggable_url(url: str) -> str:
    """A URL for the log: no credentials, no query string."""
    try:
        parts = urlsplit(url)
        netloc = parts.hostname or ""
        if parts.port:
            netloc = f"{netloc}:{parts.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        return "[unparseable url]"


# ------------------------------------------------------------------------------------------------
# transcript
# What a policy can read off the conversation the agent resends every turn: its text, the session it
# belongs to, and the five signals. Pure apart from the clock `stall` reads. Every threshold and window
# here is the reference runtime's: a policy must see the same signals on the same transcript.
# ------------------------------------------------------------------------------------------------

SESSION_HEAD = 5  # messages that identify a session: system, task, and the reads of SKILL.md / INSTRUCTION.md
PROVISIONAL_HEAD = 2  # a conversation shorter than SESSION_HEAD is keyed by its first two messages
KEY_TEXT_CHARS = 6000
TOOL_TEXT_CHARS = 400

STALL_S = 420.0  # `stall`: the session is older than this (seconds since its first turn)
TOOLERR_K = 3  # `toolerr`: the last K tool results all look like errors
NOPROG_N = 8  # `noprog`: none of the last N assistant turns looks like writing a deliverable
REPEAT_N = 3  # `repeat`: the last N assistant turns all made the same tool calls

# Substrings (of the lower-cased first 400 characters) that make a tool result an error.
ERROR_MARKERS = (
    "traceback",
    "error:",
    "command not found",
    "no such file",
    "permission denied",
    "exit code 1",
    "exit status 1",
    "syntaxerror",
    "failed",
)
# Substrings of an assistant turn's (lower-cased, JSON-encoded) action that look like producing output.
DELIVERABLE_HINTS = (
    "write_file",
    "create_file",
    "cat >",
    "tee ",
    "> /app",
    ">/app",
    "applypatch",
    "git apply",
    "patch ",
)


def content_text(content: Any) -> str:
    """A message's content as text: a string as is, the text parts of a list, "" for None."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    if content is None:
        return ""
    return str(content)


def session_key(msgs: list[dict]) -> str:
    """The agent session a conversation belongs to: "s" + 12 hex of sha1 over role and text of its first
    five messages, or, while it is shorter than five, "pre" + the same over its first two."""
    complete = len(msgs) >= SESSION_HEAD
    head = msgs[:SESSION_HEAD] if complete else msgs[:PROVISIONAL_HEAD]
    lines = [f"{m.get('role')}:{content_text(m.get('content'))[:KEY_TEXT_CHARS]}" for m in head]
    digest = hashlib.sha1("\n".join(lines).encode()).hexdigest()[:12]
    return ("s" if complete else "pre") + digest


def tool_is_error(text: str) -> bool:
    """A tool result that reads like a failure (a marker within its first 400 characters)."""
    head = text[:TOOL_TEXT_CHARS].lower()
    return any(marker in head for marker in ERROR_MARKERS)


def transcript_signals(
    msgs: list[dict],
    sess: dict,
    stall_s: float = STALL_S,
    k_toolerr: int = TOOLERR_K,
    n_noprog: int = NOPROG_N,
) -> list[str]:
    """The signals that hold now, in the order stall, len, toolerr, noprog, repeat:

    stall    more than `stall_s` seconds since the session's first turn (`sess["t0"]`)
    len      the session's previous answer ended with finish_reason "length"
    toolerr  at least `k_toolerr` tool results, and the last `k_toolerr` all read like errors
    noprog   at least `n_noprog` assistant turns, and none of the last `n_noprog` looks like writing a file
    repeat   the last three assistant turns all called tools, with identical calls
    """
    now = time.time()
    fired: list[str] = []
    if now - sess.get("t0", now) > stall_s:
        fired.append("stall")
    if sess.get("last_finish") == "length":
        fired.append("len")

    tool_msgs = [m for m in msgs if m.get("role") == "tool"]
    if len(tool_msgs) >= k_toolerr and all(
        tool_is_error(content_text(m.get("content"))) for m in tool_msgs[-k_toolerr:]
    ):
        fired.append("toolerr")

    turns = [m for m in msgs if m.get("role") == "assistant"]
    if len(turns) >= n_noprog:
        actions = [m.get("tool_calls") or m.get("content") for m in turns[-n_noprog:]]
        encoded = json.dumps(actions, default=str).lower()
        if not any(hint in encoded for hint in DELIVERABLE_HINTS):
            fired.append("noprog")

    calls = [
        json.dumps(m.get("tool_calls"), sort_keys=True, default=str)
        for m in turns[-REPEAT_N:]
        if m.get("tool_calls")
    ]
    if len(calls) == REPEAT_N and len(set(calls)) == 1:
        fired.append("repeat")
    return fired


# ------------------------------------------------------------------------------------------------
# render
# An answer the policy assembled itself (`ctx.render(message)`), as the agent receives it: SSE chunks
# when it asked for a stream, else one chat.completion. Pure.
# ------------------------------------------------------------------------------------------------

class Rendered:
    """`message` is an assistant message dict (`content` and/or `tool_calls`). The server sends `sse()`
    or `json()` depending on whether the agent's request asked for a stream."""

    def __init__(
        self, message: dict, model: str, finish: str, usage: dict | None, stream: bool, req_id: str
    ) -> None:
        self.message = message
        self.model = model
        self.finish = finish
        self.usage = usage
        self.stream = stream
        self.req_id = req_id

    def _chunk(self, created: int, delta: dict, finish: str | None) -> dict[str, Any]:
        return {
            "id": self.req_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def sse(self) -> bytes:
        """data: events — the content (if any), every tool call in one delta, the finish reason with the
        usage — then data: [DONE]."""
        created = int(time.time())
        events: list[dict[str, Any]] = []
        content = self.message.get("content") or ""
        if content:
            events.append(self._chunk(created, {"role": "assistant", "content": content}, None))
        if self.message.get("tool_calls"):
            deltas = []
            for index, call in enumerate(self.message["tool_calls"]):
                fn = call["function"]
                deltas.append(
                    {
                        "index": index,
                        "id": call.get("id"),
                        "type": "function",
                        "function": {"name": fn["name"], "arguments": fn.get("arguments", "")},
                    }
                )
            events.append(self._chunk(created, {"role": "assistant", "tool_calls": deltas}, None))
        last = self._chunk(created, {}, self.finish)
        last["usage"] = self.usage
        events.append(last)
        body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
        return body + b"data: [DONE]\n\n"

    def json(self) -> bytes:
        """The same answer as one chat.completion body."""
        completion = {
            "id": self.req_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", **self.message}, "finish_reason": self.finish}
            ],
            "usage": self.usage,
        }
        return json.dumps(completion).encode()


# ------------------------------------------------------------------------------------------------
# context
# What `Policy.handle(req, ctx)` works with: the context of one request (session state, signals, budget,
# upstream access, extra calls, rendering) and the upstream's answer it returns.
# ------------------------------------------------------------------------------------------------

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


# ------------------------------------------------------------------------------------------------
# kinds
# The Policy base class and the policy.json kinds (pin, escalate, advisers), with the reference
# runtime's defaults and its leniency: fields it does not read are ignored, values go through Python's own
# float()/int()/list()/set(), and only what those reject (or an unknown kind) stops the sidecar at start.
# The adviser prompts reach the models, so their text is the reference runtime's, byte for byte.
# ------------------------------------------------------------------------------------------------

ESCALATE_SIGNALS = ("stall", "toolerr", "repeat")
ESCALATE_STALL_S = 420.0
ADVISER_MAX_TOKENS = 400
ADVISER_TEMPERATURE = 0.7
ADVISER_TRANSCRIPT_CHARS = 60000  # the tail of the conversation's JSON an adviser reads

ADVISER_PROMPT = (
    "You are an adviser watching another agent solve a terminal task. Read the conversation so far and "
    "write at most 150 words of concrete, specific advice for its NEXT step only: what to check, what "
    "to run, what mistake to avoid, or what the deliverable must contain. No preamble. If the agent is "
    "on track, say so in one line."
)
ADVICE_HEADER = (
    "Notes from independent advisers who read the conversation so far. They may be wrong; weigh them "
    "with your own judgment, then take the next step.\n\n"
)


class Policy:
    """Subclass and implement `async def handle(self, req, ctx)`: return `await ctx.upstream(req)` to
    stream a model's answer through, or `ctx.render(message)` to answer with a message you assembled.
    `name` is what /health and /v1/models report."""

    name = "policy"

    async def handle(self, req: dict, ctx: Ctx) -> Any:
        req["model"] = DEFAULT_MODEL
        return await ctx.upstream(req)


class PinPolicy(Policy):
    """Every call to one model."""

    def __init__(self, model: str = DEFAULT_MODEL) -> None:
        self.model = model
        self.name = f"pin:{model}"

    async def handle(self, req: dict, ctx: Ctx) -> Any:
        req["model"] = self.model
        return await ctx.upstream(req)


class EscalatePolicy(Policy):
    """Each session starts on `cheap`; the first turn on which one of `signals` holds moves it to `strong`
    for good (the session records "escalated" and "why")."""

    def __init__(self, cheap: str, strong: str, signals: list[str] | None = None, stall_s: float = ESCALATE_STALL_S):
        self.cheap = cheap
        self.strong = strong
        self.signals = set(signals or ESCALATE_SIGNALS)
        self.stall_s = stall_s
        self.name = f"escalate:{cheap}->{strong}"

    async def handle(self, req: dict, ctx: Ctx) -> Any:
        sess = ctx.session
        if not sess.get("escalated"):
            why = [s for s in ctx.signals(stall_s=self.stall_s) if s in self.signals]
            if why:
                sess["escalated"] = True
                sess["why"] = why
        req["model"] = self.strong if sess.get("escalated") else self.cheap
        return await ctx.upstream(req)


class AdvisersPolicy(Policy):
    """Once the conversation holds tool results, on every `every`-th turn of the session, each adviser
    reads the conversation and writes a note (in parallel); the notes that came back are appended to the
    writer's messages as one system message. The writer answers every turn, streamed through."""

    def __init__(
        self,
        writer: str,
        advisers: list[str],
        max_words: int = 150,
        temperature: float = ADVISER_TEMPERATURE,
        max_tokens: int = ADVISER_MAX_TOKENS,
        every: int = 1,
    ) -> None:
        self.writer = writer
        self.advisers = list(advisers)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.every = max(1, every)
        self.name = f"advisers:{writer}|{','.join(advisers)}"

    def _engaged(self, msgs: list[dict], turn: int) -> bool:
        return any(m.get("role") == "tool" for m in msgs) and turn % self.every == 0

    async def handle(self, req: dict, ctx: Ctx) -> Any:
        msgs = req.get("messages") or []
        if self._engaged(msgs, ctx.session.get("turn", 0)):
            transcript = json.dumps(msgs[1:], default=str)[-ADVISER_TRANSCRIPT_CHARS:]
            prompt = [
                {"role": "system", "content": ADVISER_PROMPT},
                {"role": "user", "content": "Conversation so far (JSON):\n" + transcript},
            ]
            notes = await asyncio.gather(
                *(ctx.call(m, prompt, max_tokens=self.max_tokens, temperature=self.temperature) for m in self.advisers)
            )
            written = [(m, n["text"].strip()) for m, n in zip(self.advisers, notes) if n["text"].strip()]
            if written:
                block = "\n\n".join(f"Adviser {i + 1} ({m}):\n{text}" for i, (m, text) in enumerate(written))
                req["messages"] = msgs + [{"role": "system", "content": ADVICE_HEADER + block}]
            log(event="advisers", n=len(written), s=[n["s"] for n in notes], status=[n["status"] for n in notes])
        req["model"] = self.writer
        return await ctx.upstream(req)


def policy_from_config(cfg: dict) -> Policy:
    """policy.json (parsed) → the kind it names; a missing or empty kind is pin. Raises ValueError for an
    unknown kind, and whatever Python raises for a value it cannot use (a missing model, "x" as a number)."""
    kind = (cfg.get("kind") or "pin").lower()
    if kind == "pin":
        return PinPolicy(cfg.get("model", DEFAULT_MODEL))
    if kind == "escalate":
        return EscalatePolicy(
            cfg["cheap"], cfg["strong"], cfg.get("signals"), float(cfg.get("stall_s", ESCALATE_STALL_S))
        )
    if kind == "advisers":
        return AdvisersPolicy(
            cfg["writer"],
            cfg["advisers"],
            temperature=float(cfg.get("temperature", ADVISER_TEMPERATURE)),
            max_tokens=int(cfg.get("max_tokens", ADVISER_MAX_TOKENS)),
            every=int(cfg.get("every", 1)),
        )
    raise ValueError(f"unknown policy kind {kind!r}")


# ------------------------------------------------------------------------------------------------
# server
# The OpenAI-compatible server the agent talks to (aiohttp), its upstream client (the meter), and the
# sidecar's entry point: POLICY_DIR's policy.py if present (run in this process: an SDK policy calls
# serve(), a raw one serves POLICY_PORT itself), else its policy.json, else pin on DEFAULT_MODEL.
# ------------------------------------------------------------------------------------------------

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
