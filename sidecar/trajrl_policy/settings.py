"""What the validator hands the sidecar through its environment, read once at import as the reference
runtime reads it (a policy may read these names too), and the policy log."""

from __future__ import annotations

import json
import os
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

POLICY_PORT = int(os.environ.get("POLICY_PORT", "8800"))
UPSTREAM_URL = os.environ.get("UPSTREAM_URL", "http://meter:8790/v1").rstrip("/")
EPISODE_TOKEN = os.environ.get("EPISODE_TOKEN", "")
POLICY_DIR = os.environ.get("POLICY_DIR", "/policy")
POLICY_LOG = os.environ.get("POLICY_LOG", "")
DEFAULT_MODEL = os.environ.get("DEFAULT_MODEL", "qwen3.8-27b")
# "token" (the validator's sidecar): every upstream call carries EPISODE_TOKEN. "passthrough": the
# caller's own Authorization header is forwarded instead (a policy served as a product endpoint).
UPSTREAM_AUTH = os.environ.get("UPSTREAM_AUTH", "token")
# Ours, not the reference runtime's: `trajrl-validator policy serve` listens on loopback only.
POLICY_HOST = os.environ.get("POLICY_HOST", "0.0.0.0")

BUDGET_HEADER = "x-trajrl-budget-remaining-usd"
MAX_REQUEST_BYTES = 64 * 1024 * 1024  # the agent resends the whole conversation every turn

# Opened for the life of the process; append, so a policy.py importing this module again shares it.
_policy_log_file = open(POLICY_LOG, "a") if POLICY_LOG else None  # noqa: SIM115


def log(**fields: Any) -> None:
    """One JSON line in the policy log (POLICY_LOG, else stdout): kept with the episode's artifacts."""
    fields.setdefault("ts", round(time.time(), 3))
    line = json.dumps(fields, default=str)
    if _policy_log_file is not None:
        _policy_log_file.write(line + "\n")
        _policy_log_file.flush()
    else:
        print(line, flush=True)


def loggable_url(url: str) -> str:
    """A URL for the log: no credentials, no query string."""
    try:
        parts = urlsplit(url)
        netloc = parts.hostname or ""
        if parts.port:
            netloc = f"{netloc}:{parts.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        return "[unparseable url]"
