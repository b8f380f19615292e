"""The probes of a trajrl-bench sandbox-agent image, as upstream's validator runs them:

    docker run --rm --entrypoint '' IMAGE python -m trajrl_bench.cli scenarios
    docker run --rm --entrypoint '' IMAGE python -m trajrl_bench.cli scenario-info --scenario NAME

JSON on stdout, messages on stderr; an unknown or broken scenario exits 1. The scenarios are the
folders of /opt/trajrl-bench/scenarios (root-only in the image), each in the Harbor shape:
task.toml, instruction.md, tests/, environment/Dockerfile.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from trajrl_bench import SCENARIO_IMAGE_PREFIX, __version__

SCENARIOS_DIR = Path(os.environ.get("TRAJRL_BENCH_SCENARIOS_DIR") or "/opt/trajrl-bench/scenarios")
# The agent harness of this image: its command answers --version (name and version go into every
# verdict and heartbeat upstream sends). TRAJRL_HARNESS_NAME overrides the parsed name.
HARNESS_CMD = os.environ.get("TRAJRL_HARNESS_CMD") or "hermes"
HARNESS_NAME = os.environ.get("TRAJRL_HARNESS_NAME") or ""

# Defaults where a task.toml is silent, as upstream's bench applies them.
DEFAULT_VERIFIER_TIMEOUT_S = 300
DEFAULT_AGENT_OUTPUT_PATH = "/app/summary.csv"


def _fail(message: str) -> None:
    print(message, file=sys.stderr)
    sys.exit(1)


def _emit(payload: dict) -> None:
    json.dump(payload, sys.stdout, indent=2)
    sys.stdout.write("\n")


def harness_identity() -> dict:
    """{harness_name?, harness_version?} from the first line of `<harness> --version`; what cannot
    be learned is left out, never an error (the probe must still answer)."""
    ident: dict = {}
    if HARNESS_NAME:
        ident["harness_name"] = HARNESS_NAME
    try:
        out = subprocess.run([HARNESS_CMD, "--version"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.SubprocessError):
        return ident
    text = (out.stdout or out.stderr or "").strip()
    if not text:
        return ident
    first = text.splitlines()[0].strip()
    if "harness_name" not in ident:
        name = re.match(r"\s*([A-Za-z][\w-]*)", first)
        if name:
            ident["harness_name"] = name.group(1)
    version = re.search(r"v?(\d+\.\d+(?:\.\d+)?(?:[.\-+][\w.]+)?)", first)
    if version:
        ident["harness_version"] = version.group(1)
    return ident


def scenario_names() -> list[str]:
    if not SCENARIOS_DIR.is_dir():
        return []
    return sorted(p.name for p in SCENARIOS_DIR.iterdir() if p.is_dir() and not p.name.startswith("."))


def scenario_dir(name: str) -> Path | None:
    # A plain folder name only: "--scenario ../x" must not read outside the tree.
    if not name or "/" in name or "\\" in name or name in (".", "..") or name.startswith("."):
        return None
    path = SCENARIOS_DIR / name
    return path if path.is_dir() else None


def read_task(path: Path) -> dict:
    if not path.is_file():
        return {}
    import tomllib

    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        _fail(f"{path}: not valid TOML: {e}")
    return {}


def cmd_scenarios(_args: argparse.Namespace) -> None:
    _emit({"version": __version__, "scenarios": scenario_names(), **harness_identity()})


def cmd_scenario_info(args: argparse.Namespace) -> None:
    name = args.scenario
    root = scenario_dir(name)
    if root is None:
        _fail(f"unknown scenario: {name}")
    assert root is not None
    if not (root / "environment" / "Dockerfile").is_file():
        _fail(f"scenario {name!r} is missing environment/Dockerfile")
    instruction = root / "instruction.md"
    if not instruction.is_file():
        _fail(f"scenario {name!r} is missing instruction.md")
    task = read_task(root / "task.toml")
    verifier = task.get("verifier") if isinstance(task.get("verifier"), dict) else {}
    agent = task.get("agent") if isinstance(task.get("agent"), dict) else {}
    try:
        verifier_timeout_s = int(verifier.get("timeout_sec", DEFAULT_VERIFIER_TIMEOUT_S))
        agent_timeout = agent.get("timeout_sec")
        agent_timeout_s = int(agent_timeout) if agent_timeout is not None else None
    except (TypeError, ValueError) as e:
        _fail(f"scenario {name!r}: task.toml timeout_sec is not a number: {e}")
        return
    tests: dict[str, str] = {}
    tests_dir = root / "tests"
    if tests_dir.is_dir():
        for f in sorted(tests_dir.iterdir()):
            if f.is_file():
                tests[f.name] = base64.b64encode(f.read_bytes()).decode("ascii")
    payload = {
        "version": __version__,
        "name": name,
        "image_repo": f"{SCENARIO_IMAGE_PREFIX}{name}",
        "instruction_md": instruction.read_text(encoding="utf-8"),
        "agent_output_path": str(verifier.get("agent_output_path") or DEFAULT_AGENT_OUTPUT_PATH),
        "verifier_timeout_s": verifier_timeout_s,
    }
    if agent_timeout_s is not None:
        payload["agent_timeout_s"] = agent_timeout_s
    payload["tests_files_b64"] = tests
    _emit(payload)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="trajrl_bench.cli",
        description="The probes of a trajrl-bench sandbox-agent image (JSON on stdout).",
    )
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("scenarios", help="the bench version, its scenarios and its agent harness")
    info = sub.add_parser("scenario-info", help="everything a validator needs to run one scenario")
    info.add_argument("--scenario", required=True, help="scenario name")
    args = parser.parse_args(argv)
    if args.command == "scenarios":
        cmd_scenarios(args)
    elif args.command == "scenario-info":
        cmd_scenario_info(args)
    else:
        parser.print_help(sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
