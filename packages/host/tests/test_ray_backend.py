"""Ray runs on a real local Ray cluster (one per test session: 2 CPUs, so 2 workers; no dashboard).

The in-process tests pass ``--ray auto``: the test session's own connection is reused. The CLI tests
run ``tolokaforge run --ray <the cluster's address>`` in a subprocess, as a user would.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web

from tolokaforge.core.credentials import token_dir
from tolokaforge.core.models import MOCK_JUDGE_MODEL, JudgeModelConfig
from tolokaforge.host.agents import GoldenAgentFactory
from tolokaforge.host.agents.setup import AgentRecipe, LLMOptions
from tolokaforge.host.packs import Pack, load_pack
from tolokaforge.host.results.outcome import TrialOutcome
from tolokaforge.host.run.ray import RaySettings
from tolokaforge.host.run.ray.cluster import local_token_file, ray, start_local_cluster
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.users.router import UserRouter

pytestmark = pytest.mark.ray

GOLDEN = AgentRecipe.of("golden", LLMOptions(None, None, "http://127.0.0.1:9/v1", None), None, False)
SECRET = "sk-tolokaforge-ray-secret-4f1c9e"


@pytest.fixture(scope="module")
def ray_temp_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cluster's own files (session logs included), short enough for Ray's socket paths."""
    return tmp_path_factory.mktemp("ray")


@pytest.fixture(scope="module")
def ray_cluster(ray_turn: None, ray_temp_dir: Path) -> Iterator[str]:
    """This module's cluster, started as ``--ray local`` starts one; yields its address. Stopped when the
    module ends: its processes are children of the test process, which later tests of the same xdist
    worker would otherwise count among their own (a test asserting no child outlived its trial)."""
    start_local_cluster(num_cpus=2, temp_dir=str(ray_temp_dir))
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()


def test_the_local_cluster_runs_under_a_token_of_its_own(ray_cluster: str) -> None:
    """Not Ray's shared ``~/.ray/auth_token`` (0644): a 0600 file of this process's, its path inherited."""
    token_file = local_token_file()
    assert token_file is not None and token_file.parent == token_dir()
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600

    @ray.remote
    def seen() -> tuple[str | None, str | None]:
        return os.environ.get("RAY_AUTH_MODE"), os.environ.get("RAY_AUTH_TOKEN_PATH")

    assert ray.get(seen.remote()) == ("token", str(token_file))


def _grade_files(output: Path) -> dict[str, str]:
    return {
        str(path.relative_to(output)): path.read_text()
        for path in sorted((output / "trials").glob("*/*/grade.yaml"))
    }


def _worker_pids() -> list[int]:
    """TrialWorker actor processes of this test session's cluster (descendants of this process)."""
    parents: dict[int, int] = {}
    titles: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            titles[int(entry.name)] = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])

    def mine(pid: int) -> bool:
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == os.getpid():
                return True
        return False

    return [pid for pid, title in titles.items() if title.startswith("ray::TrialWorker") and mine(pid)]


def _ray_settings(output: Path, recipe: AgentRecipe = GOLDEN, **kwargs: Any) -> RunSettings:
    return RunSettings(output=output, ray=RaySettings("auto", recipe), **kwargs)


@pytest.mark.parametrize("pack_name", ["retail", "dual_control"])
async def test_a_ray_run_writes_the_grade_files_of_a_local_run(
    ray_cluster: str, packs_dir: Path, tmp_path: Path, pack_name: str
) -> None:
    pack = load_pack(packs_dir / pack_name)
    judge = JudgeModelConfig(model=MOCK_JUDGE_MODEL)  # dual_control has a judged task: the offline judge
    local = await run_pack(
        pack,
        GoldenAgentFactory(),
        UserRouter(),
        RunSettings(output=tmp_path / "local", concurrency=8, judge_model=judge),
    )
    on_ray = await run_pack(
        pack,
        GoldenAgentFactory(),
        UserRouter(),
        _ray_settings(tmp_path / "ray", concurrency=4, judge_model=judge),
    )
    local_grades, ray_grades = _grade_files(tmp_path / "local"), _grade_files(tmp_path / "ray")
    assert len(ray_grades) == len(pack.tasks)
    assert ray_grades == local_grades  # same scores, reasons and state diffs, byte for byte
    assert on_ray.pass_rate == local.pass_rate == 1.0
    manifest = yaml.safe_load((tmp_path / "ray" / "run.yaml").read_text())
    assert manifest["runner"]["mode"] == "ray" and manifest["runner"]["workers"] == 2
    saved = yaml.safe_load((tmp_path / "ray" / "summary.yaml").read_text())
    assert saved["passed"] == len(pack.tasks)


class _KillOneWorker:
    """An observer that SIGKILLs one worker when the first trial is done (others are still in flight)."""

    def __init__(self) -> None:
        self.killed: int | None = None
        self.done: list[tuple[str, int]] = []

    def started(self, total: int, skipped: int) -> None:
        return None

    def trial_done(self, outcome: TrialOutcome) -> None:
        self.done.append((outcome.task_id, outcome.trial_index))
        if self.killed is None:
            self.killed = _worker_pids()[0]
            os.kill(self.killed, signal.SIGKILL)


async def test_a_killed_worker_loses_its_trials_which_are_retried_and_counted_once(
    ray_cluster: str, packs_dir: Path, tmp_path: Path
) -> None:
    pack = load_pack(packs_dir / "retail")
    observer = _KillOneWorker()
    summary = await run_pack(
        pack, GoldenAgentFactory(), UserRouter(), _ray_settings(tmp_path, concurrency=2), observer
    )
    assert observer.killed is not None
    assert sorted(observer.done) == sorted((t.task_id, 0) for t in pack.tasks)  # each one exactly once
    assert len(_grade_files(tmp_path)) == len(pack.tasks) and summary.pass_rate == 1.0
    trajectories = [yaml.safe_load(p.read_text()) for p in (tmp_path / "trials").glob("*/*/trajectory.yaml")]
    retried = [t for t in trajectories if t["lost_attempts"]]
    assert retried, "the killed worker held a trial in flight"
    for trajectory in retried:
        assert "Ray worker running it died" in trajectory["lost_attempts"][0]["error"]
        assert trajectory["lost_attempts"][0]["trial_id"] == f"{trajectory['task_id']}:0"
        assert trajectory["trial_id"] == f"{trajectory['task_id']}:0:a1"
    # The run's workers are gone with it: killed as it ends (their processes exit a moment later).
    deadline = time.monotonic() + 30
    while _worker_pids() and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert _worker_pids() == []
    saved = yaml.safe_load((tmp_path / "summary.yaml").read_text())
    assert saved["passed"] == len(pack.tasks) == saved["trials"]


def _cli(address: str, output: Path, pack: Path, *extra: str, env: dict[str, str]) -> subprocess.Popen[str]:
    command = [str(Path(sys.executable).parent / "tolokaforge"), "run", "--pack", str(pack)]
    command += ["--ray", address, "--output", str(output), "--concurrency", "1", *extra]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def _files_holding(secret: str, *folders: Path) -> list[Path]:
    """Every file under ``folders`` whose bytes hold ``secret``, read in chunks: a cluster's folder may
    hold its object store's file (gigabytes, mostly sparse) when /dev/shm is short, which a whole read
    would pull into this process's memory."""
    needle = secret.encode()
    found: list[Path] = []
    for folder in folders:
        for path in folder.rglob("*"):
            if not path.is_file():
                continue
            with path.open("rb") as data:
                tail = b""
                while chunk := data.read(1 << 20):
                    if needle in tail + chunk:
                        found.append(path)
                        break
                    tail = chunk[-len(needle) :]
    return found


def test_ctrl_c_stops_a_ray_run_with_130_and_resume_finishes_it(
    ray_cluster: str, ray_temp_dir: Path, packs_dir: Path, tmp_path: Path
) -> None:
    output = tmp_path / "run"
    total = len(load_pack(packs_dir / "retail").tasks)
    env = {**os.environ, "TOLOKAFORGE_LLM_API_KEY": SECRET}
    first = _cli(ray_cluster, output, packs_dir / "retail", env=env)
    deadline = time.monotonic() + 240
    while len(list(output.glob("trials/*/*/grade.yaml"))) < 2:
        assert first.poll() is None and time.monotonic() < deadline, first.stdout and first.stdout.read()
        time.sleep(0.2)
    first.send_signal(signal.SIGINT)
    log_first, _ = first.communicate(timeout=60)
    assert first.returncode == 130, log_first
    assert "interrupted (exit 130)" in log_first
    finished = len(list(output.glob("trials/*/*/grade.yaml")))
    assert 2 <= finished < total
    deadline = time.monotonic() + 30
    while _worker_pids() and time.monotonic() < deadline:  # the cluster's work is cancelled
        time.sleep(0.2)
    assert _worker_pids() == []

    second = _cli(ray_cluster, output, packs_dir / "retail", "--resume", env=env)
    log_second, _ = second.communicate(timeout=300)
    assert second.returncode == 0, log_second
    summary = yaml.safe_load((output / "summary.yaml").read_text())
    assert (
        summary["passed"] == total
        and summary["skipped_by_resume"] == finished
        and summary["ran"] == total - finished
    )
    manifest = yaml.safe_load((output / "run.yaml").read_text())
    assert manifest["runner"]["mode"] == "ray" and len(manifest["resumed_at"]) == 1
    assert _files_holding(SECRET, output, ray_temp_dir) == [] and SECRET not in log_first + log_second


async def test_the_api_key_reaches_the_workers_through_the_runtime_env_and_is_written_nowhere(
    ray_cluster: str, ray_temp_dir: Path, packs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        message = {"role": "assistant", "content": "All done."}
        body: dict[str, Any] = {"id": "c", "object": "chat.completion"}
        body["choices"] = [{"index": 0, "message": message}]
        body["usage"] = {"prompt_tokens": 10, "completion_tokens": 2}
        return web.json_response(body)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    server = web.AppRunner(app)
    await server.setup()
    await web.TCPSite(server, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{server.addresses[0][1]}/v1"
    monkeypatch.setenv("TOLOKAFORGE_LLM_API_KEY", SECRET)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    pack: Pack = load_pack(packs_dir / "retail")
    recipe = AgentRecipe.of("llm", LLMOptions("model-x", None, url, None), None, False)
    try:
        async with aiohttp.ClientSession() as session:
            agents, users = recipe.build(session)  # the driver's factories name the run; workers build theirs
            summary = await run_pack(
                pack,
                agents,
                users,
                _ray_settings(tmp_path, recipe, task_ids=tuple(t.task_id for t in pack.tasks[:4])),
            )
    finally:
        await server.cleanup()
    assert len(summary.rows) == 4
    assert seen and set(seen) == {f"Bearer {SECRET}"}  # only the workers called the model
    assert _files_holding(SECRET, tmp_path) == []  # results, summary, run.yaml
    assert _files_holding(SECRET, ray_temp_dir) == []  # the cluster's logs (and every other file)
    assert SECRET not in json.dumps(yaml.safe_load((tmp_path / "run.yaml").read_text()))
