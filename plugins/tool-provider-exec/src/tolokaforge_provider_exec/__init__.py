"""A ToolProviderService plugin that runs a command in the trial's workspace.

One operation, ``run``: the command's output streams back as output chunks while it runs, then its
exit status, then the result. A non-zero exit is execution_failed carrying the exit code; a command
still running at its deadline is killed (with everything it started) and answers timeout.
"""

from __future__ import annotations

__all__: list[str] = []
