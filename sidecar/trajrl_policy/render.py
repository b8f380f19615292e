"""An answer the policy assembled itself (`ctx.render(message)`), as the agent receives it: SSE chunks
when it asked for a stream, else one chat.completion. Pure."""

from __future__ import annotations

import json
import time
from typing import Any


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
