"""End to end on the embedded default runner: the golden agent passes every task of both example packs."""

from __future__ import annotations

from pathlib import Path

import yaml

from tolokaforge.core.models import MOCK_JUDGE_MODEL, JudgeModelConfig
from tolokaforge.host.agents import GoldenAgentFactory
from tolokaforge.host.packs import Pack, load_pack
from tolokaforge.host.results.summary import RunSummary
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.users.router import UserRouter


def _grades(output: Path) -> dict[str, dict[str, object]]:
    return {
        path.parent.parent.name: yaml.safe_load(path.read_text())
        for path in sorted((output / "trials").glob("*/*/grade.yaml"))
    }


def _assert_all_pass(pack: Pack, output: Path, summary: RunSummary) -> dict[str, dict[str, object]]:
    grades = _grades(output)
    assert sorted(grades) == sorted(t.task_id for t in pack.tasks)
    failing = {task: grade["reasons"] for task, grade in grades.items() if grade["score"] != 1.0}
    assert failing == {}
    assert all(grade["binary_pass"] for grade in grades.values())
    assert summary.pass_rate == 1.0 and summary.mean_score == 1.0 and summary.pass_hat(1) == 1.0
    assert summary.terminations() == {"agent_done": len(pack.tasks)}
    saved = yaml.safe_load((output / "summary.yaml").read_text())
    assert saved["passed"] == len(pack.tasks) and saved["pass_rate"] == 1.0
    trajectory = yaml.safe_load(
        (output / "trials" / pack.tasks[0].task_id / "0" / "trajectory.yaml").read_text()
    )
    assert trajectory["termination_reason"] == "agent_done" and trajectory["grading_error"] is None
    assert all(call["status"] == "SUCCESS" for call in trajectory["tool_calls"])
    assert trajectory["messages"][0]["role"] == "system"
    return grades


async def test_every_retail_task_passes_and_concurrency_16_grades_like_concurrency_1(
    packs_dir: Path, tmp_path: Path
) -> None:
    pack = load_pack(packs_dir / "retail")
    by_concurrency: dict[int, dict[str, dict[str, object]]] = {}
    for concurrency in (16, 1):
        output = tmp_path / f"c{concurrency}"
        summary = await run_pack(
            pack, GoldenAgentFactory(), UserRouter(), RunSettings(output=output, concurrency=concurrency)
        )
        by_concurrency[concurrency] = _assert_all_pass(pack, output, summary)
    assert len(by_concurrency[1]) == 29
    assert by_concurrency[1] == by_concurrency[16]


async def test_every_dual_control_task_passes(packs_dir: Path, tmp_path: Path) -> None:
    pack = load_pack(packs_dir / "dual_control")
    mock_judge = JudgeModelConfig(model=MOCK_JUDGE_MODEL)
    summary = await run_pack(
        pack,
        GoldenAgentFactory(),
        UserRouter(),
        RunSettings(output=tmp_path, concurrency=16, judge_model=mock_judge),
    )
    grades = _assert_all_pass(pack, tmp_path, summary)
    judged = grades["dc_data_addon_judged"]
    assert judged["judge_status"] == "completed" and judged["components"]["llm_judge"] == 1.0  # type: ignore[index]
    assert "judge_status" not in grades["dc_roaming_abroad"]


async def test_dual_control_custom_checks_and_user_side_init_are_graded(
    packs_dir: Path, tmp_path: Path
) -> None:
    pack = load_pack(packs_dir / "dual_control")
    await run_pack(
        pack,
        GoldenAgentFactory(),
        UserRouter(),
        RunSettings(output=tmp_path, task_ids=("dc_airplane_mode_no_service",)),
    )
    grade = yaml.safe_load(
        (tmp_path / "trials" / "dc_airplane_mode_no_service" / "0" / "grade.yaml").read_text()
    )
    assert grade["components"] == {
        "state_checks": 1.0,
        "transcript_rules": 1.0,
        "llm_judge": None,
        "custom_checks": 1.0,
        "trace_checks": None,
    }
    assert [row["status"] for row in grade["custom_checks"]] == ["passed"] * len(grade["custom_checks"])
