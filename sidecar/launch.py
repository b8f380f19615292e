#!/usr/bin/env python3
"""The sidecar's entry point: decides how the policy in POLICY_DIR runs.

    POLICY_DIR/policy.py    `python3 policy.py` in POLICY_DIR, trajrl_policy importable. Covers SDK
                            policies (they call serve()) and raw ones (they serve POLICY_PORT themselves).
    POLICY_DIR/policy.json  the built-in kind it names (pin, escalate, advisers).
    neither                 pin on DEFAULT_MODEL.

A policy that cannot start (unparseable or invalid policy.json, policy.py crashing at import, bad
environment) makes this process exit non-zero before anything answers on POLICY_PORT, with the
reason on stderr: the episode runner records it as the policy's error (a policy fault).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

RUNTIME_DIR = os.path.dirname(os.path.abspath(__file__))
if RUNTIME_DIR not in sys.path:
    sys.path.insert(0, RUNTIME_DIR)

EXIT_BAD_POLICY = 2
EXIT_POLICY_RETURNED = 3


def die(message: str, code: int = EXIT_BAD_POLICY) -> None:
    sys.stderr.write(f"trajrl-sidecar: {message}\n")
    sys.stderr.flush()
    sys.exit(code)


def run_policy_py(policy_dir: str) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = RUNTIME_DIR + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["POLICY_DIR"] = policy_dir
    env.setdefault("PYTHONUNBUFFERED", "1")  # the policy's own prints reach the log as they happen
    # A child process (not exec) so this launcher can say why the policy stopped; it forwards
    # SIGTERM/SIGINT, which matters when it is PID 1 in the container.
    child = subprocess.Popen([sys.executable, "policy.py"], cwd=policy_dir, env=env)
    stopping: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        stopping.append(signum)
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    code = child.wait()
    if stopping:
        sys.exit(0 if code in (0, -signal.SIGTERM, -signal.SIGINT) else (128 - code if code < 0 else code))
    if code == 0:
        die(
            "policy.py exited (status 0) without serving: an SDK policy must end with serve(YourPolicy()); "
            "a raw policy must keep serving POLICY_PORT",
            EXIT_POLICY_RETURNED,
        )
    if code < 0:
        die(f"policy.py was killed by signal {-code}", 128 - code)
    die(f"policy.py exited with status {code} (its traceback, if any, is above)", code)


def main() -> None:
    policy_dir = os.path.abspath(os.environ.get("POLICY_DIR", "").strip() or "/policy")
    if not os.path.isdir(policy_dir):
        die(f"POLICY_DIR {policy_dir} is not a directory")
    py = os.path.join(policy_dir, "policy.py")
    js = os.path.join(policy_dir, "policy.json")
    if os.path.isfile(py):
        run_policy_py(policy_dir)
        return

    # Validate before importing the server (aiohttp, httpx): a bad policy.json fails in milliseconds.
    from trajrl_policy.spec import PinSpec, PolicyConfigError, parse_policy_spec

    if os.path.isfile(js):
        try:
            with open(js, "rb") as f:
                text = f.read().decode("utf-8")
        except UnicodeDecodeError:
            die("policy.json is not UTF-8 text")
        except OSError as e:
            die(f"policy.json cannot be read: {e.strerror or e}")
        try:
            spec = parse_policy_spec(text)
        except PolicyConfigError as e:
            die(str(e))
        name = spec.kind
    else:
        spec = PinSpec(os.environ.get("DEFAULT_MODEL", "").strip() or "qwen3.8-27b")
        name = "pin(default)"

    from trajrl_policy.kinds import build_policy
    from trajrl_policy.runtime import serve

    serve(build_policy(spec), name=name)


if __name__ == "__main__":
    main()
