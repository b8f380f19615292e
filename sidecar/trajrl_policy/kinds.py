"""The built-in policy.json kinds: pin, escalate, advisers (validation: spec.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from .runtime import Context, Policy, UpstreamError
from .signals import count_tool_turns, has_tool_results, text_of, tool_calls_of
from .spec import (
    KINDS,
    AdvisersSpec,
    EscalateSpec,
    PinSpec,
    PolicyConfigError,
    PolicySpec,
    parse_policy_spec,
    spec_from_config,
)

__all__ = ["KINDS", "AdvisersPolicy", "EscalatePolicy", "PinPolicy", "PolicyConfigError", "build_policy",
           "parse_policy_config", "policy_from_config"]

ADVISER_TIMEOUT_S = 90.0


# --- pin ------------------------------------------------------------------------------------------


class PinPolicy(Policy):
    """Every call goes to one model."""

    kind = "pin"

    def __init__(self, model: str) -> None:
        self.model = model

    async def handle(self, req: dict[str, Any], ctx: Context) -> Any:
        req["model"] = self.model
        return await ctx.upstream(req)


# --- escalate -------------------------------------------------------------------------------------


class EscalatePolicy(Policy):
    """Start on `cheap`; the first turn on which a listed signal holds switches the session to `strong`
    for the rest of the session."""

    kind = "escalate"

    def __init__(self, cheap: str, strong: str, signals: tuple[str, ...], stall_s: float) -> None:
        self.cheap = cheap
        self.strong = strong
        self.signals = signals
        self.stall_s = stall_s

    async def handle(self, req: dict[str, Any], ctx: Context) -> Any:
        state = ctx.session.get("escalated")
        if state is None:
            fired = [s for s in ctx.signals(stall_s=self.stall_s) if s in self.signals]
            if fired:
                state = {"turn": ctx.turn, "signals": fired}
                ctx.session["escalated"] = state
        req["model"] = self.strong if state else self.cheap
        ctx.log(escalated=state)
        return await ctx.upstream(req)


# --- advisers -------------------------------------------------------------------------------------

ADVISER_SYSTEM = (
    "You advise an AI agent that works on a task in a Linux terminal through tools. Read the transcript "
    "and write one short note (at most 80 words): the most useful next step, or a mistake to avoid. "
    "Plain text only; do not call tools and do not solve the whole task."
)
NOTES_HEADER = (
    "[advisers] Notes from other models on the next step, for you only (not from the user). "
    "Decide for yourself and continue the task with your tools."
)
HEAD_MESSAGES = 5
TAIL_MESSAGES = 10
# The first messages carry the task (system prompt, SKILL.md, INSTRUCTION.md): keep them nearly whole.
HEAD_CLIP_CHARS = 8000
CLIP_CHARS = 1500


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n // 2] + f"\n[... {len(text) - n} chars cut ...]\n" + text[-n // 2 :]


def adviser_messages(messages: list[Any]) -> list[dict[str, str]]:
    """What an adviser reads: the task (the first messages) and the recent turns as plain text, so the
    adviser needs no tool definitions and its input stays bounded whatever the conversation length."""
    n = len(messages)
    picked = list(range(min(HEAD_MESSAGES, n))) + list(range(max(HEAD_MESSAGES, n - TAIL_MESSAGES), n))
    lines: list[str] = []
    prev = -1
    for i in picked:
        if i != prev + 1:
            lines.append(f"[... {i - prev - 1} messages omitted ...]")
        prev = i
        m = messages[i]
        if not isinstance(m, dict):
            continue
        role = str(m.get("role", "?"))
        head = f"### {role}" + (f" ({m['name']})" if isinstance(m.get("name"), str) else "")
        body = _clip(text_of(m.get("content")), HEAD_CLIP_CHARS if i < HEAD_MESSAGES else CLIP_CHARS)
        calls = "".join(f"\n-> {name}({_clip(args, 500)})" for name, args in tool_calls_of(m))
        lines.append(f"{head}\n{body}{calls}".rstrip())
    transcript = "\n\n".join(lines)
    return [
        {"role": "system", "content": ADVISER_SYSTEM},
        {"role": "user", "content": f"Transcript so far:\n\n{transcript}\n\nYour note:"},
    ]


def notes_message(notes: list[tuple[str, str]]) -> dict[str, str]:
    body = "\n\n".join(f"- ({model}) {text.strip()}" for model, text in notes)
    return {"role": "user", "content": f"{NOTES_HEADER}\n\n{body}"}


def advisers_engage(messages: list[Any], every: int) -> bool:
    """Once tool results exist, on every `every`-th tool-calling turn of the agent (1st, 1+every, ...)."""
    if not has_tool_results(messages):
        return False
    k = count_tool_turns(messages)
    return k >= 1 and (k - 1) % every == 0


class AdvisersPolicy(Policy):
    """The writer answers every turn; once tool results exist, the advisers first write short notes in
    parallel (ctx.call) that are appended to the writer's messages."""

    kind = "advisers"

    def __init__(self, writer: str, advisers: tuple[str, ...], max_tokens: int, temperature: float, every: int) -> None:
        self.writer = writer
        self.advisers = advisers
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.every = every

    async def _note(self, ctx: Context, model: str, prompt: list[dict[str, str]]) -> str:
        msg = await asyncio.wait_for(
            ctx.call(model, prompt, max_tokens=self.max_tokens, temperature=self.temperature), ADVISER_TIMEOUT_S
        )
        return text_of(msg.get("content")).strip()

    async def handle(self, req: dict[str, Any], ctx: Context) -> Any:
        messages = req.get("messages") or []
        if advisers_engage(messages, self.every):
            prompt = adviser_messages(messages)
            results = await asyncio.gather(*(self._note(ctx, m, prompt) for m in self.advisers), return_exceptions=True)
            notes: list[tuple[str, str]] = []
            failed: dict[str, str] = {}
            for model, r in zip(self.advisers, results):
                if isinstance(r, BaseException):
                    # An adviser refused (402 near the cap, 400, timeout) costs its note, not the turn.
                    if isinstance(r, UpstreamError):
                        failed[model] = str(r.code or r.type or r.status)
                    else:
                        failed[model] = type(r).__name__
                elif r:
                    notes.append((model, r))
            if notes:
                req["messages"] = list(messages) + [notes_message(notes)]
            ctx.log(advisers=len(notes), adviser_errors=failed or None)
        req["model"] = self.writer
        return await ctx.upstream(req)


def build_policy(spec: PolicySpec) -> Policy:
    if isinstance(spec, PinSpec):
        return PinPolicy(spec.model)
    if isinstance(spec, EscalateSpec):
        return EscalatePolicy(spec.cheap, spec.strong, spec.signals, spec.stall_s)
    if isinstance(spec, AdvisersSpec):
        return AdvisersPolicy(spec.writer, spec.advisers, spec.max_tokens, spec.temperature, spec.every)
    raise PolicyConfigError(f"no built-in policy for {spec!r}")


def parse_policy_config(text: str) -> Policy:
    """policy.json text → a built-in policy. Raises PolicyConfigError with a one-line reason."""
    return build_policy(parse_policy_spec(text))


def policy_from_config(obj: Any) -> Policy:
    return build_policy(spec_from_config(obj))
