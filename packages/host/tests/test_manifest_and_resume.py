"""run.yaml records what ran; --resume continues only the same run and names what differs."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from aiohttp import web

from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION
from tolokaforge.host.cli import main
from tolokaforge.host.results.manifest import pack_digest

if TYPE_CHECKING:
    from conftest import ChatServer, Replies, Responder

TASK = "lookup_order_tracking"


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(["run", *args])
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out + err


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "turns.yaml"
    path.write_text(yaml.safe_dump([{"content": "Let me check.", "done": True}]))
    return path


def test_the_manifest_records_what_ran(
    packs_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-never-written")
    output = tmp_path / "run"
    code, _ = _run(
        ["--pack", str(packs_dir / "retail"), "--task", TASK, "--trials", "2", "--output", str(output)],
        capsys,
    )
    assert code == 0
    manifest = yaml.safe_load((output / "run.yaml").read_text())
    assert manifest["tolokaforge_version"] == "0.1.0"
    assert manifest["engine_protocol_version"] == ENGINE_PROTOCOL_VERSION
    assert manifest["pack"] == {
        "name": "retail",
        "version": "1.0.0",
        "digest": pack_digest(packs_dir / "retail"),
    }
    assert manifest["agent"] == "golden" and manifest["models"] == {"agent": None}
    assert manifest["tasks"] == [TASK] and manifest["trials_per_task"] == 2
    options = manifest["options"]
    assert options["trials"] == 2 and options["concurrency"] == 4 and options["task"] == [TASK]
    assert (
        options["llm_timeout"] == 60.0 and options["llm_max_retries"] == 2 and options["fail_under"] is None
    )
    assert manifest["runner"]["mode"] == "embedded" and manifest["runner"]["version"] == "0.1.0"
    assert manifest["runner"]["isolation"].startswith("embedded runner in this process")
    assert manifest["started_at"] <= manifest["finished_at"]
    assert "sk-secret" not in (output / "run.yaml").read_text()


def test_a_new_run_refuses_a_folder_that_holds_one(
    packs_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "run"
    assert (
        _run(["--pack", str(packs_dir / "retail"), "--task", TASK, "--output", str(output)], capsys)[0] == 0
    )
    dual_control = ["--pack", str(packs_dir / "dual_control"), "--judge-model", "tolokaforge-mock-judge"]
    code, text = _run([*dual_control, "--output", str(output)], capsys)
    assert code == 2 and "already holds a run: pass --resume" in text
    assert yaml.safe_load((output / "summary.yaml").read_text())["pack"] == "retail"  # untouched


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (["--agent", "scripted"], "agent: 'golden' -> 'scripted'"),
        (["--trials", "3"], "trials_per_task: 1 -> 3"),
        (["--task", "lookup_refund_quote"], "tasks: ['lookup_order_tracking'] -> ['lookup_refund_quote']"),
        (["--max-turns", "5"], "options.max_turns: 30 -> 5"),
    ],
)
def test_resume_refuses_a_different_run_naming_the_difference(
    packs_dir: Path,
    tmp_path: Path,
    script: Path,
    capsys: pytest.CaptureFixture[str],
    change: list[str],
    named: str,
) -> None:
    output = tmp_path / "run"
    base = ["--pack", str(packs_dir / "retail"), "--output", str(output), "--script", str(script)]
    assert _run([*base, "--task", TASK], capsys)[0] == 0
    args = [*base, "--resume", *change]
    if "--task" not in change:
        args += ["--task", TASK]
    code, text = _run(args, capsys)
    assert code == 2
    assert f"--resume refused: {output} is a different run (" in text and named in text
    # the same run resumes: nothing left to do, nothing changed
    code, text = _run([*base, "--task", TASK, "--resume", "--concurrency", "9"], capsys)
    assert code == 0 and "1 resumed" in text


def test_resume_refuses_another_pack_or_a_changed_one(
    packs_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = tmp_path / "retail"
    shutil.copytree(packs_dir / "retail", pack, ignore=shutil.ignore_patterns("__pycache__"))
    output = tmp_path / "run"
    assert _run(["--pack", str(pack), "--task", TASK, "--output", str(output)], capsys)[0] == 0

    dual_control = ["--pack", str(packs_dir / "dual_control"), "--judge-model", "tolokaforge-mock-judge"]
    code, text = _run([*dual_control, "--resume", "--output", str(output)], capsys)
    assert code == 2 and "pack.name: 'retail' -> 'dual_control'" in text

    (pack / "policy.md").write_text((pack / "policy.md").read_text() + "\nRefunds need a manager.\n")
    code, text = _run(["--pack", str(pack), "--task", TASK, "--resume", "--output", str(output)], capsys)
    assert code == 2 and "pack.digest: 'sha256:" in text


async def test_resume_refuses_a_different_model(
    packs_dir: Path,
    tmp_path: Path,
    chat_server: Callable[[Responder], Awaitable[ChatServer]],
    replies: Replies,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def respond(body: dict[str, Any], count: int) -> web.StreamResponse:
        return replies.completion({"content": "Your order has shipped."})

    server = await chat_server(respond)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    output = tmp_path / "run"
    base = [
        "--pack",
        str(packs_dir / "retail"),
        "--task",
        TASK,
        "--agent",
        "llm",
        "--llm-base-url",
        server.url,
    ]
    base += ["--output", str(output), "--max-turns", "1"]

    def run(args: list[str]) -> tuple[int, str]:
        return _run(args, capsys)

    code, _ = await asyncio.to_thread(run, [*base, "--model", "gpt-4o-mini"])
    assert code == 0
    assert yaml.safe_load((output / "run.yaml").read_text())["models"] == {"agent": "gpt-4o-mini"}
    requests = len(server.requests)
    code, text = await asyncio.to_thread(run, [*base, "--model", "gpt-4o", "--resume"])
    assert code == 2 and "models.agent: 'gpt-4o-mini' -> 'gpt-4o'" in text
    assert len(server.requests) == requests  # refused before any completion
