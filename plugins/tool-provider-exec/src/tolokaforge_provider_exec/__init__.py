"""A ToolProviderService plugin that runs commands in the trial's workspace.

``run`` starts one command (an argv, no shell): its output streams back as output chunks while it runs,
then its exit status, then the result; a non-zero exit is execution_failed carrying the exit code.
``bash`` runs a command line in the trial's persistent shell and answers its status. A command still
running at its deadline is killed (with everything it started) and answers timeout. ``calculator``
evaluates arithmetic.
"""

from __future__ import annotations

__all__: list[str] = []
