"""Command-line options, each paired with an ini key, and the settings read from them once.

===================================== ================================= =============================================
option                                ini key                           meaning
===================================== ================================= =============================================
``--tolokaforge-pack PATH``           ``tolokaforge_packs``             a pack to test (repeatable / one per line)
``--tolokaforge-runner H:P``          ``tolokaforge_runner``            test this runner instead of an embedded one
``--tolokaforge-runner-token-file P`` ``tolokaforge_runner_token_file`` that runner's token file (default: the file a
                                                                        runner on this machine wrote for its port)
``--tolokaforge-checks L``            ``tolokaforge_checks``            comma list of the checks to run (default all)
``--tolokaforge-provider C``          ``tolokaforge_providers``         a tool-provider command line to check for
                                                                        conformance (repeatable / one per line)
``--tolokaforge-ray ADDR``            ``tolokaforge_ray``               run the per-task checks on this Ray cluster
                                                                        (``local``, ``auto``, ``HOST:PORT``)
===================================== ================================= =============================================

A command-line value wins over the ini value. Relative command-line paths resolve from the directory
pytest was invoked in; relative ini paths from the ini file's directory.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pytest

__all__ = ["CHECKS", "TASK_CHECKS", "Settings", "add_options", "parse_providers", "read_settings"]

TASK_CHECKS = ("load", "golden", "resolve", "taxonomy", "determinism")
"""Per-task checks, in the order they run (determinism last: its two replays want time between them)."""
CHECKS = (*TASK_CHECKS, "runner")


@dataclass(frozen=True)
class Settings:
    packs: tuple[Path, ...]
    runner: str | None
    checks: frozenset[str]
    providers: tuple[tuple[str, ...], ...] = ()
    """Tool-provider command lines (already shell-split) to check against the provider contract."""
    ray: str | None = None
    """A Ray cluster to run the per-task checks on (ray_checks.py); None runs them here."""
    runner_token_file: Path | None = None
    """The ``runner``'s token file; None: the one a runner on this machine wrote for its port."""

    @property
    def active(self) -> bool:
        """The plugin does nothing unless at least one pack or provider is given."""
        return bool(self.packs or self.providers)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("tolokaforge", "Tolokaforge task-pack contract tests")
    group.addoption(
        "--tolokaforge-pack",
        action="append",
        dest="tolokaforge_packs",
        default=[],
        metavar="PATH",
        help="A task pack (its root or its tasks/ folder, or tau2:<domain>) to turn into contract tests. Repeatable.",
    )
    group.addoption(
        "--tolokaforge-runner",
        dest="tolokaforge_runner",
        default=None,
        metavar="HOST:PORT",
        help="Test the runner at HOST:PORT instead of starting an embedded one.",
    )
    group.addoption(
        "--tolokaforge-runner-token-file",
        dest="tolokaforge_runner_token_file",
        default=None,
        metavar="PATH",
        help="The --tolokaforge-runner's token file (default: the file a runner on this machine wrote "
        "for its port).",
    )
    group.addoption(
        "--tolokaforge-checks",
        dest="tolokaforge_checks",
        default=None,
        metavar="LIST",
        help=f"Comma list of the checks to run: {', '.join(CHECKS)} (default: all).",
    )
    group.addoption(
        "--tolokaforge-provider",
        action="append",
        dest="tolokaforge_providers",
        default=[],
        metavar="CMD",
        help="A tool-provider command line (shell-split) to check against the provider contract. Repeatable.",
    )
    group.addoption(
        "--tolokaforge-ray",
        dest="tolokaforge_ray",
        default=None,
        metavar="ADDRESS",
        help="Run the per-task checks on a Ray cluster: local, auto or HOST:PORT "
        "(needs tolokaforge-host[ray]).",
    )
    parser.addini("tolokaforge_packs", "Task packs to test, one per line.", type="paths", default=[])
    parser.addini("tolokaforge_runner", "HOST:PORT of a runner to test instead of an embedded one.")
    parser.addini("tolokaforge_runner_token_file", "The tolokaforge_runner's token file.")
    parser.addini("tolokaforge_ray", "A Ray cluster (local, auto, HOST:PORT) to run the per-task checks on.")
    parser.addini("tolokaforge_checks", f"Comma list of the checks to run: {', '.join(CHECKS)}.")
    parser.addini(
        "tolokaforge_providers",
        "Tool-provider command lines to check, one per line.",
        type="linelist",
        default=[],
    )


def read_settings(config: pytest.Config) -> Settings:
    """The settings for this session; an unknown check name is a usage error naming the valid ones."""
    given = cast(list[str], config.getoption("tolokaforge_packs") or [])
    if given:
        base = config.invocation_params.dir
        # tau2:<domain> names a τ² domain, not a folder (docs/tau2.md).
        packs = tuple(
            Path(value) if value.startswith("tau2:") else (base / value).resolve() for value in given
        )
    else:
        packs = tuple(Path(p).resolve() for p in cast(list[Path], config.getini("tolokaforge_packs")))
    runner = cast(str | None, config.getoption("tolokaforge_runner")) or (
        cast(str, config.getini("tolokaforge_runner")).strip() or None
    )
    raw_checks = cast(str | None, config.getoption("tolokaforge_checks")) or cast(
        str, config.getini("tolokaforge_checks")
    )
    commands = cast(list[str], config.getoption("tolokaforge_providers") or []) or cast(
        list[str], config.getini("tolokaforge_providers")
    )
    ray = cast(str | None, config.getoption("tolokaforge_ray")) or (
        cast(str, config.getini("tolokaforge_ray")).strip() or None
    )
    token_file = cast(str | None, config.getoption("tolokaforge_runner_token_file"))
    if token_file:
        runner_token_file = (config.invocation_params.dir / token_file).resolve()
    else:
        ini_value = cast(str, config.getini("tolokaforge_runner_token_file")).strip()
        ini_dir = config.inipath.parent if config.inipath is not None else config.rootpath
        runner_token_file = (ini_dir / ini_value).resolve() if ini_value else None
    return Settings(
        packs=packs,
        runner=runner,
        checks=parse_checks(raw_checks),
        providers=parse_providers(commands),
        ray=ray,
        runner_token_file=runner_token_file,
    )


def parse_providers(commands: list[str]) -> tuple[tuple[str, ...], ...]:
    """Each command line shell-split; an empty or unparsable one is a usage error."""
    parsed: list[tuple[str, ...]] = []
    for command in commands:
        try:
            argv = tuple(shlex.split(command))
        except ValueError as error:
            raise pytest.UsageError(f"--tolokaforge-provider {command!r}: {error}") from error
        if not argv:
            raise pytest.UsageError("--tolokaforge-provider: an empty command line")
        parsed.append(argv)
    return tuple(parsed)


def parse_checks(raw: str) -> frozenset[str]:
    names = [part.strip() for part in raw.split(",") if part.strip()]
    if not names:
        return frozenset(CHECKS)
    unknown = [name for name in names if name not in CHECKS]
    if unknown:
        raise pytest.UsageError(
            f"--tolokaforge-checks: unknown check(s) {', '.join(unknown)}; choose from {', '.join(CHECKS)}"
        )
    return frozenset(names)
