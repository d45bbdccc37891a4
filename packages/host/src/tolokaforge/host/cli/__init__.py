"""``tolokaforge``: the command group. One module per command (run, validate).

Every option is also an environment variable, ``TOLOKAFORGE_<OPTION>`` (shown in ``--help``). A
prerequisite failure — a pack that does not load, a runner that cannot be reached, a missing API key —
is printed as one line on stderr with exit status 2, never as a traceback.
"""

from __future__ import annotations

import sys

import click

from ..errors import HostError
from .run_command import run_command
from .validate_command import validate_command

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
def cli() -> None:
    """Tolokaforge: run an agent through a task pack and grade every trial."""


cli.add_command(run_command)
cli.add_command(validate_command)


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="tolokaforge", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("tolokaforge: aborted", err=True)
        sys.exit(130)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except HostError as error:
        click.echo(f"tolokaforge: error: {error}", err=True)
        sys.exit(2)
