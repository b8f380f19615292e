"""policy.json → a validated spec, strictly: an unknown kind, an unknown or missing field, or a wrong
type is a PolicyConfigError naming the field. Pure and free of aiohttp/httpx imports, so the launcher
rejects a bad policy.json in milliseconds, before the server starts (a policy fault)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from .signals import DEFAULT_STALL_S, SIGNAL_NAMES

KINDS = ("pin", "escalate", "advisers")
MAX_MODEL_NAME = 128
MAX_ADVISERS = 8
DEFAULT_ESCALATE_SIGNALS = ("stall", "toolerr", "repeat")
DEFAULT_ADVISER_MAX_TOKENS = 256
DEFAULT_ADVISER_TEMPERATURE = 0.3


class PolicyConfigError(ValueError):
    """policy.json is unusable; the message says which field and why."""


@dataclass(frozen=True)
class PinSpec:
    model: str
    kind: str = "pin"


@dataclass(frozen=True)
class EscalateSpec:
    cheap: str
    strong: str
    signals: tuple[str, ...]
    stall_s: float
    kind: str = "escalate"


@dataclass(frozen=True)
class AdvisersSpec:
    writer: str
    advisers: tuple[str, ...]
    max_tokens: int
    temperature: float
    every: int
    kind: str = "advisers"


PolicySpec = PinSpec | EscalateSpec | AdvisersSpec


def _model(kind: str, field: str, v: Any) -> str:
    if not isinstance(v, str) or not v.strip():
        raise PolicyConfigError(f"{kind}.{field} must be a model name (a non-empty string), got {json.dumps(v)}")
    if len(v) > MAX_MODEL_NAME or v != v.strip():
        raise PolicyConfigError(f"{kind}.{field}: {json.dumps(v)} is not a model name")
    return v


def _number(kind: str, field: str, v: Any, lo: float, hi: float, *, integer: bool = False) -> float:
    ok = isinstance(v, int) if integer else isinstance(v, (int, float))
    if isinstance(v, bool) or not ok:
        raise PolicyConfigError(f"{kind}.{field} must be {'an integer' if integer else 'a number'}, got {json.dumps(v)}")
    if not lo <= v <= hi:
        raise PolicyConfigError(f"{kind}.{field} must be between {lo:g} and {hi:g}, got {v}")
    return v


def _fields(kind: str, obj: dict[str, Any], required: tuple[str, ...], optional: tuple[str, ...]) -> None:
    allowed = ("kind",) + required + optional
    unknown = sorted(k for k in obj if k not in allowed)
    if unknown:
        raise PolicyConfigError(
            f"{kind}: unknown field(s) {', '.join(map(json.dumps, unknown))} (allowed: {', '.join(allowed[1:])})"
        )
    missing = [k for k in required if k not in obj]
    if missing:
        raise PolicyConfigError(f"{kind}: missing required field(s) {', '.join(map(json.dumps, missing))}")


def _pin(obj: dict[str, Any]) -> PinSpec:
    _fields("pin", obj, ("model",), ())
    return PinSpec(_model("pin", "model", obj["model"]))


def _escalate(obj: dict[str, Any]) -> EscalateSpec:
    _fields("escalate", obj, ("cheap", "strong"), ("signals", "stall_s"))
    cheap = _model("escalate", "cheap", obj["cheap"])
    strong = _model("escalate", "strong", obj["strong"])
    signals = obj.get("signals", list(DEFAULT_ESCALATE_SIGNALS))
    if not isinstance(signals, list) or not signals:
        raise PolicyConfigError(f"escalate.signals must be a non-empty list of {', '.join(SIGNAL_NAMES)}")
    for s in signals:
        if s not in SIGNAL_NAMES:
            raise PolicyConfigError(f"escalate.signals: unknown signal {json.dumps(s)} (allowed: {', '.join(SIGNAL_NAMES)})")
    if len(set(signals)) != len(signals):
        raise PolicyConfigError("escalate.signals: a signal is listed twice")
    stall_s = float(_number("escalate", "stall_s", obj.get("stall_s", DEFAULT_STALL_S), 1, 3600))
    return EscalateSpec(cheap, strong, tuple(signals), stall_s)


def _advisers(obj: dict[str, Any]) -> AdvisersSpec:
    _fields("advisers", obj, ("writer", "advisers"), ("max_tokens", "temperature", "every"))
    writer = _model("advisers", "writer", obj["writer"])
    advisers = obj["advisers"]
    if not isinstance(advisers, list) or not advisers:
        raise PolicyConfigError("advisers.advisers must be a non-empty list of model names")
    if len(advisers) > MAX_ADVISERS:
        raise PolicyConfigError(f"advisers.advisers: at most {MAX_ADVISERS} advisers, got {len(advisers)}")
    names = tuple(_model("advisers", f"advisers[{i}]", a) for i, a in enumerate(advisers))
    max_tokens = int(
        _number("advisers", "max_tokens", obj.get("max_tokens", DEFAULT_ADVISER_MAX_TOKENS), 16, 4096, integer=True)
    )
    temperature = float(_number("advisers", "temperature", obj.get("temperature", DEFAULT_ADVISER_TEMPERATURE), 0, 2))
    every = int(_number("advisers", "every", obj.get("every", 1), 1, 1000, integer=True))
    return AdvisersSpec(writer, names, max_tokens, temperature, every)


_PARSERS: dict[str, Callable[[dict[str, Any]], PolicySpec]] = {"pin": _pin, "escalate": _escalate, "advisers": _advisers}


def spec_from_config(obj: Any) -> PolicySpec:
    if not isinstance(obj, dict):
        raise PolicyConfigError(f"policy.json must be a JSON object, got {type(obj).__name__}")
    if "kind" not in obj:
        raise PolicyConfigError(f'policy.json: missing "kind" (one of {", ".join(KINDS)})')
    kind = obj["kind"]
    if not isinstance(kind, str) or kind not in _PARSERS:
        raise PolicyConfigError(f"policy.json: unknown kind {json.dumps(kind)} (one of {', '.join(KINDS)})")
    return _PARSERS[kind](obj)


def parse_policy_spec(text: str) -> PolicySpec:
    """policy.json text → a validated spec. Raises PolicyConfigError with a one-line reason."""
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise PolicyConfigError(f"policy.json is not valid JSON: {e}") from None
    return spec_from_config(obj)
