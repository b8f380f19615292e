"""Server-sent events of the OpenAI chat API: an incremental parser, a chunk assembler and the
renderer of a finished message. Pure; the runtime feeds bytes in and writes bytes out."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any


class SSEParser:
    """Incremental: feed() raw bytes as they arrive, get back the complete events' data fields.
    Tolerates CRLF, comments (": keep-alive") and multi-line data; an event ends at a blank line."""

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[str]:
        self._buf += chunk
        events: list[str] = []
        while True:
            nl = self._buf.find(b"\n")
            if nl < 0:
                break
            raw, self._buf = self._buf[:nl], self._buf[nl + 1 :]
            line = raw[:-1] if raw.endswith(b"\r") else raw
            if not line:
                if self._data:
                    events.append("\n".join(self._data))
                    self._data = []
                continue
            if line.startswith(b":"):
                continue
            field, _, value = line.partition(b":")
            if field == b"data":
                self._data.append(value[1:].decode("utf-8", "replace") if value.startswith(b" ") else value.decode("utf-8", "replace"))
        return events

    def close(self) -> list[str]:
        """Events still pending when the stream ended without a final blank line."""
        rest = self.feed(b"\n\n") if self._buf or self._data else []
        return rest


class RawEventSplitter:
    """Splits a byte stream into whole SSE events, each kept byte for byte (terminator included)."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buf += chunk
        out: list[bytes] = []
        while True:
            cut = -1
            for sep in (b"\n\n", b"\r\n\r\n"):
                i = self._buf.find(sep)
                if i >= 0 and (cut < 0 or i + len(sep) < cut):
                    cut = i + len(sep)
            if cut < 0:
                return out
            out.append(self._buf[:cut])
            self._buf = self._buf[cut:]

    def close(self) -> bytes:
        rest, self._buf = self._buf, b""
        return rest


def is_usage_only_event(raw: bytes) -> bool:
    """A chunk that carries usage and no choices: what stream_options.include_usage adds at the end."""
    for line in raw.splitlines():
        if line.startswith(b"data:"):
            try:
                obj = json.loads(line[5:].strip())
            except ValueError:
                return False
            return isinstance(obj, dict) and obj.get("choices") == [] and isinstance(obj.get("usage"), dict)
    return False


class StreamAssembler:
    """Rebuilds the assistant message, model, finish reason and usage from streamed chunks."""

    def __init__(self) -> None:
        self.id: str | None = None
        self.model: str | None = None
        self.usage: dict[str, Any] | None = None
        self.finish_reason: str | None = None
        self.error: Any = None
        self.done = False
        self.chunks = 0
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._tools: dict[int, dict[str, Any]] = {}

    def feed_event(self, data: str) -> None:
        if data.strip() == "[DONE]":
            self.done = True
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            return
        if isinstance(chunk, dict):
            self.feed(chunk)

    def feed(self, chunk: dict[str, Any]) -> None:
        self.chunks += 1
        if "error" in chunk:
            self.error = chunk["error"]
        if isinstance(chunk.get("id"), str) and self.id is None:
            self.id = chunk["id"]
        if isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            if isinstance(choice.get("finish_reason"), str):
                self.finish_reason = choice["finish_reason"]
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue
            if isinstance(delta.get("content"), str):
                self._content.append(delta["content"])
            if isinstance(delta.get("reasoning_content"), str):
                self._reasoning.append(delta["reasoning_content"])
            for frag in delta.get("tool_calls") or []:
                if not isinstance(frag, dict):
                    continue
                idx = frag.get("index", len(self._tools))
                slot = self._tools.setdefault(idx, {"id": None, "type": "function", "name": "", "arguments": ""})
                if isinstance(frag.get("id"), str):
                    slot["id"] = frag["id"]
                if isinstance(frag.get("type"), str):
                    slot["type"] = frag["type"]
                fn = frag.get("function")
                if isinstance(fn, dict):
                    if isinstance(fn.get("name"), str):
                        slot["name"] += fn["name"]
                    if isinstance(fn.get("arguments"), str):
                        slot["arguments"] += fn["arguments"]

    def message(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "assistant", "content": "".join(self._content) if self._content else None}
        if self._reasoning:
            msg["reasoning_content"] = "".join(self._reasoning)
        if self._tools:
            msg["tool_calls"] = [
                {
                    "id": t["id"] or f"call_{i}",
                    "type": t["type"],
                    "function": {"name": t["name"], "arguments": t["arguments"]},
                }
                for i, t in sorted(self._tools.items())
            ]
        return msg


def new_completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def normalise_message(message: Any) -> dict[str, Any]:
    """What ctx.render accepts: a message dict, or a plain string (the content)."""
    if isinstance(message, str):
        return {"role": "assistant", "content": message}
    if not isinstance(message, dict):
        raise TypeError(f"ctx.render expects a message dict or a string, got {type(message).__name__}")
    out: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if out["content"] is not None and not isinstance(out["content"], str):
        raise TypeError("ctx.render: message content must be a string or None")
    calls = message.get("tool_calls")
    if calls:
        if not isinstance(calls, list):
            raise TypeError("ctx.render: tool_calls must be a list")
        norm = []
        for i, c in enumerate(calls):
            fn = c.get("function") if isinstance(c, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                raise TypeError(f"ctx.render: tool_calls[{i}] needs function.name")
            args = fn.get("arguments", "")
            if not isinstance(args, str):
                args = json.dumps(args, ensure_ascii=False)
            norm.append(
                {
                    "id": c.get("id") if isinstance(c.get("id"), str) else f"call_{uuid.uuid4().hex[:12]}",
                    "type": "function",
                    "function": {"name": fn["name"], "arguments": args},
                }
            )
        out["tool_calls"] = norm
    if isinstance(message.get("reasoning_content"), str):
        out["reasoning_content"] = message["reasoning_content"]
    return out


def finish_reason_of(message: dict[str, Any]) -> str:
    return "tool_calls" if message.get("tool_calls") else "stop"


def completion_body(
    message: dict[str, Any],
    *,
    model: str,
    completion_id: str | None = None,
    created: int | None = None,
    usage: dict[str, Any] | None = None,
    finish_reason: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": completion_id or new_completion_id(),
        "object": "chat.completion",
        "created": created if created is not None else int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason or finish_reason_of(message)}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def sse_event(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"


def render_chunks(
    message: dict[str, Any],
    *,
    model: str,
    completion_id: str | None = None,
    created: int | None = None,
    usage: dict[str, Any] | None = None,
    include_usage: bool = False,
    finish_reason: str | None = None,
) -> list[bytes]:
    """The SSE events of an assembled message, in the order an OpenAI-compatible server sends them:
    role, reasoning, content, one event per tool call (id, name and whole arguments), the finish
    reason, the usage chunk when the client asked for it, then [DONE]."""
    cid = completion_id or new_completion_id()
    ts = created if created is not None else int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse_event(
            {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": ts,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    out = [chunk({"role": "assistant", "content": ""})]
    if message.get("reasoning_content"):
        out.append(chunk({"reasoning_content": message["reasoning_content"]}))
    if message.get("content"):
        out.append(chunk({"content": message["content"]}))
    for i, call in enumerate(message.get("tool_calls") or []):
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": call["function"]["arguments"]},
                        }
                    ]
                }
            )
        )
    out.append(chunk({}, finish_reason or finish_reason_of(message)))
    if include_usage:
        out.append(
            sse_event(
                {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": ts,
                    "model": model,
                    "choices": [],
                    "usage": usage or {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                }
            )
        )
    out.append(SSE_DONE)
    return out


def error_body(message: str, *, type_: str, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    """OpenAI-shaped error JSON."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}
