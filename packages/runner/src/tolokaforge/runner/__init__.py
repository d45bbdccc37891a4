"""Tolokaforge Runner: the RunnerService (trial lifecycle, tool execution, grading) on grpclib.

Start one in this process with :func:`start_runner` (embedded mode, ephemeral loopback port), or as a
service with the ``tolokaforge-runner`` command. :class:`ChildProcess` is the runner's supervised child
process (its own process group, drained pipes, the whole tree killed on stop), public for the pytest
plugin's provider checks.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .grpc_edge import EdgeLimits
from .server import RunnerHandle, RunnerSettings, start_runner
from .tools.child_process import ChildProcess

__all__ = ["ChildProcess", "EdgeLimits", "RunnerHandle", "RunnerSettings", "__version__", "start_runner"]
