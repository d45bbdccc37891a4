"""``tolokaforge``: the command group. One module per command (run, validate, list, report/view, init,
export); ``tolokaforge --version`` prints the versions of the host, the runner and the engine protocol.

Every option is also an environment variable, ``TOLOKAFORGE_<OPTION>`` (shown in ``--help``; the rule
is ``tolokaforge.core.settings.env_var``). A usage error or a prerequisite failure — a bad option, a
pack that does not load, a runner or model endpoint that cannot be reached, a missing API key — is one
line on stderr with exit status 2, never a traceback. ``run`` ends with a line naming its exit status
(see ``tolokaforge.host.run.exit_status``); an interrupt exits 130.
"""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, version

import click

from ..errors import HostError, RunnerError
from ..run.exit_status import EXIT_INTERRUPTED, EXIT_USAGE
from .export_command import export_command
from .init_command import init_command
from .list_command import list_command
from .report_command import report_command, view_command
from .run_command import run_command
from .validate_command import validate_command

__all__ = ["cli", "main"]


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION

    click.echo(f"tolokaforge {_installed('tolokaforge-host')}")
    click.echo(f"runner {_installed('tolokaforge-runner')}, engine protocol {ENGINE_PROTOCOL_VERSION}")
    ctx.exit(0)


def _installed(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "not installed"  # a host that only calls a remote --runner needs no runner of its own


@click.group(context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Print the version of tolokaforge, of its runner and of the engine protocol, and exit.",
)
def cli() -> None:
    """Tolokaforge: run an agent through a task pack and grade every trial."""


cli.add_command(run_command)
cli.add_command(validate_command)
cli.add_command(list_command)
cli.add_command(report_command)
cli.add_command(view_command)
cli.add_command(init_command)
cli.add_command(export_command)


def _fail(message: str) -> None:
    click.echo(f"tolokaforge: error (exit {EXIT_USAGE}): {message}", err=True)
    sys.exit(EXIT_USAGE)


def main(argv: list[str] | None = None) -> None:
    result: object = 0
    try:
        result = cli.main(args=argv, prog_name="tolokaforge", standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo(
            f"tolokaforge: interrupted (exit {EXIT_INTERRUPTED}); --resume continues the run", err=True
        )
        sys.exit(EXIT_INTERRUPTED)
    except click.UsageError as error:
        hint = f" (see {error.ctx.command_path} --help)" if error.ctx is not None else ""
        _fail(f"{error.format_message()}{hint}")
    except click.ClickException as error:
        _fail(error.format_message())
    except (HostError, RunnerError) as error:
        _fail(str(error))
    sys.exit(result if isinstance(result, int) else 0)
