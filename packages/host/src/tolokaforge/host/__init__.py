"""Tolokaforge host: load a task pack, drive agents through a runner, grade, write results.

The CLI is ``tolokaforge`` (:mod:`tolokaforge.host.cli`); the library entry points are
:func:`load_pack` and :func:`run_pack`.
"""

from __future__ import annotations

from .errors import HostError, PackLoadError, PackProblem
from .packs import LoadedTask, Pack, load_pack
from .run import RunSettings, run_pack
from .summary import RunSummary

__all__ = [
    "HostError",
    "LoadedTask",
    "Pack",
    "PackLoadError",
    "PackProblem",
    "RunSettings",
    "RunSummary",
    "load_pack",
    "run_pack",
]
