"""``tolokaforge report RUN RUN``: two real runs of the retail pack (the golden agent, and a scripted
agent that passes one task and fails the rest) compared on one page, rendered by headless Chromium
(Debian's ``chromium``, installed by ``.ci/run``): what a user sees, and the page's search and filters."""

from __future__ import annotations

import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml

PACKS = Path(__file__).resolve().parents[3] / "examples" / "packs"

TASKS = (
    "lookup_order_tracking",  # lookup: the scripted agent passes it too
    "write_cancel_processing_order",  # single_write
    "refuse_expired_coupon",  # refusal
    "multi_cancel_and_return",  # multi_step
    "lookup_refund_quote",  # lookup
)
CATEGORIES = {
    "lookup_order_tracking": "lookup",
    "write_cancel_processing_order": "single_write",
    "refuse_expired_coupon": "refusal",
    "multi_cancel_and_return": "multi_step",
    "lookup_refund_quote": "lookup",
}

SCRIPT: dict[str, Any] = {
    "default": [{"content": "Done.", "done": True}],
    "tasks": {
        "lookup_order_tracking": [
            {"tool_calls": [{"name": "get_customer_details", "arguments": {"customer_id": "C-129"}},
                            {"name": "get_order_details", "arguments": {"order_id": "O-50064"}}]},
            {"content": "Your order O-50064 has shipped: tracking number 1Z1749276956, promised to arrive "
                        "by 2026-03-19.", "done": True},
        ],
    },
}  # fmt: skip


def _tolokaforge(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from tolokaforge.host.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(golden, scripted): the same five tasks, every one passed by golden, one by the script."""
    root = tmp_path_factory.mktemp("compare")
    script = root / "script.yaml"
    script.write_text(yaml.safe_dump(SCRIPT))
    selected = [arg for name in TASKS for arg in ("--task", name)]
    golden, scripted = root / "golden", root / "scripted"
    for output, agent in ((golden, ["golden"]), (scripted, ["scripted", "--script", str(script)])):
        done = _tolokaforge("run", "--pack", str(PACKS / "retail"), "--agent", *agent, *selected,
                            "--output", str(output))  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    return golden, scripted


@pytest.fixture(scope="module")
def page(runs: tuple[Path, Path]) -> Path:
    golden, scripted = runs
    assert _tolokaforge("report", str(golden)).returncode == 0  # the golden run's own page, linked to
    out = golden.parent / "pages" / "golden-vs-scripted.html"
    done = _tolokaforge("report", str(golden), str(scripted), "--html", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"report: {out}\n" and done.stderr == ""
    return out


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "Debian's chromium is required (.ci/run installs it: apt-get install chromium)"
    return found


class _Dom(HTMLParser):
    """Table rows by class (attributes and cell texts) and the shown-count, from the DOM Chromium
    serialised after running the page's script."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, list[tuple[dict[str, str], list[str]]]] = {}
        self.links: dict[str, list[str]] = {}
        """Per row (its first cell's text), the links in it."""
        self.shown = ""
        self._cells: list[str] | None = None
        self._row_links: list[str] = []
        self._in_cell = False
        self._in_shown = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        if tag == "tr" and attributes.get("class"):
            self._cells, self._row_links = [], []
            self.rows.setdefault(attributes["class"].split()[0], []).append((attributes, self._cells))
        if tag == "td" and self._cells is not None:
            self._cells.append("")
            self._in_cell = True
        if tag == "a" and self._cells is not None:
            self._row_links.append(attributes.get("href", ""))
        self._in_shown = attributes.get("id") == "shown-count"

    def handle_data(self, data: str) -> None:
        if self._in_cell and self._cells is not None:
            self._cells[-1] = " ".join((self._cells[-1] + " " + data).split())
        if self._in_shown:
            self.shown += data

    def handle_endtag(self, tag: str) -> None:
        self._in_shown = False
        if tag == "td":
            self._in_cell = False
        if tag == "tr" and self._cells is not None:
            self.links[self._cells[0] if self._cells else ""] = self._row_links
            self._cells = None

    def visible(self, kind: str) -> list[tuple[dict[str, str], list[str]]]:
        return [(attrs, cells) for attrs, cells in self.rows.get(kind, []) if "hidden" not in attrs["class"]]


def _dom(url: str) -> _Dom:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
    done = subprocess.run(
        [_chromium(), *flags, "--virtual-time-budget=5000", "--dump-dom", url],
        capture_output=True,
        timeout=120,
        check=True,
    )
    dom = _Dom()
    dom.feed(done.stdout.decode())
    return dom


def test_runs_record_each_task_category(runs: tuple[Path, Path]) -> None:
    manifest = yaml.safe_load((runs[0] / "run.yaml").read_text())
    assert manifest["categories"] == CATEGORIES


def test_the_page_puts_newly_failing_tasks_first(page: Path) -> None:
    dom = _dom(page.as_uri())
    changes = [(attrs["data-task"], attrs["data-change"]) for attrs, _ in dom.visible("task-change")]
    assert changes[-1] == ("lookup_order_tracking", "unchanged")
    assert {change for _, change in changes[:-1]} == {"newly failing"}
    assert sorted(task for task, _ in changes) == sorted(TASKS)
    # the largest drop first; all four fell from 1/1 to 0/1, so they keep the runs' task order
    assert [task for task, _ in changes[:-1]] == [task for task in TASKS if task != "lookup_order_tracking"]
    first = dom.visible("task-change")[0][1]
    assert first == ["write_cancel_processing_order", "single_write", "newly failing", "1/1 score 1.000",
                     "0/1 score 0.000"]  # fmt: skip
    assert dom.shown == "5 of 5 tasks shown"  # written by the page's script, so it ran


def test_the_page_shows_each_run_and_category_side_by_side(page: Path) -> None:
    dom = _dom(page.as_uri())
    runs = [cells for _, cells in dom.visible("run-row")]
    # run, pack, agent, models, started, trials, passed, pass rate, mean score, pass^1, pass@1, tokens, cost
    assert [cells[0] for cells in runs] == ["golden", "scripted"]
    # a run with its own report.html is linked, as is each of its tasks' first trial there
    assert dom.links["golden"] == ["../golden/report.html"] and dom.links["scripted"] == []
    assert dom.links["lookup_refund_quote"] == ["../golden/report.html#trial-lookup_refund_quote-0"]
    assert [cells[5:8] for cells in runs] == [["5", "5", "1.000"], ["5", "1", "0.200"]]
    assert [cells[9:13] for cells in runs] == [
        ["1.000", "1.000", "0", "$0.0000"],
        ["0.200", "0.200", "0", "$0.0000"],
    ]
    categories = {cells[0]: cells[1:] for _, cells in dom.visible("category-row")}
    # per run: passed/trials, pass^1, pass@1
    assert categories == {
        "lookup": ["2/2", "1.000", "1.000", "1/2", "0.500", "0.500"],
        "multi_step": ["1/1", "1.000", "1.000", "0/1", "0.000", "0.000"],
        "refusal": ["1/1", "1.000", "1.000", "0/1", "0.000", "0.000"],
        "single_write": ["1/1", "1.000", "1.000", "0/1", "0.000", "0.000"],
    }


def test_search_and_filters_hide_rows(page: Path) -> None:
    searched = _dom(page.as_uri() + "?q=REFUND")
    assert [attrs["data-task"] for attrs, _ in searched.visible("task-change")] == ["lookup_refund_quote"]
    assert searched.shown == "1 of 5 tasks shown"
    by_category = _dom(page.as_uri() + "?category=lookup&change=newly%20failing")
    assert [attrs["data-task"] for attrs, _ in by_category.visible("task-change")] == ["lookup_refund_quote"]
    unchanged = _dom(page.as_uri() + "?change=unchanged")
    assert [attrs["data-task"] for attrs, _ in unchanged.visible("task-change")] == ["lookup_order_tracking"]


def test_a_later_run_that_passes_more_is_newly_passing(runs: tuple[Path, Path], tmp_path: Path) -> None:
    golden, scripted = runs
    done = _tolokaforge("report", str(scripted), str(golden), cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == "report: comparison.html\n", done.stderr
    dom = _dom((tmp_path / "comparison.html").as_uri())
    changes = [attrs["data-change"] for attrs, _ in dom.visible("task-change")]
    assert changes == ["newly passing"] * 4 + ["unchanged"]


def test_a_tampered_record_in_one_run_is_named_and_fails_the_comparison(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    golden, scripted = runs
    copy = tmp_path / "scripted"
    shutil.copytree(scripted, copy)
    grade = copy / "trials" / "write_cancel_processing_order" / "0" / "grade.yaml"
    grade.write_text(grade.read_text().replace("binary_pass: false", "binary_pass: true"))
    done = _tolokaforge("report", str(golden), str(copy), "--html", str(tmp_path / "page.html"))
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"tolokaforge: warning: {copy}: trial write_cancel_processing_order/0: record tampered: "
    ), done.stderr
    dom = _dom((tmp_path / "page.html").as_uri())
    row = next(
        cells
        for attrs, cells in dom.visible("task-change")
        if attrs["data-task"] == "write_cancel_processing_order"
    )
    assert row[2:] == ["newly failing", "1/1 score 1.000", "0/1"]  # tampered: a trial without a grade


def test_a_folder_that_is_not_a_run_stops_the_comparison(runs: tuple[Path, Path], tmp_path: Path) -> None:
    done = _tolokaforge("report", str(runs[0]), str(tmp_path), "--html", str(tmp_path / "page.html"))
    assert done.returncode == 2
    assert done.stderr == (
        f"tolokaforge: error (exit 2): {tmp_path} is not a results folder (no run.yaml, no trials/)\n"
    )
    assert not (tmp_path / "page.html").exists()


def test_a_task_only_one_run_selected_is_listed_last(runs: tuple[Path, Path], tmp_path: Path) -> None:
    golden = runs[0]
    other = tmp_path / "other"
    selected = ["--task", "lookup_refund_quote", "--task", "refuse_other_customers_order"]
    done = _tolokaforge("run", "--pack", str(PACKS / "retail"), "--agent", "golden", *selected,
                        "--output", str(other), "--trials", "2")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    page = tmp_path / "page.html"
    assert _tolokaforge("report", str(golden), str(other), "--html", str(page)).returncode == 0
    dom = _dom(page.as_uri())
    changes = [(attrs["data-task"], attrs["data-change"]) for attrs, _ in dom.visible("task-change")]
    assert changes[0] == ("lookup_refund_quote", "unchanged")
    assert changes[-1] == ("refuse_other_customers_order", "not in every run")
    assert len(changes) == len(TASKS) + 1
    # k is the fewest trials per task of any run: 1 here, though the second run ran 2 per task
    assert dom.visible("run-row")[1][1][5:7] == ["4", "4"]
    assert "pass^1" in page.read_text() and "pass^2" not in page.read_text()
