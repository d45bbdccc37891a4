"""``tolokaforge report RUN_DIR`` writes ``report.html``; ``tolokaforge view RUN_DIR`` serves it locally."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from ..errors import ConfigError
from ..html_report import serve_report, write_report
from .options import option

__all__ = ["report_command", "view_command"]

_RUN_DIR = click.Path(path_type=Path, exists=True, file_okay=False)


@click.command("report")
@click.argument("run_dir", type=_RUN_DIR)
def report_command(run_dir: Path) -> None:
    """Write RUN_DIR/report.html: one self-contained page (no network) of every task and trial."""
    click.echo(f"report: {write_report(run_dir)}")


@click.command("view")
@click.argument("run_dir", type=_RUN_DIR)
@option("--port", type=click.IntRange(0, 65535), default=8000, help="Port on 127.0.0.1 (0: any free port).")
def view_command(run_dir: Path, port: int) -> None:
    """Write RUN_DIR/report.html and serve it on 127.0.0.1 until interrupted."""
    report = write_report(run_dir)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            serve_report(report, port, lambda url: click.echo(f"serving {report} at {url}  (Ctrl-C stops)"))
    except OSError as error:
        raise ConfigError(f"cannot serve on 127.0.0.1:{port}: {error}") from error
