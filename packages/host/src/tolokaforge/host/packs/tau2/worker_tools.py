# pyright: basic
# τ² ships no type information; this module's job is to call it, so it is checked in basic mode.
"""τ²-bench's own tools as python tools of a trial (docs/tau2.md).

The host ships this file's text to the runner as the task's tool code (``tau2_tools.py``); the runner's
zygote imports it once, so every trial's worker starts with τ²'s domain modules loaded. It imports
only τ² and the standard library (plus :mod:`tolokaforge.sdk.tool_result`), so any runner with τ²
installed can run it.

A tool class is named ``<domain>__<requestor>__<tool>`` and built on first lookup. The runner's copy
imports τ²'s domains with the module (in the zygote, once); the host's imports τ² only when used. Each call builds
τ²'s own ``Environment`` over the trial's tables and answers through ``Environment.get_response``, so
outputs, error texts and telecom's ``sync_tools`` are τ²'s by construction; then it writes back the
records the call changed. A τ² error answer (``Error: …``) keeps its partial writes, as in τ².

Tables: a DB field typed ``dict[str, Model]`` or ``list[Model]`` is a table of that name (the user
DB's as ``user_db.<field>``); a field holding one record lives in the keyed table ``agent_db`` or
``user_db`` under the field's name. :func:`db_tables` gives the initial tables the same way.

Records are validated when a call first reads them and cached for the worker's next calls while the
trial's record is the same object (the runner replaces a changed record, never mutates it), so a
call costs what it touches, not the size of the DB.
"""

from __future__ import annotations

import _thread
import importlib
import json
import os
import typing
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

from pydantic import BaseModel, TypeAdapter

from tolokaforge.sdk.tool_result import ReportedError

DOMAINS: dict[str, tuple[str, str, str | None, str | None]] = {
    # domain: (module, environment class, agent toolkit, user toolkit) — classes in tau2.domains.<d>.*
    "airline": ("airline", "tau2.environment.environment:Environment", "tools:AirlineTools", None),
    "retail": ("retail", "tau2.environment.environment:Environment", "tools:RetailTools", None),
    "mock": ("mock", "tau2.environment.environment:Environment", "tools:MockTools", None),
    "telecom": (
        "telecom",
        "tau2.domains.telecom.environment:TelecomEnvironment",
        "tools:TelecomTools",
        "user_tools:TelecomUserTools",
    ),
}
ENV_FUNCTION_TOOL = "tau2_env_function"
"""Hidden tool: τ²'s ``run_env_function_call`` (initialization actions)."""
ENV_ASSERTION_TOOL = "tau2_env_assertion"
"""Hidden tool: τ²'s ``run_env_assertion`` (ENV_ASSERTION grading), answering ``true`` or ``false``."""


def _load(spec: str, package: str = "") -> Any:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(f"{package}{module}"), name)


class _Side:
    """One DB of a domain (the agent's or the user's): how its fields map onto tables."""

    def __init__(self, db_class: type[BaseModel], prefix: str, record_table: str) -> None:
        self.db_class = db_class
        self.record_table = record_table
        self.fields: dict[str, tuple[str, str, Any]] = {}  # field -> (kind, table, adapter or model)
        hints = typing.get_type_hints(db_class)
        for field in db_class.model_fields:
            hint = hints[field]
            origin = typing.get_origin(hint)
            args = typing.get_args(hint)
            if origin is dict and args and args[0] is str:
                self.fields[field] = ("keyed", prefix + field, args[1])
            elif origin is list and args:
                self.fields[field] = ("list", prefix + field, TypeAdapter(hint))
            else:
                self.fields[field] = ("record", record_table, TypeAdapter(hint))

    def tables(self, db: BaseModel) -> dict[str, Any]:
        dumped = db.model_dump(mode="json")
        tables: dict[str, Any] = {}
        for field, (kind, table, _) in self.fields.items():
            if kind == "record":
                tables.setdefault(table, {})[field] = dumped[field]
            else:
                tables[table] = dumped[field]
        return tables


def _prepare_tau2() -> None:
    """Before τ² is imported: no BLAS thread pool, no logging to stderr.

    τ² imports numpy, whose OpenBLAS starts a thread at import unless told to use one; the runner forks
    each trial's worker from a zygote that imported this module, which is safe only without threads.
    τ² imports pandas, which imports pyarrow, whose jemalloc pool starts a background thread at its first
    allocation unless its configuration says otherwise.
    τ² logs at import (a missing .env) and every response at DEBUG; the transcript already has them.
    """
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(variable, "1")
    os.environ.setdefault("JE_ARROW_MALLOC_CONF", "background_thread:false")
    from loguru import logger

    logger.disable("tau2")


class _Domain:
    def __init__(self, name: str) -> None:
        _prepare_tau2()
        self.tool_call = _load("tau2.data_model.message:ToolCall")
        self.env_function_call = _load("tau2.data_model.tasks:EnvFunctionCall")
        self.env_assertion = _load("tau2.data_model.tasks:EnvAssertion")
        module, env_spec, agent_spec, user_spec = DOMAINS[name]
        package = f"tau2.domains.{module}."
        self.name = name
        self.env_class = _load(env_spec)
        self.agent_toolkit = _load(agent_spec, package) if agent_spec else None
        self.user_toolkit = _load(user_spec, package) if user_spec else None
        self.agent = _Side(self._db_class(self.agent_toolkit), "", "agent_db") if self.agent_toolkit else None
        self.user = (
            _Side(self._db_class(self.user_toolkit), "user_db.", "user_db") if self.user_toolkit else None
        )
        # τ²'s READ tools write nothing; where there is no user DB to sync, their calls skip the write-back
        # (the parity tests compare the tables with τ²'s DB after every call, reads included).
        self.read_only: frozenset[str] = frozenset()
        if self.agent_toolkit is not None and self.user_toolkit is None:
            self.read_only = frozenset(
                name
                for name, function in self.agent_toolkit(None).tools.items()
                if str(getattr(getattr(function, "__tool_type__", ""), "value", "")).lower() == "read"
            )

    @staticmethod
    def _db_class(toolkit: Any) -> type[BaseModel]:
        return typing.get_type_hints(toolkit.__init__)["db"]

    def warm(self) -> None:
        """Validate the domain's shipped DB once (in the zygote), for every worker's first reads.

        A worker takes a record from here only if the trial's record equals its dump, and only once
        (then it is the trial's own), so a trial whose state differs validates its own records.
        """
        if self.agent is None:
            return
        try:
            module = importlib.import_module(f"tau2.domains.{DOMAINS[self.name][0]}.environment")
            db = module.get_environment().tools.db
        except Exception:  # a faster first read, never a condition for one
            return
        for field, (kind, table, _) in self.agent.fields.items():
            if kind == "keyed":
                records = getattr(db, field)
                _WARM[(self.name, "agent", table)] = {
                    key: (record.model_dump(mode="json"), record) for key, record in records.items()
                }

    def environment(self, agent_db: Any, user_db: Any) -> Any:
        tools = self.agent_toolkit(agent_db) if self.agent_toolkit else None
        if self.user_toolkit is not None:
            return self.env_class(self.name, "", tools, self.user_toolkit(user_db))
        return self.env_class(domain_name=self.name, policy="", tools=tools)


_DOMAINS: dict[str, _Domain] = {}


def domain(name: str) -> _Domain:
    """Domain ``name``, its τ² modules imported on first use."""
    found = _DOMAINS.get(name)
    if found is None:
        found = _DOMAINS[name] = _Domain(name)
    return found


def db_tables(name: str, agent_db: BaseModel | None, user_db: BaseModel | None) -> dict[str, Any]:
    """The trial tables holding ``agent_db`` and ``user_db`` of domain ``name`` (the initial state)."""
    spec = domain(name)
    tables: dict[str, Any] = {}
    if spec.agent is not None and agent_db is not None:
        tables.update(spec.agent.tables(agent_db))
    if spec.user is not None and user_db is not None:
        tables.update(spec.user.tables(user_db))
    return tables


class _LazyTable(MutableMapping[str, Any]):
    """A keyed table as τ²'s code sees it: records validated on first read, changes tracked."""

    def __init__(
        self,
        view: Any,
        model: type[BaseModel],
        cache: dict[str, tuple[Any, Any]],
        warm: dict[str, tuple[Any, Any]],
    ) -> None:
        self._view = view
        self._warm = warm
        # The runner's view copies a record when it is read; the base holds the records as committed.
        self._base: dict[str, Any] = getattr(view, "base", view)
        self._model = model
        self._cache = cache
        self._live: dict[str, Any] = {}
        self._deleted: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        record = self._live.get(key)
        if record is not None:
            return record
        if key in self._deleted:
            raise KeyError(key)
        source = self._base[key]
        hit = self._cache.get(key)
        if hit is not None and hit[0] is source:
            record = hit[1]
        else:
            warm = self._warm.pop(key, None)
            record = warm[1] if warm is not None and warm[0] == source else self._model.model_validate(source)
        self._live[key] = record
        return record

    def __setitem__(self, key: str, value: Any) -> None:
        self._deleted.discard(key)
        self._live[key] = value

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        self._live.pop(key, None)
        self._deleted.add(key)

    def __contains__(self, key: object) -> bool:
        return key in self._live or (key in self._base and key not in self._deleted)

    def __iter__(self) -> Iterator[str]:
        for key in self._base:
            if key not in self._deleted:
                yield key
        for key in self._live:
            if key not in self._base:
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def keep(self) -> None:
        """After a call that wrote nothing: its records stay the trial's, unchanged, for the next call."""
        for key, record in self._live.items():
            self._cache[key] = (self._base.get(key), record)

    def write_back(self) -> None:
        for key in self._deleted:
            if key in self._base:
                del self._view[key]
            self._cache.pop(key, None)
        for key, record in self._live.items():
            dumped = record.model_dump(mode="json") if isinstance(record, BaseModel) else record
            source = self._base.get(key)
            if dumped != source:
                self._view[key] = dumped
                source = dumped
            self._cache[key] = (source, record)


class _Bound:
    """One side's DB built over a call's tables, and how to put its changes back."""

    def __init__(self, side: _Side, data: MutableMapping[str, Any], where: tuple[str, str]) -> None:
        self.side = side
        self.data = data
        self.lazy: dict[str, _LazyTable] = {}
        self.plain: dict[str, Any] = {}
        values: dict[str, Any] = {}
        for field, (kind, table, adapter) in side.fields.items():
            if kind == "keyed":
                key = (*where, table)
                lazy = _LazyTable(data[table], adapter, _CACHE.setdefault(key, {}), _WARM.get(key, {}))
                self.lazy[field] = lazy
                values[field] = lazy
            elif kind == "list":
                values[field] = self.plain[field] = adapter.validate_python(list(data[table]))
            else:
                values[field] = self.plain[field] = adapter.validate_python(data[table][field])
        self.db = side.db_class.model_construct(**values)

    def keep(self) -> None:
        for lazy in self.lazy.values():
            lazy.keep()

    def write_back(self) -> None:
        for lazy in self.lazy.values():
            lazy.write_back()
        for field in self.plain:
            kind, table, adapter = self.side.fields[field]
            current = getattr(self.db, field)  # a tool may have replaced the object, not only changed it
            dumped = adapter.dump_python(current, mode="json")
            if kind == "record":
                if self.data[table][field] != dumped:
                    self.data[table][field] = dumped
                continue
            rows = self.data[table]
            for index, row in enumerate(dumped):
                if index >= len(rows):
                    rows.append(row)
                elif rows[index] != row:
                    rows[index] = row
            while len(rows) > len(dumped):
                del rows[len(rows) - 1]


_CACHE: dict[tuple[str, str, str], dict[str, tuple[Any, Any]]] = {}
"""(domain, side, table) -> key -> (the trial's record as last seen, its validated model): kept between
the calls of one worker (one trial), used while the trial's record is that same object."""
_WARM: dict[tuple[str, str, str], dict[str, tuple[Any, Any]]] = {}
"""(domain, side, table) -> key -> (dump, model) of the domain's shipped DB, validated in the zygote."""
_LOCK = _thread.allocate_lock()
"""One call at a time per process: a worker makes one anyway; trusted mode runs tools on threads, and
the caches above must never hand one model to two calls at once."""


class _Call:
    """τ²'s environment over one call's tables."""

    def __init__(self, name: str, data: MutableMapping[str, Any]) -> None:
        spec = domain(name)
        self.bound: dict[str, _Bound] = {}
        for which, side in (("agent", spec.agent), ("user", spec.user)):
            if side is not None:
                self.bound[which] = _Bound(side, data, (name, which))
        agent, user = self.bound.get("agent"), self.bound.get("user")
        self.env = spec.environment(agent.db if agent else None, user.db if user else None)

    def finish(self, *, wrote: bool = True) -> None:
        for bound in self.bound.values():
            if wrote:
                bound.write_back()
            else:
                bound.keep()


def _serialized(call: Callable[..., Any]) -> Callable[..., Any]:
    """``call`` under the process's lock; if it fails half way, no cached model is trusted again."""

    def run(data: MutableMapping[str, Any], **arguments: Any) -> Any:
        with _LOCK:
            try:
                return call(data, **arguments)
            except BaseException:
                _CACHE.clear()
                _WARM.clear()
                raise

    return run


def _answer(content: str, error: bool) -> str | ReportedError:
    if error:
        return ReportedError(content.removeprefix("Error: "))
    return content


def _tool_class(name: str, requestor: str, tool: str) -> type:
    read_only = tool in domain(name).read_only

    def invoke(data: MutableMapping[str, Any], **arguments: Any) -> str | ReportedError:
        call = _Call(name, data)
        request = domain(name).tool_call(id="call", name=tool, arguments=arguments, requestor=requestor)
        message = call.env.get_response(request)
        call.finish(wrote=not read_only)
        return _answer(message.content, bool(message.error))

    return type(f"{name}__{requestor}__{tool}", (), {"invoke": staticmethod(_serialized(invoke))})


def _env_function_class(name: str) -> type:
    def invoke(
        data: MutableMapping[str, Any], env_type: str, func_name: str, arguments: dict[str, Any] | None = None
    ) -> str:
        call = _Call(name, data)
        result = call.env.run_env_function_call(
            domain(name).env_function_call(env_type=env_type, func_name=func_name, arguments=arguments or {})
        )
        call.finish()
        return call.env.to_json_str(result)

    return type(f"{name}__{ENV_FUNCTION_TOOL}", (), {"invoke": staticmethod(_serialized(invoke))})


def _env_assertion_class(name: str) -> type:
    def invoke(
        data: MutableMapping[str, Any],
        env_type: str,
        func_name: str,
        arguments: dict[str, Any] | None = None,
        assert_value: bool = True,
        message: str | None = None,
    ) -> str:
        call = _Call(name, data)
        assertion = domain(name).env_assertion(
            env_type=env_type,
            func_name=func_name,
            arguments=arguments or {},
            assert_value=assert_value,
            message=message,
        )
        held = call.env.run_env_assertion(assertion, raise_assertion_error=False)
        call.finish()
        return json.dumps(held)

    return type(f"{name}__{ENV_ASSERTION_TOOL}", (), {"invoke": staticmethod(_serialized(invoke))})


def class_name(name: str, requestor: str, tool: str) -> str:
    """The class the runner looks up for ``tool`` of ``name`` called by ``requestor``."""
    return f"{name}__{requestor}__{tool}"


def __getattr__(attribute: str) -> type:
    parts = attribute.split("__")
    if len(parts) == 3 and parts[0] in DOMAINS:
        built = _tool_class(*parts)
    elif len(parts) == 2 and parts[0] in DOMAINS and parts[1] == ENV_FUNCTION_TOOL:
        built = _env_function_class(parts[0])
    elif len(parts) == 2 and parts[0] in DOMAINS and parts[1] == ENV_ASSERTION_TOOL:
        built = _env_assertion_class(parts[0])
    else:
        raise AttributeError(attribute)
    globals()[attribute] = built
    return built


if __name__.rpartition(".")[2] == "tau2_tools":
    # The runner's copy (the task's tool code): its zygote imports this module once, so import every
    # domain of τ² now and each trial's worker starts with them loaded.
    for _name in DOMAINS:
        domain(_name).warm()
