"""Fixtures for pack authors' own tests: the packs, the runner, and registered trials.

* ``tolokaforge_packs`` / ``tolokaforge_pack`` (session): the loaded pack(s) -- the tasks that load;
* ``tolokaforge_runner`` (session): the runner under test (embedded, or ``--tolokaforge-runner``),
  with its ``stub`` and ``run()`` / ``arun()`` to drive the stub's coroutines on the plugin's loop;
* ``tolokaforge_trial``: a factory, ``tolokaforge_trial("task_id")`` -> :class:`Trial`, registered on
  the runner and cleaned up after the test.
"""

from __future__ import annotations

import json
from collections.abc import Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import pytest

from tolokaforge.contracts.runner import (
    ExecuteToolRequest,
    ExecuteToolResponse,
    GetStateRequest,
    Grade,
    GradeTrialRequest,
    RunnerServiceStub,
    ToolSchema,
)
from tolokaforge.core.models import TaskDescription
from tolokaforge.core.runner_api import RunnerError
from tolokaforge.core.transcript import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    encode_transcript_wire,
)
from tolokaforge.host import HostError, Pack, build_trial_spec

from .errors import CheckFailure
from .replay import RUN_ID
from .session import RunnerConnection, ToloSession, session_of

__all__ = ["TolokaforgeRunner", "Trial", "TrialFactory"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class TolokaforgeRunner:
    """The runner under test. The stub's coroutines run on the plugin's loop: ``run(stub.x(...))``."""

    session: ToloSession
    connection: RunnerConnection

    @property
    def address(self) -> str:
        return self.connection.address

    @property
    def stub(self) -> RunnerServiceStub:
        return self.connection.stub

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return self.session.run(coro)

    async def arun(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return await self.session.arun(coro)


@dataclass
class Trial:
    """A registered trial of one task: call its tools, read its state, grade it."""

    runner: TolokaforgeRunner
    task: TaskDescription
    trial_id: str
    agent_tools: tuple[ToolSchema, ...]
    user_tools: tuple[ToolSchema, ...]
    messages: list[Message] = field(default_factory=list[Message])
    closed: bool = False
    _calls: int = 0

    def call(
        self, tool: str, arguments: Mapping[str, Any] | str = "{}", *, executor: str = "agent"
    ) -> ExecuteToolResponse:
        """ExecuteTool; the call and its result join the transcript :meth:`grade` sends."""
        self._calls += 1
        call_id = f"author-{self._calls}"
        raw = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
        request = ExecuteToolRequest(
            trial_id=self.trial_id, tool_name=tool, arguments_json=raw, executor=executor, call_id=call_id
        )
        response = self.runner.run(self.runner.stub.execute_tool(request, timeout=120))
        try:
            decoded: Any = json.loads(raw)
        except ValueError:
            decoded = {}
        recorded = ToolCall(
            id=call_id,
            name=tool,
            arguments=cast(dict[str, Any], decoded) if isinstance(decoded, dict) else {},
        )
        turn = AssistantMessage("", (recorded,)) if executor == "agent" else UserMessage("", (recorded,))
        text = response.output if response.status.name == "SUCCESS" else f"Error: {response.error_message}"
        self.messages += [turn, ToolMessage(content=text, tool_call_id=call_id)]
        return response

    def say(self, text: str) -> None:
        """An assistant turn of plain text (for must_contain / communicate_info rules)."""
        self.messages.append(AssistantMessage(text))

    def state(self, *, include_unstable: bool = False) -> dict[str, Any]:
        request = GetStateRequest(trial_id=self.trial_id, include_unstable=include_unstable)
        response = self.runner.run(self.runner.stub.get_state(request, timeout=60))
        if not response.success:
            raise AssertionError(f"GetState {self.trial_id} failed: {response.error}")
        return cast(dict[str, Any], json.loads(response.state_json or "{}"))

    def grade(self, *, termination_reason: str = "agent_done") -> Grade:
        """GradeTrial over the transcript so far; AssertionError when the runner cannot grade."""
        request = GradeTrialRequest(
            trial_id=self.trial_id,
            llm_messages_json=encode_transcript_wire(self.messages),
            termination_reason=termination_reason,
        )
        response = self.runner.run(self.runner.stub.grade_trial(request, timeout=300))
        if not response.success or response.grade is None:
            raise AssertionError(f"GradeTrial {self.trial_id} failed: {response.error}")
        return response.grade

    def close(self) -> None:
        """CleanupTrial (idempotent)."""
        if not self.closed:
            self.closed = True
            self.runner.run(self.runner.connection.client.release(self.trial_id))


@dataclass
class TrialFactory:
    """``factory(task_id)`` registers a fresh trial of that task; every trial is cleaned up afterwards."""

    runner: TolokaforgeRunner
    packs: tuple[Pack, ...]
    trials: list[Trial] = field(default_factory=list[Trial])

    def __call__(self, task_id: str) -> Trial:
        task = self._find(task_id)
        spec = build_trial_spec(task, run_id=RUN_ID, trial_index=self.runner.session.next_trial_index())
        try:
            registered = self.runner.run(self.runner.connection.client.register(spec))
        except (HostError, RunnerError) as error:
            raise AssertionError(f"RegisterTrial {spec.trial_id}: {error}") from error
        messages: list[Message] = []
        if task.system_prompt:
            messages.append(SystemMessage(task.system_prompt))
        if task.initial_user_message:
            messages.append(UserMessage(task.initial_user_message))
        trial = Trial(
            self.runner, task, spec.trial_id, registered.agent_tools, registered.user_tools, messages
        )
        self.trials.append(trial)
        return trial

    def _find(self, task_id: str) -> TaskDescription:
        for pack in self.packs:
            for loaded in pack.tasks:
                if loaded.task_id == task_id:
                    return loaded.task
        known = ", ".join(t.task_id for p in self.packs for t in p.tasks)
        raise KeyError(f"no task {task_id!r} in the loaded packs (tasks: {known})")

    def close(self) -> None:
        for trial in self.trials:
            trial.close()


@pytest.fixture(scope="session")
def tolokaforge_packs(request: pytest.FixtureRequest) -> tuple[Pack, ...]:
    """Every pack given, with the tasks that loaded."""
    return tuple(report.pack for report in session_of(request.config).load_packs())


@pytest.fixture(scope="session")
def tolokaforge_pack(tolokaforge_packs: tuple[Pack, ...]) -> Pack:
    """The (first) pack given."""
    return tolokaforge_packs[0]


@pytest.fixture(scope="session")
def tolokaforge_runner(request: pytest.FixtureRequest) -> TolokaforgeRunner:
    """The runner under test, opened once per session."""
    state = session_of(request.config)
    try:
        connection = state.run(state.connection())
    except CheckFailure as error:
        pytest.fail(str(error))
    return TolokaforgeRunner(state, connection)


@pytest.fixture
def tolokaforge_trial(
    tolokaforge_runner: TolokaforgeRunner, tolokaforge_packs: tuple[Pack, ...]
) -> Iterator[TrialFactory]:
    """A factory of registered trials, each cleaned up after the test."""
    factory = TrialFactory(tolokaforge_runner, tolokaforge_packs)
    yield factory
    factory.close()
