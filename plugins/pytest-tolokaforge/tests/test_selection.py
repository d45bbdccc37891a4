"""Choosing what runs: ``-k <task_id>``, ``--tolokaforge-checks``, no pack at all, a pack that is not there."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import RunPytest


def test_k_selects_one_tasks_items_and_checks_selects_the_checks(
    run_pytest: RunPytest, packs_dir: Path
) -> None:
    run = run_pytest(
        f"--tolokaforge-pack={packs_dir / 'retail'}",
        "--tolokaforge-checks=load, resolve",
        "-k",
        "lookup_order_tracking",
    )
    assert run.returncode == 0, run.output
    assert run.outcomes == {
        "tolokaforge[retail]::lookup_order_tracking::load": "PASSED",
        "tolokaforge[retail]::lookup_order_tracking::resolve": "PASSED",
    }
    assert "collected 58 items / 56 deselected / 2 selected" in run.output  # 29 tasks x 2 checks, no runner
    assert "tasks checked: 1, passed: 1, failed: 0" in run.output


def test_without_a_pack_the_plugin_adds_nothing_and_its_fixtures_say_why(
    run_pytest: RunPytest, tmp_path: Path
) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_plain.py").write_text(
        "def test_plain():\n    assert 1 + 1 == 2\n\n\n"
        "def test_wants_a_pack(tolokaforge_pack):\n    assert tolokaforge_pack\n"
    )
    run = run_pytest(cwd=tmp_path)
    assert run.outcomes == {
        "tests/test_plain.py::test_plain": "PASSED",
        "tests/test_plain.py::test_wants_a_pack": "ERROR",
    }
    assert "the tolokaforge fixtures need a pack: pass --tolokaforge-pack PATH" in run.output
    assert "tasks checked" not in run.output


def test_an_unknown_check_is_a_usage_error(run_pytest: RunPytest, packs_dir: Path) -> None:
    run = run_pytest(f"--tolokaforge-pack={packs_dir / 'retail'}", "--tolokaforge-checks=load,golde")
    assert run.returncode == 4
    assert "--tolokaforge-checks: unknown check(s) golde; choose from load, golden" in run.output


def test_a_pack_that_is_not_there_fails_its_load_item(run_pytest: RunPytest, tmp_path: Path) -> None:
    run = run_pytest(f"--tolokaforge-pack={tmp_path / 'nowhere'}", "--tolokaforge-checks=load")
    assert run.returncode == 1
    assert run.outcomes == {"tolokaforge[nowhere]::pack.yaml::load": "FAILED"}
    assert f"does not load: {tmp_path / 'nowhere'}: is not a directory" in run.output


def test_a_project_with_nested_conftests_runs_its_tests_beside_the_pack(
    run_pytest: RunPytest, packs_dir: Path, tmp_path: Path
) -> None:
    # A conftest below the root makes pytest call its hooks through a subset of the plugins, which
    # pluggy keeps in a set: the plugin's objects must hash (they did not, and pytest stopped).
    (tmp_path / "tests" / "unit").mkdir(parents=True)
    (tmp_path / "tests" / "unit" / "conftest.py").write_text(
        "import pytest\n\n\n@pytest.fixture\ndef two():\n    return 2\n"
    )
    (tmp_path / "tests" / "unit" / "test_own.py").write_text(
        "def test_own(two):\n    assert two + two == 4\n"
    )
    run = run_pytest(
        f"--tolokaforge-pack={packs_dir / 'retail'}",
        "--tolokaforge-checks=load",
        "-k",
        "lookup_order_tracking or test_own",
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.output
    assert run.outcomes == {
        "tests/unit/test_own.py::test_own": "PASSED",
        "tolokaforge[retail]::lookup_order_tracking::load": "PASSED",
    }
