"""``tolokaforge report RUN_DIR`` writes ``report.html``; ``tolokaforge view RUN_DIR`` serves it locally;
``tolokaforge report RUN_DIR RUN_DIR [...]`` writes one page comparing the runs (``comparison.html``).

Both verify the run and check every trial record first (html_report/collect.py). Each tampered record
is one ``tolokaforge: warning:`` line on stderr and a notice in the page. A run that cannot be verified
is one ``tolokaforge: error (exit N): RUN_DIR: NOT VERIFIED: ...`` line (the page, still written, says
NOT VERIFIED at its top). ``report`` exits:

====  ============================================================================================
0     the run was verified and every trial's record is intact
1     the results are not trustworthy: a record was tampered with, ``run.yaml`` is missing, unsigned
      or was edited, or the run's ledger breaks its chain or was cut short
2     this machine cannot verify the run: its key (or ledger head) is not here, or cannot be used;
      copy them from the machine that ran it (or a usage error: not a results folder)
====  ============================================================================================

Comparing runs, each run is verified the same way and the status is the worst of theirs.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from ..errors import ConfigError
from ..html_report import COMPARISON_FILE, ReportData, publish_comparison, publish_report, serve_report
from ..run.exit_status import EXIT_INCOMPLETE, EXIT_OK, EXIT_USAGE
from .options import option

__all__ = ["report_command", "view_command"]

_RUN_DIR = click.Path(path_type=Path, exists=True, file_okay=False)


@click.command("report")
@click.argument("run_dirs", metavar="RUN_DIR [RUN_DIR...]", nargs=-1, required=True, type=_RUN_DIR)
@option(
    "--html",
    "html",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help=f"Where to write the page (default: RUN_DIR/report.html for one run, ./{COMPARISON_FILE} for several).",
)
def report_command(run_dirs: tuple[Path, ...], html: Path | None) -> int:
    """Write RUN_DIR/report.html: one self-contained page (no network) of every task and trial.

    With several RUN_DIRs, write one page comparing them: pass^k and pass@k per run and per
    category, each task's change against the first run (newly failing first), tokens and cost."""
    if len(run_dirs) == 1:
        path, data = publish_report(run_dirs[0], html)
        click.echo(f"report: {path}")
        return _warn(data, exiting=True)
    path, comparison = publish_comparison(list(run_dirs), html or Path(COMPARISON_FILE))
    click.echo(f"report: {path}")
    return max(_warn(run.data, exiting=True, prefix=f"{run.data.run_dir}: ") for run in comparison.runs)


def _status(data: ReportData) -> int:
    if data.unverifiable == "key":
        return EXIT_USAGE
    if data.unverifiable is not None or data.tampered:
        return EXIT_INCOMPLETE
    return EXIT_OK


def _warn(data: ReportData, *, exiting: bool = False, prefix: str = "") -> int:
    """One stderr line per thing the report cannot vouch for (the run's last: an error when the
    command is ``exiting`` with the status returned, else a warning); ``prefix`` names the run when
    the page shows several."""
    status = _status(data)
    for trial in data.tampered:
        click.echo(
            f"tolokaforge: warning: {prefix}trial {trial.row.task_id}/{trial.row.trial_index}: record tampered: "
            f"{trial.tampered}; shown as tampered, not counted",
            err=True,
        )
    if data.verification is not None:
        kind = f"error (exit {status})" if exiting else "warning"
        click.echo(f"tolokaforge: {kind}: {data.run_dir}: {data.verification}", err=True)
    return status


@click.command("view")
@click.argument("run_dir", type=_RUN_DIR)
@option("--port", type=click.IntRange(0, 65535), default=8000, help="Port on 127.0.0.1 (0: any free port).")
def view_command(run_dir: Path, port: int) -> None:
    """Write RUN_DIR/report.html and serve it on 127.0.0.1 until interrupted."""
    report, data = publish_report(run_dir)
    _warn(data)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            serve_report(report, port, lambda url: click.echo(f"serving {report} at {url}  (Ctrl-C stops)"))
    except OSError as error:
        raise ConfigError(f"cannot serve on 127.0.0.1:{port}: {error}") from error
