"""The sandbox launcher's Limits, and the launcher's start-up: only what it needs is imported."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tolokaforge.runner.process import sandbox
from tolokaforge.runner.process.sandbox import Limits


def test_limits_are_values_that_travel_as_json() -> None:
    limits = Limits(open_files=64)
    assert Limits.from_json(limits.to_json()) == limits
    assert json.loads(limits.to_json())["open_files"] == 64
    assert Limits() == Limits() and hash(Limits()) == hash(Limits())
    assert limits != Limits()
    opened = limits.replace(network=True)
    assert opened.network and opened.open_files == 64 and not limits.network
    assert "open_files=64" in repr(limits)
    with pytest.raises(AttributeError):
        limits.network = True  # pyright: ignore[reportAttributeAccessIssue]
    with pytest.raises(TypeError):
        Limits.from_json('{"open_file": 3}')  # a misspelt limit is refused, never dropped


def test_the_launcher_starts_without_the_heavy_standard_modules() -> None:
    # Every probe, tool server and custom-check run starts with this file: dataclasses (inspect, ast)
    # alone would add some 20 ms to each.
    code = "import sys, sandbox; print(' '.join(sorted(sys.modules)))"
    folder = str(sandbox.__file__).rsplit("/", 1)[0]
    out = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {folder!r}); {code}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "sandbox" in out
    assert not {"dataclasses", "inspect", "ast", "typing"} & set(out)
