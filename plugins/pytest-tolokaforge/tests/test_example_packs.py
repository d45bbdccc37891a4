"""Every generated item passes on both example packs (the one full run of the suite)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pytest_tolokaforge.options import TASK_CHECKS

if TYPE_CHECKING:
    from conftest import RunPytest

RUNNER_ITEMS = ("health_check", "protocol_version_skew", "empty_call_id", "cleanup_idempotent")


def test_every_item_passes_on_both_example_packs(run_pytest: RunPytest, packs_dir: Path) -> None:
    run = run_pytest(
        f"--tolokaforge-pack={packs_dir / 'retail'}", f"--tolokaforge-pack={packs_dir / 'dual_control'}"
    )
    assert run.returncode == 0, run.output
    outcomes = run.outcomes
    tasks = {
        "tolokaforge[retail]": sorted(p.name for p in (packs_dir / "retail" / "tasks").iterdir()),
        "tolokaforge[dual_control]": sorted(p.name for p in (packs_dir / "dual_control" / "tasks").iterdir()),
    }
    expected = {
        f"{pack}::{task}::{check}" for pack, names in tasks.items() for task in names for check in TASK_CHECKS
    } | {f"tolokaforge-runner::{name}" for name in RUNNER_ITEMS}
    assert set(outcomes) == expected
    assert set(outcomes.values()) == {"PASSED"}
    assert len(expected) == 34 * 5 + 4
    assert "tasks checked: 34, passed: 34, failed: 0" in run.output
    assert "runner contract: 4 checked, 4 passed, 0 failed" in run.output
    # a task with an LLM judge passes offline: the mock judge answers it, and the check says so
    assert (
        "note tolokaforge[dual_control]::dc_data_addon_judged golden: mock-judged: llm_judge "
        "(by tolokaforge-mock-judge" in run.output
    )
    # combine: any -- the transcript rule is the alternative the golden path does not take, and says so
    assert (
        "note tolokaforge[retail]::multi_damaged_return_or_replacement golden: combine any: "
        "transcript_rules scored 0" in run.output
    )
