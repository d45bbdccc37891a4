"""Fixtures shared by the contract tests: the repository root, buf, and the compiled descriptor."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def buf() -> Path:
    """The buf CLI installed into the workspace venv by `uv sync` (package buf-bin)."""
    path = Path(sys.executable).parent / "buf"
    assert path.exists(), f"buf is not installed in {path.parent}: run `uv sync --locked`"
    return path


@pytest.fixture(scope="session")
def descriptor_set(buf: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """contracts/proto compiled by buf into a FileDescriptorSet, as proto3 JSON."""
    out = tmp_path_factory.mktemp("image") / "image.json"
    subprocess.run(
        [str(buf), "build", "--exclude-source-info", "--as-file-descriptor-set", "-o", str(out)],
        cwd=REPO_ROOT,
        check=True,
    )
    return json.loads(out.read_text())
