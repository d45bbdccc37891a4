"""The public project's import names resolve, in a fresh interpreter, to the SDK's own objects."""

from __future__ import annotations

import json
import subprocess
import sys

PUBLIC_NAMES = {
    "tolokaforge.core.tools_interface": "tolokaforge.sdk.tools_interface",
    "tolokaforge.core.grading.checks_interface": "tolokaforge.sdk.checks_interface",
    "tolokaforge.core.grading.checks_helpers": "tolokaforge.sdk.checks_helpers",
}

# Prints, per public module: the names of its __all__, and those not the very object the SDK module holds.
_PROBE = """
import importlib, json, sys
report = {}
for public, own in json.loads(sys.argv[1]).items():
    old, new = importlib.import_module(public), importlib.import_module(own)
    report[public] = {
        "all": list(old.__all__),
        "differ": [name for name in new.__all__ if getattr(old, name, None) is not getattr(new, name)],
    }
print(json.dumps(report))
"""


def _run(code: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-I", "-c", code, *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_public_names_are_the_sdk_objects() -> None:
    report = json.loads(_run(_PROBE, json.dumps(PUBLIC_NAMES)))
    assert set(report) == set(PUBLIC_NAMES)
    for public, own in PUBLIC_NAMES.items():
        sdk_module = __import__(own, fromlist=["__all__"])
        assert report[public]["all"] == list(sdk_module.__all__), public
        assert report[public]["differ"] == [], public
    assert "create_server" in report["tolokaforge.core.tools_interface"]["all"]
    assert "check" in report["tolokaforge.core.grading.checks_interface"]["all"]


def test_a_check_declared_through_the_public_name_reaches_the_sdk_registry() -> None:
    code = """
from tolokaforge.core.grading.checks_interface import CheckPassed, check, init
from tolokaforge.sdk import checks_interface

@init(interface_version="1.0")
def setup(ctx):
    pass

@check
def declared_publicly():
    return CheckPassed("ok")

print(checks_interface.get_interface_version(), list(checks_interface.get_registered_checks()))
"""
    assert _run(code).split() == ["1.0", "['declared_publicly']"]


def test_core_alone_loads_neither_the_sdk_nor_mcp() -> None:
    code = "import sys, tolokaforge.core; print(sorted(m for m in sys.modules if m.split('.')[0] == 'mcp' or m.startswith('tolokaforge.sdk')))"
    assert _run(code).strip() == "[]"
