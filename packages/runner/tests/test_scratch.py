"""Where a runner keeps its scratch: a roomy tmpfs unless TMPDIR says otherwise, else the temp dir."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from tolokaforge.runner.scratch import MIN_FREE_BYTES, filesystem_type, scratch_parent


def test_the_mount_table_names_each_paths_file_system() -> None:
    assert filesystem_type(Path("/proc/self")) == "proc"
    assert filesystem_type(Path("/dev/shm")) == "tmpfs"


def test_tmpdir_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert scratch_parent() == tmp_path


def test_a_disk_directory_is_not_taken_for_a_memory_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("TMPDIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", None)
    on_disk = tmp_path / "shm"
    on_disk.mkdir()
    assert filesystem_type(on_disk) != "tmpfs"
    assert scratch_parent(shm=on_disk) == Path(tempfile.gettempdir())
    assert scratch_parent(shm=tmp_path / "missing") == Path(tempfile.gettempdir())


def test_dev_shm_is_taken_when_it_has_room(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TMPDIR", raising=False)
    stats = os.statvfs("/dev/shm")
    roomy = stats.f_bavail * stats.f_frsize >= MIN_FREE_BYTES
    # This machine's /dev/shm is a tmpfs; whether it is chosen follows only from its free room.
    assert (scratch_parent() == Path("/dev/shm")) is roomy
