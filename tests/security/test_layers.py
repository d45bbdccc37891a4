"""A missing sandbox layer stops the run, naming it; a layer the user accepts running without is recorded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tolokaforge.contracts.runner import HealthCheckRequest
from tolokaforge.runner import Confinement, RunnerSettings, SandboxUnavailable, start_runner

REPO = Path(__file__).parent.parent.parent


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``tolokaforge run`` of the retail pack with the golden agent, and ``args``."""
    program = str(Path(sys.executable).parent / "tolokaforge")
    return subprocess.run(
        [program, "run", "--pack", str(REPO / "examples/packs/retail"), "--agent", "golden", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_an_unknown_layer_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable, match="unknown sandbox layer"):
        Confinement.detect(tmp_path, without=["seccom"])


def test_without_bubblewrap_the_run_stops_with_exit_2_naming_the_fix(tmp_path: Path) -> None:
    # PATH without bubblewrap (the interpreter is named by its full path).
    done = run_cli("--output", str(tmp_path / "run"), env={**os.environ, "PATH": str(tmp_path / "empty")})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the sandbox needs bubblewrap" in done.stderr and "--isolation process" in done.stderr
    assert "Traceback" not in done.stderr


async def test_a_layer_run_without_is_said_in_health_and_the_manifest(tmp_path: Path) -> None:
    runner = await start_runner(
        RunnerSettings(work_dir=tmp_path / "work", sandbox_without=frozenset({"cgroup"})), serve=False
    )
    try:
        adapters = (await runner.servicer.health_check(HealthCheckRequest())).available_adapters
    finally:
        await runner.close()
    assert "isolation:sandbox" in adapters
    assert "sandbox:cgroup=off (--without cgroup)" in adapters
    done = run_cli(
        "--task", "lookup_order_tracking", "--without", "cgroup", "--output", str(tmp_path / "run")
    )
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = yaml.safe_load((tmp_path / "run" / "run.yaml").read_text())
    assert "sandbox:cgroup=off (--without cgroup)" in manifest["runner"]["tool_adapters"]
