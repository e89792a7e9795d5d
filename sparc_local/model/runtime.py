"""onnxruntime, imported with its telemetry off.

onnxruntime 1.29 and later, on Linux, keep a telemetry queue in the user's home as soon as they are imported:
a persistent device id and an SQLite file of "ProcessInfo" events
(~/.cache/Microsoft/DeveloperTools/.onnxruntime). `disable_telemetry_events()` comes too late, after
the import has written both. The runtime reads `ORT_DISABLE_TELEMETRY` when it starts, and with it
set creates neither (benchmarks/ort_telemetry.py checks every release the pin allows). Every
import of onnxruntime in sparc-local goes through `onnxruntime()`.
"""

from __future__ import annotations

import os
from types import ModuleType

TELEMETRY_SWITCH = "ORT_DISABLE_TELEMETRY"
# onnxruntime collects nothing when it sees one of these, so a privacy check must run without them
CI_VARIABLES = ("CI", "TF_BUILD", "GITHUB_ACTIONS", "GITLAB_CI", "CIRCLECI", "TRAVIS", "JENKINS_URL",
                "CODEBUILD_BUILD_ID", "BUILDKITE", "TEAMCITY_VERSION", "APPVEYOR", "BITBUCKET_BUILD_NUMBER",
                "ORT_RUNNING_UNIT_TESTS")


def onnxruntime() -> ModuleType:
    """The onnxruntime module; its telemetry switched off before its first import in this process."""
    os.environ[TELEMETRY_SWITCH] = "1"
    import onnxruntime as ort

    return ort
