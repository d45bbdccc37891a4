"""The run summary: every selected trial's row (read back from its files), aggregated.

Computed from the trials' documents, so a resumed run summarises the trials it skipped (read back
from their files) exactly like the ones it ran (the documents it has just written, not parsed again). Every figure names what it counts (``DEFINITIONS`` is written into
``summary.yaml``): rates are over *all* selected trials, where a trial without a grade counts as not
passed; mean scores are over *graded* trials only.

Per task with n trials of which c passed, for k <= n: ``pass^k`` = C(c, k) / C(n, k), the chance that k
trials drawn from the task all pass (tau-bench's); ``pass@k`` = 1 - C(n - c, k) / C(n, k), the chance
that at least one of k drawn trials passes (the unbiased estimator of the Codex paper). Run-level
values average the per-task ones over tasks with at least k trials; ``pass_hat_ks`` is τ²-bench's
figure (pass^k for k = 1 .. the fewest trials any task has; every selected trial is a row, so that is
``trials_per_task``, and a trial without a grade fails, as a τ² simulation that failed scores 0). The
rubric judge's spend is grading spend, summed apart from the agent's (``judge``, when a judge ran).

``summary.yaml`` is a convenience copy for people and scripts: it is not signed, and nothing reads it
back as a result. What vouches for a run is ``tolokaforge report`` (or ``--resume``), which verifies
every trial's record (records.py) and computes the figures again from the verified ones.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from math import comb
from pathlib import Path
from typing import Any

from .cell_rows import CellRow, cell_rows
from .trial_rows import TRIAL_KINDS, TrialRow, read_row
from .yaml_files import dump_yaml

__all__ = [
    "DEFINITIONS",
    "EntryTexts",
    "RunSummary",
    "TaskRow",
    "TrialRow",
    "pass_at",
    "pass_hat",
    "per_trial_entry",
    "render_summary",
    "summarise",
    "write_summary",
]

DEFINITIONS: dict[str, str] = {
    "pass_rate": "passed trials / all selected trials (a trial without a grade counts as not passed)",
    "mean_score": "mean score over graded trials only (ungraded trials have no score)",
    "pass^k": "per task C(passed, k) / C(trials, k): k drawn trials all pass; mean over tasks",
    "pass@k": "per task 1 - C(failed, k) / C(trials, k): one of k drawn trials passes; mean over tasks",
    "pass_hat_ks": "pass^k for every k from 1 to the fewest trials any task has, mean over all tasks: "
    "tau2-bench's compute_metrics (a trial without a grade counts as failed); for a tau2:<domain> run, "
    "the domain's pass^k",
    "outcomes": "trials by what became of them: passed, failed (graded, did not pass), not_gradeable "
    "(ended without a grade), lost (an earlier version's grade of a lost trial), unfinished (no grade.yaml; "
    "infrastructure failures and trials lost on every attempt included)",
    "components": "per grade component: trials it was evaluated in, and its mean over those",
    "unscored_components": "per component: trials whose task configured it and whose grade left it unscored "
    "(a custom-checks suite under fail_on_error: false that could not run, say)",
    "grades_carrying": "graded or ungraded trials whose grade.yaml carries this field (non-empty)",
    "models": "tokens, calls and cost per model over all trials (agent and simulated user)",
    "judge": "the rubric judge's trials, calls, tokens and cost (grading spend, not in tokens/cost_usd)",
    "trace_gates_failed": "graded trials a trace-check gate failed (each such trial fails, whatever its score)",
    "tampered": "trials whose record failed its check on this resume (altered, deleted, an earlier record "
    "put back, one the run's ledger never accepted): moved aside, revoked in the ledger, not counted, and "
    "run again",
}


def pass_hat(n: int, c: int, k: int) -> float:
    return comb(c, k) / comb(n, k)


def pass_at(n: int, c: int, k: int) -> float:
    return 1.0 - comb(n - c, k) / comb(n, k)


def _mean(values: Iterable[float]) -> float | None:
    listed = list(values)
    return sum(listed) / len(listed) if listed else None


@dataclass(frozen=True)
class TaskRow:
    task_id: str
    trials: int
    passed: int
    graded: int
    mean_score: float | None

    @property
    def pass_rate(self) -> float:
        return self.passed / self.trials if self.trials else 0.0

    def pass_hat(self, k: int) -> float | None:
        return pass_hat(self.trials, self.passed, k) if k <= self.trials else None

    def pass_at(self, k: int) -> float | None:
        return pass_at(self.trials, self.passed, k) if k <= self.trials else None


@dataclass
class RunSummary:
    pack: str
    agent: str
    trials_per_task: int
    rows: list[TrialRow] = field(default_factory=list[TrialRow])
    wall_time_s: float = 0.0
    ran: int = 0
    skipped: int = 0
    tampered: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    """Trial records this resume found tampered with (each ran again): task, index, file, problem, where
    moved (None when nothing of it was left)."""
    skipped_tasks: list[dict[str, str]] = field(default_factory=list[dict[str, str]])
    """Tasks of the pack that were not run on this machine, each ``{task_id, reason}`` (a terminal task
    whose container cannot be provided here): no trial, never counted as passed (docs/terminal.md)."""
    cells: dict[str, dict[str, Any]] = field(default_factory=dict[str, dict[str, Any]])
    """A multi-pack run's cells (matrix.py): run task id -> {pack, model, task_id}; empty otherwise."""

    def per_pack_model(self) -> list[CellRow]:
        return cell_rows(self.rows, self.cells)

    @property
    def pass_rate(self) -> float:
        return sum(row.passed for row in self.rows) / len(self.rows) if self.rows else 0.0

    def tasks(self) -> list[TaskRow]:
        by_task: dict[str, list[TrialRow]] = {}
        for row in self.rows:
            by_task.setdefault(row.task_id, []).append(row)
        return [
            TaskRow(
                task_id=task_id,
                trials=len(rows),
                passed=sum(row.passed for row in rows),
                graded=sum(row.graded for row in rows),
                mean_score=_mean(row.score for row in rows if row.score is not None),
            )
            for task_id, rows in by_task.items()
        ]

    def pass_hat(self, k: int) -> float | None:
        """pass^k over tasks that have at least k trials; None when none has."""
        return _mean(value for task in self.tasks() if (value := task.pass_hat(k)) is not None)

    def pass_at(self, k: int) -> float | None:
        return _mean(value for task in self.tasks() if (value := task.pass_at(k)) is not None)

    def pass_hat_ks(self) -> dict[int, float]:
        """pass^k for every k from 1 to the fewest trials any task has, each the mean over all tasks:
        τ²-bench's ``compute_metrics`` (``pass_hat_ks``), where a trial that passed is one whose reward
        is 1 and a trial without a grade is one that failed (τ² has none: it scores a failed
        simulation 0). Empty for a run without trials."""
        tasks = self.tasks()
        fewest = min((task.trials for task in tasks), default=0)
        return {
            k: sum(pass_hat(t.trials, t.passed, k) for t in tasks) / len(tasks) for k in range(1, fewest + 1)
        }

    @property
    def mean_score(self) -> float | None:
        return _mean(row.score for row in self.rows if row.score is not None)

    @property
    def graded(self) -> int:
        return sum(row.graded for row in self.rows)

    @property
    def tokens(self) -> int:
        return sum(row.tokens for row in self.rows)

    @property
    def cost_usd(self) -> float | None:
        costs = [row.cost_usd for row in self.rows]
        return None if any(cost is None for cost in costs) else sum(cost or 0.0 for cost in costs)

    def outcomes(self) -> dict[str, int]:
        return {kind: sum(row.kind == kind for row in self.rows) for kind in TRIAL_KINDS}

    def not_passed(self) -> list[TrialRow]:
        return [row for row in self.rows if not row.passed]

    def terminations(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.rows:
            if row.kind != "unfinished":
                key = row.termination or "unknown"
                counts[key] = counts.get(key, 0) + 1
        return counts

    def components(self) -> dict[str, dict[str, Any]]:
        """Every component any grade names (new ones slot in), evaluated count and mean."""
        names = dict.fromkeys(name for row in self.rows for name in row.components)
        table: dict[str, dict[str, Any]] = {}
        for name in names:
            values = [v for row in self.rows if (v := row.components.get(name)) is not None]
            table[name] = {"evaluated_in": len(values), "mean": _mean(values)}
        return table

    def unscored(self) -> dict[str, int]:
        """Per component, how many graded trials left it unscored although the task configured it."""
        counts: dict[str, int] = {}
        for row in self.rows:
            for name in row.unscored:
                counts[name] = counts.get(name, 0) + 1
        return counts

    def grades_carrying(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.rows:
            for name in row.grade_fields:
                counts[name] = counts.get(name, 0) + 1
        return dict(sorted(counts.items()))

    def judge_spend(self) -> dict[str, Any] | None:
        """The judges' calls, tokens and cost over the run, apart from the agent's; None when none ran."""
        reports = [row.judge for row in self.rows if row.judge is not None]
        if not reports:
            return None
        costs = [report.get("cost_usd") for report in reports]
        return {
            "trials_judged": len(reports),
            "calls": sum(int(report.get("calls") or 0) for report in reports),
            "tokens": sum(
                int(report.get("prompt_tokens") or 0) + int(report.get("completion_tokens") or 0)
                for report in reports
            ),
            "cost_usd": None if any(cost is None for cost in costs) else sum(float(c or 0.0) for c in costs),
        }

    def models(self) -> dict[str, dict[str, Any]]:
        table: dict[str, dict[str, Any]] = {}
        for row in self.rows:
            for model, spend in row.by_model.items():
                entry = table.setdefault(
                    model, {"prompt_tokens": 0, "completion_tokens": 0, "llm_calls": 0, "cost_usd": 0.0}
                )
                for key in ("prompt_tokens", "completion_tokens", "llm_calls"):
                    entry[key] += int(spend.get(key) or 0)
                cost = spend.get("cost_usd")
                entry["cost_usd"] = (
                    None if entry["cost_usd"] is None or cost is None else entry["cost_usd"] + cost
                )
        return table

    def to_dict(self) -> dict[str, Any]:
        k = self.trials_per_task
        outcomes = self.outcomes()
        return {
            "pack": self.pack,
            "agent": self.agent,
            "trials": len(self.rows),
            "trials_per_task": k,
            "ran": self.ran,
            "skipped_by_resume": self.skipped,
            **({"skipped_tasks": self.skipped_tasks} if self.skipped_tasks else {}),
            "tampered": self.tampered,
            "outcomes": outcomes,
            "passed": outcomes["passed"],
            "graded": self.graded,
            "pass_rate": self.pass_rate,
            "mean_score": self.mean_score,
            "pass^1": self.pass_hat(1),
            f"pass^{k}": self.pass_hat(k),
            f"pass@{k}": self.pass_at(k),
            "pass_hat_ks": self.pass_hat_ks(),
            "grading_errors": sum(row.grading_error is not None for row in self.rows),
            "trace_gates_failed": sum(row.trace_gate_failed for row in self.rows),
            "terminations": self.terminations(),
            "components": self.components(),
            "unscored_components": self.unscored(),
            "grades_carrying": self.grades_carrying(),
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "models": self.models(),
            **({"judge": judge} if (judge := self.judge_spend()) is not None else {}),
            "wall_time_s": round(self.wall_time_s, 3),
            "trials_per_second": round(self.ran / self.wall_time_s, 3) if self.wall_time_s > 0 else None,
            **({"per_pack_model": [row.to_dict() for row in self.per_pack_model()]} if self.cells else {}),
            "per_task": [
                {
                    "task_id": task.task_id,
                    "trials": task.trials,
                    "passed": task.passed,
                    "graded": task.graded,
                    "pass_rate": task.pass_rate,
                    "mean_score": task.mean_score,
                    f"pass@{k}": task.pass_at(k),
                    f"pass^{k}": task.pass_hat(k),
                }
                for task in self.tasks()
            ],
            "failures": [
                {
                    "task_id": row.task_id,
                    "trial_index": row.trial_index,
                    "kind": row.kind,
                    "reason": row.reason,
                }
                for row in self.not_passed()
            ],
            "per_trial": [per_trial_entry(row) for row in self.rows],
            "definitions": DEFINITIONS,
        }


def per_trial_entry(row: TrialRow) -> dict[str, Any]:
    """One trial's entry in ``summary.yaml``'s ``per_trial``."""
    return {
        "task_id": row.task_id,
        "trial_index": row.trial_index,
        "outcome": row.kind,
        "passed": row.passed,
        "score": row.score,
        "termination_reason": row.termination,
        "grading_error": row.grading_error,
        "unscored": list(row.unscored),
        "trace_gate_failed": row.trace_gate_failed,
    }


class EntryTexts:
    """``per_trial`` entries rendered as YAML on a background thread while the run goes on.

    ``per_trial`` is the one part of the summary that grows with the run: rendered whole at the end it
    took 50-150 ms for 1,024 trials, after the last trial and before the run returned. Here the
    entries are rendered ``batch`` at a time as trials finish (one at a time costs several times
    the CPU: PyYAML's set-up per call), and the end only renders the last few and joins the texts.
    """

    def __init__(self, batch: int = 64) -> None:
        self._batch = batch
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tolokaforge-summary")
        self._waiting: list[TrialRow] = []
        self._batches: list[tuple[list[TrialRow], Future[list[str]]]] = []

    def add(self, row: TrialRow) -> None:
        self._waiting.append(row)
        if len(self._waiting) >= self._batch:
            batch, self._waiting = self._waiting, []
            self._batches.append((batch, self._pool.submit(_entry_texts, batch)))

    def texts(self) -> dict[tuple[str, int], str]:
        rendered = [(batch, future.result()) for batch, future in self._batches]
        rendered.append((self._waiting, _entry_texts(self._waiting)))
        return {
            (row.task_id, row.trial_index): text
            for batch, texts in rendered
            for row, text in zip(batch, texts, strict=True)
        }

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _entry_texts(rows: Sequence[TrialRow]) -> list[str]:
    """Each row's entry as ``per_trial`` lists it: one document rendered, cut where each entry starts
    (a line opening with ``- `` at the margin; anything inside an entry is indented)."""
    if not rows:
        return []
    lines = dump_yaml([per_trial_entry(row) for row in rows]).splitlines(keepends=True)
    texts: list[list[str]] = []
    for line in lines:
        if line.startswith("- "):
            texts.append([])
        texts[-1].append(line)
    return ["".join(text) for text in texts]


def summarise(
    output: Path,
    keys: Sequence[tuple[str, int]],
    summary: RunSummary,
    crashes: dict[tuple[str, int], str] | None = None,
    written: Mapping[tuple[str, int], TrialRow] | None = None,
    infrastructure: Collection[tuple[str, int]] = (),
) -> RunSummary:
    """Fill ``summary.rows`` from the result files of every trial named by ``keys``.

    ``written`` holds the rows of trials this process has just written, built from the very documents
    it wrote (:func:`~.trial_rows.row_of`), so they are not parsed back; every other trial is read.
    ``infrastructure`` names the crashed trials the infrastructure ended (their rows say so).
    """
    crashes, written = crashes or {}, written or {}
    summary.rows.extend(
        written.get((task_id, index))
        or read_row(
            output,
            task_id,
            index,
            crashes.get((task_id, index)),
            infrastructure=(task_id, index) in infrastructure,
        )
        for task_id, index in keys
    )
    return summary


def render_summary(summary: RunSummary, entry_texts: Mapping[tuple[str, int], str] | None = None) -> str:
    """``summary.yaml``'s text: exactly ``dump_yaml(summary.to_dict())``, with the ``per_trial`` entries
    found in ``entry_texts`` (by task id and trial index, rendered by :class:`EntryTexts`) taken as
    they are."""
    document = summary.to_dict()
    if not entry_texts or not summary.rows:
        return dump_yaml(document)
    entries: list[dict[str, Any]] = document.pop("per_trial")
    definitions = document.pop("definitions")  # the last key, after per_trial
    texts = [dump_yaml(document)]
    for row, entry in zip(summary.rows, entries, strict=True):
        texts.append(entry_texts.get((row.task_id, row.trial_index)) or dump_yaml([entry]))
    closing = dump_yaml({"definitions": definitions})
    # A block scalar that keeps its trailing newlines (``|+``) leaves PyYAML's document open: the whole
    # document then ends with the end marker ``...``, which each part dumped alone carries at its end.
    opened = any(text.endswith(_DOCUMENT_END) for text in texts)
    parts = [text[: -len(_DOCUMENT_END) + 1] if text.endswith(_DOCUMENT_END) else text for text in texts]
    parts.insert(1, "per_trial:\n")
    if opened and not closing.endswith(_DOCUMENT_END):
        closing += "...\n"
    return "".join(parts) + closing


_DOCUMENT_END = "\n...\n"


def write_summary(
    output: Path, summary: RunSummary, entry_texts: Mapping[tuple[str, int], str] | None = None
) -> Path:
    path = output / "summary.yaml"
    path.write_text(render_summary(summary, entry_texts), encoding="utf-8")
    return path
