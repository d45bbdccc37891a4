"""The embedded runner is called directly: no request is encoded, no task digested, no reply decoded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tolokaforge.host.agents import GoldenAgentFactory
from tolokaforge.host.packs import load_pack
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.runner import task_wire
from tolokaforge.host.users.router import UserRouter
from tolokaforge.runner.edge import servicer as runner_edge
from tolokaforge.runner.edge import task_wire as edge_task_wire


def _refuse(what: str) -> Any:
    def refused(*args: object, **kwargs: object) -> Any:
        raise AssertionError(f"the embedded path reached the wire: {what}")

    return refused


async def test_a_golden_run_on_the_embedded_runner_never_touches_the_wire(
    packs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every wire step of either adapter fails loudly if reached.
    monkeypatch.setattr(task_wire, "register_request", _refuse("RegisterTrial encoding"))
    monkeypatch.setattr(task_wire.TaskWires, "of", _refuse("a task's wire form and digest"))
    monkeypatch.setattr(task_wire.WirePart, "of", _refuse("a part's SHA-256"))
    monkeypatch.setattr(runner_edge, "decode_transcript_wire", _refuse("GradeTrial transcript decoding"))
    monkeypatch.setattr(edge_task_wire.TaskWire, "decode", _refuse("TrialSpec decoding"))
    for name in ("register_trial", "execute_tool", "grade_trial", "cleanup_trial"):
        monkeypatch.setattr(runner_edge.RunnerServicer, name, _refuse(f"the servicer's {name}"))
    pack = load_pack(packs_dir / "retail")
    summary = await run_pack(
        pack, GoldenAgentFactory(), UserRouter(), RunSettings(output=tmp_path, concurrency=4)
    )
    assert summary.pass_rate == 1.0, summary.terminations()
    grade = yaml.safe_load((tmp_path / "trials" / pack.tasks[0].task_id / "0" / "grade.yaml").read_text())
    assert grade["binary_pass"] and grade["reasons"][0] == "State: hash match"
