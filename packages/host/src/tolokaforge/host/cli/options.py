"""The host's click options, named by the one convention of ``tolokaforge.core.settings``.

``--some-name`` is also ``TOLOKAFORGE_SOME_NAME`` (shown in ``--help``); a few options also honour the
variable the wider ecosystem uses (``OPENAI_BASE_URL``), after ours.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from tolokaforge.core.settings import env_var

__all__ = ["ENV_PREFIX", "isolation_option", "option", "without_option"]

ENV_PREFIX = "TOLOKAFORGE_"

F = TypeVar("F", bound=Callable[..., Any])


def option(*names: str, also_env: Sequence[str] = (), **kwargs: Any) -> Callable[[F], F]:
    """``click.option`` with ``envvar`` set by the convention, from the first ``--long`` name."""
    flag = next(name for name in names if name.startswith("--"))
    return click.option(*names, envvar=[env_var(ENV_PREFIX, flag), *also_env], show_envvar=True, **kwargs)


isolation_option = option(
    "--isolation",
    type=click.Choice(["sandbox", "process", "thread"]),
    default="sandbox",
    help="How pack code is confined -- the embedded runner's tools and checks, and what the loader asks "
    "the pack's code: in the OS sandbox (bubblewrap, seccomp, Landlock, a cgroup per trial; "
    "docs/isolation.md), in supervised processes without it (weaker, for machines without the sandbox), "
    "or (trusted mode, only for code you trust) python tools on the runner's own threads.",
)
without_option = option(
    "--without",
    "sandbox_without",
    multiple=True,
    type=click.Choice(["bubblewrap", "seccomp", "landlock", "cgroup"]),
    help="Run sandboxed without this layer, which this machine lacks (repeatable); the run manifest "
    "records it. Without it, a missing layer stops the command before it starts.",
)
