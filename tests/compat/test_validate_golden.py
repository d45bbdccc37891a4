"""``tolokaforge validate --golden``: every task's golden path played, so OK means the pack will grade."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Cli

REPO = Path(__file__).resolve().parents[2]
TERMINAL = REPO / "examples" / "terminal"


def test_the_terminal_examples_golden_paths_pass(cli: Cli) -> None:
    code, out = cli(["validate", "--pack", str(TERMINAL), "--golden"])
    assert code == 0, out
    assert "3 golden paths passed" in out


def test_a_solution_that_miscounts_is_a_problem_naming_the_task_and_the_check(
    tmp_path: Path, cli: Cli
) -> None:
    pack = tmp_path / "terminal"
    shutil.copytree(TERMINAL, pack)
    solve = pack / "log-error-report" / "solution" / "solve.sh"
    # Counts every line that mentions ERROR, not the lines whose level is ERROR.
    solve.write_text(
        solve.read_text().replace(
            """awk '$2 == "ERROR"' logs/*.log | wc -l""",
            "grep -c ERROR logs/*.log | awk -F: '{ s += $2 } END { print s }'",
        )
    )
    code, out = cli(["validate", "--pack", str(pack), "--golden"])
    assert code == 1, out
    assert "log-error-report: golden path did not pass:" in out
    assert "errors" in out.split("log-error-report: golden path did not pass:")[1]
    assert "1 problem(s)" in out


def test_a_task_without_a_golden_path_is_listed_not_failed(tmp_path: Path, cli: Cli) -> None:
    task = tmp_path / "pack" / "tasks" / "note"
    task.mkdir(parents=True)
    (task / "task.yaml").write_text(
        "task_id: note\nname: Note\ncategory: test\ndescription: Write a note.\n"
        "initial_user_message: Write hello to note.txt\n"
        "tools: {agent: {enabled: [write_file]}}\n"
        "user_simulator: {mode: scripted, scripted_flow: []}\n"
        "grading: grading.yaml\n"
    )
    (task / "grading.yaml").write_text(
        "combine: {method: weighted, weights: {state_checks: 1.0}, pass_threshold: 1.0}\n"
        "state_checks: {files: [{path: note.txt, must_exist: true, must_contain: hello}]}\n"
    )
    code, out = cli(["validate", "--pack", str(tmp_path / "pack"), "--golden"])
    assert code == 0, out
    assert "NO GOLDEN PATH note" in out
