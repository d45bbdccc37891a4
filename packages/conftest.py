"""Fixtures every package's tests may request (pytest loads this file for each test under packages/).

None is autouse: a package's own conftest.py turns one on for its tests, so the others run as before.
This file is not at the rootdir: there, pyright would take it for the ``conftest`` that test modules
import their conftest's types from.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def run_key_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Runs' signing keys go to a folder of this session, not the home directory (host run_keys.py);
    CLI subprocesses that inherit the environment use it too."""
    directory = tmp_path_factory.mktemp("run-keys")
    before = os.environ.get("TOLOKAFORGE_RUN_KEY_DIR")
    os.environ["TOLOKAFORGE_RUN_KEY_DIR"] = str(directory)
    yield directory
    if before is None:
        del os.environ["TOLOKAFORGE_RUN_KEY_DIR"]
    else:
        os.environ["TOLOKAFORGE_RUN_KEY_DIR"] = before


@pytest.fixture(scope="module")
def ray_turn() -> Iterator[None]:
    """One local Ray cluster on the machine at a time: a module that starts one waits for the other's
    module to end. Two at once (host's and env's test modules on two xdist workers) drove a worker to
    23 GB and the kernel's OOM killer, then hung the session; each module alone stays under 300 MB."""
    with open(os.path.join(tempfile.gettempdir(), "tolokaforge-tests-ray.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
