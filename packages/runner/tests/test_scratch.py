"""Where a runner keeps its scratch: a roomy tmpfs unless TMPDIR says otherwise, else the temp dir."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tolokaforge.runner.trials.scratch import (
    MIN_FREE_BYTES,
    PREFIX,
    Scratch,
    filesystem_type,
    scratch_parent,
    sweep_abandoned,
)


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


def test_a_dead_runners_directory_is_swept_and_a_live_ones_is_not(tmp_path: Path) -> None:
    live = Scratch(tmp_path)
    try:
        # A runner killed outright: its directory and lock file stay, but nobody holds the lock.
        killed = subprocess.run(
            [sys.executable, "-c", _KILLED_RUNNER, str(tmp_path)], capture_output=True, text=True, check=True
        )
        dead = Path(killed.stdout.strip())
        assert dead.is_dir()
        fresh = tmp_path / f"{PREFIX}unlocked"  # being made by a runner that has not locked it yet
        fresh.mkdir()
        assert sweep_abandoned(tmp_path) == [dead]
        assert not dead.exists()
        assert Path(live.name).is_dir() and fresh.is_dir()
        old = time.time() - 3600
        os.utime(fresh, (old, old))  # no lock file for an hour: abandoned too
        assert sweep_abandoned(tmp_path) == [fresh]
    finally:
        live.cleanup()
    assert not Path(live.name).exists()
    assert sweep_abandoned(tmp_path) == []


_KILLED_RUNNER = """
import os, sys
from pathlib import Path
from tolokaforge.runner.trials.scratch import Scratch
scratch = Scratch(Path(sys.argv[1]))
print(scratch.name, flush=True)
os._exit(0)  # no cleanup: what SIGKILL leaves
"""
