"""What a run shows on the terminal: a rich progress bar while it runs, a summary table at the end."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..results.outcome import TrialOutcome
from ..results.summary import RunSummary

__all__ = [
    "FAILURES_SHOWN",
    "ProgressObserver",
    "cells_table",
    "failures_table",
    "summary_table",
    "tasks_table",
]


class ProgressObserver:
    """A RunObserver drawing one bar: trials done of trials to run, with passes so far."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("passed {task.fields[passed]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self._bar = self._progress.add_task("trials", total=0, passed=0)
        self._passed = 0

    def __enter__(self) -> ProgressObserver:
        # The bar is drawn from ``started`` on: a run refused before its first trial (exit 2) draws none.
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress.live.is_started:
            self._progress.stop()

    def started(self, total: int, skipped: int) -> None:
        description = f"trials ({skipped} done earlier)" if skipped else "trials"
        self._progress.update(self._bar, total=total - skipped, description=description)
        self._progress.start()

    def trial_done(self, outcome: TrialOutcome) -> None:
        self._passed += outcome.passed
        self._progress.update(self._bar, advance=1, passed=self._passed)


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return "—" if value is None else format(value, spec)


def cells_table(summary: RunSummary) -> Table:
    """A multi-pack run's cells side by side: per pack x agent model, its trials and how they did."""
    table = Table(title="per pack x model", header_style="bold")
    for name in ("pack", "model", "tasks", "trials", "passed", "pass rate", "mean score (graded)"):
        table.add_column(name, justify="left" if name in ("pack", "model") else "right", overflow="fold")
    for cell in summary.per_pack_model():
        table.add_row(
            cell.pack,
            cell.model or "—",
            str(cell.tasks),
            str(cell.trials),
            str(cell.passed),
            _fmt(cell.pass_rate),
            _fmt(cell.mean_score),
        )
    return table


def tasks_table(summary: RunSummary) -> Table:
    """Per task: trials, passed, pass rate, mean score over graded, pass@k and pass^k."""
    k = summary.trials_per_task
    table = Table(title="per task", header_style="bold")
    for name, justify in [("task", "left"), ("trials", "right"), ("passed", "right"), ("pass rate", "right"),
                          ("mean score (graded)", "right"), (f"pass@{k}", "right"), (f"pass^{k}", "right")]:  # fmt: skip
        table.add_column(name, justify=justify, overflow="fold")  # pyright: ignore[reportArgumentType]
    for task in summary.tasks():
        table.add_row(
            task.task_id,
            str(task.trials),
            str(task.passed),
            _fmt(task.pass_rate),
            _fmt(task.mean_score),
            _fmt(task.pass_at(k)),
            _fmt(task.pass_hat(k)),
        )
    return table


FAILURES_SHOWN = 20
"""Rows of the end-of-run failure table; the rest are in summary.yaml and the report."""


def failures_table(summary: RunSummary, output: Path, width: int = 80, shown: int = FAILURES_SHOWN) -> Table:
    """The first ``shown`` trials that did not pass, one line each in ``width`` columns: what became of
    the trial and the start of its reason; a caption points at ``output``'s summary.yaml and report for
    the rest."""
    failed = summary.not_passed()
    title = (
        "trials that did not pass" if len(failed) <= shown else f"trials that did not pass (first {shown})"
    )
    table = Table(title=title, header_style="bold", width=width)
    rows = [
        (f"{row.task_id}/{row.trial_index}", row.kind.replace("_", " "), row.reason) for row in failed[:shown]
    ]
    # One line per trial keeps the table a screenful (the whole reason is in summary.yaml and the
    # report): the trial and outcome keep their width, the reason gets what is left, cut with an ellipsis.
    trial_width = min(40, max((len(row[0]) for row in rows), default=5))
    outcome_width = max([len("outcome"), *(len(row[1]) for row in rows)])
    reason_width = max(16, width - trial_width - outcome_width - 10)  # 10: four rules, six padding spaces
    table.add_column("trial", overflow="fold", width=trial_width)
    table.add_column("outcome", no_wrap=True, width=outcome_width)
    table.add_column("reason", no_wrap=True, overflow="ellipsis", width=reason_width)
    for row in rows:
        table.add_row(*row)
    more = f"{len(failed) - shown} more of {len(failed)}; " if len(failed) > shown else ""
    table.caption = f"{more}every reason in full: 'failures' in {output / 'summary.yaml'}, or the report"
    return table


def summary_table(summary: RunSummary) -> Table:
    k = summary.trials_per_task
    total = len(summary.rows)
    table = Table(title=f"{summary.pack} · agent {summary.agent}", show_header=True, header_style="bold")
    table.add_column("metric (what it counts)")
    table.add_column("value", justify="right")
    outcomes = summary.outcomes()
    rows = [
        ("trials (selected)", f"{total} ({summary.ran} run, {summary.skipped} resumed)"),
        (
            "outcomes",
            ", ".join(f"{kind.replace('_', ' ')} {count}" for kind, count in outcomes.items() if count),
        ),
        (f"pass rate (passed / all {total})", _fmt(summary.pass_rate)),
        (f"mean score (over {summary.graded} graded)", _fmt(summary.mean_score)),
        (f"pass@{k} (mean over tasks)", _fmt(summary.pass_at(k))),
        (f"pass^{k} (mean over tasks)", _fmt(summary.pass_hat(k))),
        ("trace gates failed (trials)", str(sum(row.trace_gate_failed for row in summary.rows))),
        (
            "terminations",
            ", ".join(f"{name} {count}" for name, count in sorted(summary.terminations().items())),
        ),
        ("tokens (all models)", str(summary.tokens)),
        ("cost USD (all models)", _fmt(summary.cost_usd, ".4f")),
        ("wall time (s)", _fmt(summary.wall_time_s, ".2f")),
    ]
    for model, spend in summary.models().items():
        tokens = spend["prompt_tokens"] + spend["completion_tokens"]
        rows.append(
            (
                f"model {model}",
                f"{tokens} tokens, {spend['llm_calls']} calls, ${_fmt(spend['cost_usd'], '.4f')}",
            )
        )
    judge = summary.judge_spend()
    if judge is not None:  # grading spend, shown apart from the models the run drove
        rows.append(("judge calls / tokens", f"{judge['calls']} / {judge['tokens']}"))
        rows.append(("judge cost (USD)", _fmt(judge["cost_usd"], ".4f")))
    for name, value in rows:
        table.add_row(name, value)
    return table
