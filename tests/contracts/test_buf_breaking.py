"""The `buf breaking` gate against the committed baseline can pass, and can fail.

contracts/baseline/released.binpb is the buf image of the last released contract; CI compares the
working contract with it (and with HEAD~1). These tests prove the gate is real: an additive change
passes, a renumbered field, a removed field or a retyped field fails.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

RUNNER_PROTO = Path("contracts/proto/tolokaforge/runner/v1/runner.proto")


def _breaking(buf: Path, module_root: Path, baseline: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(buf), "breaking", "--against", str(baseline)],
        cwd=module_root,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def contract_copy(repo_root: Path, tmp_path: Path) -> Path:
    shutil.copy(repo_root / "buf.yaml", tmp_path / "buf.yaml")
    shutil.copytree(repo_root / "contracts/proto", tmp_path / "contracts/proto")
    return tmp_path


def _edit(root: Path, old: str, new: str) -> None:
    path = root / RUNNER_PROTO
    text = path.read_text()
    assert text.count(old) == 1, f"the edit target {old!r} must occur exactly once"
    path.write_text(text.replace(old, new))


def test_current_contract_is_compatible_with_the_released_baseline(buf: Path, repo_root: Path) -> None:
    result = _breaking(buf, repo_root, repo_root / "contracts/baseline/released.binpb")
    assert result.returncode == 0, result.stdout + result.stderr


def test_additive_change_passes(buf: Path, repo_root: Path, contract_copy: Path) -> None:
    _edit(contract_copy, "  string call_id = 6;\n", "  string call_id = 6;\n  string idempotency_key = 7;\n")
    result = _breaking(buf, contract_copy, repo_root / "contracts/baseline/released.binpb")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("old", "new", "complaint"),
    [
        ("  string call_id = 6;\n", "  string call_id = 7;\n", "call_id"),
        ("  string call_id = 6;\n", "", "6"),
        (
            "  int32 engine_protocol_version = 4;\n",
            "  int64 engine_protocol_version = 4;\n",
            "engine_protocol_version",
        ),
        ("  optional double trace_checks = 5;\n", "  double trace_checks = 5;\n", "trace_checks"),
    ],
    ids=["renumbered", "removed", "retyped", "presence-dropped"],
)
def test_breaking_change_fails_the_gate(
    buf: Path, repo_root: Path, contract_copy: Path, old: str, new: str, complaint: str
) -> None:
    _edit(contract_copy, old, new)
    result = _breaking(buf, contract_copy, repo_root / "contracts/baseline/released.binpb")
    assert result.returncode != 0
    assert complaint in result.stdout + result.stderr
