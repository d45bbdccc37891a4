"""Fixtures: the example packs, and run keys kept in a folder of the test session."""

from __future__ import annotations

from pathlib import Path

import pytest

PACKS = Path(__file__).resolve().parents[3] / "examples" / "packs"


@pytest.fixture(scope="session", autouse=True)
def run_key_dir(run_key_dir: Path) -> Path:
    """Every test here keeps runs' signing keys in the session's folder (packages/conftest.py)."""
    return run_key_dir


@pytest.fixture
def retail() -> Path:
    return PACKS / "retail"
