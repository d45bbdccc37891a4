"""``tolokaforge run`` (a real process, embedded runner) over a pack whose tool exits, crashes or raises
BaseException: every trial is still run and graded, the summary is written, and the process exits."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
import yaml

ORIGINAL = (
    "    def invoke(data: Data, order_id: str) -> str:\n        return dump(get_order(data, order_id))\n"
)


@pytest.mark.parametrize(
    "misbehaviour",
    ["sys.exit(0)", "os._exit(1)", "raise KeyboardInterrupt", "os.kill(os.getpid(), signal.SIGSEGV)"],
)
def test_run_finishes_with_a_summary_when_a_tool_kills_its_process(
    pack_copy: Callable[[str], Path], tmp_path: Path, misbehaviour: str
) -> None:
    pack = pack_copy("retail")
    read = pack / "tools" / "read.py"
    source = read.read_text()
    assert ORIGINAL in source
    hostile = f"    def invoke(data: Data, order_id: str) -> str:\n        import os, signal, sys\n        {misbehaviour}\n"
    read.write_text(source.replace(ORIGINAL, hostile))
    output = tmp_path / "run"
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            "from tolokaforge.host.cli import main; main()",
            "run",
            "--pack",
            str(pack),
            "--task",
            "lookup_order_tracking",
            "--trials",
            "3",
            "--output",
            str(output),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in completed.stderr, completed.stderr
    summary = yaml.safe_load((output / "summary.yaml").read_text())
    assert summary["trials"] == 3, summary
    assert summary["pass_rate"] == 0.0  # the golden path needs the tool that misbehaves
    adapters = yaml.safe_load((output / "run.yaml").read_text())["runner"]["tool_adapters"]
    assert "isolation:sandbox" in adapters  # the run manifest says what confined the pack's code
    assert any(item.startswith("sandbox:seccomp=") for item in adapters)
    assert any(item.startswith("limit:network=") for item in adapters)
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before
