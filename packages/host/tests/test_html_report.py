"""The HTML report of a real run, rendered by headless Chromium (Debian's ``chromium``, installed by
``.ci/run``): the DOM it produced, the index filter and sort, and a screenshot."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml

PACKS = Path(__file__).resolve().parents[3] / "examples" / "packs"

CHECKS = """
def check_cancel_reason(state, transcript):
    order = state["orders"]["O-50035"]
    if order.get("cancel_reason") == "found_better_price":
        return {"status": "passed", "score": 1.0, "message": "cancelled for the customer's reason"}
    return {"status": "failed", "score": 0.0, "message": f"cancel reason is {order.get('cancel_reason')!r}"}
"""

SCRIPT: dict[str, Any] = {
    "default": [{"content": "Done.", "done": True}],
    "tasks": {
        "lookup_order_tracking": [
            {"tool_calls": [{"name": "get_customer_details", "arguments": {"customer_id": "C-129"}},
                            {"name": "get_order_details", "arguments": {"order_id": "O-50064"}}]},
            {"content": "Your order O-50064 has shipped: tracking number 1Z1749276956, promised to arrive "
                        "by 2026-03-19.", "done": True},
        ],
        "write_cancel_processing_order": [
            {"tool_calls": [{"name": "cancel_order", "arguments": {"order_id": "O-50035", "reason": "other"}}]},
            {"content": "Cancelled <b>O-50035</b>.", "done": True},
        ],
        # Its user is made an LLM user and the run names no user model: the trial ends `error`.
        "lookup_refund_quote": [{"content": "Let me look that up."}],
    },
}  # fmt: skip
TASKS = ("lookup_order_tracking", "write_cancel_processing_order", "lookup_refund_quote")


def _tolokaforge(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from tolokaforge.host.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run: one pass, one failed grade with a state diff and a failed custom check, one not gradeable."""
    root = tmp_path_factory.mktemp("report")
    pack = root / "retail"
    shutil.copytree(PACKS / "retail", pack, ignore=shutil.ignore_patterns("__pycache__"))
    task = pack / "tasks" / "write_cancel_processing_order"
    (task / "checks.py").write_text(CHECKS)
    grading = yaml.safe_load((task / "grading.yaml").read_text())
    grading["custom_checks"] = {"enabled": True, "file": "checks.py", "timeout_seconds": 10}
    (task / "grading.yaml").write_text(yaml.safe_dump(grading))
    quote = pack / "tasks" / "lookup_refund_quote" / "task.yaml"
    quote.write_text(quote.read_text().replace("mode: scripted", "mode: llm"))
    script = root / "script.yaml"
    script.write_text(yaml.safe_dump(SCRIPT))
    output = root / "run"
    tasks = [arg for name in TASKS for arg in ("--task", name)]
    done = _tolokaforge("run", "--pack", str(pack), "--agent", "scripted", "--script", str(script), *tasks,
                        "--output", str(output))  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr  # one trial is not gradeable
    report = _tolokaforge("report", str(output))
    assert report.returncode == 0 and report.stdout.strip() == f"report: {output / 'report.html'}", (
        report.stderr
    )
    return output


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "Debian's chromium is required (.ci/run installs it: apt-get install chromium)"
    return found


def _headless(*args: str) -> subprocess.CompletedProcess[bytes]:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
    return subprocess.run([_chromium(), *flags, *args], capture_output=True, timeout=120, check=True)


class _Dom(HTMLParser):
    """The elements a test asserts on, from the DOM Chromium serialised after running the page's script."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, str]] = []
        self.sections: dict[str, dict[str, str]] = {}
        self.text: list[str] = []
        self.external: list[str] = []
        self.shown = ""
        self._in_shown = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        classes = attributes.get("class", "").split()
        if tag == "tr" and "trial-row" in classes:
            self.rows.append(attributes)
        if tag == "section" and "trial" in classes:
            self.sections[attributes["id"]] = attributes
        if tag in ("script", "link", "img") and (attributes.get("src") or attributes.get("href")):
            self.external.append(attributes.get("src") or attributes.get("href") or "")
        self._in_shown = attributes.get("id") == "shown-count"

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._in_shown:
            self.shown += data

    def handle_endtag(self, tag: str) -> None:
        self._in_shown = False


def _dom(url: str) -> _Dom:
    dom = _Dom()
    dom.feed(_headless("--virtual-time-budget=5000", "--dump-dom", url).stdout.decode())
    return dom


def test_chromium_renders_every_trial_with_its_evidence(run_dir: Path) -> None:
    dom = _dom((run_dir / "report.html").as_uri())
    text = " ".join(" ".join(dom.text).split())
    assert dom.external == []  # self-contained: nothing fetched from anywhere
    assert [(row["data-outcome"], row["data-score"] != "") for row in dom.rows] == [
        ("passed", True),
        ("failed", True),
        ("not_gradeable", False),
    ]
    assert dom.shown == "3 of 3 trials shown"  # written by the page's script, so it ran
    # the failed trial: its reasons, the state diff (golden vs trial), the custom check, the conversation
    assert "trial-write_cancel_processing_order-0" in dom.sections
    assert "cancel_reason" in text and "found_better_price" in text  # the diff's golden value
    assert "check status score message cancel_reason failed 0.000 cancel reason is 'other'" in text
    assert "Cancelled <b>O-50035</b>." in text  # escaped text, not markup
    assert "cancel_order" in text and "SUCCESS" in text
    # the not-gradeable trial says why
    assert "not graded: the trial ended error" in text and "wants an LLM user" in text
    # figures say what they count
    assert "pass rate" in text and "1 passed / 3 trials" in text and "over 2 graded" in text


def test_the_index_filters_failed_trials_and_sorts_by_score(run_dir: Path) -> None:
    dom = _dom((run_dir / "report.html").as_uri() + "?failed=1&sort=score")
    order = [(row["data-outcome"], "hidden" in row.get("class", "")) for row in dom.rows]
    # no score first (the ones to look at), then by score; the passed trial hidden
    assert order == [("not_gradeable", False), ("failed", False), ("passed", True)]
    assert dom.shown == "2 of 3 trials shown"
    assert "hidden" in dom.sections["trial-lookup_order_tracking-0"].get("class", "")


def _shown(dom: _Dom) -> list[str]:
    return [row["data-trial"] for row in dom.rows if "hidden" not in row.get("class", "")]


def test_search_and_filters_pick_trials_by_text_outcome_and_category(run_dir: Path) -> None:
    page = (run_dir / "report.html").as_uri()
    # text only one trial's conversation holds (the tracking number its agent reported)
    searched = _dom(page + "?q=1z1749276956")
    assert _shown(searched) == ["trial-lookup_order_tracking-0"]
    assert searched.shown == "1 of 3 trials shown"
    assert "hidden" not in searched.sections["trial-lookup_order_tracking-0"].get("class", "")
    assert "hidden" in searched.sections["trial-write_cancel_processing_order-0"].get("class", "")
    by_task_id = _dom(page + "?q=lookup_")
    assert _shown(by_task_id) == ["trial-lookup_order_tracking-0", "trial-lookup_refund_quote-0"]
    lookups_not_passed = _dom(page + "?category=lookup&outcome=not-passed")
    assert _shown(lookups_not_passed) == ["trial-lookup_refund_quote-0"]
    assert [row["data-category"] for row in lookups_not_passed.rows] == ["lookup", "single_write", "lookup"]
    unfinished = _dom(page + "?outcome=unfinished")
    assert _shown(unfinished) == [] and unfinished.shown == "0 of 3 trials shown"


def test_the_report_shows_figures_per_category(run_dir: Path) -> None:
    text = " ".join(" ".join(_dom((run_dir / "report.html").as_uri()).text).split())
    # category, tasks, trials, passed, pass rate, mean score (graded), pass@1, pass^1, tokens, cost
    assert "lookup 2 2 1 0.500 1.000 0.500 0.500 0 $0.0000" in text
    assert "single_write 1 1 0 0.000 0.000 0.000 0.000 0 $0.0000" in text


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def test_screenshot(run_dir: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    blank = tmp_path / "blank.png"
    (tmp_path / "blank.html").write_text("<!doctype html><title>blank</title>")
    for target, page in ((shot, run_dir / "report.html"), (blank, tmp_path / "blank.html")):
        _headless(f"--screenshot={target}", "--window-size=1280,1400", "--hide-scrollbars", page.as_uri())
    assert _png_size(shot) == (1280, 1400)
    # A page of tables, badges and text compresses far worse than an empty one.
    assert shot.stat().st_size > 10 * blank.stat().st_size


def test_view_serves_the_report_on_loopback(run_dir: Path) -> None:
    with subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from tolokaforge.host.cli import main; main()",
            "view",
            str(run_dir),
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.startswith(f"serving {run_dir / 'report.html'} at http://127.0.0.1:"), line
            url = line.split(" at ", 1)[1].split()[0]
            with urllib.request.urlopen(url, timeout=30) as response:
                body = response.read().decode()
            assert response.status == 200 and "trial-write_cancel_processing_order-0" in body
        finally:
            process.terminate()


def test_report_refuses_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    done = _tolokaforge("report", str(tmp_path))
    assert done.returncode == 2
    assert (
        done.stderr
        == f"tolokaforge: error (exit 2): {tmp_path} is not a results folder (no run.yaml, no trials/)\n"
    )
