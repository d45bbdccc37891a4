"""Tolokaforge Runner: the RunnerService (trial lifecycle, tool execution, grading) on grpclib.

Start one in this process with :func:`start_runner` (embedded mode, ephemeral loopback port), or as a
service with the ``tolokaforge-runner`` command. :func:`compile_parameters` is the check a tool's call
arguments get (:class:`ToolLoadError`: its schema is none), public for the host's ``validate``.
:class:`Limits` and the sandbox (:class:`Confinement`,
:class:`View`, :class:`SandboxUnavailable`) say how pack code is confined (docs/isolation.md);
:func:`confined_launch` and :func:`scrubbed_env` start a child in it (the host's pack loader reads a
pack's code that way). :class:`ChildProcess` is the runner's supervised child
process (its own process group, drained pipes, the whole tree killed on stop), public for the pytest
plugin's provider checks. :class:`BrowserPool` (with :class:`SiteRequest`, :class:`SiteResponse` and
:func:`find_chromium`) is the browser engine behind web tasks' ``browser`` tool (docs/web-tasks.md).

These names are imported on first use, not here: a tool worker imports ``tolokaforge.runner.workers``
and must not pay for (or expose) the gRPC stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .browser import BrowserPool, SiteRequest, SiteResponse, find_chromium
    from .edge.guard import EdgeLimits
    from .edge.server import RunnerHandle, RunnerSettings, start_runner
    from .errors import ToolLoadError
    from .lifecycle.local import LocalRunner
    from .process.confinement import Confinement, SandboxUnavailable, View
    from .process.sandbox import Limits, scrubbed_env
    from .process.supervisor import confined_launch
    from .tools.base import compile_parameters
    from .tools.child_process import ChildProcess

__all__ = [
    "BrowserPool",
    "ChildProcess",
    "Confinement",
    "EdgeLimits",
    "Limits",
    "LocalRunner",
    "RunnerHandle",
    "RunnerSettings",
    "SandboxUnavailable",
    "SiteRequest",
    "SiteResponse",
    "ToolLoadError",
    "View",
    "__version__",
    "compile_parameters",
    "confined_launch",
    "find_chromium",
    "scrubbed_env",
    "start_runner",
]


def __getattr__(name: str) -> Any:
    if name in ("RunnerHandle", "RunnerSettings", "start_runner"):
        from .edge import server

        return getattr(server, name)
    if name == "LocalRunner":
        from .lifecycle.local import LocalRunner

        return LocalRunner
    if name == "EdgeLimits":
        from .edge.guard import EdgeLimits

        return EdgeLimits
    if name in ("Confinement", "SandboxUnavailable", "View"):
        from .process import confinement

        return getattr(confinement, name)
    if name == "Limits":
        from .process.sandbox import Limits

        return Limits
    if name == "scrubbed_env":
        from .process.sandbox import scrubbed_env

        return scrubbed_env
    if name == "confined_launch":
        from .process.supervisor import confined_launch

        return confined_launch
    if name == "compile_parameters":
        from .tools.base import compile_parameters

        return compile_parameters
    if name == "ToolLoadError":
        from .errors import ToolLoadError

        return ToolLoadError
    if name in ("BrowserPool", "SiteRequest", "SiteResponse", "find_chromium"):
        from . import browser

        return getattr(browser, name)
    if name == "ChildProcess":
        from .tools.child_process import ChildProcess

        return ChildProcess
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
