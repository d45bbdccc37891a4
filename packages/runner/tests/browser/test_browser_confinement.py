"""The browser's walls: bubblewrap with no network (a real loopback server the page cannot reach),
the wrapper's own namespace, a dead browser relaunched, a missing one named, and which binary is found."""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
from pathlib import Path

import psutil
import pytest

from tolokaforge.core.models.web import BrowserSettings
from tolokaforge.runner.browser import BrowserPool, BrowserUnavailableError, SiteRequest, SiteResponse
from tolokaforge.runner.browser.confined import BROWSER_UID, confined_command, find_chromium
from tolokaforge.runner.process.confinement import SANDBOX_UID

from .shop_site import ORIGIN, ShopSite


async def test_the_page_cannot_reach_a_real_loopback_server_and_the_report_says_bwrap() -> None:
    connections: list[str] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(str(writer.get_extra_info("peername")))
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    page = f"""<title>Reach</title><p id="out">waiting</p><script>
      try {{ new WebSocket('ws://127.0.0.1:{port}/'); }} catch (e) {{}}
      fetch('http://127.0.0.1:{port}/').then(
        () => {{ document.getElementById('out').textContent = 'reached'; }},
        (e) => {{ document.getElementById('out').textContent = 'failed'; }});
    </script>"""

    async def serve(request: SiteRequest) -> SiteResponse:
        return SiteResponse(200, {"content-type": "text/html"}, page.encode())

    pool = BrowserPool()
    try:
        session = await pool.open_session(BrowserSettings(initial_url=f"{ORIGIN}/", sites=[ORIGIN]), serve)
        step = await session.run([{"type": "open_web_browser"}], screenshot=False)
        refused = set(step.refused)
        for _ in range(100):  # the fetch's failure reaches the page's script a moment later
            if step.snapshot.text.strip() != "waiting":
                break
            step = await session.run([{"type": "open_web_browser"}], screenshot=False)
            refused |= set(step.refused)
        assert step.snapshot.text.strip() == "failed"
        assert refused == {f"http://127.0.0.1:{port}/", f"ws://127.0.0.1:{port}/"}
        report = pool.report()
        assert report["confinement"].startswith("bwrap, no network")
        assert report["version"].split(".")[0].isdigit()
    finally:
        await pool.close()
        server.close()
    assert connections == []


def test_the_wrapper_runs_its_program_without_network_as_the_browser_uid_in_a_private_tmp() -> None:
    marker = Path(tempfile.mkdtemp()) / "outside"
    marker.write_text("host file")
    probe = f"""
import os, socket
try:
    socket.create_connection(("127.0.0.1", 9), timeout=2)
    print("network: reached")
except OSError as error:
    print("network:", error.strerror)
print("interfaces:", [name for _, name in socket.if_nameindex()])
print("uid:", os.getuid())
print("sees host tmp:", os.path.exists({str(marker)!r}))
try:
    open("/usr/written", "w")
    print("usr: writable")
except OSError:
    print("usr: read-only")
"""
    with tempfile.TemporaryDirectory() as private:
        command, group = confined_command("/usr/bin/python3", Path(private), memory_bytes=1 << 30)
        assert group is None  # its own detection leaves the cgroup to a runner's tree
        done = subprocess.run([command.executable, "-c", probe], capture_output=True, timeout=60, check=False)
    lines = done.stdout.decode().splitlines()
    assert done.returncode == 0, done.stderr.decode()
    # Landlock refuses the connect where it holds; under it, a network namespace with nowhere to go.
    assert lines[0] in ("network: Permission denied", "network: Network is unreachable")
    assert lines[1:] == [
        "interfaces: ['lo']",
        f"uid: {BROWSER_UID if os.geteuid() == 0 else SANDBOX_UID}",  # without root: a user namespace's
        "sees host tmp: False",
        "usr: read-only",
    ]
    assert command.confinement.startswith("bwrap, no network")


async def test_a_dead_browser_fails_its_sessions_call_and_the_next_session_gets_a_new_browser() -> None:
    pool = BrowserPool()
    try:
        settings = BrowserSettings(initial_url=f"{ORIGIN}/", sites=[ORIGIN])
        session = await pool.open_session(settings, ShopSite())
        assert (await session.run([{"type": "open_web_browser"}], screenshot=False)).error is None
        browsers = [p for p in psutil.Process().children(recursive=True) if p.name() == "bwrap"]
        assert browsers
        for browser in browsers:
            browser.kill()
        psutil.wait_procs(browsers, timeout=10)
        with pytest.raises(BrowserUnavailableError, match="browser died"):
            await session.run([{"type": "click_at", "selector": "#to-form"}], screenshot=False)
        again = await pool.open_session(settings, ShopSite())
        step = await again.run([{"type": "click_at", "selector": "#to-form"}], screenshot=False)
        assert step.snapshot.url == f"{ORIGIN}/form"
    finally:
        await pool.close()


async def test_a_missing_browser_is_named_with_how_to_fix_it() -> None:
    pool = BrowserPool(executable="/nonexistent/chromium")
    with pytest.raises(BrowserUnavailableError, match="TOLOKAFORGE_CHROMIUM"):
        await pool.start()
    await pool.close()


def test_the_headless_shell_is_preferred_and_each_debian_launcher_runs_its_own_binary(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("TOLOKAFORGE_CHROMIUM", raising=False)
    shell, chromium = "/usr/lib/chromium/chromium-headless-shell", "/usr/lib/chromium/chromium"
    assert find_chromium() == shell  # .ci/run installs both
    assert find_chromium("chromium-headless-shell") == shell  # its /usr/bin script, not chromium's binary
    assert find_chromium("chromium") == chromium
    monkeypatch.setenv("TOLOKAFORGE_CHROMIUM", "chromium")
    assert find_chromium() == chromium
    monkeypatch.delenv("TOLOKAFORGE_CHROMIUM")
    (tmp_path / "chromium").symlink_to("/usr/bin/chromium")  # a PATH without the shell: chromium
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_chromium() == chromium
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(BrowserUnavailableError, match="chromium-headless-shell or chromium on PATH"):
        find_chromium()


def _real_uids(process: psutil.Process) -> set[int]:
    """The real uid of the process and of each of its threads (RLIMIT_NPROC counts threads by it)."""
    uids: set[int] = set()
    for task in Path(f"/proc/{process.pid}/task").iterdir():
        with (task / "status").open() as status:
            line = next(text for text in status if text.startswith("Uid:"))
        uids.add(int(line.split()[1]))
    return uids


async def test_the_browsers_processes_and_threads_are_not_counted_against_the_tool_workers_uid() -> None:
    pool = BrowserPool()
    try:
        session = await pool.open_session(
            BrowserSettings(initial_url=f"{ORIGIN}/", sites=[ORIGIN]), ShopSite()
        )
        assert (await session.run([{"type": "open_web_browser"}], screenshot=False)).error is None
        binary = Path(pool.report()["executable"]).name  # chromium-headless-shell where installed
        chromium = [
            process
            for process in psutil.Process().children(recursive=True)
            if process.name() == binary and process.status() != psutil.STATUS_ZOMBIE
        ]
        assert len(chromium) >= 3  # the browser, a renderer, the utility processes
        threads = sum(process.num_threads() for process in chromium)
        assert threads > 20  # what the workers' budget would have carried
        # A root runner's browser has a uid of its own; without root, everything runs as the runner's.
        expected = BROWSER_UID if os.geteuid() == 0 else os.geteuid()
        assert {uid for process in chromium for uid in _real_uids(process)} == {expected}
        assert expected != SANDBOX_UID
        assert f"uid {expected}" in pool.report()["confinement"]
    finally:
        await pool.close()
