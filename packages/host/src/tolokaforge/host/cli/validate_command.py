"""``tolokaforge validate --pack PATH``: load the pack and report every problem at once (exit 1 if any)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import PackLoadError
from ..packs import load_pack
from .options import option

__all__ = ["validate_command"]


@click.command("validate")
@option(
    "--pack",
    "pack_path",
    required=True,
    type=click.Path(path_type=Path),
    help="The pack root, or its tasks/ folder; or tau2:<domain> (airline, retail, telecom, mock: docs/tau2.md).",
)
@option(
    "--split",
    default=None,
    metavar="NAME",
    help="With --pack tau2:<domain>: τ²'s task split (base, train, test, full; telecom also small) [default: base].",
)
def validate_command(pack_path: Path, split: str | None) -> None:
    """Check a pack: every file, key, referenced file and tool, all problems in one report."""
    try:
        pack = load_pack(pack_path, split=split)
    except PackLoadError as error:
        for problem in error.problems:
            click.echo(str(problem))
        click.echo(f"{len(error.problems)} problem(s) in {pack_path}", err=True)
        sys.exit(1)
    tools = {
        tool.name for loaded in pack.tasks for tool in (*loaded.task.agent_tools, *loaded.task.user_tools)
    }
    for skipped in pack.skipped:
        click.echo(f"SKIPPED {skipped.task_id}: {skipped.reason}")
    skipped_note = f" ({len(pack.skipped)} skipped)" if pack.skipped else ""
    click.echo(f"{pack.name}: {len(pack.tasks)} tasks{skipped_note}, {len(tools)} tools: OK")
