"""What a python tool may return besides its text: an error it reports itself.

Tool workers import this module inside the sandbox (a tool's code does), so it imports the standard
library only.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ReportedError"]


@dataclass(frozen=True)
class ReportedError:
    """A tool's own error answer: ``invoke(data, **arguments)`` returns it instead of its text.

    Unlike an exception, it is not a failed call: the call's changes to the tables stand, committed
    exactly as a successful call's are. The runner answers ExecuteTool with status ERROR,
    ``error_message`` = ``message`` and ``reported_by_tool`` set, and the model reads exactly
    ``"Error: " + message`` (also when ``message`` is empty). See docs/protocol/runner.md#executetool-statuses.
    """

    message: str

    def __post_init__(self) -> None:
        if not isinstance(self.message, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"ReportedError.message must be a str, got {type(self.message).__name__}")
