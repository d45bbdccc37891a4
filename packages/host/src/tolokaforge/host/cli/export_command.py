"""``tolokaforge export --format tau2 RUN_DIR OUT.json``: a finished run in another harness's results format.

``tau2``: τ²-bench's ``Results`` JSON (``tau2 view``, ``Results.load``, ``compute_metrics`` read it), for
runs of ``--pack tau2:<domain>`` (packs/tau2/export.py says what maps to what). The run is verified
first, as ``tolokaforge report`` does; a trial whose record was tampered with is exported as a skipped
sample (reward 0) and named on stderr. Exits:

====  ============================================================================================
0     written; the run was verified and every trial's record is intact
1     written, but not everything in it is vouched for: a record was tampered with, or the run could
      not be verified (only with ``--unverified``)
2     nothing written: a usage error, a folder that is not a τ² run, a run that cannot be verified
      (without ``--unverified``), or τ² not installed (or not the version the run used)
====  ============================================================================================
"""

from __future__ import annotations

from pathlib import Path

import click

from ..results.tau2_export import tau2_results
from ..run.exit_status import EXIT_INCOMPLETE, EXIT_OK
from .options import option

__all__ = ["export_command"]


@click.command("export")
@option(
    "--format",
    "format_",
    default=None,
    type=click.Choice(["tau2"]),
    help="The results format: tau2 (τ²-bench's Results JSON; runs of --pack tau2:<domain>).",
)
@option(
    "--unverified",
    is_flag=True,
    default=False,
    help="Export a run that cannot be verified here (its key not on this machine, run.yaml edited, "
    "its ledger broken); the file says so.",
)
@click.argument("run_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.argument("out", type=click.Path(path_type=Path, dir_okay=False))
def export_command(format_: str | None, unverified: bool, run_dir: Path, out: Path) -> int:
    """Write the run in RUN_DIR to OUT in another harness's results format."""
    if format_ is None:  # checked here: click's own message for a missing choice spans two lines
        raise click.UsageError("missing option --format: tau2 (τ²-bench's Results JSON)")
    export = tau2_results(run_dir, unverified=unverified)
    path = export.write(out)
    for problem in export.problems:
        click.echo(f"tolokaforge: warning: {run_dir}: {problem}", err=True)
    simulations = len(export.results.simulations)
    click.echo(f"exported {simulations} simulations of τ² {export.domain} to {path}")
    return EXIT_INCOMPLETE if export.problems else EXIT_OK
