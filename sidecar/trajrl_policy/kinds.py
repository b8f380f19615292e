"""The Policy base class and the policy.json kinds (pin, escalate, advisers), with the reference
runtime's defaults and its leniency: fields it does not read are ignored, values go through Python's own
float()/int()/list()/set(), and only what those reject (or an unknown kind) stops the sidecar at start.
The adviser prompts reach the models, so their text is the reference runtime's, byte for byte."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from .context import Ctx
from .settings import DEFAULT_MODEL, log

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
