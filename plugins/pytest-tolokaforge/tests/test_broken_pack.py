"""A copy of the retail pack broken four ways: the right item fails, naming the problem; the rest pass.

One run covers every breakage (each in its own task) plus an intact task and a task without a
``golden_response`` -- ``-k`` keeps the run to those six tasks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.etree import ElementTree

import pytest
import yaml

from pytest_tolokaforge.options import TASK_CHECKS

if TYPE_CHECKING:
    from conftest import RunPytest

WRONG_ARGUMENT = "write_cancel_processing_order"  # golden cancel_order reason: found_better_price -> other
UNDECLARED_TIMESTAMP = "write_ticket_overdue_shipment"  # tickets.created_at no longer declared unstable
BAD_SCHEMA = "lookup_order_tracking"  # its tools module adds a tool whose schema is not JSON Schema
MISSING_TOOL = "lookup_product_availability"  # golden action get_product_details -> get_product_detailz
NO_GOLDEN_RESPONSE = "lookup_refund_quote"  # golden_response removed: text rules are not judged
INTACT = "lookup_store_credit_balance"
TASKS = (WRONG_ARGUMENT, UNDECLARED_TIMESTAMP, BAD_SCHEMA, MISSING_TOOL, NO_GOLDEN_RESPONSE, INTACT)

BROKEN_TOOLS = '''
"""The retail tools plus one whose parameters are not a JSON Schema ("type": "strin")."""

from __future__ import annotations

from typing import Any

from . import TOOLS as RETAIL_TOOLS


class LookupBrokenSchema:
    @staticmethod
    def get_info() -> dict[str, Any]:
        parameters = {"type": "object", "properties": {"order_id": {"type": "strin"}}}
        return {"type": "function", "function": {"name": "lookup_broken_schema", "parameters": parameters}}

    @staticmethod
    def invoke(data: dict[str, Any], **kwargs: Any) -> str:
        return "never"


TOOLS = [*RETAIL_TOOLS, LookupBrokenSchema]
'''


def _edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _break(root: Path) -> None:
    tasks = root / "tasks"

    def wrong_reason(grading: dict[str, Any]) -> None:
        (cancel,) = [
            a for a in grading["state_checks"]["hash"]["golden_actions"] if a["name"] == "cancel_order"
        ]
        cancel["kwargs"]["reason"] = "other"

    _edit(tasks / WRONG_ARGUMENT / "grading.yaml", wrong_reason)

    def undeclare(task: dict[str, Any]) -> None:
        fields = task["initial_state"]["unstable_fields"]
        task["initial_state"]["unstable_fields"] = [f for f in fields if f["field_name"] != "created_at"]

    _edit(tasks / UNDECLARED_TIMESTAMP / "task.yaml", undeclare)

    (root / "tools" / "broken.py").write_text(BROKEN_TOOLS)
    _edit(
        tasks / BAD_SCHEMA / "task.yaml",
        lambda task: task.__setitem__(
            "tools", {"agent": {"python": "tools.broken"}, "user": {"enabled": []}}
        ),
    )

    def rename(grading: dict[str, Any]) -> None:
        for action in grading["state_checks"]["hash"]["golden_actions"]:
            if action["name"] == "get_product_details":
                action["name"] = "get_product_detailz"

    _edit(tasks / MISSING_TOOL / "grading.yaml", rename)
    _edit(tasks / NO_GOLDEN_RESPONSE / "grading.yaml", lambda grading: grading.pop("golden_response"))


@pytest.mark.parametrize(
    "on_ray",
    [pytest.param(False, id="here"), pytest.param(True, id="on-ray", marks=pytest.mark.ray)],
)
def test_each_breakage_fails_its_item_naming_the_problem(
    run_pytest: RunPytest, pack_copy: Callable[[str], Path], on_ray: bool
) -> None:
    """The same items fail with the same text whether the checks run here or on a local Ray cluster."""
    root = pack_copy("retail")
    _break(root)
    ray = ["--tolokaforge-ray", "local"] if on_ray else []
    run = run_pytest(f"--tolokaforge-pack={root}", "-k", " or ".join(TASKS), *ray, timeout=420)
    assert bool(re.search(r"per-task checks ran on \d+ Ray workers", run.output)) == on_ray, run.output
    assert run.returncode == 1, run.output
    item = "tolokaforge[retail]::{}::{}".format
    assert set(run.outcomes) == {item(task, check) for task in TASKS for check in TASK_CHECKS}
    # The schema breaks every check of its task (the runner refuses to register it); each other
    # breakage fails only the checks it concerns, and the other tasks pass everything. An undeclared
    # timestamp fails the golden check too when the trial and its golden replay straddle a second
    # (the clock decides, so that one item may go either way); determinism always catches it.
    assert run.failed() - {item(UNDECLARED_TIMESTAMP, "golden")} == {
        *(item(BAD_SCHEMA, check) for check in TASK_CHECKS),
        item(MISSING_TOOL, "resolve"),
        item(MISSING_TOOL, "golden"),
        item(WRONG_ARGUMENT, "golden"),
        item(UNDECLARED_TIMESTAMP, "determinism"),
    }

    load = run.section(item(BAD_SCHEMA, "load"))
    assert "agent tool 'lookup_broken_schema': parameters are not a valid JSON Schema" in load
    assert "'strin' is not valid" in load and "(at properties/order_id/type)" in load
    assert "lookup_broken_schema" in run.section(item(BAD_SCHEMA, "golden"))

    resolve = run.section(item(MISSING_TOOL, "resolve"))
    assert "golden_actions[1] 'get_product_detailz' resolves to no registered agent tool" in resolve
    assert "registered agent tools: " in resolve and "get_product_details" in resolve
    assert "CheckFailure" not in resolve  # the check's own account, not a traceback through the plugin
    assert "get_product_detailz" in run.section(item(MISSING_TOOL, "golden"))

    golden = run.section(item(WRONG_ARGUMENT, "golden"))
    assert "golden path scored transcript_rules 0" in golden
    assert "required action 'cancel'" in golden and "'reason': 'found_better_price'" in golden
    assert 'cancel_order({"order_id": "O-50035", "reason": "other"}): SUCCESS' in golden

    determinism = run.section(item(UNDECLARED_TIMESTAMP, "determinism"))
    assert "fields not declared unstable differ: tickets.created_at" in determinism
    undeclared, declared = determinism.split("differing fields declared unstable (expected):")
    assert "tickets[#40].created_at: " in undeclared and "ticket_id" not in undeclared
    assert "tickets[#40].ticket_id: " in declared

    assert "tasks checked: 6, passed: 2, failed: 4" in run.output
    assert (
        f"failed tolokaforge[retail]::{UNDECLARED_TIMESTAMP} determinism: two golden replays end with "
        "different stable hashes; fields not declared unstable differ: tickets.created_at" in run.output
    )
    assert (
        f"note tolokaforge[retail]::{NO_GOLDEN_RESPONSE} golden: not judged (the task has no "
        "golden_response): disallow_regex, communicate_info" in run.output
    )


def test_the_short_summary_gives_a_failed_checks_whole_reason_at_80_columns(
    run_pytest: RunPytest, pack_copy: Callable[[str], Path], tmp_path: Path
) -> None:
    root = pack_copy("retail")
    _break(root)
    junit = tmp_path / "junit.xml"
    run = run_pytest(
        f"--tolokaforge-pack={root}",
        "--tolokaforge-checks=load,resolve",
        "-k",
        MISSING_TOOL,
        f"--junit-xml={junit}",
        columns=80,
    )
    assert run.returncode == 1, run.output
    item = f"tolokaforge[retail]::{MISSING_TOOL}::resolve"
    found = re.search(rf"^failed tolokaforge\[retail\]::{MISSING_TOOL} resolve: (.+)$", run.output, re.M)
    assert found is not None, run.output
    reason = found.group(1)
    assert len(f"FAILED {item} - {reason}") > 80  # pytest would cut it to the terminal's width
    assert f"\nFAILED {item} - {reason}\n" in run.output
    assert f"\nPASSED tolokaforge[retail]::{MISSING_TOOL}::load\n" in run.output
    assert "registered agent tools: " in run.section(item)  # the details stay in the failure section
    (failure,) = ElementTree.parse(junit).getroot().iter("failure")
    assert failure.get("message") == reason and "registered agent tools: " in (failure.text or "")
