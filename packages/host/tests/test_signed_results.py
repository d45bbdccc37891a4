"""Results nobody else can rewrite: signed trial records, checked by ``--resume`` and ``report``; the
signing key kept out of the output folder; secrets redacted; each tool output stored once, capped.

Every run here is the real ``tolokaforge run`` in a subprocess on the example retail pack (golden agent),
or the llm agent against a real local chat-completions server.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from aiohttp import web

from tolokaforge.host.file_writer import FileWriterProcess
from tolokaforge.host.records import RecordSigner, check_manifest, check_record
from tolokaforge.host.results import MAX_STORED_CHARS
from tolokaforge.host.run_keys import KEY_DIR_ENV, load_run_key
from tolokaforge.host.yaml_files import TrialFiles

if TYPE_CHECKING:
    from conftest import ChatServer, Responder

PACKS = Path(__file__).resolve().parents[3] / "examples" / "packs"
TASKS = (
    "lookup_order_tracking",
    "write_cancel_processing_order",
    "refuse_expired_coupon",
    "lookup_store_credit_balance",
)
WARNING = re.compile(r"^tolokaforge: warning: trial (\S+)/(\d+) failed its signature check: (.*)$", re.M)


def _tolokaforge(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from tolokaforge.host.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def _run(
    output: Path, *tasks: str, pack: Path = PACKS / "retail", extra: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    selected = [arg for task in tasks for arg in ("--task", task)]
    return _tolokaforge(
        "run", "--pack", str(pack), "--agent", "golden", *selected, "--output", str(output), *extra
    )


def _signer(output: Path) -> RecordSigner:
    run_id = yaml.safe_load((output / "run.yaml").read_text())["run_id"]
    key = load_run_key(run_id)
    assert key is not None
    return RecordSigner(run_id, key)


def _trial(output: Path, task: str, index: int = 0) -> Path:
    return output / "trials" / task / str(index)


def test_a_resume_reports_every_tampered_record_and_runs_its_trial_again(tmp_path: Path) -> None:
    output = tmp_path / "run"
    first = _run(output, *TASKS)
    assert first.returncode == 0, first.stdout + first.stderr
    signer = _signer(output)
    for task in TASKS:
        assert check_record(_trial(output, task), signer, task, 0).intact

    edited, rewritten, moved, unsigned = TASKS
    shutil.rmtree(_trial(output, moved))  # another trial's genuine record put in its place
    shutil.copytree(_trial(output, edited), _trial(output, moved))
    grade = _trial(output, edited) / "grade.yaml"
    grade.write_text(grade.read_text().replace("score: 1.0", "score: 0.99"))  # a number nudged
    trajectory = _trial(output, rewritten) / "trajectory.yaml"
    trajectory.write_text(trajectory.read_text().replace("O-50035", "O-50036"))
    (_trial(output, unsigned) / "signature.yaml").unlink()

    resumed = _run(output, *TASKS, extra=("--resume",))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    warned = {(task, index): problem for task, index, problem in WARNING.findall(resumed.stderr)}
    assert set(warned) == {(task, "0") for task in TASKS}, resumed.stderr
    assert warned[(edited, "0")].startswith("grade.yaml was changed after it was signed")
    assert warned[(rewritten, "0")].startswith("trajectory.yaml was changed after it was signed")
    assert warned[(moved, "0")].startswith("signature.yaml does not match")
    assert warned[(unsigned, "0")].startswith("signature.yaml is missing")

    summary = yaml.safe_load((output / "summary.yaml").read_text())
    assert (summary["ran"], summary["skipped_by_resume"], summary["passed"]) == (4, 0, 4)
    files = {entry["task_id"]: entry["file"] for entry in summary["tampered"]}
    assert files == {edited: "grade.yaml", rewritten: "trajectory.yaml", moved: "signature.yaml",
                     unsigned: "signature.yaml"}  # fmt: skip
    manifest = yaml.safe_load((output / "run.yaml").read_text())
    assert [entry["task_id"] for entry in manifest["tampered"]] == [
        entry["task_id"] for entry in summary["tampered"]
    ]
    assert check_manifest(manifest, signer) is None  # still signed, with the same key
    for entry in summary["tampered"]:  # the evidence is kept, out of trials/, and each trial ran again
        aside = output / entry["moved_to"]
        assert aside.parts[-4] == "tampered" and (aside / "trajectory.yaml").is_file()
        assert check_record(_trial(output, entry["task_id"]), signer, entry["task_id"], 0).intact
    aside = output / next(entry["moved_to"] for entry in summary["tampered"] if entry["task_id"] == edited)
    assert "score: 0.99" in (aside / "grade.yaml").read_text()

    again = _run(output, *TASKS, extra=("--resume",))  # nothing altered since: every record is kept
    assert again.returncode == 0 and not WARNING.search(again.stderr), again.stderr
    summary = yaml.safe_load((output / "summary.yaml").read_text())
    assert (summary["ran"], summary["skipped_by_resume"], summary["tampered"]) == (0, 4, [])
    assert len(yaml.safe_load((output / "run.yaml").read_text())["tampered"]) == 4  # the run's history


def test_the_report_marks_a_tampered_record_and_leaves_it_out_of_the_figures(tmp_path: Path) -> None:
    output = tmp_path / "run"
    assert _run(output, *TASKS[:2]).returncode == 0
    clean = _tolokaforge("report", str(output))
    assert clean.returncode == 0 and clean.stderr == "", clean.stderr
    assert 'class="alert"' not in (output / "report.html").read_text()

    grade = _trial(output, TASKS[1]) / "grade.yaml"
    grade.write_text(grade.read_text().replace("score: 1.0", "score: 0.75"))
    flagged = _tolokaforge("report", str(output))
    assert flagged.returncode == 1, flagged.stderr
    assert flagged.stderr.strip() == (
        f"tolokaforge: warning: trial {TASKS[1]}/0: record tampered: grade.yaml was changed after it was "
        "signed; shown as tampered, not counted"
    )
    page = (output / "report.html").read_text()
    assert 'id="tampered"' in page and f'class="trial tampered" id="trial-{TASKS[1]}-0"' in page
    assert "0.750" not in page  # the edited score is not rendered
    assert re.search(r'<div class="big">0\.500</div>pass rate', page)  # one trusted pass of two trials

    elsewhere = _tolokaforge("report", str(output), env={KEY_DIR_ENV: str(tmp_path / "no-keys")})
    assert elsewhere.returncode == 0
    assert "not verified: the signing key of run" in elsewhere.stderr
    assert 'id="verification"' in (output / "report.html").read_text()


def test_resume_refuses_a_run_it_cannot_verify(tmp_path: Path) -> None:
    output = tmp_path / "run"
    assert _run(output, TASKS[0]).returncode == 0
    run_id = yaml.safe_load((output / "run.yaml").read_text())["run_id"]

    no_key = _tolokaforge("run", "--pack", str(PACKS / "retail"), "--task", TASKS[0], "--output", str(output),
                          "--resume", env={KEY_DIR_ENV: str(tmp_path / "other-machine")})  # fmt: skip
    assert no_key.returncode == 2
    assert no_key.stderr.startswith(
        f"tolokaforge: error (exit 2): --resume refused: the signing key of run {run_id}"
    )

    manifest = output / "run.yaml"
    manifest.write_text(manifest.read_text().replace("max_attempts: 3", "max_attempts: 4"))
    edited = _run(output, TASKS[0], extra=("--resume", "--max-attempts", "4"))
    assert edited.returncode == 2
    assert "run.yaml was changed after the run wrote it" in edited.stderr, edited.stderr


def test_the_key_stays_private_and_out_of_the_output_folder(tmp_path: Path, run_key_dir: Path) -> None:
    output = tmp_path / "run"
    done = _run(output, TASKS[0], extra=("--trials", "50", "--concurrency", "16"))  # 50: through the helper
    assert done.returncode == 0, done.stderr
    signer = _signer(output)
    key_file = run_key_dir / f"{signer.run_id}.key"
    assert (
        stat.S_IMODE(key_file.stat().st_mode) == 0o600 and stat.S_IMODE(run_key_dir.stat().st_mode) == 0o700
    )
    for path in output.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert signer.key not in data and signer.key.hex().encode() not in data, path
    assert all(
        check_record(_trial(output, TASKS[0], index), signer, TASKS[0], index).intact for index in range(50)
    )

    inside = _tolokaforge(
        "run", "--pack", str(PACKS / "retail"), "--task", TASKS[0], "--output", str(tmp_path / "second"),
        env={KEY_DIR_ENV: str(tmp_path / "second" / "keys")},
    )  # fmt: skip
    assert inside.returncode == 2 and "is inside the output folder" in inside.stderr


def test_the_helper_process_gets_the_key_on_its_pipe_only(tmp_path: Path) -> None:
    signer = RecordSigner("0" * 32, os.urandom(32))
    helper = FileWriterProcess(signer)
    try:
        files = TrialFiles(
            tmp_path / "t" / "3",
            (
                ("trajectory.yaml", {"messages": []}),
                ("metrics.yaml", {"llm_calls": 0}),
                ("grade.yaml", {"score": 1.0}),
            ),
            True,
            "t",
            3,
        )
        helper.write(files)
        pid = helper._process.pid  # pyright: ignore[reportPrivateUsage]
        seen = Path(f"/proc/{pid}/cmdline").read_bytes() + Path(f"/proc/{pid}/environ").read_bytes()
        assert signer.key.hex().encode() not in seen and signer.key not in seen
    finally:
        helper.close()
    assert check_record(files.directory, signer, "t", 3).intact
    assert not check_record(files.directory, signer, "t", 4).intact  # bound to its trial


async def test_a_key_a_provider_echoes_in_its_401_never_reaches_the_results(
    tmp_path: Path, chat_server: Callable[[Responder], Awaitable[ChatServer]]
) -> None:
    org_token = "tf-org-token-0042"
    holder: list[ChatServer] = []

    async def refuse(body: dict[str, Any], count: int) -> web.StreamResponse:
        echoed = holder[0].authorizations[-1]  # what it received, quoted back as some providers do
        message = f"Incorrect API key provided: {echoed}. Organisation token {org_token} has no access."
        return web.json_response({"error": {"message": message, "type": "invalid_request_error"}}, status=401)

    holder.append(await chat_server(refuse))
    server = holder[0]
    output = tmp_path / "run"
    env = {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "test-key", "TOLOKAFORGE_ORG_TOKEN": org_token}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from tolokaforge.host.cli import main; main()",
        "run", "--pack", str(PACKS / "retail"), "--task", TASKS[0], "--agent", "llm", "--model", "m",
        "--output", str(output),
        env={**os.environ, **env}, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 1, err.decode()  # not gradeable: the model refused
    assert server.authorizations == ["Bearer test-key"]  # the key was sent, and echoed

    report = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from tolokaforge.host.cli import main; main()", "report", str(output),
        env={**os.environ, **env}, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    await asyncio.wait_for(report.communicate(), timeout=120)
    assert report.returncode == 0

    trajectory = yaml.safe_load((_trial(output, TASKS[0]) / "trajectory.yaml").read_text())
    assert "HTTP 401: " in trajectory["error"] and "Bearer [redacted]" in trajectory["error"]
    assert "Organisation token [redacted] has no access" in trajectory["error"]
    written = [path for path in output.rglob("*") if path.is_file()]
    assert {path.name for path in written} >= {"run.yaml", "summary.yaml", "report.html", "trajectory.yaml"}
    for path in written:
        data = path.read_bytes()
        assert b"test-key" not in data and org_token.encode() not in data, path
    summary = yaml.safe_load((output / "summary.yaml").read_text())
    assert "Bearer [redacted]" in summary["failures"][0]["reason"]


def test_a_big_tool_output_is_stored_once_and_capped(
    pack_copy: Callable[[str], Path], tmp_path: Path
) -> None:
    pack = pack_copy("retail")
    read = pack / "tools" / "read.py"
    original = (
        "    def invoke(data: Data, order_id: str) -> str:\n        return dump(get_order(data, order_id))\n"
    )
    source = read.read_text()
    assert original in source
    size = 3 * MAX_STORED_CHARS  # the tester's 100 MB behaves the same: only the cap is kept
    big = f'    def invoke(data: Data, order_id: str) -> str:\n        return "BIG-OUTPUT-" + "x" * {size}\n'
    read.write_text(source.replace(original, big))
    output = tmp_path / "run"
    done = _run(output, TASKS[0], pack=pack)
    assert done.returncode == 0, done.stdout + done.stderr

    held = {path.relative_to(output).as_posix(): path.read_bytes().count(b"BIG-OUTPUT-")
            for path in output.rglob("*") if path.is_file()}  # fmt: skip
    assert {name: count for name, count in held.items() if count} == {
        f"trials/{TASKS[0]}/0/trajectory.yaml": 1
    }
    trajectory_file = _trial(output, TASKS[0]) / "trajectory.yaml"
    assert trajectory_file.stat().st_size < MAX_STORED_CHARS + 64 * 1024  # not 3 MiB, and not twice
    trajectory = yaml.safe_load(trajectory_file.read_text())
    call = next(call for call in trajectory["tool_calls"] if call["name"] == "get_order_details")
    assert "output" not in call and call["status"] == "SUCCESS"
    message = trajectory["messages"][call["output_in_message"]]
    assert message["tool_call_id"] == call["call_id"]
    kept, cut = message["content"].rsplit("\n", 1)
    assert kept == "BIG-OUTPUT-" + "x" * (MAX_STORED_CHARS - len("BIG-OUTPUT-"))
    left_out = size + len("BIG-OUTPUT-") - MAX_STORED_CHARS
    assert (
        cut == f"[tolokaforge: cut here: {left_out:,} of {size + len('BIG-OUTPUT-'):,} characters not kept]"
    )
    digests = yaml.safe_load((trajectory_file.parent / "signature.yaml").read_text())["files"]
    assert digests["trajectory.yaml"] == hashlib.sha256(trajectory_file.read_bytes()).hexdigest()
