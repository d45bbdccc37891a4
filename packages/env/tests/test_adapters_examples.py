"""The two adapter examples (examples/rl/) run end to end, as a user runs them: a subprocess each, against
the local golden model server. Their rewards must be the runner's grades, as the trial files record them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ["verifiers_rollout.py", "openenv_rollout.py"]


def _run_example(script: str, tmp_path: Path, *extra: str) -> tuple[list[dict[str, Any]], Path]:
    output, rows = tmp_path / "run", tmp_path / "rows.json"
    command = [
        sys.executable,
        str(ROOT / "examples" / "rl" / script),
        "--output",
        str(output),
        "--json",
        str(rows),
    ]
    done = subprocess.run([*command, *extra], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    # Nothing went wrong quietly: no traceback from the servers either.
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
    return json.loads(rows.read_text()), output


def _recorded_grades(output: Path) -> dict[str, dict[str, Any]]:
    """Each task's grade.yaml in the run folder (one trial per task here)."""
    grades: dict[str, dict[str, Any]] = {}
    for path in sorted(output.glob("trials/*/*/grade.yaml")):
        grades[path.parent.parent.name] = yaml.safe_load(path.read_text())
    return grades


@pytest.mark.parametrize("script", EXAMPLES)
def test_golden_rollouts_score_the_runners_grade(script: str, tmp_path: Path) -> None:
    rows, output = _run_example(script, tmp_path)
    grades = _recorded_grades(output)
    assert len(rows) == 29 and set(grades) == {row["task_id"] for row in rows}
    for row in rows:
        grade = grades[row["task_id"]]
        assert row["reward"] == grade["score"] == 1.0, row
        assert row["grade"]["passed"] is grade["binary_pass"] is True
        assert row["grade"]["components"] == grade["components"]
        assert row["grade"]["reasons"] == grade["reasons"]
    summary = yaml.safe_load((output / "summary.yaml").read_text())
    assert summary["ran"] == summary["passed"] == 29


@pytest.mark.parametrize("script", EXAMPLES)
def test_a_wrong_play_scores_below_one_with_the_graders_reasons(script: str, tmp_path: Path) -> None:
    task = "write_update_shipping_address"
    rows, output = _run_example(script, tmp_path, "--task", task, "--skip-actions")
    grade = _recorded_grades(output)[task]
    [row] = rows
    assert row["reward"] == grade["score"] < 1.0
    assert row["grade"]["passed"] is grade["binary_pass"] is False
    assert row["grade"]["reasons"] == grade["reasons"]
    assert any("update_shipping_address" in reason for reason in row["grade"]["reasons"])
