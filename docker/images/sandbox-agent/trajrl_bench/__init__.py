"""trajrl_bench, as this project's offline bench ships it: the two probes upstream's validator runs
inside the sandbox-agent image (``python -m trajrl_bench.cli scenarios`` and ``scenario-info``).
Written for this project from the contract upstream's validator reads; see README.md beside the
Dockerfile. The version and the scenario image prefix are fixed when the image is built
(_build.json, written by the Dockerfile from its build arguments); an image built FROM this one
with scenarios of its own may name their images elsewhere with ENV TRAJRL_SCENARIO_IMAGE_PREFIX.
"""

import json
import os

_BUILD_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_build.json")


def _build_info() -> dict:
    try:
        with open(_BUILD_FILE, encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


_BUILD = _build_info()

__version__: str = str(_BUILD.get("version") or "0.0.0+unbuilt")
SCENARIO_IMAGE_PREFIX: str = (
    os.environ.get("TRAJRL_SCENARIO_IMAGE_PREFIX")
    or str(_BUILD.get("scenario_image_prefix") or "")
    or "trajrl-bench/scenario-"
)
