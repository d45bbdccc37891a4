"""The Python API: ``evaluate`` a pack with an agent and get typed results back.

One call does what ``tolokaforge run --pack P --agent A`` does on the embedded runner (the pack loaded,
the model endpoint checked, every trial run, graded and written to a results folder) and returns the
figures as frozen values instead of printing them. :func:`evaluate` is for scripts;
:func:`aevaluate` is the same run as a coroutine, for code that already runs an event loop (a notebook
cell, an async training loop).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, cast

from tolokaforge.core.models import TaskDescription

from .agents.base import Agent, AgentFactory
from .agents.setup import AgentRecipe, LLMOptions
from .errors import ConfigError
from .llm import llm_session
from .llm.chat import DEFAULT_BASE_URL, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_S
from .llm.generation import Generation, check_generation, parse_generation
from .llm.preflight import check_models
from .packs import Pack, load_pack
from .results.redaction import Redactor
from .results.summary import RunSummary
from .results.trial_files import trial_dir
from .results.trial_rows import TrialKind, TrialRow
from .results.yaml_files import read_yaml
from .run.schedule import RunSettings, run_pack

__all__ = ["EvaluationResult", "TrialResult", "aevaluate", "evaluate"]

_NAMED_AGENTS = frozenset({"golden"})


@dataclass(frozen=True)
class TrialResult:
    """One trial: what became of it, its grade, and what it cost."""

    task_id: str
    trial_index: int
    outcome: TrialKind
    """``passed``, ``failed`` (graded, did not pass), ``not_gradeable``, ``lost`` or ``unfinished``."""
    passed: bool
    score: float | None
    """None when the trial has no grade (the runner did not compute one)."""
    components: Mapping[str, float | None]
    reasons: tuple[str, ...]
    """The grade's reasons; for a trial without a grade, why it has none."""
    termination: str | None
    tokens: int
    cost_usd: float | None
    """None when a model the trial used has no price."""
    wall_time_s: float
    tool_calls: int


@dataclass(frozen=True)
class EvaluationResult:
    """A whole run: its trials in task order, the figures ``summary.yaml`` holds, and where it was written."""

    pack: str
    agent: str
    output: Path
    trials: tuple[TrialResult, ...]
    trials_per_task: int
    pass_rate: float
    """Passed trials over all trials; a trial without a grade counts as not passed."""
    mean_score: float | None
    """Over graded trials only."""
    pass_hat_k: Mapping[int, float]
    """pass^k for k = 1 .. ``trials_per_task``: the chance that k trials of a task all pass, mean over tasks."""
    pass_at_k: Mapping[int, float]
    """pass@k for the same k: the chance that one of k trials of a task passes, mean over tasks."""
    tokens: int
    cost_usd: float | None
    outcomes: Mapping[str, int]
    """Trials by outcome (``passed``, ``failed``, ``not_gradeable``, ``lost``, ``unfinished``)."""

    @property
    def all_graded(self) -> bool:
        """Every trial has a grade: what ``tolokaforge run`` exits 0 for."""
        return all(trial.outcome in ("passed", "failed") for trial in self.trials)


class _OneAgent:
    """An :class:`Agent` object given directly: every trial is played by that same object."""

    def __init__(self, agent: Agent) -> None:
        self._agent = agent

    @property
    def name(self) -> str:
        return type(self._agent).__name__

    @property
    def model(self) -> str | None:
        model = getattr(self._agent, "model", None)
        return model if isinstance(model, str) else None

    def for_trial(self, task: TaskDescription) -> Agent:
        return self._agent


def evaluate(
    pack: str | Path | Pack,
    agent: str | Agent | AgentFactory = "golden",
    *,
    trials: int = 1,
    concurrency: int = 4,
    tasks: Sequence[str] = (),
    categories: Sequence[str] = (),
    output: str | Path | None = None,
    resume: bool = False,
    user_model: str | None = None,
    base_url: str | None = None,
    prices: str | Path | None = None,
    generation: Mapping[str, Mapping[str, float | int | str]] | None = None,
    llm_timeout_s: float = DEFAULT_TIMEOUT_S,
    llm_max_retries: int = DEFAULT_MAX_RETRIES,
    max_turns: int = 30,
    isolation: Literal["sandbox", "process", "thread"] = "sandbox",
    split: str | None = None,
) -> EvaluationResult:
    """Run every task of ``pack`` with ``agent``, ``trials`` times each, and grade every trial.

    ``pack`` is a pack folder, one task folder, ``tau2:<domain>``, or a :class:`Pack` already loaded.
    ``agent`` is ``"golden"``, a model name (an LLM agent through the OpenAI-compatible API at
    ``base_url``, default ``TOLOKAFORGE_LLM_BASE_URL``, else ``OPENAI_BASE_URL``, else OpenAI's; key
    from ``TOLOKAFORGE_LLM_API_KEY`` or ``OPENAI_API_KEY``), an object with
    ``async next_turn(messages, tools) -> AgentTurn`` (it plays every trial), or an agent factory
    (``name``, ``model``, ``for_trial(task) -> agent``: one fresh agent per trial). Results are written
    under ``output`` (default ``runs/<pack>-<UTC time>``) exactly as by ``tolokaforge run``; ``tasks``
    (ids or shell globs) and ``categories`` select tasks as ``--task`` and ``--category`` do;
    ``generation`` sets the agent's and the simulated user's ``temperature``, ``seed``, ``max_tokens`` and
    ``reasoning_effort`` (``{"agent": {"temperature": 0}}``), as ``--gen`` does.

    Inside a running event loop (a notebook cell) use ``await aevaluate(...)``: this function refuses,
    since it would have to start a second loop in the same thread.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass  # no loop here: start one
    else:
        raise ConfigError(
            "evaluate() was called inside a running event loop (a notebook cell, an async function): "
            "use `await aevaluate(...)` there, with the same arguments"
        )
    return asyncio.run(
        aevaluate(
            pack,
            agent,
            trials=trials,
            concurrency=concurrency,
            tasks=tasks,
            categories=categories,
            output=output,
            resume=resume,
            user_model=user_model,
            base_url=base_url,
            prices=prices,
            generation=generation,
            llm_timeout_s=llm_timeout_s,
            llm_max_retries=llm_max_retries,
            max_turns=max_turns,
            isolation=isolation,
            split=split,
        )
    )


async def aevaluate(
    pack: str | Path | Pack,
    agent: str | Agent | AgentFactory = "golden",
    *,
    trials: int = 1,
    concurrency: int = 4,
    tasks: Sequence[str] = (),
    categories: Sequence[str] = (),
    output: str | Path | None = None,
    resume: bool = False,
    user_model: str | None = None,
    base_url: str | None = None,
    prices: str | Path | None = None,
    generation: Mapping[str, Mapping[str, float | int | str]] | None = None,
    llm_timeout_s: float = DEFAULT_TIMEOUT_S,
    llm_max_retries: int = DEFAULT_MAX_RETRIES,
    max_turns: int = 30,
    isolation: Literal["sandbox", "process", "thread"] = "sandbox",
    split: str | None = None,
) -> EvaluationResult:
    """:func:`evaluate` as a coroutine, run on the caller's event loop; same arguments, same result."""
    if isinstance(agent, str) and agent in ("llm", "scripted"):
        raise ConfigError(
            f"agent={agent!r}: pass the model name itself (agent='gpt-4o-mini'), or an agent object"
        )
    for name, value in (("tasks", tasks), ("categories", categories)):
        if isinstance(value, str):
            raise ConfigError(f"{name} must be a list of strings, not the string {value!r}")
    loaded = pack if isinstance(pack, Pack) else load_pack(Path(pack), split=split, isolation=isolation)
    if output is None:
        if resume:
            raise ConfigError("resume=True needs the output folder of the run to continue")
        output = _new_output(loaded.name)
    model = agent if isinstance(agent, str) and agent not in _NAMED_AGENTS else None
    llm_users = any(t.task.user_simulator and t.task.user_simulator.mode == "llm" for t in loaded.tasks)
    settings_by_role = _generation(generation or {})
    # As the CLI's --llm-base-url: its variable, then the OpenAI ecosystem's, then OpenAI itself.
    base_url = (
        base_url
        or os.environ.get("TOLOKAFORGE_LLM_BASE_URL")
        or os.environ.get("OPENAI_BASE_URL")
        or DEFAULT_BASE_URL
    )
    llm = LLMOptions(
        model=model,
        user_model=user_model,
        base_url=base_url,
        prices=Path(prices) if prices is not None else None,
        timeout_s=llm_timeout_s,
        max_retries=llm_max_retries,
        generation=settings_by_role.get("agent", Generation()),
        user_generation=settings_by_role.get("user", Generation()),
    )
    kind = "llm" if model is not None else "golden"
    recipe = AgentRecipe.of(kind, llm, None, llm_users)
    uses_llm = model is not None or (llm_users and recipe.user_model is not None)
    if model is not None:
        check_generation("agent", model, llm.generation, where=("generation",))
    if llm_users and recipe.user_model is not None:
        check_generation("user", recipe.user_model, llm.user_generation, where=("generation",))
    models: dict[str, str | None] = {"agent": model}
    if llm_users:
        models["user"] = recipe.user_model
    settings = RunSettings(
        output=Path(output),
        trials=trials,
        concurrency=concurrency,
        isolation=isolation,
        resume=resume,
        task_ids=tuple(tasks),
        categories=tuple(categories),
        default_max_turns=max_turns,
        models=models,
        llm_endpoint=llm.base_url_for(model) if model else (base_url if uses_llm else None),
        options={
            "agent": agent if isinstance(agent, str) else "custom",
            "model": model,
            "user_model": user_model,
            "trials": trials,
            "generation": {role: gen.recorded() for role, gen in settings_by_role.items()},
            "isolation": isolation,
            "output": str(output),
            "called_from": "python",
        },
    )
    async with llm_session(concurrency) as session:
        agents, users = recipe.build(session)
        if not isinstance(agent, str):
            agents = _as_factory(agent)
            users.stand_in = False
        # One completion per model before any trial: a wrong key or model name stops here.
        await check_models(session, recipe.model_checks(), Redactor.from_environment().text)
        summary = await run_pack(loaded, agents, users, settings)
    return _result(summary, settings.output)


def _new_output(pack: str) -> Path:
    """``runs/<pack>-<UTC time>`` as the CLI names it; a notebook may start two runs within a second."""
    base = Path("runs") / f"{pack}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}"
    output, suffix = base, 1
    while output.exists():
        suffix += 1
        output = base.with_name(f"{base.name}-{suffix}")
    return output


def _generation(given: Mapping[str, Mapping[str, float | int | str]]) -> dict[str, Generation]:
    """``{"agent": {"temperature": 0.2}, "user": {...}}`` checked as ``--gen agent.temperature=0.2`` is."""
    unknown = [role for role in given if role not in ("agent", "user")]
    if unknown:
        raise ConfigError(f"generation: role(s) {', '.join(map(repr, unknown))} are not 'agent' or 'user'")
    items = [f"{role}.{key}={value}" for role, keys in given.items() for key, value in keys.items()]
    try:
        return parse_generation(items)
    except ConfigError as error:
        raise ConfigError(f"generation: {str(error).removeprefix('--gen ')}") from error


def _as_factory(agent: Agent | AgentFactory) -> AgentFactory:
    if callable(getattr(agent, "for_trial", None)):
        return cast(AgentFactory, agent)
    if callable(getattr(agent, "next_turn", None)):
        return _OneAgent(cast(Agent, agent))
    raise ConfigError(
        f"agent must be 'golden', a model name, an object with async next_turn(messages, tools), or a "
        f"factory with for_trial(task); got {type(agent).__name__}"
    )


def _result(summary: RunSummary, output: Path) -> EvaluationResult:
    ks = range(1, summary.trials_per_task + 1)
    return EvaluationResult(
        pack=summary.pack,
        agent=summary.agent,
        output=output,
        trials=tuple(_trial(row, output) for row in summary.rows),
        trials_per_task=summary.trials_per_task,
        pass_rate=summary.pass_rate,
        mean_score=summary.mean_score,
        pass_hat_k={k: value for k in ks if (value := summary.pass_hat(k)) is not None},
        pass_at_k={k: value for k in ks if (value := summary.pass_at(k)) is not None},
        tokens=summary.tokens,
        cost_usd=summary.cost_usd,
        outcomes=summary.outcomes(),
    )


def _trial(row: TrialRow, output: Path) -> TrialResult:
    grade_file = trial_dir(output, row.task_id, row.trial_index) / "grade.yaml"
    # The row keeps the reasons as one line; the list is the grade's own, when the trial has one.
    grade: dict[str, Any] = read_yaml(grade_file) if grade_file.is_file() else {}
    listed = [str(reason) for reason in cast(list[Any], grade.get("reasons") or [])]
    reasons = tuple(listed) if listed else ((row.reason,) if row.reason else ())
    return TrialResult(
        task_id=row.task_id,
        trial_index=row.trial_index,
        outcome=row.kind,
        passed=row.passed,
        score=row.score,
        components=dict(row.components),
        reasons=reasons,
        termination=row.termination,
        tokens=row.tokens,
        cost_usd=row.cost_usd,
        wall_time_s=row.wall_time_s,
        tool_calls=row.tool_calls,
    )
