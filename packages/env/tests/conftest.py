"""Fixtures: the example packs, and run keys kept in a folder of the test session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKS = Path(__file__).resolve().parents[3] / "examples" / "packs"


@pytest.fixture(scope="session", autouse=True)
def run_key_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Runs' signing keys go to a folder of this session, not the home directory (the CLI's too)."""
    directory = tmp_path_factory.mktemp("run-keys")
    before = os.environ.get("TOLOKAFORGE_RUN_KEY_DIR")
    os.environ["TOLOKAFORGE_RUN_KEY_DIR"] = str(directory)
    yield directory
    if before is None:
        del os.environ["TOLOKAFORGE_RUN_KEY_DIR"]
    else:
        os.environ["TOLOKAFORGE_RUN_KEY_DIR"] = before


@pytest.fixture
def retail() -> Path:
    return PACKS / "retail"
