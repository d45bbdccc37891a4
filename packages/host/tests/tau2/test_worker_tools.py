"""τ²'s tools run here answer byte for byte as τ²'s own environment does, and leave the same DB.

Every call goes through the shipped tool code (worker_tools) over the runner's copy-on-write views,
exactly as a tool worker makes it, beside the same call on a live τ² environment; after each call the
trial's tables must equal τ²'s agent and user DB. Calls: each task's initialization actions and golden
actions, then the same with planted mistakes (an argument changed, an argument that does not exist,
a tool that does not exist).
"""

from __future__ import annotations

import copy
import importlib
import random
from typing import Any, cast

import orjson
import pytest
from pydantic import BaseModel

from tolokaforge.host.packs.tau2 import worker_tools
from tolokaforge.runner.state.cow import CowTables, apply_changes
from tolokaforge.sdk.tool_result import ReportedError

tau2_message = pytest.importorskip("tau2.data_model.message")

DOMAINS = ("airline", "retail", "mock", "telecom")


def _tables(domain: str, env: Any) -> dict[str, Any]:
    user = env.user_tools.db if env.user_tools is not None else None
    return worker_tools.db_tables(domain, env.tools.db, user)


def _planted(action: Any, rng: random.Random) -> list[tuple[str, str, dict[str, Any]]]:
    """Mistakes an agent makes: a changed argument, an unexpected one, a tool that does not exist."""
    arguments = dict(action.arguments)
    calls = [(action.name, action.requestor, {**arguments, "not_an_argument": 1})]
    if arguments:
        key = rng.choice(sorted(arguments))
        calls.append((action.name, action.requestor, {**arguments, key: "X-planted"}))
    calls.append((action.name + "_missing", action.requestor, arguments))
    return calls


class _Trial:
    """One trial's tables as a worker holds them, beside τ²'s live environment."""

    def __init__(self, domain: str, env: Any, tables_json: bytes, *, warm: bool) -> None:
        self.domain = domain
        self.env = env
        self.base: dict[str, Any] = orjson.loads(tables_json)
        self.views: dict[str, Any] = {}
        self.small = domain in ("telecom", "mock")  # whole tables compared after every call
        # A new trial is a new worker: nothing of the last trial's, and (warm) the zygote's validated DB.
        worker_tools._CACHE.clear()  # pyright: ignore[reportPrivateUsage]
        worker_tools._WARM.clear()  # pyright: ignore[reportPrivateUsage]
        if warm:
            worker_tools.domain(domain).warm()

    def _commit(self, data: CowTables) -> None:
        changes = data.changes()
        apply_changes(self.base, changes)
        data.settle()
        # Each call: the records it wrote equal τ²'s; each task's end (check_all): every table does.
        theirs = _tables(self.domain, self.env) if self.small else None
        for change in changes:
            table = change["table_name"]
            for operation in change["operations"]:
                key = operation.get("key")
                if key is None or theirs is not None:
                    theirs = theirs or _tables(self.domain, self.env)
                    assert self.base[table] == theirs[table], (
                        f"table {table} differs from τ²'s after the call"
                    )
                else:
                    record = self._record(table, key)
                    assert self.base[table].get(key) == record, f"{table}[{key}] differs from τ²'s"

    def _record(self, table: str, key: str) -> Any:
        db = self.env.tools.db
        found = getattr(db, table).get(key)
        return found.model_dump(mode="json") if found is not None else None

    def check_all(self) -> None:
        assert self.base == _tables(self.domain, self.env), (
            "tables differ from τ²'s DB at the end of the task"
        )

    def call(self, name: str, requestor: str, arguments: dict[str, Any]) -> None:
        data = CowTables(self.base, self.views)
        tool = getattr(worker_tools, worker_tools.class_name(self.domain, requestor, name))
        ours = tool.invoke(data, **copy.deepcopy(arguments))
        call = tau2_message.ToolCall(id="c", name=name, arguments=arguments, requestor=requestor)
        theirs = self.env.get_response(call)
        if theirs.error:
            assert isinstance(ours, ReportedError), theirs.content
            assert "Error: " + ours.message == theirs.content
        else:
            assert ours == theirs.content
        self._commit(data)

    def env_function(self, action: Any) -> None:
        data = CowTables(self.base, self.views)
        tool = getattr(worker_tools, f"{self.domain}__{worker_tools.ENV_FUNCTION_TOOL}")
        ours = tool.invoke(
            data, env_type=action.env_type, func_name=action.func_name, arguments=action.arguments
        )
        assert ours == self.env.to_json_str(self.env.run_env_function_call(action))
        self._commit(data)


def _tasks(domain: str) -> tuple[Any, list[Any]]:
    module = importlib.import_module(f"tau2.domains.{domain}.environment")
    tasks = [
        task
        for task in module.get_tasks(None if domain != "telecom" else "base")
        if task.initial_state is None
        or (not task.initial_state.message_history and task.initial_state.initialization_data is None)
    ]
    return module, tasks


@pytest.mark.parametrize("domain", DOMAINS)
def test_tools_answer_and_write_as_tau2(domain: str) -> None:
    module, tasks = _tasks(domain)
    pristine: Any = module.get_environment()
    agent_db = cast(type[BaseModel], pristine.tools.db.__class__)
    user_db = (
        cast(type[BaseModel], pristine.user_tools.db.__class__) if pristine.user_tools is not None else None
    )
    tables_json = orjson.dumps(_tables(domain, pristine))
    agent_json = pristine.tools.db.model_dump_json()
    user_json = pristine.user_tools.db.model_dump_json() if pristine.user_tools is not None else None
    rng = random.Random(f"tau2-{domain}")
    calls = 0
    for index, task in enumerate(tasks):
        databases: dict[str, Any] = {"db": agent_db.model_validate_json(agent_json)}
        if user_db is not None and user_json is not None:
            databases["user_db"] = user_db.model_validate_json(user_json)
        # the first tasks start from the zygote's validated DB, as workers do; the rest validate cold
        trial = _Trial(domain, module.get_environment(**databases), tables_json, warm=index < 3)
        initial = task.initial_state
        for action in list(initial.initialization_actions or []) if initial is not None else []:
            trial.env_function(action)
        golden: list[Any] = list(task.evaluation_criteria.actions or []) if task.evaluation_criteria else []
        for action in golden:
            trial.call(action.name, action.requestor, dict(action.arguments))
            calls += 1
        for action in rng.sample(golden, min(2, len(golden))):
            for name, requestor, arguments in _planted(action, rng):
                if requestor == "user" and pristine.user_tools is None:
                    continue
                trial.call(name, requestor, arguments)
                calls += 1
        if trial.small or index % 5 == 0:  # whole DBs of airline and retail are big: one task in five
            trial.check_all()
    assert calls > len(tasks)
