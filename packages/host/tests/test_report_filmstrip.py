"""A trial's screenshots in the HTML report: a filmstrip beside the transcript, rendered by real headless
Chromium (Debian's ``chromium``, driven by Playwright), served by ``tolokaforge view``, and kept by
``--resume``.

The run is a real one (the retail pack, golden agent); one trial's record is then written again, as
the run's own writer writes a browser trial: three browser calls, each with a JPEG screenshot, signed
and accepted by the run's ledger."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from playwright.sync_api import Page, sync_playwright

from tolokaforge.contracts.runner import Grade
from tolokaforge.core.runner_api import Attachment
from tolokaforge.core.termination import TerminationReason
from tolokaforge.core.transcript import AssistantMessage, SystemMessage, ToolCall, UserMessage
from tolokaforge.host.results.manifest import read_manifest
from tolokaforge.host.results.outcome import CallRecord, Episode, TrialOutcome
from tolokaforge.host.results.result_writer import ResultWriter
from tolokaforge.host.results.run_keys import run_ledger, verify_run
from tolokaforge.host.results.trial_files import trial_dir
from tolokaforge.host.turns import AttachedToolMessage

if TYPE_CHECKING:
    from conftest import Jpegs

PACKS = Path(__file__).resolve().parents[3] / "examples" / "packs"
TASKS = ("lookup_order_tracking", "write_cancel_processing_order")
WEB = "lookup_order_tracking"
SHOTS = 3


def _tolokaforge(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from tolokaforge.host.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _run_args(output: Path) -> list[str]:
    selected = [arg for name in TASKS for arg in ("--task", name)]
    return ["run", "--pack", str(PACKS / "retail"), "--agent", "golden", *selected, "--output", str(output)]


def _browser_trial(shots: list[bytes]) -> TrialOutcome:
    """A trial of three browser calls, each answered with a page and its screenshot."""
    episode = Episode(termination=TerminationReason.AGENT_DONE, assistant_turns=SHOTS + 1)
    episode.messages += [SystemMessage("Shop."), UserMessage("Where is my order?")]
    for number, shot in enumerate(shots):
        call = ToolCall(f"call_{number}", "browser", {"actions": [{"type": "click_at", "x": 500, "y": 500}]})
        page = f"Clicked at (500, 500)\nURL: http://shop.test/orders/{number}\nPage: Order {number}"
        episode.messages.append(AssistantMessage("", (call,)))
        attachment = Attachment("image/jpeg", shot, "screenshot", for_model=True)
        episode.messages.append(AttachedToolMessage(page, call.id, (attachment,)))
        episode.calls.append(CallRecord(call.id, "browser", "agent", '{"actions": []}', "SUCCESS", page))
    episode.messages.append(AssistantMessage("It ships tomorrow."))
    return TrialOutcome(WEB, 0, f"{WEB}:0", episode, grade=Grade(binary_pass=True, score=1.0))


async def _rewrite(output: Path, outcome: TrialOutcome) -> None:
    verified = verify_run(output, read_manifest(output))
    assert verified.signer is not None and verified.problem is None, verified.problem
    writer = ResultWriter(helper=False, ledger=run_ledger(verified.signer, output))
    try:
        writer.write(output, outcome)
        await writer.drain()
    finally:
        writer.close()


@pytest.fixture(scope="module")
def shots(jpegs: Jpegs) -> list[bytes]:
    return jpegs(SHOTS)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, shots: list[bytes]) -> Path:
    output = tmp_path_factory.mktemp("filmstrip") / "run"
    done = _tolokaforge(*_run_args(output))
    assert done.returncode == 0, done.stdout + done.stderr
    asyncio.run(_rewrite(output, _browser_trial(shots)))
    report = _tolokaforge("report", str(output))
    assert report.returncode == 0, report.stderr
    return output


@pytest.fixture(scope="module")
def browser_page() -> Iterator[Page]:
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path="/usr/bin/chromium")
        yield browser.new_page(viewport={"width": 1280, "height": 900})
        browser.close()


def _frames(page: Page, url: str) -> list[dict[str, Any]]:
    """The web trial's filmstrip as Chromium shows it: each image loaded (scrolled to), its natural
    width, where it links, and its caption."""
    page.goto(url)
    page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
    images = page.locator(f"#trial-{WEB}-0 .filmstrip img")
    for index in range(images.count()):
        images.nth(index).scroll_into_view_if_needed()
    page.wait_for_function(
        f"[...document.querySelectorAll('#trial-{WEB}-0 .filmstrip img')].every(i => i.complete)"
    )
    return page.evaluate(
        f"""[...document.querySelectorAll('#trial-{WEB}-0 .filmstrip figure')].map(f => ({{
            width: f.querySelector('img').naturalWidth,
            jump: f.querySelector('a.frame-jump').getAttribute('href'),
            full: f.querySelector('a.frame-full').getAttribute('href'),
            caption: f.querySelector('figcaption').innerText,
        }}))"""
    )


def test_the_trial_s_filmstrip_shows_every_screenshot_in_call_order(
    run_dir: Path, browser_page: Page
) -> None:
    frames = _frames(browser_page, (run_dir / "report.html").as_uri())
    assert [frame["width"] for frame in frames] == [320] * SHOTS  # each a real image, loaded
    assert [frame["caption"] for frame in frames] == [
        f"#{n} URL: http://shop.test/orders/{n} · full size" for n in range(SHOTS)
    ]
    assert [frame["full"] for frame in frames] == [
        f"trials/{WEB}/0/attachments/000{n}-screenshot.jpg" for n in range(SHOTS)
    ]
    # the other trial has no screenshots and no filmstrip
    assert browser_page.locator(f"#trial-{TASKS[1]}-0 .filmstrip").count() == 0


def test_clicking_a_screenshot_jumps_to_its_tool_call(run_dir: Path, browser_page: Page) -> None:
    frames = _frames(browser_page, (run_dir / "report.html").as_uri())
    browser_page.locator(f"#trial-{WEB}-0 .filmstrip a.frame-jump").nth(1).click()
    assert browser_page.evaluate("location.hash") == frames[1]["jump"]
    target = browser_page.locator(frames[1]["jump"])
    assert "role-tool" in (target.get_attribute("class") or "")
    assert "http://shop.test/orders/1" in target.inner_text() and "call_1" in target.inner_text()
    assert target.locator("a.attachment").get_attribute("href") == frames[1]["full"]


def test_a_page_written_elsewhere_still_shows_the_screenshots(
    run_dir: Path, browser_page: Page, tmp_path: Path
) -> None:
    page = tmp_path / "pages" / "web.html"
    page.parent.mkdir()
    done = _tolokaforge("report", str(run_dir), "--html", str(page))
    assert done.returncode == 0, done.stderr
    frames = _frames(browser_page, page.as_uri())
    assert [frame["width"] for frame in frames] == [320] * SHOTS
    assert all(
        frame["full"].endswith(f"/trials/{WEB}/0/attachments/000{n}-screenshot.jpg")
        for n, frame in enumerate(frames)
    )


def test_view_serves_the_screenshots_and_nothing_else_of_the_folder(
    run_dir: Path, shots: list[bytes]
) -> None:
    command = [
        sys.executable,
        "-c",
        "from tolokaforge.host.cli import main; main()",
        "view",
        str(run_dir),
        "--port",
        "0",
    ]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            base = process.stdout.readline().split(" at ", 1)[1].split()[0].rstrip("/")
            with urllib.request.urlopen(
                f"{base}/trials/{WEB}/0/attachments/0001-screenshot.jpg", timeout=30
            ) as answer:
                assert answer.headers["Content-Type"] == "image/jpeg" and answer.read() == shots[1]
            for refused in (
                f"/trials/{WEB}/0/grade.yaml",
                "/run.yaml",
                f"/trials/{WEB}/0/attachments/../grade.yaml",
            ):
                with pytest.raises(urllib.error.HTTPError) as error:
                    urllib.request.urlopen(base + refused, timeout=30)
                assert error.value.code == 404
                error.value.close()
        finally:
            process.terminate()


def test_resume_keeps_the_screenshots_and_checks_them(
    run_dir: Path, shots: list[bytes], tmp_path: Path
) -> None:
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    done = _tolokaforge(*_run_args(copy), "--resume")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning" not in done.stderr
    summary = yaml.safe_load((copy / "summary.yaml").read_text())
    assert summary["skipped_by_resume"] == 2 and summary["ran"] == 0 and summary["passed"] == 2
    folder = trial_dir(copy, WEB, 0) / "attachments"
    assert [(folder / f"000{n}-screenshot.jpg").read_bytes() for n in range(SHOTS)] == shots


def test_a_changed_screenshot_marks_the_trial_tampered(
    run_dir: Path, shots: list[bytes], tmp_path: Path
) -> None:
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    (trial_dir(copy, WEB, 0) / "attachments" / "0001-screenshot.jpg").write_bytes(shots[0])
    done = _tolokaforge("report", str(copy))
    assert done.returncode == 1
    assert "attachments/0001-screenshot.jpg was changed after it was signed" in done.stderr
    page = (copy / "report.html").read_text()
    assert "filmstrip" not in page.split(f'id="trial-{WEB}-0"', 1)[1].split("</section>", 1)[0]


def test_a_web_pack_s_screenshots_reach_the_record_and_the_page(tmp_path: Path, browser_page: Page) -> None:
    """The real path: the web_shop pack with screenshots on, its golden path run by the embedded runner."""
    pack = tmp_path / "web_shop"
    shutil.copytree(PACKS / "web_shop", pack)
    manifest = yaml.safe_load((pack / "pack.yaml").read_text())
    manifest["defaults"]["tools"]["agent"]["browser"].update(screenshots=True, vision=True)
    (pack / "pack.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    output = tmp_path / "run"
    task = "buy_stove_standard"
    done = _tolokaforge(
        "run", "--pack", str(pack), "--agent", "golden", "--task", task, "--output", str(output)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    trajectory = yaml.safe_load((trial_dir(output, task, 0) / "trajectory.yaml").read_text())
    references = [ref for message in trajectory["messages"] for ref in message.get("attachments", [])]
    calls = [call for call in trajectory["tool_calls"] if call["name"] == "browser"]
    assert len(references) == len(calls) > 0  # one screenshot per browser call
    assert all(ref["media_type"] == "image/jpeg" and ref["for_model"] for ref in references)
    folder = trial_dir(output, task, 0)
    assert all((folder / ref["path"]).read_bytes()[:2] == b"\xff\xd8" for ref in references)
    assert _tolokaforge("report", str(output)).returncode == 0
    browser_page.goto((output / "report.html").as_uri())
    browser_page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
    images = browser_page.locator(f"#trial-{task}-0 .filmstrip img")
    for index in range(images.count()):
        images.nth(index).scroll_into_view_if_needed()
    browser_page.wait_for_function(
        f"[...document.querySelectorAll('#trial-{task}-0 .filmstrip img')].every(i => i.complete)"
    )
    widths = browser_page.evaluate(
        f"[...document.querySelectorAll('#trial-{task}-0 .filmstrip img')].map(i => i.naturalWidth)"
    )
    assert len(widths) == len(references) and all(width > 0 for width in widths)
