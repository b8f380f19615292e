"""What a policy can read off the conversation the agent resends every turn: its text, the session it
belongs to, and the five signals. Pure apart from the clock `stall` reads. Every threshold and window
here is the reference runtime's: a policy must see the same signals on the same transcript."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

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
