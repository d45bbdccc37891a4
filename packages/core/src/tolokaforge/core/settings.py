"""One settings convention for every Tolokaforge command: a flag, its environment variable, a typed value.

The rule, the same for the three commands: option ``--some-name`` of a command whose prefix is ``P`` is
also the variable ``P`` + ``SOME_NAME`` (``tolokaforge``: ``TOLOKAFORGE_``, ``tolokaforge-runner``:
``TOLOKAFORGE_RUNNER_``, ``tolokaforge-db``: ``TOLOKAFORGE_DB_``). A flag wins over its variable, the
variable over the default. :func:`env_var` is the rule; the host's click options and the services'
argparse options are both named by it.

The services describe their options once, as a pydantic model (field ``some_name`` is ``--some-name``;
its description is the help). :func:`parse_settings` reads flags and variables and validates them
together, so a bad or missing value is a :class:`SettingsError` whose text is one line naming where
the value came from (``TOLOKAFORGE_RUNNER_PORT='abc': ...``), never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, NoReturn, TypeVar, get_args, get_origin

from pydantic import BaseModel, ValidationError

__all__ = ["SettingsError", "env_var", "exit_on_settings_error", "parse_settings"]

M = TypeVar("M", bound=BaseModel)


class SettingsError(ValueError):
    """A setting that cannot be used; ``str()`` is one line naming the flag or variable."""


def env_var(prefix: str, option: str) -> str:
    """The variable of ``--some-name`` (or ``some_name``) under ``prefix``: ``PREFIX_SOME_NAME``."""
    return prefix + option.lstrip("-").upper().replace("-", "_")


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error raises instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise SettingsError(f"{message} (see {self.prog} --help)")


def _metavar(name: str, annotation: Any) -> str:
    """``{a,b}`` for a Literal (optional or not), else the field's name in capitals."""
    for candidate in (annotation, *get_args(annotation)):
        if get_origin(candidate) is Literal:
            return "{" + ",".join(str(value) for value in get_args(candidate)) + "}"
    return name.upper()


def _parser(prog: str, description: str, model: type[BaseModel], prefix: str) -> _OneLineParser:
    parser = _OneLineParser(prog=prog, description=description)
    for name, field in model.model_fields.items():
        default = field.default
        shown = "required" if field.is_required() else f"default: {default}"
        # A default made per instance (default_factory) has no one value to show.
        if default is None or field.default_factory is not None:
            shown = "required" if field.is_required() else "default: unset"
        parser.add_argument(
            _flag(name),
            dest=name,
            default=argparse.SUPPRESS,
            metavar=_metavar(name, field.annotation),
            help=f"{field.description or ''} [{env_var(prefix, name)}; {shown}]".strip(),
        )
    return parser


def _one_line(error: ValidationError, sources: Mapping[str, str], values: Mapping[str, Any]) -> str:
    first = error.errors()[0]
    message = str(first["msg"]).removeprefix("Value error, ")
    location = first["loc"]
    if location and isinstance(location[0], str) and location[0] in values:
        name = location[0]
        return f"{sources[name]}={values[name]!r}: {message}"
    if location and isinstance(location[0], str):
        return f"{_flag(location[0])} is required: {message}"
    return message


def parse_settings(
    model: type[M],
    *,
    prog: str,
    prefix: str,
    description: str = "",
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> M:
    """``model`` filled from flags (``argv``), then ``prefix`` variables, then its defaults; validated."""
    env = os.environ if environ is None else environ
    parser = _parser(prog, description, model, prefix)
    flags = vars(parser.parse_args(sys.argv[1:] if argv is None else list(argv)))
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name in model.model_fields:
        variable = env_var(prefix, name)
        if name in flags:
            values[name], sources[name] = flags[name], _flag(name)
        elif env.get(variable):
            values[name], sources[name] = env[variable], variable
    try:
        return model.model_validate(values)
    except ValidationError as error:
        raise SettingsError(_one_line(error, sources, values)) from None


def exit_on_settings_error(prog: str, body: Callable[[], int]) -> int:
    """Run a command's body; a :class:`SettingsError` becomes ``prog: error: ...`` and status 2."""
    try:
        return body()
    except SettingsError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
