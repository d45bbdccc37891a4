"""``tolokaforge report RUN_DIR`` writes ``report.html``; ``tolokaforge view RUN_DIR`` serves it locally.

Both check every trial record's signature first (html_report/collect.py): each tampered record, an
altered ``run.yaml`` or a run that cannot be checked (no key here) is one ``tolokaforge: warning:`` line
on stderr and a notice in the page. ``report`` exits 1 when it found a record or ``run.yaml`` altered,
else 0.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from ..errors import ConfigError
from ..exit_status import EXIT_INCOMPLETE, EXIT_OK
from ..html_report import ReportData, publish_report, serve_report
from .options import option

__all__ = ["report_command", "view_command"]

_RUN_DIR = click.Path(path_type=Path, exists=True, file_okay=False)


@click.command("report")
@click.argument("run_dir", type=_RUN_DIR)
def report_command(run_dir: Path) -> int:
    """Write RUN_DIR/report.html: one self-contained page (no network) of every task and trial."""
    path, data = publish_report(run_dir)
    altered = _warn(data)
    click.echo(f"report: {path}")
    return EXIT_INCOMPLETE if altered else EXIT_OK


def _warn(data: ReportData) -> bool:
    """One stderr line per thing the report cannot vouch for; True when something was altered."""
    if data.verification is not None:
        click.echo(f"tolokaforge: warning: {data.run_dir}: {data.verification}", err=True)
    for trial in data.tampered:
        click.echo(
            f"tolokaforge: warning: trial {trial.row.task_id}/{trial.row.trial_index}: record tampered: "
            f"{trial.tampered}; shown as tampered, not counted",
            err=True,
        )
    return bool(data.tampered) or data.run_yaml_altered


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
