"""Tolokaforge Runner: the RunnerService (trial lifecycle, tool execution, grading) on grpclib.

Start one in this process with :func:`start_runner` (embedded mode, ephemeral loopback port), or as a
service with the ``tolokaforge-runner`` command.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .server import RunnerHandle, RunnerSettings, start_runner

__all__ = ["RunnerHandle", "RunnerSettings", "__version__", "start_runner"]
