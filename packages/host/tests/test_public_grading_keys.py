"""The loader on the public project's grading keys and state shapes: what each becomes, and what is refused.

The proof pack ``tests/compat/packs/public_grading`` is loaded as written, then copies of it are edited
one key at a time.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tolokaforge.core.value_tables import VALUE_KEY
from tolokaforge.host.errors import PackLoadError
from tolokaforge.host.packs import load_pack

PACK = Path(__file__).parents[3] / "tests" / "compat" / "packs" / "public_grading"


@pytest.fixture
def pack(tmp_path: Path) -> Path:
    target = tmp_path / "public_grading"
    shutil.copytree(PACK, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def _edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _problems(root: Path) -> dict[tuple[str, str], str]:
    with pytest.raises(PackLoadError) as caught:
        load_pack(root)
    return {(p.file.name, p.key): p.message for p in caught.value.problems}


def test_plain_values_are_stored_as_value_tables_beside_tables() -> None:
    task = load_pack(PACK).task("tally_counter").task
    assert task.initial_state.tables == {
        "counter": {VALUE_KEY: {"value": 0}},
        "label": {VALUE_KEY: {"value": "door count"}},
        "notes": {VALUE_KEY: {"value": ["opened"]}},
        "operations": [],
    }


def test_rootless_paths_and_short_operators_become_ours() -> None:
    state = load_pack(PACK).task("tally_counter").task.grading.state_checks
    assert state is not None
    assert [(c.path, c.operator, c.expected, c.description) for c in state.jsonpaths] == [
        ("$.db.counter", "greater_or_equal", 5, "the tally reached five"),
        ("$.db.counter", "less_than", 6, "and no more than five"),
        ("$.db.notes", "contains", "added 5", "the note was kept"),
        ("$.db.label", "not_equals", "", "the label is kept"),
        ("$.db.operations[0].amount", "equals", 5, "the operation is logged"),
    ]


def test_a_path_without_an_operator_asks_that_it_matches(pack: Path) -> None:
    _edit(
        pack / "tasks/tally_counter/grading.yaml",
        lambda d: d["state_checks"]["jsonpaths"].append({"path": "$.operations[0].op"}),
    )
    state = load_pack(pack).task("tally_counter").task.grading.state_checks
    assert state is not None
    assert (state.jsonpaths[-1].path, state.jsonpaths[-1].operator, state.jsonpaths[-1].expected) == (
        "$.db.operations[0].op",
        "exists",
        True,
    )


def test_files_by_path_become_one_file_check_each() -> None:
    state = load_pack(PACK).task("save_result").task.grading.state_checks
    assert state is not None and state.jsonpaths == []
    assert [(f.path_glob, f.operator) for f in state.files] == [
        ("result.txt", "contains"),
        ("scratch.txt", "exists"),
    ]
    assert (state.files[0].contains, state.files[1].exists) == ("391", False)


def test_public_env_assertions_become_the_env_assertions_component_with_the_state_weight() -> None:
    task = load_pack(PACK).task("lamp_check").task
    grading = task.grading
    assert grading.weights == {"env_assertions": 1.0}
    assert grading.env_assertions is not None
    [assertion] = grading.env_assertions.assertions
    assert (assertion.tool_name, assertion.executor, assertion.expected, assertion.message) == (
        "assert_lamp_on",
        "agent",
        True,
        "the hall lamp is on",
    )
    assert grading.state_checks is not None and not grading.state_checks.hash_enabled
    [action] = task.initial_state.initialization_actions
    assert (action.tool_name, action.env_type, action.arguments) == (
        "install_lamp",
        "assistant",
        {"lamp_id": "L-1", "room": "hall"},
    )


def test_env_assertions_may_name_the_tool_as_the_public_runner_reads_it(pack: Path) -> None:
    def lamp(d: dict[str, Any]) -> None:
        written = d["state_checks"]["env_assertions"][0]
        written["tool_name"] = written.pop("func_name")
        del written["env_type"]

    _edit(pack / "tasks/lamp_check/grading.yaml", lamp)
    grading = load_pack(pack).task("lamp_check").task.grading
    assert grading.env_assertions is not None
    [assertion] = grading.env_assertions.assertions
    assert (assertion.tool_name, assertion.executor) == ("assert_lamp_on", "user")


def test_the_legacy_judge_is_one_graded_criterion() -> None:
    judge = load_pack(PACK).task("judged_reply").task.grading.llm_judge
    assert judge is not None
    [criterion] = judge.rubric.criteria
    assert (criterion.id, criterion.kind, criterion.required) == ("rubric", "graded", False)
    assert criterion.description.startswith("Score 1.0 when the agent tells the customer")


def test_device_overrides_set_keys_of_the_device_value(pack: Path) -> None:
    def task(d: dict[str, Any]) -> None:
        d["initial_state"]["json_db"]["device"] = {"airplane_mode": True, "battery": 80}
        d["initial_state"]["device_overrides"] = {"airplane_mode": False}

    _edit(pack / "tasks/lamp_check/task.yaml", task)
    tables = load_pack(pack).task("lamp_check").task.initial_state.tables
    assert tables["device"] == {VALUE_KEY: {"value": {"airplane_mode": False, "battery": 80}}}


def test_public_grading_keys_without_a_meaning_here_are_refused_by_path(pack: Path) -> None:
    def tally(d: dict[str, Any]) -> None:
        d["state_checks"]["db_hash_check"] = True
        d["state_checks"]["jsonpaths"][0]["op"] = "between"
        d["state_checks"]["jsonpaths"][1]["path"] = "$.nowhere"
        d["state_checks"]["files"] = [
            {"path": "a.txt", "must_exist": False, "must_contain": "x"},
            {"path": "b.txt", "contains_ci": "x"},
            {"path": "c.txt"},
        ]
        d["state_checks"]["jsonpaths"][2]["must_exist"] = True

    def lamp(d: dict[str, Any]) -> None:
        d["state_checks"]["jsonpaths"] = [{"path": "$.switched", "op": "gte", "expected": 1}]
        d["state_checks"]["env_assertions"].append({"func_name": "a", "tool_name": "b"})

    def judge(d: dict[str, Any]) -> None:
        d["llm_judge"]["output_schema"]["properties"]["tone"] = {"type": "string"}
        d["llm_judge"]["tool_packs"] = ["browser"]

    def lamp_task(d: dict[str, Any]) -> None:
        d["initial_state"]["initialization_actions"][0]["tool_name"] = "install_lamp"
        d["initial_state"]["device_overrides"] = {"airplane_mode": False}
        d["initial_state"]["system_prompt"] = "wiki.md"
        d["initial_state"]["json_db"]["odd"] = {VALUE_KEY: {"value": 1}}

    _edit(pack / "tasks/tally_counter/grading.yaml", tally)
    _edit(pack / "tasks/lamp_check/grading.yaml", lamp)
    _edit(pack / "tasks/judged_reply/grading.yaml", judge)
    _edit(pack / "tasks/lamp_check/task.yaml", lamp_task)
    problems = _problems(pack)
    assert "compares with a literal digest" in problems[("grading.yaml", "state_checks.db_hash_check")]
    assert "unknown operator 'between'" in problems[("grading.yaml", "state_checks.jsonpaths[0].op")]
    assert (
        "'$.nowhere' must address the trial's state"
        in problems[("grading.yaml", "state_checks.jsonpaths[1].path")]
    )
    assert (
        "belongs to a files[] check by path"
        in problems[("grading.yaml", "state_checks.jsonpaths[2].must_exist")]
    )
    assert "contradicts must_contain" in problems[("grading.yaml", "state_checks.files[0].must_exist")]
    assert "not contains_ci" in problems[("grading.yaml", "state_checks.files[1]")]
    assert "needs must_exist or must_contain" in problems[("grading.yaml", "state_checks.files[2]")]
    assert (
        "cannot share state_checks with jsonpaths"
        in problems[("grading.yaml", "state_checks.env_assertions")]
    )
    assert "asks for tone, which nothing grades" in problems[("grading.yaml", "llm_judge.output_schema")]
    assert "the judge's tools are fixed" in problems[("grading.yaml", "llm_judge.tool_packs")]
    assert "name the tool once" in problems[("task.yaml", "initial_state.initialization_actions[0]")]
    assert "needs a top-level 'device' object" in problems[("task.yaml", "initial_state.device_overrides")]
    assert "give the task's system_prompt" in problems[("task.yaml", "initial_state.system_prompt")]
    assert "would read as a plain value" in problems[("task.yaml", "initial_state.json_db.odd")]


def test_a_judge_of_our_shape_is_still_validated_under_its_key(pack: Path) -> None:
    _edit(
        pack / "tasks/judged_reply/grading.yaml",
        lambda d: d.update(llm_judge={"rubric": {"criteria": [{"id": "reasons", "description": "x"}]}}),
    )
    problems = _problems(pack)
    assert (
        "collides with the judge's report keys" in problems[("grading.yaml", "llm_judge.rubric.criteria.0")]
    )
