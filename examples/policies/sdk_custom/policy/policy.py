"""sdk_custom: a policy on the trajrl_policy SDK.

Cheap model while the agent orients itself (reading SKILL.md and the task), kimi-k3 once it works,
with one short note from a cheap adviser on the first working turn and again whenever the work goes
wrong (a tool error, a repeated action, no progress, a stall). Near the episode cap it falls back to
the cheap model, whose worst case still fits.
"""

from trajrl_policy import Policy, UpstreamError, serve

CHEAP = "glm-5.3-flash"
STRONG = "kimi-k3"
ADVISER = "glm-5.3-flash"
LOW_BUDGET_USD = 0.03
TROUBLE = {"toolerr", "repeat", "noprog", "stall"}


def _text(content):
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def adviser_prompt(messages):
    """The task (first five messages) and the last eight, as plain text: no tools needed."""
    picked = messages[:5] + messages[max(5, len(messages) - 8):]
    parts = []
    for m in picked:
        text = _text(m.get("content"))
        limit = 8000 if len(parts) < 5 else 1500
        for call in m.get("tool_calls") or []:
            fn = call.get("function") or {}
            text += f"\n-> {fn.get('name')}({str(fn.get('arguments'))[:400]})"
        parts.append(f"### {m.get('role')}\n{text[:limit]}")
    return [
        {
            "role": "system",
            "content": "You review the work of an AI agent in a Linux terminal. In at most 60 words, say "
            "what its next step should be, or what mistake to avoid. Plain text, no tool calls.",
        },
        {"role": "user", "content": "\n\n".join(parts)},
    ]


class Custom(Policy):
    async def handle(self, req, ctx):
        messages = req["messages"]
        working = any(m.get("role") == "tool" for m in messages)
        low = ctx.remaining_usd is not None and ctx.remaining_usd < LOW_BUDGET_USD
        if not working or low:
            req["model"] = CHEAP
            ctx.log(route="cheap", low_budget=low)
            return await ctx.upstream(req)

        trouble = sorted(TROUBLE.intersection(ctx.signals()))
        if trouble or not ctx.session.get("advised"):
            ctx.session["advised"] = True
            try:
                note = await ctx.call(ADVISER, adviser_prompt(messages), max_tokens=200, temperature=0.2)
                text = _text(note.get("content")).strip()
                if text:
                    req["messages"] = messages + [
                        {"role": "user", "content": f"[adviser] A second opinion, not from the user:\n{text}"}
                    ]
            except UpstreamError:
                pass  # no note is better than no answer
        ctx.log(route="strong", trouble=trouble)
        req["model"] = STRONG
        try:
            return await ctx.upstream(req)
        except UpstreamError as e:
            if e.status != 402:
                raise
            # The strong model's worst case no longer fits under the cap: answer cheaply instead.
            req["model"] = CHEAP
            return await ctx.upstream(req)


serve(Custom())
