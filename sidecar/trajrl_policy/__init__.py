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

from __future__ import annotations

from .context import Ctx, UpstreamResponse
from .kinds import AdvisersPolicy, EscalatePolicy, PinPolicy, Policy, policy_from_config
from .render import Rendered
from .server import Server, main, serve
from .settings import DEFAULT_MODEL, EPISODE_TOKEN, POLICY_DIR, POLICY_LOG, POLICY_PORT, UPSTREAM_AUTH, UPSTREAM_URL, log
from .transcript import content_text, session_key, tool_is_error, transcript_signals

__all__ = [
    "DEFAULT_MODEL",
    "EPISODE_TOKEN",
    "POLICY_DIR",
    "POLICY_LOG",
    "POLICY_PORT",
    "UPSTREAM_AUTH",
    "UPSTREAM_URL",
    "AdvisersPolicy",
    "Ctx",
    "EscalatePolicy",
    "PinPolicy",
    "Policy",
    "Rendered",
    "Server",
    "UpstreamResponse",
    "content_text",
    "log",
    "main",
    "policy_from_config",
    "serve",
    "session_key",
    "tool_is_error",
    "transcript_signals",
]
