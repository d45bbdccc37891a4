"""The HTML report of a results folder: ``collect`` reads it, ``render`` writes ``report.html``,
``serve`` shows it on 127.0.0.1 (``tolokaforge report`` / ``tolokaforge view``)."""

from __future__ import annotations

from .collect import ReportData, TrialView, collect
from .render import REPORT_FILE, publish_report, render_report, write_report
from .serve import serve_report

__all__ = [
    "REPORT_FILE",
    "ReportData",
    "TrialView",
    "collect",
    "publish_report",
    "render_report",
    "serve_report",
    "write_report",
]
