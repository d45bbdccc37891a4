"""Custom checks in a separate process: verdicts, errors, timeouts, fail_on_error, the skip."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import psutil
import pytest

from tolokaforge.contracts.runner import RegisterTrialRequest, RunnerServiceStub

SpecFactory = Callable[..., dict[str, Any]]
RequestFor = Callable[..., RegisterTrialRequest]


def _grading(
    file: str,
    *,
    fail_on_error: bool | None = False,
    enabled: bool = True,
    timeout: float = 10.0,
    relative_imports: list[str] | None = None,
) -> dict[str, Any]:
    block: dict[str, Any] = {"enabled": enabled, "file": file, "timeout_seconds": timeout}
    if fail_on_error is not None:
        block["fail_on_error"] = fail_on_error
    if relative_imports is not None:
        block["relative_imports"] = relative_imports
    return {
        "combine_method": "weighted",
        "weights": {"custom_checks": 1.0},
        "pass_threshold": 0.5,
        "custom_checks": block,
    }


@pytest.fixture
def graded(
    stub: RunnerServiceStub, spec_factory: SpecFactory, request_for: RequestFor, episode: Any
) -> Callable[..., Any]:
    async def _graded(grading: dict[str, Any], *, pay: bool = True) -> Any:
        response = await stub.register_trial(request_for(spec_factory("t:0", grading=grading)))
        assert response.success, response.error
        ep = episode("t:0")
        if pay:
            await ep.call("set_status", {"order_id": "O-1", "status": "paid"}, "c1")
        ep.say("All done. Bye!")
        return await ep.grade()

    return _graded


async def test_verdicts_become_rows_and_the_mean_score(graded: Any) -> None:
    response = await graded(_grading("checks/good.py"))
    assert response.success, response.error
    grade = response.grade
    rows = {row.check_name: (row.status, row.score, row.message) for row in grade.custom_checks}
    assert rows == {
        "first_order_paid": ("passed", 1.0, "O-1 paid"),
        "second_order_paid": ("failed", 0.0, "O-2 not paid"),
        "said_goodbye": ("passed", 1.0, "said bye"),
    }
    assert grade.components.custom_checks == pytest.approx(2 / 3)
    assert grade.reasons.startswith("Custom checks: score=0.67 (2 passed, 1 failed, 0 skipped, 0 errored)")
    assert "second_order_paid failed: O-2 not paid" in grade.reasons


async def test_an_erroring_check_is_a_row_and_excluded_from_the_mean(graded: Any) -> None:
    response = await graded(_grading("checks/broken.py"))
    grade = response.grade
    rows = {row.check_name: row.status for row in grade.custom_checks}
    assert rows == {"raises": "error", "fine": "passed"}
    assert grade.components.custom_checks == 1.0
    assert "raises error: RuntimeError: checker bug" in grade.reasons


async def test_fail_on_error_turns_an_erroring_check_into_zero(graded: Any) -> None:
    response = await graded(_grading("checks/broken.py", fail_on_error=True))
    assert response.grade.components.custom_checks == 0.0
    assert not response.grade.binary_pass


async def test_suite_that_cannot_load_is_unscored_but_explained(graded: Any) -> None:
    response = await graded(_grading("checks/bad_import.py"))
    assert response.success, response.error
    grade = response.grade
    assert grade.components.custom_checks == -1.0
    assert (
        "Custom checks: unscored (fail_on_error: false), the suite failed to run — "
        "importing the checks file raised ModuleNotFoundError"
    ) in grade.reasons
    assert not grade.binary_pass  # configured, nothing scored: the fold fails it and says why
    assert "nothing was scored" in grade.reasons


async def test_suite_that_hangs_times_out(graded: Any) -> None:
    response = await graded(_grading("checks/hangs.py", timeout=0.5, fail_on_error=True))
    assert response.grade.components.custom_checks == 0.0
    assert "the suite failed to run — timed out after 0.5s" in response.grade.reasons


def _check_children() -> list[psutil.Process]:
    found: list[psutil.Process] = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline: list[str] = proc.info["cmdline"] or []
        if "tf-hanging-check-child" in cmdline and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


async def test_a_timed_out_suite_leaves_no_child_behind(graded: Any) -> None:
    # The suite's children carry a marker on their command line (their pids are their sandbox's own).
    response = await graded(_grading("checks/hangs_with_children.py", timeout=3.0))
    assert "the suite failed to run — timed out after 3s" in response.grade.reasons
    for _ in range(300):
        if not _check_children():
            break
        await asyncio.sleep(0.01)
    assert _check_children() == []  # the group is killed, and so is the child that left it


async def test_missing_or_escaping_file(graded: Any) -> None:
    response = await graded(_grading("../../../etc/passwd"))
    assert "is not a file inside the task's code" in response.grade.reasons


async def test_not_enabled_is_a_recorded_skip(graded: Any) -> None:
    response = await graded(_grading("checks/good.py", enabled=False) | {"weights": {}})
    assert response.success, response.error
    assert "skipped: custom checks not enabled (custom_checks)" in response.grade.reasons
    assert response.grade.components.custom_checks == -1.0
    # Disabled is not configured: nothing asked for a score, so nothing was owed.
    assert (response.grade.binary_pass, response.grade.score) == (True, 1.0)


async def test_a_suite_that_cannot_import_fails_the_grade_by_default(graded: Any) -> None:
    response = await graded(_grading("checks/bad_import.py", fail_on_error=None))
    assert response.success, response.error
    grade = response.grade
    assert (grade.components.custom_checks, grade.score, grade.binary_pass) == (0.0, 0.0, False)
    assert (
        "Custom checks: score=0.00, the suite failed to run — importing the checks file raised"
        in grade.reasons
    )


async def test_declared_style_checks_read_the_check_context(graded: Any) -> None:
    grading = _grading("checks/declared.py", fail_on_error=None, relative_imports=["checks/shared"])
    response = await graded(grading)
    assert response.success, response.error
    grade = response.grade
    rows = {row.check_name: (row.status, row.message) for row in grade.custom_checks}
    assert rows == {
        "first_order_became_paid": ("passed", "O-1 went from unpaid to paid"),
        "status_tool_was_used": ("passed", "set_status called"),
        "knows_its_task": ("passed", "task t"),
    }
    assert (grade.components.custom_checks, grade.binary_pass) == (1.0, True)


async def test_declared_style_checks_fail_on_the_wrong_path(graded: Any) -> None:
    grading = _grading("checks/declared.py", fail_on_error=None, relative_imports=["checks/shared"])
    response = await graded(grading, pay=False)
    grade = response.grade
    assert grade.components.custom_checks == pytest.approx(1 / 3)
    assert "first_order_became_paid failed: O-1 is not newly paid" in grade.reasons
    assert "status_tool_was_used failed: set_status never called" in grade.reasons


async def test_declared_style_without_its_import_folder_fails_by_default(graded: Any) -> None:
    response = await graded(_grading("checks/declared.py", fail_on_error=None))
    assert response.grade.components.custom_checks == 0.0
    assert "No module named 'order_rules'" in response.grade.reasons
