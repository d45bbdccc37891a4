"""Resume, the scripted agent, an unknown tool answered, a refused grade and the CLI's one-line prerequisite errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tolokaforge.core.models import MOCK_JUDGE_MODEL, JsonPathCheck, JudgeModelConfig
from tolokaforge.host.agents import GoldenAgentFactory, ScriptedAgentFactory, load_script
from tolokaforge.host.cli import main
from tolokaforge.host.errors import ConfigError, PackLoadError
from tolokaforge.host.packs import load_pack
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.users.router import UserRouter

MOCK_JUDGE = JudgeModelConfig(model=MOCK_JUDGE_MODEL)


async def test_resume_skips_finished_trials(packs_dir: Path, tmp_path: Path) -> None:
    pack = load_pack(packs_dir / "dual_control")
    settings = RunSettings(output=tmp_path, trials=2, concurrency=8, judge_model=MOCK_JUDGE)
    first = await run_pack(pack, GoldenAgentFactory(), UserRouter(), settings)
    assert (first.ran, len(first.rows), first.pass_hat(2)) == (10, 10, 1.0)
    kept = tmp_path / "trials" / "dc_roaming_abroad" / "0" / "trajectory.yaml"
    stamp = kept.stat().st_mtime_ns
    (tmp_path / "trials" / "dc_data_addon_purchase" / "1" / "grade.yaml").unlink()  # an unfinished trial

    with pytest.raises(ConfigError, match="--resume"):
        await run_pack(pack, GoldenAgentFactory(), UserRouter(), settings)
    resumed = await run_pack(
        pack,
        GoldenAgentFactory(),
        UserRouter(),
        RunSettings(output=tmp_path, trials=2, resume=True, judge_model=MOCK_JUDGE),
    )
    assert (resumed.ran, resumed.skipped, len(resumed.rows), resumed.pass_rate) == (1, 9, 10, 1.0)
    assert kept.stat().st_mtime_ns == stamp
    assert (tmp_path / "trials" / "dc_data_addon_purchase" / "1" / "grade.yaml").is_file()


async def test_an_unknown_tool_is_answered_and_the_trial_is_graded(packs_dir: Path, tmp_path: Path) -> None:
    script = tmp_path / "turns.yaml"
    script.write_text(
        yaml.safe_dump(
            [
                {"tool_calls": [{"name": "get_line_details", "arguments": {"line_id": "L-1002"}}]},
                {"tool_calls": [{"name": "format_hard_drive", "arguments": {}}]},
            ]
        )
    )
    pack = load_pack(packs_dir / "dual_control")
    output = tmp_path / "out"
    summary = await run_pack(
        pack,
        ScriptedAgentFactory(load_script(script)),
        UserRouter(),
        RunSettings(output=output, task_ids=("dc_roaming_abroad",)),
    )
    folder = output / "trials" / "dc_roaming_abroad" / "0"
    trajectory = yaml.safe_load((folder / "trajectory.yaml").read_text())
    grade = yaml.safe_load((folder / "grade.yaml").read_text())
    assert trajectory["termination_reason"] == "agent_done"
    assert [c["status"] for c in trajectory["tool_calls"]] == ["SUCCESS", "TOOL_NOT_FOUND"]
    assert trajectory["messages"][-1]["content"].startswith(
        "Error: tool 'format_hard_drive' is not registered"
    )
    # Graded like any other ending; the roaming the task asked for was never enabled.
    assert grade["graded"] is True and not grade["binary_pass"]
    assert summary.pass_rate == 0.0 and summary.mean_score is not None


async def test_a_refused_grade_publishes_no_score(pack_copy: Callable[[str], Path], tmp_path: Path) -> None:
    root = pack_copy("dual_control")
    grading = root / "tasks" / "dc_data_addon_purchase" / "grading.yaml"
    data = yaml.safe_load(grading.read_text())
    # An assertion on state the runner does not carry: it refuses to grade rather than score 0.0.
    data["state_checks"]["jsonpaths"].append({"path": "$.filesystem.notes", "exists": True})
    grading.write_text(yaml.safe_dump(data))
    with pytest.raises(PackLoadError, match=r"\$\.filesystem\.notes"):
        load_pack(root)  # validate refuses it before the run ...
    data["state_checks"]["jsonpaths"].pop()
    grading.write_text(yaml.safe_dump(data))
    pack = load_pack(root)
    # ... so the shape reaches the runner only in a TaskDescription built some other way.
    state_checks = pack.task("dc_data_addon_purchase").task.grading.state_checks
    assert state_checks is not None
    state_checks.jsonpaths.append(JsonPathCheck(path="$.filesystem.notes", exists=True))
    output = tmp_path / "out"
    summary = await run_pack(
        pack,
        GoldenAgentFactory(),
        UserRouter(),
        RunSettings(output=output, task_ids=("dc_data_addon_purchase",)),
    )
    folder = output / "trials" / "dc_data_addon_purchase" / "0"
    trajectory = yaml.safe_load((folder / "trajectory.yaml").read_text())
    grade = yaml.safe_load((folder / "grade.yaml").read_text())
    assert trajectory["termination_reason"] == "agent_done"
    assert trajectory["grading_error"] and "$.filesystem.notes" in trajectory["grading_error"]
    assert grade["score"] is None and grade["graded"] is False
    assert grade["reasons"][0].startswith("grading failed:")
    assert summary.to_dict()["grading_errors"] == 1 and summary.mean_score is None


def test_cli_runs_a_pack_and_reports_prerequisites_in_one_line(
    packs_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOLOKAFORGE_TRIALS", "2")  # every option is an environment variable too
    output = tmp_path / "run"
    with pytest.raises(SystemExit) as done:
        main(
            [
                "run",
                "--pack",
                str(packs_dir / "dual_control"),
                "--task",
                "dc_refuse_sim_swap_wrong_pin",
                "--output",
                str(output),
            ]
        )
    assert done.value.code == 0
    printed = capsys.readouterr().out
    assert "pass^2" in printed and "1.000" in printed
    assert printed.strip().splitlines()[-1].startswith("exit 0: all 2 trials graded")
    assert yaml.safe_load((output / "summary.yaml").read_text())["trials"] == 2

    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--pack", str(tmp_path / "missing")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert (
        error.count("\n") == 1
        and error.startswith("tolokaforge: error (exit 2):")
        and "Traceback" not in error
    )

    with pytest.raises(SystemExit):
        main(["run", "--pack", str(packs_dir / "retail"), "--agent", "llm"])
    assert (
        capsys.readouterr().err.strip()
        == "tolokaforge: error (exit 2): --agent llm needs --model (or TOLOKAFORGE_MODEL)"
    )
