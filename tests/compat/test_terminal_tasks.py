"""Terminal-Bench task folders as packs (docs/terminal.md), through the real CLI, runner and sandbox.

The three examples under examples/terminal pass golden (solution/solve.sh played through the ``bash``
tool, <task>/tests/test.sh as the verifier in the trial's sandbox) and fail when a scripted agent does the
wrong thing, the grade naming the verifier's failing test. The older layout (task.yaml, run-tests.sh,
a root Dockerfile, solution.sh) runs from tests/compat/packs/terminal_legacy, where a task whose image
installs packages is reported SKIPPED with its reason and never counted. The verifier and the
solution are out of the agent's reach, and a task.toml key we do not read is refused by validate.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

if TYPE_CHECKING:
    from conftest import Cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "terminal"
LEGACY = Path(__file__).parent / "packs" / "terminal_legacy"
EXAMPLE_TASKS = ("csv-region-totals", "fix-mean-script", "log-error-report")


def _grade(run: Path, task: str) -> dict[str, Any]:
    return yaml.safe_load((run / "trials" / task / "0" / "grade.yaml").read_text())


def _tool_answers(run: Path, task: str) -> list[str]:
    trajectory = yaml.safe_load((run / "trials" / task / "0" / "trajectory.yaml").read_text())
    return [message["content"] for message in trajectory["messages"] if message["role"] == "tool"]


def _bash(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


def test_the_examples_validate(cli: Cli) -> None:
    code, out = cli(["validate", "--pack", str(EXAMPLES)])
    assert code == 0, out
    assert "terminal: 3 tasks" in out and "SKIPPED" not in out


def test_the_examples_pass_golden(tmp_path: Path, cli: Cli) -> None:
    run = tmp_path / "run"
    code, out = cli(["run", "--pack", str(EXAMPLES), "--agent", "golden", "--output", str(run)])
    assert code == 0, out
    summary = yaml.safe_load((run / "summary.yaml").read_text())
    assert summary["passed"] == 3 and summary["trials"] == 3, out
    assert "skipped_tasks" not in summary
    for task in EXAMPLE_TASKS:
        grade = _grade(run, task)
        assert grade["binary_pass"] is True and grade["components"]["terminal_tests"] == 1.0, grade
        items = grade["component_items"]
        assert items[-1]["label"].endswith("exit status 0") and items[-1]["met"] is True
    # pytest's verdicts become the component's items, test by test
    labels = [item["label"] for item in _grade(run, "csv-region-totals")["component_items"]]
    assert any(label.endswith("test_outputs.py::test_totals_sorted_by_region") for label in labels), labels


def test_planted_mistakes_fail_naming_the_check(tmp_path: Path, cli: Cli) -> None:
    script = tmp_path / "mistakes.yaml"
    script.write_text(
        yaml.safe_dump(
            {
                "tasks": {
                    # hard-codes the answer for the given file: the unseen inputs expose it
                    "fix-mean-script": [_bash("printf 'print(\"18.00\")\\n' > mean.py")],
                    # totals right but unsorted
                    "csv-region-totals": [
                        _bash(
                            "printf 'region,total\\nnorth,150.50\\neast,16.00\\nsouth,99.99\\nwest,100.00\\n' > totals.csv"
                        )
                    ],
                    # counts every line that mentions ERROR, not those whose level is ERROR
                    "log-error-report": [
                        _bash(
                            "printf 'errors: %s\\ntop: E042\\n' \"$(cat logs/*.log | grep -c ERROR)\" > report.txt"
                        )
                    ],
                }
            }
        )
    )
    run = tmp_path / "run"
    code, out = cli(
        [
            "run",
            "--pack",
            str(EXAMPLES),
            "--agent",
            "scripted",
            "--script",
            str(script),
            "--output",
            str(run),
        ]
    )
    assert code == 0, out  # every trial graded; none passed
    summary = yaml.safe_load((run / "summary.yaml").read_text())
    assert summary["passed"] == 0 and summary["graded"] == 3, out
    mean = _grade(run, "fix-mean-script")
    assert mean["components"]["terminal_tests"] == 0.0
    assert any("test_unseen_input" in reason for reason in mean["reasons"]), mean["reasons"]
    totals = _grade(run, "csv-region-totals")
    assert any("test_totals_sorted_by_region" in reason for reason in totals["reasons"]), totals["reasons"]
    # a reward between 0 and 1 (2 of 3 checks) is the score; the task still fails
    report = _grade(run, "log-error-report")
    assert report["score"] == pytest.approx(2 / 3, abs=1e-6) and report["binary_pass"] is False
    assert any("exit status 1" in reason for reason in report["reasons"]), report["reasons"]
    tail = report["component_items"][-1]["details"]["output_tail"]
    assert "FAIL error count: expected 'errors: 5', got 'errors: 6'" in tail


def test_the_older_layout_runs_and_an_unbuildable_task_is_skipped(tmp_path: Path, cli: Cli) -> None:
    run = tmp_path / "run"
    code, out = cli(["run", "--pack", str(LEGACY), "--agent", "golden", "--output", str(run)])
    assert code == 0, out
    assert "SKIPPED needs-packages: Dockerfile line 2: RUN needs a container build" in out
    assert "1 task(s) SKIPPED" in out
    summary = yaml.safe_load((run / "summary.yaml").read_text())
    assert summary["trials"] == 1 and summary["passed"] == 1
    assert [task["task_id"] for task in summary["per_task"]] == ["greeting-file"]
    assert summary["skipped_tasks"] == [
        {
            "task_id": "needs-packages",
            "reason": "Dockerfile line 2: RUN needs a container build (no container engine runs trials here)",
        }
    ]
    assert not (run / "trials" / "needs-packages").exists()
    grade = _grade(run, "greeting-file")
    assert grade["components"]["terminal_tests"] == 1.0 and grade["binary_pass"] is True


def test_the_agent_cannot_see_the_verifier_and_a_partial_reward_fails(tmp_path: Path, cli: Cli) -> None:
    script = tmp_path / "peek.yaml"
    script.write_text(
        yaml.safe_dump(
            [
                _bash("pwd; ls -a; ls /tests /logs 2>&1; ls -a .."),
                _bash("echo 'Hello terminal' > hello.txt"),  # the comma and the bang are missing
            ]
        )
    )
    run = tmp_path / "run"
    code, out = cli(
        ["run", "--pack", str(LEGACY), "--agent", "scripted", "--script", str(script), "--output", str(run)]
    )
    assert code == 0, out
    listing = _tool_answers(run, "greeting-file")[0]
    # The shell starts where the image would put it: the workspace is also at the Dockerfile's WORKDIR.
    assert listing.startswith("/srv/greeting\n"), listing
    assert "name.txt" in listing, listing
    assert not any(word in listing for word in ("test_outputs", "run-tests", "solution", "verifier")), listing
    assert "cannot access '/tests': No such file or directory" in listing
    grade = _grade(run, "greeting-file")
    # run-tests.sh exits 0 but writes the share of passing tests: 1 of 2 is a score of 0.5, not a pass
    assert grade["score"] == 0.5 and grade["binary_pass"] is False, grade
    assert any("test_hello_greets_the_name" in reason for reason in grade["reasons"]), grade["reasons"]


def _task_copy(tmp_path: Path, name: str = "fix-mean-script") -> Path:
    pack = tmp_path / "pack"
    shutil.copytree(EXAMPLES / name, pack / name)
    return pack / name


def test_unsupported_keys_are_refused_with_their_path(tmp_path: Path, cli: Cli) -> None:
    task = _task_copy(tmp_path)
    with (task / "task.toml").open("a", encoding="utf-8") as toml:
        toml.write('\n[verifier.extra]\n\n[network]\nmode = "host"\n')
    text = (task / "task.toml").read_text().replace("[verifier]\n", '[verifier]\nuser = "root"\n')
    (task / "task.toml").write_text(text)
    code, out = cli(["validate", "--pack", str(task.parent)])
    assert code == 1, out
    assert "fix-mean-script/task.toml: verifier.user: is not supported" in out
    assert "fix-mean-script/task.toml: verifier.extra: is not a task.toml key read here" in out
    assert "fix-mean-script/task.toml: network: is not a task.toml key read here" in out


@pytest.mark.parametrize(
    ("dockerfile", "reason"),
    [
        (
            "FROM node:20\nWORKDIR /app\n",
            "environment/Dockerfile line 1: base image 'node:20' is not provided here",
        ),
        (
            "FROM python:3.12\nCOPY mean.py /opt/mean.py\n",
            "environment/Dockerfile line 2: COPY to /opt/mean.py places files outside the working directory /app",
        ),
        ("FROM python:3.12\nUSER nobody\n", "environment/Dockerfile line 2: USER needs a container build"),
        (
            "FROM python:3.12 AS build\nFROM python:3.12\n",
            "environment/Dockerfile line 2: a multi-stage build needs a container build",
        ),
    ],
)
def test_environments_this_machine_cannot_provide_are_skipped_with_the_reason(
    tmp_path: Path, cli: Cli, dockerfile: str, reason: str
) -> None:
    task = _task_copy(tmp_path)
    (task / "environment" / "Dockerfile").write_text(dockerfile)
    code, out = cli(["validate", "--pack", str(task)])
    assert code == 0, out
    assert f"SKIPPED fix-mean-script: {reason}" in out, out
    assert "0 tasks (1 skipped)" in out


def test_a_second_compose_service_or_a_prebuilt_image_is_skipped(tmp_path: Path, cli: Cli) -> None:
    task = _task_copy(tmp_path)
    (task / "docker-compose.yaml").write_text(
        "services:\n  main: {build: environment}\n  db: {image: postgres}\n"
    )
    other = _task_copy(tmp_path, "csv-region-totals")
    with (other / "task.toml").open("a", encoding="utf-8") as toml:
        toml.write('\n[environment]\ndocker_image = "example/prebuilt:1"\n')
    code, out = cli(["validate", "--pack", str(task.parent)])
    assert code == 0, out
    assert "SKIPPED fix-mean-script: docker-compose.yaml: services db, main need a container engine" in out
    assert (
        "SKIPPED csv-region-totals: environment.docker_image 'example/prebuilt:1' is a prebuilt image" in out
    )


def test_the_pytest_plugin_replays_the_golden_path_and_reports_the_skip(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:xdist",
            "-p",
            "no:cacheprovider",
            "-rs",
            f"--tolokaforge-pack={LEGACY}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "tasks checked: 1, passed: 1, failed: 0" in out, out
    assert "SKIPPED: Dockerfile line 2: RUN needs a container build" in out, out
