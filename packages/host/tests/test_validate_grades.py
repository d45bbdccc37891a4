"""``tolokaforge validate`` refuses what would break grading, naming the file and the dotted key.

Each test plants one mistake in a copy of the retail example pack and runs the real CLI in a
subprocess: a golden action the tool's schema refuses, a JSONPath that does not parse or reads a
table the initial state lacks, a required action no offered tool can meet, a bad pack.yaml default.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

TASK = "write_cancel_processing_order"


def _edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _validate(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from tolokaforge.host.cli import main; main()",
            "validate",
            "--pack",
            str(root),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _grading(root: Path) -> Path:
    return root / "tasks" / TASK / "grading.yaml"


def _golden(grading: dict[str, Any], index: int) -> dict[str, Any]:
    return grading["state_checks"]["hash"]["golden_actions"][index]


def test_the_unedited_pack_validates(pack_copy: Callable[[str], Path]) -> None:
    done = _validate(pack_copy("retail"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "retail: 29 tasks" in done.stdout


def test_a_golden_action_missing_a_required_argument_is_refused(pack_copy: Callable[[str], Path]) -> None:
    root = pack_copy("retail")
    _edit(_grading(root), lambda g: _golden(g, 2)["kwargs"].pop("reason"))
    done = _validate(root)
    assert done.returncode == 1, done.stdout
    assert (
        f"retail/tasks/{TASK}/grading.yaml: state_checks.hash.golden_actions[2].kwargs: "
        "the schema of 'cancel_order' refuses these arguments: 'reason' is a required property"
    ) in done.stdout
    assert "1 problem(s)" in done.stderr


def test_a_golden_argument_of_the_wrong_type_is_refused_naming_it(pack_copy: Callable[[str], Path]) -> None:
    root = pack_copy("retail")
    _edit(_grading(root), lambda g: _golden(g, 1)["kwargs"].__setitem__("order_id", 50035))
    done = _validate(root)
    assert done.returncode == 1, done.stdout
    assert (
        f"{TASK}/grading.yaml: state_checks.hash.golden_actions[1].kwargs.order_id: "
        "the schema of 'get_order_details' refuses these arguments: 50035 is not of type 'string'"
    ) in done.stdout


def test_a_jsonpath_that_does_not_parse_is_refused(pack_copy: Callable[[str], Path]) -> None:
    root = pack_copy("retail")
    _edit(
        _grading(root),
        lambda g: g["state_checks"]["jsonpaths"][0].__setitem__("path", "$.db.orders['O-50035'.status"),
    )
    done = _validate(root)
    assert done.returncode == 1, done.stdout
    assert f"{TASK}/grading.yaml: state_checks.jsonpaths[0].path: " in done.stdout
    assert "is not a JSONPath the grader can parse" in done.stdout


def test_a_jsonpath_into_a_table_the_state_lacks_is_refused(pack_copy: Callable[[str], Path]) -> None:
    root = pack_copy("retail")
    _edit(
        _grading(root),
        lambda g: g["state_checks"]["jsonpaths"][2].__setitem__("path", "$.db.prodcts['P-1034'].stock"),
    )
    done = _validate(root)
    assert done.returncode == 1, done.stdout
    line = next(line for line in done.stdout.splitlines() if "jsonpaths[2].path" in line)
    assert line.startswith(f"retail/tasks/{TASK}/grading.yaml: state_checks.jsonpaths[2].path: ")
    assert "reads table 'prodcts', which the task's initial state does not have" in line
    assert "products" in line  # the tables it does have are listed


def test_a_required_action_naming_no_offered_tool_is_refused(pack_copy: Callable[[str], Path]) -> None:
    root = pack_copy("retail")
    _edit(
        _grading(root),
        lambda g: g["transcript_rules"]["required_actions"][0].__setitem__("name", "cancel_the_order"),
    )
    done = _validate(root)
    assert done.returncode == 1, done.stdout
    assert (
        f"{TASK}/grading.yaml: transcript_rules.required_actions[0].name: 'cancel_the_order' is not a "
        "tool the task offers the agent"
    ) in done.stdout


def test_a_required_user_action_needs_a_user_tool(pack_copy: Callable[[str], Path]) -> None:
    root = pack_copy("dual_control")
    grading = root / "tasks" / "dc_roaming_abroad" / "grading.yaml"
    _edit(grading, lambda g: g["transcript_rules"]["required_actions"][0].__setitem__("requestor", "user"))
    done = _validate(root)
    assert done.returncode == 1, done.stdout
    assert (
        "dc_roaming_abroad/grading.yaml: transcript_rules.required_actions[0].name: 'enable_roaming' is not "
        "a tool the task offers the user (offered: check_status_bar, toggle_data_roaming, "
    ) in done.stdout


def test_a_bad_value_from_pack_defaults_is_reported_against_pack_yaml(
    pack_copy: Callable[[str], Path],
) -> None:
    root = pack_copy("retail")
    _edit(root / "pack.yaml", lambda p: p["defaults"]["tools"]["agent"].__setitem__("enabled", ["no_such"]))
    done = _validate(root)
    assert done.returncode == 1, done.stdout
    problems = [line for line in done.stdout.splitlines() if line.strip()]
    assert problems and all(
        line.startswith("retail/pack.yaml: defaults.tools.agent.enabled") for line in problems
    )
    assert "task.yaml" not in done.stdout
