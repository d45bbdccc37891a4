"""File checks read the workspace as hostile: bounded reads, no symlink followed, no escape by pattern."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from tolokaforge.core.beneath import read_beneath
from tolokaforge.core.models import FileCheck
from tolokaforge.runner.grading import file_checks
from tolokaforge.runner.grading.file_checks import MAX_FILE_BYTES, evaluate_file_checks


def _check(path_glob: str, **operator: Any) -> FileCheck:
    return FileCheck.model_validate({"path_glob": path_glob, **operator})


def _score(workspace: Path, *checks: FileCheck) -> tuple[float | None, str]:
    result = evaluate_file_checks(checks, workspace)
    return result.score, result.segment


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "notes" / "deep").mkdir(parents=True)
    (root / "notes" / "a.txt").write_text("hello world")
    (root / "notes" / "deep" / "b.txt").write_text("EXACT")
    (root / "report.md").write_text("Total: 42")
    return root


def test_the_operators_over_ordinary_files(workspace: Path) -> None:
    score, segment = _score(
        workspace,
        _check("notes/*.txt", contains="world"),
        _check("notes/**/b.txt", equals="EXACT"),
        _check("**/*.md", contains_ci="TOTAL"),
        _check("*.csv", exists=False),
        _check("notes/deep/b.txt", exists=True),
    )
    assert (score, segment) == (1.0, "Files: all 5 checks passed")


def test_a_symlink_to_etc_passwd_is_not_the_trials_file(workspace: Path) -> None:
    (workspace / "passwd").symlink_to("/etc/passwd")
    (workspace / "etc").symlink_to("/etc", target_is_directory=True)
    score, segment = _score(
        workspace,
        _check("passwd", contains="root:"),
        _check("*", contains="root:"),
        _check("etc/passwd", contains="root:"),
        _check("**/passwd", exists=True),
    )
    assert score == 0.0, segment
    assert "no file matches 'passwd'" in segment and "no file matches 'etc/passwd'" in segment


def test_a_file_swapped_for_a_link_after_the_walk_is_not_read(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "secret.txt").write_text("secret")

    def swapped_first(root: int, path: str, max_bytes: int) -> tuple[bytes, bool]:
        (workspace / path).unlink()
        (workspace / path).symlink_to(tmp_path / "secret.txt")
        return read_beneath(root, path, max_bytes)

    monkeypatch.setattr(file_checks, "read_beneath", swapped_first)
    score, segment = _score(workspace, _check("report.md", contains="secret"))
    assert score == 0.0 and "'report.md' could not be read" in segment, segment


def test_a_sparse_gigabyte_is_refused_with_bounded_memory(workspace: Path) -> None:
    big = workspace / "huge.log"
    big.touch()
    os.truncate(big, 1 << 30)
    tracemalloc.start()
    try:
        score, segment = _score(
            workspace,
            _check("huge.log", contains="\0"),
            _check("huge.log", equals=""),
            _check("huge.log", exists=True),
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # A prefix of NULs holds "\0", yet the check must not pass on a prefix: the file was not read whole.
    assert score == pytest.approx(1 / 3), segment
    assert f"'huge.log' is larger than the {MAX_FILE_BYTES}-byte limit of file checks" in segment
    assert peak < 4 * MAX_FILE_BYTES, peak


def test_a_large_file_beside_one_that_holds_does_not_fail_the_check(workspace: Path) -> None:
    big = workspace / "notes" / "big.txt"
    big.touch()
    os.truncate(big, MAX_FILE_BYTES + 1)
    assert _score(workspace, _check("notes/*.txt", contains="world"))[0] == 1.0


def test_patterns_that_leave_the_workspace_fail_their_check(workspace: Path) -> None:
    score, segment = _score(
        workspace,
        _check("../*", exists=True),
        _check("/etc/passwd", exists=True),
        _check("notes/../*.md", exists=True),
    )
    assert score == 0.0
    assert "leaves the workspace" in segment and "is absolute" in segment


def test_fifos_and_folders_are_not_files(workspace: Path) -> None:
    os.mkfifo(workspace / "pipe.txt")
    (workspace / "dir.txt").mkdir()
    score, segment = _score(workspace, _check("pipe.txt", exists=True), _check("*.txt", contains="x"))
    assert score == 0.0, segment


def test_no_workspace_matches_nothing(tmp_path: Path) -> None:
    assert _score(tmp_path / "missing", _check("*", exists=False))[0] == 1.0
    assert evaluate_file_checks([_check("*", exists=True)], None).score == 0.0
