"""Render a results folder as one self-contained ``report.html`` (Jinja2; CSS and JS inline).

The page needs no network: no CDN, no fonts, no images from elsewhere; a trial's screenshots are the
run folder's own files, referenced by relative path (from wherever the page is written to the run
folder), so the page shows them next to the folder and ``tolokaforge view`` serves them. Everything it shows is escaped
by Jinja2's autoescaping; the only script is ``templates/report.js`` (search, filter and sort the
index), or, on the page comparing several runs (``compare.html.j2``), ``templates/compare.js``
(search and filter the per-task changes).
Secrets this process knows are redacted from the page (redaction.py), even if a file of an older run
still carries one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import ChainableUndefined, Environment, PackageLoader, select_autoescape

from ..results.redaction import Redactor
from ..results.summary import DEFINITIONS
from .collect import ReportData, collect
from .compare import CHANGES, Comparison, compare
from .filmstrip import attachment_refs

__all__ = [
    "COMPARISON_FILE",
    "REPORT_FILE",
    "publish_comparison",
    "publish_report",
    "render_comparison",
    "render_report",
    "write_report",
]

REPORT_FILE = "report.html"
COMPARISON_FILE = "comparison.html"
"""Where ``tolokaforge report RUN RUN [...]`` writes its page by default (in the current directory)."""


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("tolokaforge.host.html_report", "templates"),
        autoescape=select_autoescape(["html", "j2"], default_for_string=True, default=True),
        undefined=ChainableUndefined,  # result files are YAML: optional keys are simply absent
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _num
    env.filters["pretty"] = _pretty
    return env


def _num(value: Any, spec: str = ".3f") -> str:
    return "—" if value is None else format(value, spec)


def _pretty(value: Any) -> str:
    """Tool arguments and outputs: JSON re-indented when they are JSON, else as they are."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
        if isinstance(value, str):
            return value
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def render_report(data: ReportData, page: Path | None = None) -> str:
    """The page; written at ``page`` (default: the run folder's ``report.html``), its screenshots are
    referenced relative to it."""
    base = ""
    if page is not None and page.parent.resolve() != data.run_dir.resolve():
        base = quote(Path(os.path.relpath(data.run_dir.resolve(), page.parent.resolve())).as_posix()) + "/"
    template = _environment().get_template("report.html.j2")
    return template.render(data=data, summary=data.summary, files_base=base, refs=attachment_refs)


def publish_report(run_dir: Path, output: Path | None = None) -> tuple[Path, ReportData]:
    """Write ``report.html`` (or ``output``); returns where, and what it was made of (what was
    verified, what not)."""
    data = collect(run_dir)
    path = output or run_dir / REPORT_FILE
    path.write_text(Redactor.from_environment().text(render_report(data, path)), encoding="utf-8")
    return path, data


def write_report(run_dir: Path) -> Path:
    return publish_report(run_dir)[0]


def render_comparison(comparison: Comparison, page: Path | None = None) -> str:
    """The comparison page; written at ``page``, it links each run whose ``report.html`` exists."""
    links = [
        os.path.relpath(report, page.parent) if page is not None and report.is_file() else None
        for report in (run.data.run_dir / REPORT_FILE for run in comparison.runs)
    ]
    template = _environment().get_template("compare.html.j2")
    return template.render(comparison=comparison, changes=CHANGES, definitions=DEFINITIONS, links=links)


def publish_comparison(run_dirs: list[Path], output: Path) -> tuple[Path, Comparison]:
    """Write the runs' comparison page to ``output``; returns where, and what it was made of."""
    comparison = compare(run_dirs)
    output.parent.mkdir(parents=True, exist_ok=True)
    page = render_comparison(comparison, output.resolve())
    output.write_text(Redactor.from_environment().text(page), encoding="utf-8")
    return output, comparison
