"""The bash_shell proof pack: the built-in ``bash`` enabled by name, through the CLI and the embedded
runner, its shell in the trial's sandbox.

The golden path is three calls that only work in one persistent shell (the second uses the first's
working directory and exported variable; the third reads the workspace at /env/fs/agent-visible); it
passes. A scripted agent that counts one order too few fails naming the check, and one whose command
fails gets the exit status as its answer, not a broken trial.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from conftest import Cli

PACK = Path(__file__).parent / "packs" / "bash_shell"
TASK = "tally_orders"


def _file(run: Path, name: str) -> dict[str, Any]:
    return yaml.safe_load((run / "trials" / TASK / "0" / name).read_text())


def _answers(run: Path) -> list[str]:
    return [
        message["content"]
        for message in _file(run, "trajectory.yaml")["messages"]
        if message["role"] == "tool"
    ]


def _scripted(tmp_path: Path, commands: list[str], cli: Cli) -> Path:
    turns = [{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]} for command in commands]
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([*turns, {"content": "Done.", "done": True}]))
    run = tmp_path / "run"
    code, out = cli(
        ["run", "--pack", str(PACK), "--agent", "scripted", "--script", str(script), "--output", str(run)]
    )
    assert code == 0, out  # every trial graded
    return run


def test_the_pack_validates(cli: Cli) -> None:
    code, out = cli(["validate", "--pack", str(PACK)])
    assert code == 0, out


def test_golden_replay_passes_in_one_persistent_shell(tmp_path: Path, cli: Cli) -> None:
    run = tmp_path / "run"
    code, out = cli(["run", "--pack", str(PACK), "--agent", "golden", "--output", str(run)])
    assert code == 0, out
    grade = _file(run, "grade.yaml")
    assert grade["binary_pass"] is True and grade["score"] == 1.0, grade["reasons"]
    assert _answers(run) == ["[no output]", "[no output]", "total=5"]


def test_a_planted_miscount_fails_naming_the_check(tmp_path: Path, cli: Cli) -> None:
    # Counts only Monday's file: three orders, not five.
    run = _scripted(tmp_path, ["mkdir -p out && echo total=$(wc -l < data/monday.txt) > out/report.txt"], cli)
    grade = _file(run, "grade.yaml")
    assert grade["binary_pass"] is False and grade["components"]["state_checks"] == 0.0
    assert any("the report counts five orders" in reason for reason in grade["reasons"]), grade["reasons"]


def test_a_failing_command_is_an_answer_with_its_status(tmp_path: Path, cli: Cli) -> None:
    run = _scripted(tmp_path, ["cat data/wednesday.txt", "cd data; pwd"], cli)
    missing, moved = _answers(run)
    assert missing.startswith("[stderr]\ncat: data/wednesday.txt: No such file or directory")
    assert missing.endswith("[exit code: 1]")
    assert moved.endswith("/data")
    assert _file(run, "grade.yaml")["binary_pass"] is False
