"""What a run shows on the terminal: a rich progress bar while it runs, a summary table at the end."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..results.outcome import TrialOutcome
from ..results.summary import RunSummary

__all__ = ["ProgressObserver", "cells_table", "failures_table", "summary_table", "tasks_table"]


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
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def started(self, total: int, skipped: int) -> None:
        description = f"trials ({skipped} done earlier)" if skipped else "trials"
        self._progress.update(self._bar, total=total - skipped, description=description)

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


def failures_table(summary: RunSummary) -> Table:
    """Every trial that did not pass, with what became of it and its one-line reason."""
    table = Table(title="trials that did not pass", header_style="bold")
    table.add_column("trial")
    table.add_column("outcome")
    table.add_column("reason", overflow="fold")
    for row in summary.not_passed():
        table.add_row(f"{row.task_id}/{row.trial_index}", row.kind.replace("_", " "), row.reason)
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
