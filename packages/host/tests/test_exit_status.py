"""``tolokaforge run`` exit status: 0 all graded, 1 not gradeable / lost / below --fail-under, 2 usage and
unreachable prerequisites (checked up front), with a last line that says which."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tolokaforge.core.credentials import new_token, write_token_file
from tolokaforge.host.cli import main


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again when the block ends: nothing listens there


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(["run", *args])
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def _last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


@pytest.fixture
def giving_up_script(tmp_path: Path) -> Path:
    """An agent that answers once and stops: graded, and it fails the grade."""
    script = tmp_path / "give_up.yaml"
    script.write_text(yaml.safe_dump([{"content": "Sorry, I cannot help with that.", "done": True}]))
    return script


def test_all_graded_exits_0_even_when_grades_fail(
    packs_dir: Path, tmp_path: Path, giving_up_script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = str(packs_dir / "retail")
    common = [
        "--pack",
        pack,
        "--agent",
        "scripted",
        "--script",
        str(giving_up_script),
        "--task",
        "lookup_order_tracking",
    ]
    code, out, _ = _run([*common, "--output", str(tmp_path / "a")], capsys)
    assert code == 0
    assert _last_line(out) == "exit 0: all 1 trials graded; pass rate 0.000 (0/1 passed)"
    assert "trials that did not pass" in out and "lookup_order_tracking/0" in out  # listed with its reason

    code, out, _ = _run([*common, "--output", str(tmp_path / "b"), "--fail-under", "0.5"], capsys)
    assert code == 1
    assert _last_line(out) == "exit 1: pass rate 0.000 (0/1 passed) is below --fail-under 0.5"


def test_fail_under_met_exits_0(packs_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--pack", str(packs_dir / "retail"), "--task", "lookup_order_tracking", "--fail-under", "1"]
    code, out, _ = _run([*args, "--output", str(tmp_path / "run")], capsys)
    assert code == 0
    assert _last_line(out).endswith("pass rate 1.000 (1/1 passed), at least --fail-under 1")


def test_a_broken_golden_action_exits_1_naming_the_trial(
    pack_copy: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = pack_copy("retail")
    grading = root / "tasks" / "lookup_order_tracking" / "grading.yaml"
    data = yaml.safe_load(grading.read_text())
    data["state_checks"]["hash"]["golden_actions"][1]["kwargs"] = {"order_id": "O-00000"}  # no such order
    grading.write_text(yaml.safe_dump(data))
    tasks = ["--task", "lookup_order_tracking", "--task", "lookup_refund_quote"]
    code, out, _ = _run(["--pack", str(root), *tasks, "--output", str(tmp_path / "run")], capsys)
    assert code == 1
    assert _last_line(out) == "exit 1: 1 not gradeable of 2 trials; pass rate 0.500 (1/2 passed)"
    summary = yaml.safe_load((tmp_path / "run" / "summary.yaml").read_text())
    assert summary["outcomes"] == {"passed": 1, "failed": 0, "not_gradeable": 1, "lost": 0, "unfinished": 0}
    [failure] = summary["failures"]
    assert failure["task_id"] == "lookup_order_tracking" and failure["kind"] == "not_gradeable"
    assert "O-00000" in failure["reason"]


def _cli(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from tolokaforge.host.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=timeout,  # the bound the issue sets: an unreachable prerequisite is reported in seconds
    )


def test_an_unreachable_runner_exits_2_after_its_short_health_budget(packs_dir: Path, tmp_path: Path) -> None:
    # The bound that matters is the up-front HealthCheck's 5 s budget, which the error names; the
    # subprocess timeout only keeps a hang from stalling the suite (a loaded machine starts Python slowly).
    port = _closed_port()
    token_file = tmp_path / "runner.token"  # a credential, so what is tested is the runner's absence
    write_token_file(token_file, new_token())
    done = _cli(
        [
            "run",
            "--pack",
            str(packs_dir / "retail"),
            "--runner",
            f"127.0.0.1:{port}",
            "--runner-token-file",
            str(token_file),
            "--output",
            str(tmp_path / "r"),
        ],
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"tolokaforge: error (exit 2): runner at 127.0.0.1:{port} unreachable")
    assert "after 5s" in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "r" / "trials").exists()  # no trial was attempted


def test_an_unreachable_model_endpoint_exits_2_before_any_trial(packs_dir: Path, tmp_path: Path) -> None:
    port = _closed_port()
    done = subprocess.run(
        [sys.executable, "-c", "from tolokaforge.host.cli import main; main()", "run", "--pack",
         str(packs_dir / "retail"), "--agent", "llm", "--model", "gpt-4o-mini", "--output", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(
        f"tolokaforge: error (exit 2): preflight: the agent model 'gpt-4o-mini' at http://127.0.0.1:{port}/v1 "
        "unreachable: "
    )
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["--trials", "0"], {}, "Invalid value for '--trials'"),
        ([], {"TOLOKAFORGE_TRIALS": "abc"}, "Invalid value for '--trials' (env var: 'TOLOKAFORGE_TRIALS')"),
        (
            [],
            {"TOLOKAFORGE_FAIL_UNDER": "2"},
            "Invalid value for '--fail-under' (env var: 'TOLOKAFORGE_FAIL_UNDER')",
        ),
        (["--bogus"], {}, "No such option '--bogus'"),
    ],
)
def test_a_bad_option_is_one_line_and_exit_2(
    packs_dir: Path, args: list[str], env: dict[str, str], expected: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from tolokaforge.host.cli import main; main()", "run", "--pack", str(packs_dir / "retail"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", **env},
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("tolokaforge: error (exit 2): ") and expected in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
