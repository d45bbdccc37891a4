"""The files_family proof pack: the public file tools enabled by name, through the CLI and the embedded
runner, the fs provider in the trial's sandbox.

The golden path calls each of the nine tools once, with relative paths and absolute ones under
/env/fs/agent-visible, and passes; the model reads the public tools' text answers. A scripted agent
that moves the notes instead of copying them fails naming the check; one that reaches outside the
workspace is refused (permission_denied) without breaking the trial or touching anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

if TYPE_CHECKING:
    from conftest import Cli

PACK = Path(__file__).parent / "packs" / "files_family"
TASK = "tidy_workspace"
GOLDEN = yaml.safe_load((PACK / "tasks" / TASK / "grading.yaml").read_text())["state_checks"]["hash"][
    "golden_actions"
]


def _file(run: Path, name: str) -> dict[str, Any]:
    return yaml.safe_load((run / "trials" / TASK / "0" / name).read_text())


def _answers(run: Path) -> list[str]:
    return [m["content"] for m in _file(run, "trajectory.yaml")["messages"] if m["role"] == "tool"]


def _scripted(tmp_path: Path, calls: list[dict[str, Any]], cli: Cli) -> Path:
    turns = [{"tool_calls": [{"name": c["name"], "arguments": c["kwargs"]}]} for c in calls]
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


def test_golden_path_uses_every_file_tool_and_passes(tmp_path: Path, cli: Cli) -> None:
    run = tmp_path / "run"
    code, out = cli(["run", "--pack", str(PACK), "--agent", "golden", "--output", str(run)])
    assert code == 0, out
    grade = _file(run, "grade.yaml")
    assert grade["binary_pass"] is True and grade["score"] == 1.0, grade["reasons"]
    assert "Files: all 8 checks passed" in grade["reasons"]
    assert _answers(run) == [
        "file: meeting.md\nfile: todo.txt",
        "inbox/meeting.md:3:- budget approved: 1200",
        "     3\t- budget approved: 1200\n",
        "File written successfully: reports/summary.md",
        "Appended to /env/fs/agent-visible/reports/summary.md",
        "Replaced text in config/settings.ini",
        "Copied inbox/meeting.md -> archive/meeting.md",
        "Moved inbox/todo.txt -> archive",
        "Deleted drafts/old.txt",
    ]


def test_a_planted_move_instead_of_copy_fails_naming_the_check(tmp_path: Path, cli: Cli) -> None:
    planted = [
        {"name": "move_file", "kwargs": {"source": "inbox/meeting.md", "destination": "archive/meeting.md"}}
        if call["name"] == "copy_file"
        else call
        for call in GOLDEN
    ]
    run = _scripted(tmp_path, planted, cli)
    grade = _file(run, "grade.yaml")
    assert grade["binary_pass"] is False and grade["components"]["state_checks"] == pytest.approx(7 / 8)
    failed = [r for r in grade["reasons"] if "the notes stay in the inbox" in r]
    assert failed, grade["reasons"]
    assert grade["components"]["transcript_rules"] < 1.0  # copy_file was never called


def test_reaching_outside_the_workspace_is_refused_and_changes_nothing(tmp_path: Path, cli: Cli) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    attempts = [
        {"name": "read_file", "kwargs": {"path": "/etc/hostname"}},
        {"name": "read_file", "kwargs": {"path": "/env/fs/agent-visible/../../etc/hostname"}},
        {"name": "write_file", "kwargs": {"path": str(outside), "content": "pwned"}},
        {"name": "copy_file", "kwargs": {"source": "inbox/meeting.md", "destination": "../leak.md"}},
        {"name": "delete_file", "kwargs": {"path": "../inbox"}},
        {"name": "grep_workspace", "kwargs": {"pattern": "root", "path": "/etc"}},
    ]
    run = _scripted(tmp_path, attempts, cli)
    calls = _file(run, "trajectory.yaml")["tool_calls"]
    assert [c["name"] for c in calls] == [a["name"] for a in attempts]
    for call in calls:
        assert call["error_category"] == "PERMISSION_DENIED", call
        assert "outside the workspace" in call["error"], call
    assert all(answer.startswith("Error: ") for answer in _answers(run))
    assert outside.read_text() == "keep me"
    grade = _file(run, "grade.yaml")
    assert grade["graded"] is True and grade["binary_pass"] is False
