"""The HTML report of a results folder: ``collect`` reads it, ``render`` writes ``report.html``,
``serve`` shows it on 127.0.0.1 (``tolokaforge report`` / ``tolokaforge view``); ``compare`` puts
several runs side by side on one page (``tolokaforge report RUN RUN [...]``)."""

from __future__ import annotations

from .collect import ReportData, TrialView, collect
from .compare import Comparison, compare
from .render import (
    COMPARISON_FILE,
    REPORT_FILE,
    publish_comparison,
    publish_report,
    render_comparison,
    render_report,
    write_report,
)
from .serve import serve_report

__all__ = [
    "COMPARISON_FILE",
    "REPORT_FILE",
    "Comparison",
    "ReportData",
    "TrialView",
    "collect",
    "compare",
    "publish_comparison",
    "publish_report",
    "render_comparison",
    "render_report",
    "serve_report",
    "write_report",
]
