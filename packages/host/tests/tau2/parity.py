"""τ²'s own evaluator on an exported run, compared with our grades: the parity proof, reusable.

    from .parity import assert_tau2_parity, tau2_disagreements

    export_tau2_results(run_dir, out)                    # tolokaforge export --format tau2
    results = assert_tau2_parity(out, summary)           # raises listing every disagreement

For every simulation of the file, ``evaluate_simulation(simulation, task, EvaluationType.ALL,
solo_mode=False, domain=...)`` -- τ²'s evaluator, which replays the trajectory on a fresh τ²
environment -- must give the reward our grade gave (within τ²'s 1e-6) and the same breakdown per reward
type; an evaluator that raises (its replay found a tool answering otherwise than our transcript says)
is a disagreement too. With our run's summary, τ²'s ``compute_metrics`` pass^k must equal ours for every
k it computes. Skipped samples (trials without a trusted record) are evaluated as τ² would: AGENT_ERROR,
reward 0.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tolokaforge.host.results.summary import RunSummary

__all__ = [
    "Disagreement",
    "assert_tau2_parity",
    "load_tau2_results",
    "pass_hat_disagreements",
    "tau2_disagreements",
]

TOLERANCE = 1e-6
"""τ²'s own: ``metrics.agent_metrics.is_successful`` counts a reward within this of 1 a success."""


def _tau2(module: str) -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm loads (the evaluator's)
    return importlib.import_module(module)


@dataclass(frozen=True)
class Disagreement:
    """One simulation where τ²'s evaluator and our grade differ (``what``: reward, breakdown or raised)."""

    task_id: str
    trial: int | None
    what: str
    ours: object
    tau2: object

    def __str__(self) -> str:
        return f"task {self.task_id} trial {self.trial}: {self.what}: ours {self.ours!r}, τ² {self.tau2!r}"


def load_tau2_results(path: Path) -> Any:
    """The file as τ² reads it (``Results.load``)."""
    return _tau2("tau2.data_model.simulation").Results.load(path)


def _breakdown(reward_info: Any) -> dict[str, float]:
    breakdown: dict[Any, Any] = (reward_info.reward_breakdown if reward_info is not None else None) or {}
    return {str(getattr(kind, "value", kind)): float(value) for kind, value in breakdown.items()}


def _same(ours: dict[str, float], theirs: dict[str, float]) -> bool:
    return ours.keys() == theirs.keys() and all(abs(ours[k] - theirs[k]) <= TOLERANCE for k in ours)


def tau2_disagreements(results: Any, *, domain: str | None = None) -> list[Disagreement]:
    """Every simulation of ``results`` (τ²'s Results) where τ²'s evaluator disagrees with the exported
    reward_info (our grade); [] when all agree. ``domain``: the registry name (default: the file's)."""
    evaluator = _tau2("tau2.evaluator.evaluator")
    domain = domain or results.info.environment_info.domain_name
    tasks = {task.id: task for task in results.tasks}
    found: list[Disagreement] = []
    for simulation in results.simulations:
        ours = simulation.reward_info
        key = (simulation.task_id, simulation.trial)
        try:
            theirs = evaluator.evaluate_simulation(
                simulation, tasks[simulation.task_id], evaluator.EvaluationType.ALL, False, domain
            )
        except Exception as error:  # τ²'s replay raises when a tool answers otherwise than recorded
            found.append(Disagreement(*key, "raised", ours.reward if ours else None, repr(error)[:2000]))
            continue
        reward = ours.reward if ours is not None else None
        if reward is None or abs(reward - theirs.reward) > TOLERANCE:
            found.append(Disagreement(*key, "reward", reward, theirs.reward))
        if not _same(_breakdown(ours), _breakdown(theirs)):
            found.append(Disagreement(*key, "breakdown", _breakdown(ours), _breakdown(theirs)))
    return found


def pass_hat_disagreements(results: Any, summary: RunSummary) -> list[str]:
    """Where τ²'s ``compute_metrics`` pass^k differs from our summary's (``pass_hat_ks``, and ``pass^1`` /
    ``pass^k`` for k = trials per task); [] when they agree."""
    metrics = _tau2("tau2.metrics.agent_metrics").compute_metrics(results)
    theirs = {int(k): float(v) for k, v in metrics.pass_hat_ks.items()}
    ours = summary.pass_hat_ks()
    found: list[str] = []
    if ours.keys() != theirs.keys():
        found.append(f"pass^k for k in {sorted(ours)} (ours) but {sorted(theirs)} (τ²)")
    for k in sorted(ours.keys() & theirs.keys()):
        if abs(ours[k] - theirs[k]) > TOLERANCE:
            found.append(f"pass^{k}: ours {ours[k]!r}, τ² {theirs[k]!r}")
    for k in {1, summary.trials_per_task} & theirs.keys():
        figure = summary.pass_hat(k)
        if figure is None or abs(figure - theirs[k]) > TOLERANCE:
            found.append(f"summary pass^{k}: ours {figure!r}, τ² {theirs[k]!r}")
    return found


def assert_tau2_parity(path: Path, summary: RunSummary | None = None) -> Any:
    """Load the exported file with τ²'s loader and assert τ²'s evaluator gives every simulation our
    reward and breakdown (and, given our ``summary``, τ²'s pass^k is ours). Returns the Results."""
    results = load_tau2_results(path)
    problems = [str(found) for found in tau2_disagreements(results)]
    if summary is not None:
        problems += pass_hat_disagreements(results, summary)
    assert not problems, f"{len(problems)} disagreement(s) with τ²:\n" + "\n".join(problems)
    return results
