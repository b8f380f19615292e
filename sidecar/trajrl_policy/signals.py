"""Pure functions over an agent transcript: session keys and the five policy signals.

Nothing here does I/O or reads the clock; the caller passes the wall-clock gap it measured.
The definitions are the contract documented in sidecar/README.md ("Signals"); change both together.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any, Iterable, Sequence

SIGNAL_NAMES: tuple[str, ...] = ("stall", "len", "toolerr", "noprog", "repeat")

# How many leading messages identify an agent session (Hermes: system, user, and the tool results
# that read SKILL.md and INSTRUCTION.md make it unique).
SESSION_PREFIX = 5

DEFAULT_STALL_S = 90.0
LEN_TOKENS = 40_000
REPEAT_WINDOW = 6
REPEAT_COUNT = 3
NOPROG_WINDOW = 6

Message = dict[str, Any]


def text_of(content: Any) -> str:
    """The text of a message's content: a string, None, or a list of OpenAI content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return str(content)


def _canonical_args(arguments: Any) -> str:
    # Two calls with the same arguments in a different key order or spacing are the same action.
    if isinstance(arguments, str):
        try:
            return json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        except (ValueError, TypeError):
            return arguments.strip()
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def tool_calls_of(message: Message) -> list[tuple[str, str]]:
    """(name, canonical arguments) of every tool call of an assistant message."""
    out: list[tuple[str, str]] = []
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return out
    for call in calls:
        if not isinstance(call, dict):
            continue
        fn = call.get("function")
        if not isinstance(fn, dict):
            continue
        out.append((str(fn.get("name", "")), _canonical_args(fn.get("arguments", ""))))
    return out


def _normal_message(message: Any) -> Any:
    # Agents re-serialise earlier turns (content None vs "", extra fields); key on what the
    # model saw so a session keeps its key from turn to turn.
    if not isinstance(message, dict):
        return message
    return {
        "role": message.get("role"),
        "content": text_of(message.get("content")),
        "tool_calls": tool_calls_of(message),
        "tool_call_id": message.get("tool_call_id"),
    }


def prefix_key(messages: Sequence[Any], n: int) -> str:
    """sha256 (16 hex) of the first n messages, normalised."""
    canon = json.dumps(
        [_normal_message(m) for m in messages[:n]], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:16]


def session_key(messages: Sequence[Any]) -> str:
    """The session key: digest of the first five messages (fewer while the conversation is shorter)."""
    return prefix_key(messages, min(SESSION_PREFIX, len(messages)))


def estimate_tokens(messages: Sequence[Any]) -> int:
    """The meter's conservative rule: ASCII at 3 characters per token, non-ASCII at one token each,
    over the compact JSON text of the messages."""
    text = json.dumps(list(messages), separators=(",", ":"), ensure_ascii=False, default=str)
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    return math.ceil(ascii_chars / 3) + (len(text) - ascii_chars)


# --- tool results ---------------------------------------------------------------------------------

_ERROR_TEXT = re.compile(
    r"traceback \(most recent call last\)"
    r"|^\s*(?:[\w.]*error|fatal|[\w.]*exception)\s*:"
    r"|command not found"
    r"|no such file or directory"
    r"|permission denied"
    r"|\bexit (?:code|status)\b\W{0,3}[1-9]\d*"
    r"|timed out",
    re.IGNORECASE | re.MULTILINE,
)
_TIMEOUT_TEXT = re.compile(r"timed out|\btimeout\b", re.IGNORECASE)
# The project's agent ends every terminal result with a status trailer; when present it decides,
# so a successful command whose output mentions "error:" is not an error.
_EXIT_TRAILER = re.compile(r"\[(?:killed by \w+; )?exit code: (-?\d+)\]\s*\Z")
_TIMEOUT_TRAILER = re.compile(r"\[timed out after [^\]]*\]\s*\Z")
_EXIT_KEYS = ("exit_code", "returncode", "exit_status")
_TIMEOUT_KEYS = ("timed_out", "timeout")


def _structured(text: str) -> dict[str, Any] | None:
    s = text.strip()
    if not s.startswith("{"):
        return None
    try:
        value = json.loads(s)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _nonzero_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v != 0


def tool_result_is_timeout(content: Any) -> bool:
    text = text_of(content)
    obj = _structured(text)
    if obj is not None:
        if any(obj.get(k) is True for k in _TIMEOUT_KEYS):
            return True
        return any(obj.get(k) == 124 for k in _EXIT_KEYS)  # 124: coreutils `timeout`
    if _TIMEOUT_TRAILER.search(text):
        return True
    trailer = _EXIT_TRAILER.search(text)
    if trailer:
        return trailer.group(1) == "124"
    return bool(_TIMEOUT_TEXT.search(text))


def tool_result_is_error(content: Any) -> bool:
    """A tool result reports a failure. A JSON object result is judged by its fields only (its
    output may legitimately contain the word "error"); text ending in the agent's status trailer
    by that trailer; other text by the patterns in _ERROR_TEXT."""
    text = text_of(content)
    obj = _structured(text)
    if obj is not None:
        if any(_nonzero_int(obj.get(k)) for k in _EXIT_KEYS):
            return True
        err = obj.get("error")
        if err not in (None, "", False, [], {}):
            return True
        if obj.get("success") is False or obj.get("ok") is False:
            return True
        return any(obj.get(k) is True for k in _TIMEOUT_KEYS)
    if _TIMEOUT_TRAILER.search(text):
        return True
    trailer = _EXIT_TRAILER.search(text)
    if trailer:
        return trailer.group(1) != "0"
    return bool(_ERROR_TEXT.search(text))


def latest_tool_results(messages: Sequence[Any]) -> list[Message]:
    """The tool messages after the last assistant message: what the agent just ran."""
    out: list[Message] = []
    for m in reversed(messages):
        if not isinstance(m, dict):
            continue
        if m.get("role") == "assistant":
            break
        if m.get("role") == "tool":
            out.append(m)
    out.reverse()
    return out


def _assistant_signature(message: Message) -> str | None:
    calls = tool_calls_of(message)
    if calls:
        return json.dumps(calls, separators=(",", ":"), ensure_ascii=False)
    text = text_of(message.get("content")).strip()
    return json.dumps(["text", text], ensure_ascii=False) if text else None


def _squash(text: str) -> str:
    return " ".join(text.split())


# --- the signals ----------------------------------------------------------------------------------


def sig_stall(messages: Sequence[Any], gap_s: float | None, stall_s: float) -> bool:
    if gap_s is not None and gap_s >= stall_s:
        return True
    return any(tool_result_is_timeout(m.get("content")) for m in latest_tool_results(messages))


def sig_len(messages: Sequence[Any], len_tokens: int = LEN_TOKENS) -> bool:
    return estimate_tokens(messages) >= len_tokens


def sig_toolerr(messages: Sequence[Any]) -> bool:
    return any(tool_result_is_error(m.get("content")) for m in latest_tool_results(messages))


def sig_noprog(messages: Sequence[Any], window: int = NOPROG_WINDOW) -> bool:
    tools = [m for m in messages if isinstance(m, dict) and m.get("role") == "tool"]
    if len(tools) < window:
        return False
    seen: set[str] = set()
    unproductive: list[bool] = []
    for m in tools:
        content = m.get("content")
        key = _squash(text_of(content))
        unproductive.append(tool_result_is_error(content) or key in seen)
        seen.add(key)
    return all(unproductive[-window:])


def sig_repeat(messages: Sequence[Any], window: int = REPEAT_WINDOW, count: int = REPEAT_COUNT) -> bool:
    assistants = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
    if len(assistants) < count:
        return False
    recent = [_assistant_signature(m) for m in assistants[-window:]]
    last = recent[-1]
    return last is not None and recent.count(last) >= count


def compute_signals(
    messages: Sequence[Any],
    *,
    gap_s: float | None = None,
    stall_s: float = DEFAULT_STALL_S,
    len_tokens: int = LEN_TOKENS,
) -> list[str]:
    """The signals that hold for this transcript, in SIGNAL_NAMES order."""
    msgs = list(messages)
    held = {
        "stall": sig_stall(msgs, gap_s, stall_s),
        "len": sig_len(msgs, len_tokens),
        "toolerr": sig_toolerr(msgs),
        "noprog": sig_noprog(msgs),
        "repeat": sig_repeat(msgs),
    }
    return [name for name in SIGNAL_NAMES if held[name]]


def count_tool_turns(messages: Iterable[Any]) -> int:
    """Assistant messages that called at least one tool."""
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant" and tool_calls_of(m))


def has_tool_results(messages: Iterable[Any]) -> bool:
    return any(isinstance(m, dict) and m.get("role") == "tool" for m in messages)
