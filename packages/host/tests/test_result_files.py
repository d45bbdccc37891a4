"""Result files as a run writes them: off the event loop, failures surfaced, summary rows that match the files,
and an LLM connection pool as large as the run's concurrency."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from tolokaforge.host import llm_session
from tolokaforge.host.agents import GoldenAgentFactory, ScriptedAgentFactory, load_script
from tolokaforge.host.packs import load_pack
from tolokaforge.host.results.summary import RunSummary, summarise
from tolokaforge.host.results.yaml_files import read_yaml
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.users.router import UserRouter

LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


async def test_rows_of_a_run_equal_the_rows_read_back_from_its_files(packs_dir: Path, tmp_path: Path) -> None:
    """The run builds its summary rows from the documents it wrote; reading the files gives the same rows."""
    script = tmp_path / "turns.yaml"
    script.write_text("- tool_calls: [{name: format_hard_drive, arguments: {}}]\n")
    pack = load_pack(packs_dir / "retail")
    cases = [
        (GoldenAgentFactory(), RunSettings(output=tmp_path / "golden", trials=2, concurrency=8)),
        (
            ScriptedAgentFactory(load_script(script)),
            RunSettings(output=tmp_path / "scripted", task_ids=(pack.tasks[0].task_id,)),
        ),
    ]
    kinds: set[str] = set()
    for agents, settings in cases:
        ran = await run_pack(pack, agents, UserRouter(), settings)
        keys = [(row.task_id, row.trial_index) for row in ran.rows]
        read = summarise(settings.output, keys, RunSummary(ran.pack, ran.agent, ran.trials_per_task))
        assert ran.rows == read.rows
        kinds |= {row.kind for row in ran.rows}
        for path in settings.output.rglob("*.yaml"):  # and every file is the writer's own, readable
            assert read_yaml(path) == yaml.load(path.read_text(encoding="utf-8"), Loader=LOADER)
    assert {"passed", "failed"} <= kinds  # the unknown tool is answered; the trial ends graded, not passing


async def test_a_result_file_that_cannot_be_written_fails_the_run(packs_dir: Path, tmp_path: Path) -> None:
    """The files are written on a background thread; a write that fails still fails the run, not silently."""
    pack = load_pack(packs_dir / "retail")
    task_id = pack.tasks[0].task_id
    (tmp_path / "trials" / task_id).mkdir(parents=True)
    (tmp_path / "trials" / task_id / "0").write_text("a file where the trial's folder belongs")
    with pytest.raises(FileExistsError):
        await run_pack(
            pack,
            GoldenAgentFactory(),
            UserRouter(),
            RunSettings(output=tmp_path, task_ids=(task_id,), resume=False),
        )


async def test_the_llm_pool_admits_one_request_per_trial_in_flight() -> None:
    """aiohttp's default pool stops at 100 connections; a run at concurrency 150 gets 150."""
    concurrency = 150
    in_flight = 0
    all_in = asyncio.Event()

    async def hold(request: web.Request) -> web.Response:
        nonlocal in_flight
        in_flight += 1
        if in_flight == concurrency:
            all_in.set()
        await all_in.wait()  # nobody is answered until every request has arrived
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/", hold)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/"
    try:
        async with llm_session(concurrency) as session:

            async def one() -> str:
                async with session.get(url) as response:
                    return await response.text()

            # With a smaller pool the 101st request never reaches the server and this times out.
            answers = await asyncio.wait_for(asyncio.gather(*(one() for _ in range(concurrency))), 60)
        assert answers == ["ok"] * concurrency
    finally:
        await runner.cleanup()
