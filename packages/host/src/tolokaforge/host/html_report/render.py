"""Render a results folder as one self-contained ``report.html`` (Jinja2; CSS and JS inline).

The page needs no network: no CDN, no fonts, no images from elsewhere. Everything it shows is escaped
by Jinja2's autoescaping; the only script is ``templates/report.js`` (filter and sort the index).
Secrets this process knows are redacted from the page (redaction.py), even if a file of an older run
still carries one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jinja2 import ChainableUndefined, Environment, PackageLoader, select_autoescape

from ..results.redaction import Redactor
from .collect import ReportData, collect

__all__ = ["REPORT_FILE", "publish_report", "render_report", "write_report"]

REPORT_FILE = "report.html"


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


def render_report(data: ReportData) -> str:
    return _environment().get_template("report.html.j2").render(data=data, summary=data.summary)


def publish_report(run_dir: Path) -> tuple[Path, ReportData]:
    """Write ``report.html``; returns where, and what it was made of (what was verified, what not)."""
    data = collect(run_dir)
    path = run_dir / REPORT_FILE
    path.write_text(Redactor.from_environment().text(render_report(data)), encoding="utf-8")
    return path, data


def write_report(run_dir: Path) -> Path:
    return publish_report(run_dir)[0]
