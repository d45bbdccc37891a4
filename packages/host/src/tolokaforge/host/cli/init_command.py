"""``tolokaforge init DIR``: write a one-task starter pack (validates, passes its golden run)."""

from __future__ import annotations

from pathlib import Path

import click

from ..scaffold import init_pack
from .options import option

__all__ = ["init_command"]


@click.command("init")
@click.argument("directory", type=click.Path(path_type=Path))
@option("--name", default=None, help="Pack name [default: the folder's name].")
def init_command(directory: Path, name: str | None) -> None:
    """Write a one-task pack into DIRECTORY (new or empty); then: tolokaforge validate --pack DIRECTORY."""
    written = init_pack(directory, name)
    click.echo(f"wrote {len(written)} files into {directory}")
    click.echo(
        f"next: tolokaforge validate --pack {directory} && tolokaforge run --pack {directory} --agent golden"
    )
