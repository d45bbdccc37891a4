"""The terminal_tests component on its own: a verifier script run in the real sandbox over a workspace.

How the reward files, the exit status, CTRF reports, pytest's verbose lines and the deadline become
the score and the items, and when the verifier cannot run as written (docs/terminal.md).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tolokaforge.core.models import TerminalTestsConfig
from tolokaforge.runner.grading.component import ITEMS
from tolokaforge.runner.grading.terminal_tests import TerminalTestsUnavailable, run_terminal_tests
from tolokaforge.runner.process.confinement import Confinement


@pytest.fixture(scope="module")
def confinement(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Confinement]:
    detected = Confinement.detect(tmp_path_factory.mktemp("confinement"))
    yield detected
    detected.close()


@pytest.fixture
def workspace(tmp_path: Path, confinement: Confinement) -> Path:
    folder = tmp_path / "workspaces" / "trial"
    folder.mkdir(parents=True)
    (folder / "answer.txt").write_text("42\n")
    confinement.own(folder)
    return folder


def _config(script: str, files: dict[str, str] | None = None, **extra: object) -> TerminalTestsConfig:
    return TerminalTestsConfig.model_validate({"files": {"test.sh": script, **(files or {})}, **extra})


async def test_the_reward_file_is_the_score_and_the_workspace_is_at_workdir(
    workspace: Path, confinement: Confinement
) -> None:
    script = (
        'test "$(cat /app/answer.txt)" = 42 && test "$PWD" = /app && echo 0.25 > /logs/verifier/reward.txt\n'
    )
    result = await run_terminal_tests(_config(script), workspace, confinement=confinement, cgroup=None)
    assert result.score == 0.25
    assert result.segment == "Terminal tests: score=0.25 (reward.txt 0.25; exit status 0)"


async def test_reward_json_and_a_ctrf_report_become_score_and_items(
    workspace: Path, confinement: Confinement
) -> None:
    ctrf = {"results": {"tests": [{"name": "a", "status": "passed"}, {"name": "b", "status": "failed"}]}}
    script = (
        f"echo '{json.dumps(ctrf)}' > /logs/verifier/ctrf.json\n"
        "echo '{\"reward\": 0.5}' > /logs/verifier/reward.json\n"
        "exit 1\n"
    )
    result = await run_terminal_tests(_config(script), workspace, confinement=confinement, cgroup=None)
    assert result.score == 0.5
    items = result.extra[ITEMS]
    assert [(item.label, item.met) for item in items] == [
        ("a", True),
        ("b", False),
        ("test.sh exit status 1", False),
    ]
    assert "not passed: b" in result.segment


async def test_without_a_reward_the_exit_status_decides_and_pytest_lines_are_items(
    workspace: Path, confinement: Confinement
) -> None:
    test_file = "from pathlib import Path\n\ndef test_answer():\n    assert Path('answer.txt').read_text() == '42\\n'\n\ndef test_other():\n    assert False\n"
    script = "python3 -m pytest -v -p no:cacheprovider /tests/test_answer.py\n"
    result = await run_terminal_tests(
        _config(script, files={"test_answer.py": test_file}), workspace, confinement=confinement, cgroup=None
    )
    assert result.score == 0.0
    labels = {item.label.rsplit("::", 1)[-1]: item.met for item in result.extra[ITEMS][:-1]}
    assert labels == {"test_answer": True, "test_other": False}
    assert "no reward file; exit status 1" in result.segment
    passing = await run_terminal_tests(_config("exit 0\n"), workspace, confinement=confinement, cgroup=None)
    assert passing.score == 1.0


async def test_a_reward_that_is_not_a_number_scores_zero_naming_it(
    workspace: Path, confinement: Confinement
) -> None:
    result = await run_terminal_tests(
        _config("echo pass > /logs/verifier/reward.txt\n"), workspace, confinement=confinement, cgroup=None
    )
    assert result.score == 0.0
    assert "reward.txt holds no number: 'pass'" in result.segment


async def test_a_verifier_past_its_deadline_scores_zero(workspace: Path, confinement: Confinement) -> None:
    config = _config("echo 1 > /logs/verifier/reward.txt\nsleep 60\n", timeout_s=1)
    result = await run_terminal_tests(config, workspace, confinement=confinement, cgroup=None)
    assert result.score == 0.0
    assert "test.sh timed out after 1s" in result.segment


async def test_it_needs_the_sandbox_and_a_workdir_that_hides_nothing(
    workspace: Path, confinement: Confinement
) -> None:
    with pytest.raises(TerminalTestsUnavailable, match="--isolation sandbox"):
        await run_terminal_tests(
            _config("exit 0\n"), workspace, confinement=Confinement.process(), cgroup=None
        )
    # The interpreter's own folder's parent: a mount there would hide Python from the verifier.
    hiding = os.path.dirname(os.path.dirname(sys.executable))
    with pytest.raises(TerminalTestsUnavailable, match="would hide"):
        await run_terminal_tests(
            _config("exit 0\n", workdir=hiding), workspace, confinement=confinement, cgroup=None
        )
