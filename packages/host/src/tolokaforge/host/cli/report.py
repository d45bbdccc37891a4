"""What a run shows on the terminal: a rich progress bar while it runs, a summary table at the end."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..conductor import TrialOutcome
from ..summary import RunSummary

__all__ = ["ProgressObserver", "summary_table"]


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


def summary_table(summary: RunSummary) -> Table:
    k = summary.trials_per_task
    table = Table(title=f"{summary.pack} · agent {summary.agent}", show_header=True, header_style="bold")
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("trials", f"{len(summary.rows)} ({summary.ran} run, {summary.skipped} resumed)"),
        ("passed", str(sum(row.passed for row in summary.rows))),
        ("pass rate", _fmt(summary.pass_rate)),
        (f"pass^{k}", _fmt(summary.pass_hat(k))),
        ("mean score", _fmt(summary.mean_score)),
        ("grading errors", str(sum(row.grading_error is not None for row in summary.rows))),
        (
            "terminations",
            ", ".join(f"{name} {count}" for name, count in sorted(summary.terminations().items())),
        ),
        ("tokens", str(summary.tokens)),
        ("cost (USD)", _fmt(summary.cost_usd, ".4f")),
        ("wall time (s)", _fmt(summary.wall_time_s, ".2f")),
    ]
    judge = summary.judge_spend()
    if judge is not None:  # grading spend, shown apart from the agent's
        rows.insert(-1, ("judge calls / tokens", f"{judge['calls']} / {judge['tokens']}"))
        rows.insert(-1, ("judge cost (USD)", _fmt(judge["cost_usd"], ".4f")))
    for name, value in rows:
        table.add_row(name, value)
    return table
