"""Sanity test of the example packs' content, independent of the runner and host.

For every task of every pack under ``examples/packs``: the YAML loads and uses only known keys, the
tools' schemas are valid JSON Schemas, the golden path replays through the pack's own tools (arguments
validated against those schemas), the JSONPath assertions hold on the golden state, the golden response
satisfies the text rules, refusals and lookups change nothing, declared unstable fields are exactly
where the non-determinism is, and custom checks pass on the golden outcome.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import pytest
import yaml
from jsonpath_ng.parser import parse as jsonpath_parse  # pyright: ignore[reportMissingTypeStubs]
from jsonschema import Draft202012Validator

from tolokaforge.core.stable_hash import full_hash, stable_hash

PACKS_DIR = Path(__file__).resolve().parents[2] / "examples" / "packs"

TASK_KEYS = {
    "task_id", "name", "category", "description", "max_turns", "initial_user_message", "system_prompt",
    "initial_state", "tools", "user_simulator", "policies", "grading",
}  # fmt: skip
GRADING_KEYS = {
    "combine",
    "state_checks",
    "transcript_rules",
    "golden_response",
    "custom_checks",
    "llm_judge",
    "trace_checks",
}
TRANSCRIPT_KEYS = {"max_turns", "must_contain", "disallow_regex", "required_actions", "communicate_info"}
JSONPATH_OPERATORS = {"equals", "equals_ci", "contains", "contains_ci", "exists"}
COMPONENTS = {"state_checks", "transcript_rules", "custom_checks", "trace_checks", "llm_judge"}
UNCHANGING_CATEGORIES = {"lookup", "refusal"}

Tables = dict[str, Any]
Json = dict[str, Any]


@dataclass(frozen=True)
class Pack:
    root: Path
    config: Json
    tools: dict[str, Any]
    """Tool name -> tool class, from the pack's ``tools`` package."""


@dataclass(frozen=True)
class Task:
    pack: Pack
    folder: Path
    spec: Json
    """task.yaml with the pack's defaults applied."""
    grading: Json

    @property
    def task_id(self) -> str:
        return str(self.spec["task_id"])

    def resolve(self, relative: str) -> Path:
        """A task-relative path: the task's folder first, then the pack root."""
        for base in (self.folder, self.pack.root):
            candidate = base / relative
            if candidate.exists():
                return candidate
        raise FileNotFoundError(f"{relative} (from {self.folder})")


def _load_yaml(path: Path) -> Json:
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict), f"{path} is not a mapping"
    return cast(Json, loaded)


def _import_by_path(name: str, path: Path) -> ModuleType:
    """Import a module or package from a file path under a unique module name."""
    is_package = path.is_dir()
    location = path / "__init__.py" if is_package else path
    spec = importlib.util.spec_from_file_location(
        name, location, submodule_search_locations=[str(path)] if is_package else None
    )
    assert spec is not None and spec.loader is not None, f"cannot import {path}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _tool_name(tool: Any) -> str:
    return str(tool.get_info()["function"]["name"])


def _load_pack(root: Path) -> Pack:
    config = _load_yaml(root / "pack.yaml")
    module = _import_by_path(f"example_pack_{root.name}_tools", root / "tools")
    tools_list = cast(list[Any], module.TOOLS)
    return Pack(root=root, config=config, tools={_tool_name(tool): tool for tool in tools_list})


def _pack_roots() -> list[Path]:
    """Packs whose tools are python modules: their golden paths can be replayed here without a runner.

    (A pack serving its tools from an MCP server, like mcp_notes, is checked end to end by the host's
    tests instead; so is a web pack, whose tools/ holds its site's routes and whose golden paths are
    browser actions: test_web_shop_pack.py.)"""
    return sorted(
        path.parent
        for path in PACKS_DIR.glob("*/pack.yaml")
        if (path.parent / "tools").is_dir() and not (path.parent / "tools" / "routes.py").is_file()
    )


PACKS = {root.name: _load_pack(root) for root in _pack_roots()}


def _load_tasks() -> list[Task]:
    tasks: list[Task] = []
    for pack in PACKS.values():
        defaults = cast(Json, pack.config.get("defaults") or {})
        for task_file in sorted((pack.root / "tasks").rglob("task.yaml")):
            raw = _load_yaml(task_file)
            spec = {**defaults, **raw}
            grading_ref = spec["grading"]
            grading = (
                _load_yaml(task_file.parent / grading_ref)
                if isinstance(grading_ref, str)
                else cast(Json, grading_ref)
            )
            tasks.append(Task(pack=pack, folder=task_file.parent, spec=spec, grading=grading))
    return tasks


TASKS = _load_tasks()


def cases_where(predicate: Callable[[Task], bool]) -> pytest.MarkDecorator:
    """Parametrize over the tasks a check applies to (no skips: a check that does not apply is absent)."""
    chosen = [task for task in TASKS if predicate(task)]
    assert chosen, "a content check must apply to at least one task"
    return pytest.mark.parametrize("task", chosen, ids=[f"{t.pack.root.name}/{t.task_id}" for t in chosen])


task_cases = cases_where(lambda task: True)


# ---------------------------------------------------------------------------- replay helpers


def _initial_state(task: Task) -> Tables:
    json_db = task.spec["initial_state"]["json_db"]
    return cast(Tables, json.loads(task.resolve(json_db).read_text(encoding="utf-8")))


def _enabled(task: Task, side: str) -> dict[str, Any]:
    section = cast(Json, task.spec.get("tools", {}).get(side) or {})
    names = cast(list[str] | None, section.get("enabled"))
    if side == "user" and names is None:
        return {}
    if names is None:
        return dict(task.pack.tools)
    missing = [name for name in names if name not in task.pack.tools]
    assert not missing, f"{task.task_id}: {side} tools not in the pack: {missing}"
    return {name: task.pack.tools[name] for name in names}


def _call(tool: Any, state: Tables, arguments: Json) -> str:
    parameters = tool.get_info()["function"]["parameters"]
    validator: Any = Draft202012Validator(parameters)
    validator.validate(arguments)
    output = tool.invoke(state, **arguments)
    assert isinstance(output, str)
    return output


def _golden_actions(task: Task) -> list[Json]:
    hash_block = cast(Json, task.grading.get("state_checks", {}).get("hash") or {})
    return cast(list[Json], hash_block.get("golden_actions") or [])


def _replay(task: Task, drop: int | None = None) -> tuple[Tables, list[tuple[str, Json, str]]]:
    """Run initialization actions, then the golden path (less action ``drop``); state and calls made."""
    state = copy.deepcopy(_initial_state(task))
    initialization = cast(list[Json], task.spec["initial_state"].get("initialization_actions") or [])
    for action in initialization:
        side = "user" if action["env_type"] == "user" else "agent"
        _call(_enabled(task, side)[action["tool_name"]], state, cast(Json, action["arguments"]))
    agent_tools = _enabled(task, "agent")
    calls: list[tuple[str, Json, str]] = []
    for index, action in enumerate(_golden_actions(task)):
        if index == drop:
            continue
        name, kwargs = action["name"], cast(Json, action["kwargs"])
        assert name in agent_tools, f"golden action {name} is not an enabled agent tool"
        calls.append((name, kwargs, _call(agent_tools[name], state, kwargs)))
    return state, calls


def _unstable(task: Task) -> list[tuple[str, str]]:
    fields = cast(list[Json], task.spec["initial_state"].get("unstable_fields") or [])
    return [(f["table_name"], f["field_name"]) for f in fields]


def _records(table: Any) -> Iterator[tuple[str, Json]]:
    if isinstance(table, dict):
        for key, record in cast(Json, table).items():
            yield key, cast(Json, record)
    else:
        for index, record in enumerate(cast(list[Json], table)):
            yield str(index), record


def _jsonpath_values(path: str, document: Json) -> list[Any]:
    expression: Any = jsonpath_parse(path)
    return [match.value for match in expression.find(document)]


def _assertion_holds(assertion: Json, document: Json) -> tuple[bool, str]:
    operators = JSONPATH_OPERATORS & assertion.keys()
    assert len(operators) == 1, f"one operator per assertion: {assertion}"
    operator = operators.pop()
    expected = assertion[operator]
    values = _jsonpath_values(assertion["path"], document)
    if operator == "exists":
        return bool(values) == bool(expected), f"{len(values)} match(es)"
    if len(values) != 1:
        return False, f"{len(values)} matches for {assertion['path']}"
    value = values[0]
    if operator == "equals":
        if isinstance(value, bool) or isinstance(expected, bool):
            return value is expected, repr(value)
        return value == expected, repr(value)
    if operator == "equals_ci":
        return str(value).casefold() == str(expected).casefold(), repr(value)
    if isinstance(value, list):
        items = cast(list[Any], value)
        if operator == "contains":
            return expected in items, repr(items)
        return str(expected).casefold() in [str(item).casefold() for item in items], repr(items)
    if operator == "contains":
        return str(expected) in str(value), repr(value)
    return str(expected).casefold() in str(value).casefold(), repr(value)


def _wire_transcript(task: Task, calls: list[tuple[str, Json, str]]) -> list[Json]:
    """The golden trial as GradeTrial's wire messages (without the leading system message)."""
    messages: list[Json] = [{"role": "user", "content": task.spec["initial_user_message"]}]
    for index, (name, kwargs, output) in enumerate(calls):
        call_id = f"call_{index}"
        messages.append({
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": call_id, "function": {"name": name, "arguments": json.dumps(kwargs)}}],
        })  # fmt: skip
        messages.append({"role": "tool", "content": output, "tool_call_id": call_id})
    for turn in cast(list[Json], task.spec["user_simulator"].get("scripted_flow") or []):
        messages.append({"role": "user", "content": turn["user"]})
    messages.append({"role": "assistant", "content": task.grading.get("golden_response", "")})
    return messages


def _text_rules_pass(rules: Json, text: str) -> list[str]:
    """The failures of the text rules against ``text``."""
    failures: list[str] = []
    for info in cast(list[Json], rules.get("communicate_info") or []):
        if info.get("required", True) and str(info["info"]).lower() not in text.lower():
            failures.append(f"communicate_info {info['info']!r}")
    must_contain = cast(list[str], rules.get("must_contain") or [])
    disallowed = cast(list[str], rules.get("disallow_regex") or [])
    failures += [f"must_contain {needle!r}" for needle in must_contain if needle not in text]
    failures += [f"disallow_regex {pattern!r}" for pattern in disallowed if re.search(pattern, text)]
    return failures


def _required_actions_met(rules: Json, calls: list[tuple[str, Json, str]]) -> list[str]:
    missing: list[str] = []
    for required in cast(list[Json], rules.get("required_actions") or []):
        compare = cast(list[str], required.get("compare_args") or [])
        matched = any(
            name == required["name"]
            and all(kwargs.get(arg) == required["arguments"].get(arg) for arg in compare)
            for name, kwargs, _ in calls
        )
        if not matched:
            missing.append(str(required["action_id"]))
    return missing


# ---------------------------------------------------------------------------- pack-level tests


@pytest.mark.parametrize("pack", list(PACKS.values()), ids=list(PACKS))
def test_pack_tools_have_valid_schemas(pack: Pack) -> None:
    module = sys.modules[f"example_pack_{pack.root.name}_tools"]
    tools_list = cast(list[Any], module.TOOLS)
    assert len(pack.tools) == len(tools_list), "tool names must be unique"
    for tool in tools_list:
        info = cast(Json, tool.get_info())
        assert info["type"] == "function"
        function = cast(Json, info["function"])
        assert set(function) == {"name", "description", "parameters"}
        assert re.fullmatch(r"[a-z][a-z0-9_]*", function["name"])
        assert len(function["description"]) > 20
        parameters = cast(Json, function["parameters"])
        Draft202012Validator.check_schema(parameters)
        assert parameters["type"] == "object" and parameters["additionalProperties"] is False
        assert set(parameters["required"]) <= set(parameters["properties"])
        assert tool.category in {"read", "write", "compute"}


def test_retail_pack_has_the_promised_breadth() -> None:
    retail = PACKS["retail"]
    tasks = [t for t in TASKS if t.pack is retail]
    assert len(retail.tools) >= 12 and len(tasks) >= 20
    state = _initial_state(tasks[0])
    assert len(state) >= 5 and sum(len(table) for table in state.values()) >= 300
    assert {type(table) for table in state.values()} == {dict, list}
    methods = {t.grading["combine"]["method"] for t in tasks}
    assert methods == {"weighted", "all", "any"}


def test_retail_data_is_what_the_generator_makes() -> None:
    generator = _import_by_path("example_pack_retail_generate", PACKS["retail"].root / "data" / "generate.py")
    render = cast(Callable[[Json], str], generator.render)
    build_state = cast(Callable[[], Json], generator.build_state)
    committed = (PACKS["retail"].root / "data" / "initial_state.json").read_text(encoding="utf-8")
    assert render(build_state()) == committed, "run data/generate.py and commit its output"


@pytest.mark.parametrize("pack", list(PACKS.values()), ids=list(PACKS))
def test_task_ids_are_unique_and_match_folders(pack: Pack) -> None:
    ids = [t.task_id for t in TASKS if t.pack is pack]
    assert len(ids) == len(set(ids))
    assert all(t.folder.name == t.task_id for t in TASKS if t.pack is pack)


# ---------------------------------------------------------------------------- task-level tests


@task_cases
def test_task_uses_only_known_keys(task: Task) -> None:
    assert set(task.spec) <= TASK_KEYS, set(task.spec) - TASK_KEYS
    assert set(task.grading) <= GRADING_KEYS, set(task.grading) - GRADING_KEYS
    assert set(task.grading.get("transcript_rules") or {}) <= TRANSCRIPT_KEYS
    simulator = cast(Json, task.spec["user_simulator"])
    assert simulator["mode"] == "scripted" and simulator["scripted_flow"]
    assert task.spec["initial_user_message"]
    task.resolve(task.spec["system_prompt"])


@task_cases
def test_combine_weights_every_scored_component(task: Task) -> None:
    combine = cast(Json, task.grading["combine"])
    assert combine["method"] in {"weighted", "all", "any"}
    assert 0 < combine["pass_threshold"] <= 1
    configured = {name for name in COMPONENTS if task.grading.get(name)}
    assert set(combine["weights"]) == configured
    state_checks = cast(Json, task.grading["state_checks"])
    hash_on = bool(state_checks.get("hash", {}).get("enabled"))
    both = hash_on and bool(state_checks.get("jsonpaths"))
    assert ("weight" in state_checks.get("hash", {})) == both, (
        "hash.weight exactly when hash and jsonpaths blend"
    )
    assert _golden_actions(task), "every task has golden actions"


@task_cases
def test_golden_path_replays_and_satisfies_state_checks(task: Task) -> None:
    state, _ = _replay(task)
    document = {"db": state}
    for assertion in cast(list[Json], task.grading["state_checks"].get("jsonpaths") or []):
        assert assertion["path"].startswith("$.db.")
        holds, detail = _assertion_holds(assertion, document)
        assert holds, f"{assertion} -> {detail}"


@task_cases
def test_golden_run_scores_every_component(task: Task) -> None:
    """Every component a golden run produces is 1.0 (``any``: at least one)."""
    state, calls = _replay(task)
    rules = cast(Json, task.grading.get("transcript_rules") or {})
    response = str(task.grading.get("golden_response", ""))
    text_failures = _text_rules_pass(rules, response)
    assert not text_failures, f"golden_response fails {text_failures}"
    missing = _required_actions_met(rules, calls)
    state_ok = all(
        _assertion_holds(a, {"db": state})[0]
        for a in cast(list[Json], task.grading["state_checks"].get("jsonpaths") or [])
    )
    if task.grading["combine"]["method"] == "any":
        assert state_ok or not missing
    else:
        assert not missing, f"required actions not in the golden path: {missing}"


@cases_where(lambda task: task.spec["category"] in UNCHANGING_CATEGORIES)
def test_lookups_and_refusals_change_nothing(task: Task) -> None:
    state, _ = _replay(task)
    assert full_hash(state) == full_hash(_initial_state(task))


@cases_where(lambda task: bool(_unstable(task)))
def test_declared_unstable_fields_are_on_created_records(task: Task) -> None:
    unstable = _unstable(task)
    initial = _initial_state(task)
    state, _ = _replay(task)
    for table_name, field_name in unstable:
        before = dict(_records(initial[table_name]))
        created = [record for key, record in _records(state[table_name]) if key not in before]
        assert created, f"the golden path creates no {table_name} record"
        assert all(field_name in record for record in created), f"{table_name}.{field_name} missing"


@task_cases
def test_nondeterminism_is_confined_to_unstable_fields(task: Task) -> None:
    first, _ = _replay(task)
    second, _ = _replay(task)
    unstable = _unstable(task)
    assert stable_hash(first, unstable) == stable_hash(second, unstable)
    if unstable:
        assert full_hash(first) != full_hash(second), "declared unstable fields never vary"
    else:
        assert full_hash(first) == full_hash(second)


@cases_where(lambda task: bool(cast(Json, task.grading.get("custom_checks") or {}).get("enabled")))
def test_custom_checks_pass_on_the_golden_outcome(task: Task) -> None:
    config = cast(Json, task.grading["custom_checks"])
    assert set(config) == {"enabled", "file", "timeout_seconds", "fail_on_error"}
    module = _import_by_path(f"example_pack_checks_{task.task_id}", task.resolve(config["file"]))
    checks = {
        name: value for name, value in vars(module).items() if name.startswith("check_") and callable(value)
    }
    assert checks, "a checks file declares at least one check_<name>"
    state, calls = _replay(task)
    transcript = _wire_transcript(task, calls)
    for name, check in checks.items():
        result = cast(Json, check(copy.deepcopy(state), transcript))
        assert set(result) == {"status", "score", "message"}, name
        assert result["status"] == "passed" and result["score"] == 1.0, f"{name}: {result}"


def _writes(task: Task) -> list[int]:
    return [i for i, a in enumerate(_golden_actions(task)) if task.pack.tools[a["name"]].category == "write"]


@cases_where(lambda task: bool(_writes(task)))
def test_dropping_the_last_write_is_caught(task: Task) -> None:
    """A wrong trajectory — the golden path missing its last write — fails some check of the task."""
    writes = _writes(task)
    golden_state, golden_calls = _replay(task)
    wrong_state, wrong_calls = _replay(task, drop=writes[-1])
    unstable = _unstable(task)
    state_checks = cast(Json, task.grading["state_checks"])
    hash_caught = bool(state_checks["hash"].get("enabled")) and (
        stable_hash(wrong_state, unstable) != stable_hash(golden_state, unstable)
    )
    jsonpath_caught = not all(
        _assertion_holds(a, {"db": wrong_state})[0]
        for a in cast(list[Json], state_checks.get("jsonpaths") or [])
    )
    rules = cast(Json, task.grading.get("transcript_rules") or {})
    actions_caught = bool(_required_actions_met(rules, wrong_calls)) and not _required_actions_met(
        rules, golden_calls
    )
    assert hash_caught or jsonpath_caught or actions_caught
