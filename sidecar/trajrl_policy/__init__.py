"""trajrl_policy: the SDK and runtime of TrajectoryRL fusion policies (Season 2).

    from trajrl_policy import Policy, serve

    class Mine(Policy):
        async def handle(self, req, ctx):
            req["model"] = "kimi-k3" if "toolerr" in ctx.signals() else "glm-5.3-flash"
            return await ctx.upstream(req)

    serve(Mine())

See sidecar/README.md for the Context API, the signals and the built-in policy.json kinds.
Names are loaded on first use, so `trajrl_policy.spec` (policy.json validation) can be imported
without aiohttp and httpx: the launcher rejects a bad policy.json before loading them.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Context": "runtime",
    "Policy": "runtime",
    "Rendered": "runtime",
    "StartupError": "runtime",
    "StreamedReply": "runtime",
    "UpstreamError": "runtime",
    "UpstreamUnavailable": "runtime",
    "serve": "runtime",
    "AdvisersPolicy": "kinds",
    "EscalatePolicy": "kinds",
    "PinPolicy": "kinds",
    "build_policy": "kinds",
    "parse_policy_config": "kinds",
    "policy_from_config": "kinds",
    "KINDS": "spec",
    "PolicyConfigError": "spec",
    "parse_policy_spec": "spec",
    "SIGNAL_NAMES": "signals",
    "compute_signals": "signals",
    "session_key": "signals",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'trajrl_policy' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
