"""A run: every selected task x trial index, through one runner, ``concurrency`` episodes at a time.

One event loop; slots.py bounds the trials in flight: ``concurrency`` episodes, and as many finished
episodes being graded and cleaned up. With ``settings.ray`` the trials run
on the workers of a Ray cluster instead (``ray_backend``), and everything else here is the same. Each finished trial is written at
once (so an interrupted run can ``resume``), then the summary is computed from the files.

Before any trial: the output folder is checked (a new run needs a folder without one; ``--resume``
needs the same run, by ``run.yaml``), every model of ``model_checks`` must answer one completion
(llm/preflight.py: a refused key or model, an endpoint with no answer, stop the run before its folder
exists), and the runner must answer a HealthCheck within ``preflight_budget_s`` — an unreachable
runner stops the run in seconds with :class:`RunnerUnavailableError`, not after every trial has failed.

Every trial record and ``run.yaml`` are signed with the run's key (run_keys.py, records.py), and every
record the writer accepts is a line of the run's ledger. A new run makes its key, its empty ledger and
the ledger's head; ``--resume`` loads them by the run id in ``run.yaml`` (no key or head here, a
``run.yaml`` that fails its signature, a ledger whose chain breaks or that was cut short: refused, exit
2) and checks every trial the ledger accepted a record of, and every trial that looks finished: a
record that fails (altered, deleted, an earlier one put back, one the ledger never accepted) is
reported (a warning, ``tampered`` in summary.yaml and run.yaml), moved to ``tampered/<time>/`` when
anything of it is left, revoked in the ledger, and run again. Secrets the host knows are redacted from
everything written (redaction.py), the run's key included.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, cast

import aiohttp

from tolokaforge.core.models import JudgeModelConfig
from tolokaforge.core.runner_api import Runner

from ..agents.base import AgentFactory
from ..errors import ConfigError
from ..llm.preflight import ModelCheck, check_models
from ..packs.loader import LoadedTask, Pack
from ..packs.selection import select_tasks
from ..results.ledger import LedgerAppender, LedgerState
from ..results.manifest import RunIdentity, read_manifest, refuse_resume_if_different, utc_now, write_manifest
from ..results.outcome import TrialOutcome
from ..results.records import GRADE_PENDING, LEDGER_FILE, SIGNATURE_FILE, RecordSigner, check_record
from ..results.redaction import Redactor, url_password
from ..results.result_writer import HELPER_MIN_TRIALS, ResultWriter
from ..results.run_keys import (
    RunKeyError,
    new_run_id,
    new_run_key,
    prepare_key_dir,
    run_ledger,
    store_run_key,
    verify_run,
)
from ..results.summary import EntryTexts, RunSummary, summarise, write_summary
from ..results.trial_files import configured_components, is_finished, trial_dir
from ..results.trial_rows import TrialRow, row_of
from ..results.yaml_files import parse_yaml
from ..runner import open_runner
from ..users.base import UserSimulatorFactory
from .conductor import TrialSettings, run_trial
from .ray import RaySettings
from .slots import TrialSlots

__all__ = ["RunObserver", "RunSettings", "run_pack"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSettings:
    output: Path
    trials: int = 1
    concurrency: int = 4
    runner: str | None = None
    """``host:port`` of a running runner; None starts the embedded one."""
    runner_token_file: Path | None = None
    """The running runner's token file (None: the one a runner on this machine wrote for its port)."""
    runner_ca: Path | None = None
    """The CA that signed the running runner's TLS certificate (None: plain gRPC, loopback)."""
    isolation: Literal["sandbox", "process", "thread"] = "sandbox"
    """How the embedded runner runs python tools (docs/isolation.md); a remote runner decides for itself."""
    sandbox_without: tuple[str, ...] = ()
    """Sandbox layers the user accepts running without (``--without``)."""
    golden_replay: Literal["task", "trial"] = "task"
    """Whether the embedded runner reuses a task's golden replay once two trials' replays agree
    (``task``) or replays it for every trial (docs/grading.md); a remote runner decides for itself."""
    resume: bool = False
    task_ids: tuple[str, ...] = ()
    """``--task``: task ids or shell globs (all tasks when empty)."""
    categories: tuple[str, ...] = ()
    """``--category``: only tasks of these categories (any when empty)."""
    max_attempts: int = 3
    default_max_turns: int = 30
    transport_budget_s: float = 30.0
    preflight_budget_s: float = 5.0
    """How long the runner may take to answer its first HealthCheck."""
    models: Mapping[str, str | None] = field(default_factory=dict[str, str | None])
    """Models by role (``agent``, ``user``, ...) for run.yaml; the agent's own model when empty."""
    llm_endpoint: str | None = None
    """The model endpoint's base URL; run.yaml keeps only its host."""
    options: Mapping[str, Any] = field(default_factory=dict[str, Any])
    """Every option the caller was given, for run.yaml (the CLI passes all of its own)."""
    ray: RaySettings | None = None
    """Run the trials on a Ray cluster (``concurrency`` is then per worker); None runs them here."""
    judge_model: JudgeModelConfig | None = None
    """The rubric judge's model (``--judge-model``); a task with ``llm_judge`` needs one."""
    cells: Mapping[str, Mapping[str, Any]] = field(default_factory=dict[str, Mapping[str, Any]])
    """A multi-pack run's cells (matrix.py), for the summary's per pack x model rows."""
    model_checks: tuple[ModelCheck, ...] = ()
    """The models to call once each before any trial (llm/preflight.py); a failure stops the run."""


class RunObserver(Protocol):
    def started(self, total: int, skipped: int) -> None: ...

    def trial_done(self, outcome: TrialOutcome) -> None: ...


class _Silent:
    def started(self, total: int, skipped: int) -> None:
        return None

    def trial_done(self, outcome: TrialOutcome) -> None:
        return None


def _identity(
    pack: Pack, agents: AgentFactory, tasks: list[LoadedTask], settings: RunSettings, redactor: Redactor
) -> RunIdentity:
    models = dict(settings.models) or {"agent": agents.model}
    options: dict[str, Any] = redactor.value(
        {
            "max_turns": settings.default_max_turns,
            "max_attempts": settings.max_attempts,
            "concurrency": settings.concurrency,
            **settings.options,
        }
    )
    return RunIdentity.of(
        pack,
        agents.name,
        models,
        tuple(t.task_id for t in tasks),
        settings.trials,
        options,
        categories={t.task_id: t.task.category for t in tasks if t.task.category},
    )


def _check_output(
    settings: RunSettings, identity: RunIdentity, any_finished: bool
) -> tuple[dict[str, Any] | None, RecordSigner, LedgerState]:
    """The run recorded in the output folder (None for a new run), the signer of this run, and its
    ledger as verified (empty for a new run)."""
    recorded = read_manifest(settings.output)
    if settings.resume:
        refuse_resume_if_different(recorded, identity, settings.output)  # no run.yaml, or another run
        assert recorded is not None
        signer, ledger = _recorded_run(recorded, settings.output)
        return recorded, signer, ledger
    if recorded is not None or any_finished or (settings.output / LEDGER_FILE).exists():
        raise ConfigError(
            f"{settings.output} already holds a run: pass --resume to continue it, or choose another --output"
        )
    prepare_key_dir(settings.output)  # a key directory that cannot be used stops the run before it starts
    return None, RecordSigner(new_run_id(), new_run_key()), LedgerState()


def _recorded_run(recorded: dict[str, Any], output: Path) -> tuple[RecordSigner, LedgerState]:
    """The signer and the ledger of the run ``run.yaml`` records, once its key and ledger head are
    found, run.yaml passes its signature and the ledger its chain; refused (exit 2) otherwise: nothing
    of a run that cannot be verified can be trusted, and re-running it all silently could cost as much
    as the run did."""
    verification = verify_run(output, recorded)
    if verification.problem is not None or verification.signer is None or verification.ledger is None:
        remedy = (
            "copy the run's key and head files there from the machine that ran it, or start a new run"
            if verification.unverifiable == "key"
            else "start a new run"
        )
        raise RunKeyError(
            f"--resume refused: {verification.problem}, so none of {output}'s results can be verified; "
            f"{remedy}"
        )
    return verification.signer, verification.ledger


def _verify_finished(
    output: Path,
    keys: list[tuple[LoadedTask, int]],
    finished: list[bool],
    signer: RecordSigner,
    ledger: LedgerState,
) -> tuple[dict[tuple[str, int], TrialRow], list[dict[str, Any]]]:
    """Check every trial the ledger accepted a record of, and every trial that looks finished: the rows
    of intact records (from the very bytes checked), and what was wrong with the others, whose
    directories are moved aside and whose records the ledger revokes (``finished`` turns False: each
    runs again)."""
    rows: dict[tuple[str, int], TrialRow] = {}
    tampered: list[dict[str, Any]] = []
    stamp = utc_now().replace("-", "").replace(":", "").replace("+0000", "Z")
    appender: LedgerAppender | None = None
    try:
        for position, (loaded, index) in enumerate(keys):
            task_id = loaded.task_id
            accepted = ledger.accepted(task_id, index)
            if accepted is None and not finished[position]:
                continue  # never finished (or revoked, and not run again yet): it runs, nothing to say
            directory = trial_dir(output, task_id, index)
            if accepted is None:
                check_file: str | None = SIGNATURE_FILE
                problem = ledger.not_accepted(task_id, index)
            else:
                check = check_record(directory, signer, task_id, index, accepted)
                if check.intact:
                    if check.pending:  # the writer stopped between the ledger and the rename: finish it
                        os.replace(directory / GRADE_PENDING, directory / "grade.yaml")
                    finished[position] = True
                    documents = {
                        name: parse_yaml(check.contents[name])
                        for name in ("grade.yaml", "trajectory.yaml", "metrics.yaml")
                    }
                    rows[(task_id, index)] = row_of(
                        task_id,
                        index,
                        documents["grade.yaml"],
                        documents["trajectory.yaml"],
                        documents["metrics.yaml"],
                    )
                    continue
                check_file, problem = check.file, check.problem or ""
                if appender is None:
                    appender = LedgerAppender(run_ledger(signer, output), ledger)
                appender.revoke(accepted)  # the trial runs again, as its next attempt
            finished[position] = False
            aside = (
                _move_aside(output, directory, stamp, task_id, index)
                if directory.exists() or directory.is_symlink()
                else None
            )
            tampered.append(
                {
                    "task_id": task_id,
                    "trial_index": index,
                    "file": check_file,
                    "problem": problem,
                    "moved_to": aside.relative_to(output).as_posix() if aside is not None else None,
                }
            )
            log.warning(
                "tolokaforge: warning: trial %s/%d failed its signature check: %s; not counted: %s",
                task_id,
                index,
                problem,
                f"its files are in {aside} and it runs again" if aside is not None else "it runs again",
            )
    finally:
        if appender is not None:
            appender.close()
    return rows, tampered


def _move_aside(output: Path, directory: Path, stamp: str, task_id: str, index: int) -> Path:
    target = output / "tampered" / stamp / task_id / str(index)
    suffix = 1
    while target.exists() or target.is_symlink():
        suffix += 1
        target = output / "tampered" / f"{stamp}-{suffix}" / task_id / str(index)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(directory, target)
    return target


async def _runner_facts(runner: Runner, settings: RunSettings) -> dict[str, Any]:
    health = await runner.health(budget_s=settings.preflight_budget_s)
    return {
        "mode": "remote" if settings.runner else "embedded",
        "address": settings.runner or "in this process",
        "version": health.version,
        "status": health.status,
        "isolation": "embedded runner in this process, state in memory"
        if settings.runner is None
        else "remote runner process, state in its store",
        "db_service_connected": health.store_connected,
        "tool_adapters": list(health.adapters),
    }


async def run_pack(
    pack: Pack,
    agents: AgentFactory,
    users: UserSimulatorFactory,
    settings: RunSettings,
    observer: RunObserver | None = None,
) -> RunSummary:
    """Run the pack and write results under ``settings.output``; returns the summary (also written)."""
    if settings.trials < 1 or settings.concurrency < 1:
        raise ConfigError("--trials and --concurrency must be at least 1")
    if settings.ray is not None and settings.runner is not None:
        raise ConfigError("--ray and --runner exclude each other: Ray workers embed their own runners")
    observer = observer or _Silent()
    tasks = select_tasks(pack, settings.task_ids, settings.categories)
    judged = [loaded.task_id for loaded in tasks if loaded.task.grading.llm_judge is not None]
    if judged and settings.judge_model is None:
        raise ConfigError(
            f"{len(judged)} task(s) grade with an LLM judge and no judge model is set: {', '.join(judged)}; "
            "pass --judge-model M (or TOLOKAFORGE_JUDGE_MODEL), e.g. tolokaforge-mock-judge offline"
        )
    keys = [(loaded, index) for loaded in tasks for index in range(settings.trials)]
    # A new output folder holds no trial: no need to look for each one's files (thousands of stats).
    any_trials = (settings.output / "trials").is_dir()
    finished = [
        any_trials and is_finished(trial_dir(settings.output, loaded.task_id, index))
        for loaded, index in keys
    ]
    judge_url = settings.judge_model.base_url if settings.judge_model is not None else None
    passwords = (url_password(settings.llm_endpoint), url_password(judge_url))
    redactor = Redactor.from_environment(extra=passwords)
    identity = _identity(pack, agents, tasks, settings, redactor)
    recorded, signer, ledger = _check_output(settings, identity, any(finished))
    redactor = Redactor.from_environment(extra=passwords)  # now with the run's key (run_keys.py)
    rows: dict[tuple[str, int], TrialRow] = {}
    tampered: list[dict[str, Any]] = []
    if recorded is not None:
        rows, tampered = _verify_finished(settings.output, keys, finished, signer, ledger)
    todo = [key for key, done in zip(keys, finished, strict=True) if not done]
    # Trials start round by round: every task's trial 0, then every task's trial 1, ... (results stay in
    # task order). A task's third trial then usually starts after its first two were graded, so it
    # reuses their golden replay (docs/grading.md) instead of replaying too, and a run cut short has
    # covered every task. Task by task, a task's trials were all in flight at once and nearly every
    # trial replayed: 534 replays in 560 hash grades on the retail pack at concurrency 16, 112 now.
    todo.sort(key=lambda key: key[1])  # stable: within a round, tasks keep their order
    if todo and settings.model_checks:
        # After the checks of the output folder (a refused --resume costs no token), before any trial.
        async with aiohttp.ClientSession() as session:
            await check_models(session, settings.model_checks, redactor.text)
    summary = RunSummary(
        pack=pack.name,
        agent=agents.name,
        trials_per_task=settings.trials,
        cells={task_id: dict(cell) for task_id, cell in settings.cells.items()},
    )
    summary.skipped = len(keys) - len(todo)
    summary.skipped_tasks = [{"task_id": task.task_id, "reason": task.reason} for task in pack.skipped]
    summary.tampered = tampered
    started_at = str(recorded["started_at"]) if recorded and recorded.get("started_at") else utc_now()
    resumed_at = [*map(str, cast(list[Any], recorded.get("resumed_at") or [])), utc_now()] if recorded else []
    runner_facts: dict[str, Any] = dict(recorded.get("runner") or {}) if recorded else {}
    found_at = utc_now()
    tampered_so_far = [
        *cast(list[Any], (recorded or {}).get("tampered") or []),
        *({**entry, "found_at": found_at} for entry in tampered),
    ]
    trial_settings = TrialSettings(
        run_id=settings.output.name,
        max_attempts=settings.max_attempts,
        default_max_turns=settings.default_max_turns,
        judge_model=settings.judge_model,
    )
    crashes: dict[tuple[str, int], str] = {}
    infrastructure: set[tuple[str, int]] = set()
    key_kept = recorded is not None  # a resumed run's key is where it was found

    def manifest(finished_at: str | None) -> None:
        nonlocal key_kept
        if not key_kept:  # with run.yaml, never before: a run that did not start leaves no key behind
            store_run_key(signer.run_id, signer.key, settings.output)
            run_ledger(signer, settings.output).create()
            key_kept = True
        write_manifest(
            settings.output,
            identity,
            runner=runner_facts,
            llm_endpoint=settings.llm_endpoint,
            started_at=started_at,
            finished_at=finished_at,
            resumed_at=resumed_at,
            run_id=signer.run_id,
            tampered=tampered_so_far,
            signer=signer,
            redactor=redactor,
        )

    def begin(facts: dict[str, Any]) -> None:
        nonlocal runner_facts
        runner_facts = facts
        settings.output.mkdir(parents=True, exist_ok=True)
        manifest(None)
        observer.started(len(keys), summary.skipped)

    by_id = {loaded.task_id: loaded for loaded in tasks}

    def finish(outcome: TrialOutcome) -> None:
        grading = by_id[outcome.task_id].task.grading
        if outcome.infrastructure_error is not None:
            # Never graded: no grade.yaml, so the trial is unfinished and --resume runs it.
            crashes[(outcome.task_id, outcome.trial_index)] = redactor.text(
                f"infrastructure: {outcome.infrastructure_error}"
            )
            infrastructure.add((outcome.task_id, outcome.trial_index))
        written = writer.write(
            settings.output,
            outcome,
            configured_components(grading),
            finished=outcome.infrastructure_error is None,
        )
        if written.grade is not None:
            row = row_of(
                outcome.task_id, outcome.trial_index, written.grade, written.trajectory, written.metrics
            )
            rows[(outcome.task_id, outcome.trial_index)] = row
            entries.add(row)
        observer.trial_done(outcome)

    def crash(key: tuple[str, int], error: str) -> None:
        crashes[key] = redactor.text(f"the host failed on it: {error}")

    started = time.perf_counter()
    writer = ResultWriter(
        helper=len(todo) >= HELPER_MIN_TRIALS, ledger=run_ledger(signer, settings.output), redactor=redactor
    )
    entries = EntryTexts()
    try:
        if todo and settings.ray is not None:
            from .ray.driver import ray_pool  # Ray costs seconds to import: only runs that use it

            async with ray_pool(
                settings.ray,
                concurrency=settings.concurrency,
                trial_settings=trial_settings,
                transport_budget_s=settings.transport_budget_s,
                preflight_budget_s=settings.preflight_budget_s,
                isolation=settings.isolation,
                golden_replay=settings.golden_replay,
                sandbox_without=settings.sandbox_without,
            ) as pool:
                begin(pool.facts)
                await pool.run(todo, finish, crash)
        elif todo:
            async with open_runner(
                settings.runner,
                token_file=settings.runner_token_file,
                ca_file=settings.runner_ca,
                transport_budget_s=settings.transport_budget_s,
                isolation=settings.isolation,
                sandbox_without=settings.sandbox_without,
                golden_replay=settings.golden_replay,
            ) as runner:
                begin(await _runner_facts(runner, settings))  # unreachable: raised here, in seconds
                slots = TrialSlots(settings.concurrency)

                async def one(loaded: LoadedTask, index: int) -> None:
                    async with slots.slot() as slot:
                        try:
                            outcome = await run_trial(
                                runner, loaded, index, agents, users, trial_settings, slot=slot
                            )
                        except Exception as error:  # a host defect on one trial must not sink the others
                            crash((loaded.task_id, index), f"{type(error).__name__}: {error}")
                            return
                    finish(outcome)

                async with asyncio.TaskGroup() as group:
                    for loaded, index in todo:
                        group.create_task(one(loaded, index))
        else:
            settings.output.mkdir(parents=True, exist_ok=True)
            observer.started(len(keys), summary.skipped)
        await writer.drain()
        texts = entries.texts()
    finally:
        writer.close()
        entries.close()
    summary.wall_time_s = time.perf_counter() - started
    summary.ran = len(todo)
    summarise(
        settings.output,
        [(loaded.task_id, index) for loaded, index in keys],
        summary,
        crashes,
        rows,
        infrastructure,
    )
    write_summary(settings.output, summary, texts)
    manifest(utc_now())
    return summary
