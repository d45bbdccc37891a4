"""The golden check requires every trace constraint of the route the golden path takes to pass."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from conftest import RunPytest

ORDERING = "trace_ordering_cancel_after_lookup"
ROUTES = "trace_routes_identify_then_pay"


def _edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _unreachable_left(grading: dict[str, Any]) -> None:
    # A constraint the golden path cannot pass: it never reads a coupon.
    before = grading["trace_checks"]["constraints"][0]["require"]["before"]
    before["left"]["match"]["tool"] = {"equals": "get_coupon"}
    before["left"]["match"].pop("args")


def test_a_constraint_the_golden_path_fails_fails_the_golden_check(
    run_pytest: RunPytest, pack_copy: Callable[[str], Path]
) -> None:
    root = pack_copy("retail")
    _edit(root / "tasks" / ORDERING / "grading.yaml", _unreachable_left)
    run = run_pytest(
        f"--tolokaforge-pack={root}", "--tolokaforge-checks=golden", "-k", f"{ORDERING} or {ROUTES}"
    )
    item = "tolokaforge[retail]::{}::golden".format
    assert run.failed() == {item(ORDERING)}, run.output
    golden = run.section(item(ORDERING))
    assert (
        "golden path fails trace constraints: order_read_before_cancel: before: left (tool_call get_coupon) "
        "selected no event" in golden
    )
    # The routes task passes: the route the golden path does not take is not owed.
    assert run.outcomes[item(ROUTES)] == "PASSED"
