"""sdk_custom: a policy on the trajrl_policy SDK.

Cheap model while the agent orients itself (reading SKILL.md and the task), kimi-k3 once it works,
with one short note from a cheap adviser on the first working turn and again whenever the work goes
wrong (three tool errors in a row, a repeated action, no progress). Near the episode cap, or when the
meter refuses the strong model (402: its worst case no longer fits), it answers with the cheap model.
"""

from trajrl_policy import Policy, content_text, serve

CHEAP = "glm-5.3-flash"
STRONG = "kimi-k3"
ADVISER = "glm-5.3-flash"
LOW_BUDGET_USD = 0.03
TROUBLE = {"toolerr", "repeat", "noprog"}


def adviser_prompt(messages):
    """The task (first five messages) and the last eight, as plain text: no tools needed."""
    picked = messages[:5] + messages[max(5, len(messages) - 8):]
    parts = []
    for m in picked:
        text = content_text(m.get("content"))
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
    name = "sdk_custom"

    async def handle(self, req, ctx):
        messages = req.get("messages") or []
        working = any(m.get("role") == "tool" for m in messages)
        low = ctx.remaining_usd is not None and ctx.remaining_usd < LOW_BUDGET_USD
        if not working or low:
            req["model"] = CHEAP
            return await ctx.upstream(req)

        trouble = TROUBLE.intersection(ctx.signals())
        if trouble or not ctx.session.get("advised"):
            ctx.session["advised"] = True
            note = await ctx.call(ADVISER, adviser_prompt(messages), max_tokens=200, temperature=0.2)
            if note["text"].strip():  # a refused or failed call has no text: no note then
                req["messages"] = messages + [
                    {"role": "user", "content": f"[adviser] A second opinion, not from the user:\n{note['text'].strip()}"}
                ]
        req["model"] = STRONG
        answer = await ctx.upstream(req)
        if answer.status == 402:
            req["model"] = CHEAP
            return await ctx.upstream(req)
        return answer


serve(Custom())
