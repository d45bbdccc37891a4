"""A separate project outside the monorepo, the way a pack author uses the plugin.

Its own pyproject names the pack (ini ``tolokaforge_packs``, relative to the project) and the checks;
its tests folder has no conftest and uses the fixtures; pytest finds the plugin through its ``pytest11``
entry point; and the runner under test is an external ``tolokaforge-runner`` (``--tolokaforge-runner``),
whose token the plugin finds in the file the runner wrote for its port, or is given
(``--tolokaforge-runner-token-file``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tolokaforge.core.credentials import TOKEN_DIR_ENV, new_token, write_token_file

if TYPE_CHECKING:
    from conftest import RunPytest

PLUGIN = Path(__file__).resolve().parents[1]

PYPROJECT = f"""
[project]
name = "my-dual-control-pack"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["pytest-tolokaforge @ {PLUGIN.as_uri()}"]

[tool.pytest.ini_options]
tolokaforge_packs = ["packs/dual_control"]
tolokaforge_checks = "load,golden,runner"
asyncio_default_fixture_loop_scope = "function"
"""

AUTHOR_TESTS = """
from tolokaforge.contracts.runner import HealthCheckRequest


def test_the_pack_is_loaded(tolokaforge_pack):
    assert tolokaforge_pack.name == "dual_control"
    assert sorted(t.task_id for t in tolokaforge_pack.tasks)[0] == "dc_airplane_mode_no_service"


def test_the_runner_is_the_external_one(tolokaforge_runner, request):
    health = tolokaforge_runner.run(tolokaforge_runner.stub.health_check(HealthCheckRequest()))
    assert health.status == "healthy"
    assert tolokaforge_runner.address == request.config.getoption("tolokaforge_runner")


def test_roaming_done_by_hand_passes(tolokaforge_trial):
    trial = tolokaforge_trial("dc_roaming_abroad")
    assert "enable_roaming" in [tool.name for tool in trial.agent_tools]
    assert trial.call("enable_roaming", {"line_id": 5}).status.name == "INVALID_ARGUMENTS"
    assert trial.call("toggle_data_roaming", {}, executor="agent").status.name == "TOOL_NOT_FOUND"
    assert trial.call("enable_roaming", {"line_id": "L-1002"}).status.name == "SUCCESS"
    assert trial.state()["lines"]["L-1002"]["roaming_enabled"] is True
    trial.say("Roaming is on; please also turn data roaming on in your phone settings.")
    grade = trial.grade()
    assert grade.binary_pass and grade.score == 1.0, grade.reasons


def test_doing_nothing_fails(tolokaforge_trial):
    trial = tolokaforge_trial("dc_roaming_abroad")
    trial.say("Have a nice trip!")
    assert not trial.grade().binary_pass
"""


@pytest.fixture(params=["default token file", "--tolokaforge-runner-token-file"])
def external_runner(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, list[str]]]:
    """A ``tolokaforge-runner`` process on an ephemeral port; its address and the plugin's options for
    its token: none (the runner writes its token to the default file for its port, in a token directory
    of this test, inherited by the project's pytest) or ``--tolokaforge-runner-token-file``."""
    tokens = tmp_path_factory.mktemp("tokens")
    monkeypatch.setenv(TOKEN_DIR_ENV, str(tokens))
    command = [str(Path(sys.executable).parent / "tolokaforge-runner"), "--port", "0", "--store", "memory"]
    options: list[str] = []
    if request.param == "--tolokaforge-runner-token-file":
        token_file = tmp_path_factory.mktemp("elsewhere") / "runner.token"  # not where a runner writes one
        write_token_file(token_file, new_token())
        command += ["--token-file", str(token_file)]
        options = [f"--tolokaforge-runner-token-file={token_file}"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            found = re.search(r"listening on (\S+)", line)
            assert found is not None, line
            token_line = process.stdout.readline()
            written = re.search(r"token in (\S+)", token_line)
            assert written is not None, token_line
            if not options:
                port = found.group(1).rsplit(":", 1)[1]
                assert Path(written.group(1)) == tokens / f"runner-{port}.token", token_line
            yield found.group(1), options
        finally:
            process.terminate()
            process.wait(timeout=30)


def test_a_separate_project_runs_the_plugin_against_an_external_runner(
    run_pytest: RunPytest, tmp_path: Path, packs_dir: Path, external_runner: tuple[str, list[str]]
) -> None:
    address, token_options = external_runner
    project = tmp_path / "my-pack-repo"
    (project / "tests").mkdir(parents=True)
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "tests" / "test_my_pack.py").write_text(AUTHOR_TESTS)
    shutil.copytree(
        packs_dir / "dual_control",
        project / "packs" / "dual_control",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    assert not project.resolve().is_relative_to(PLUGIN.parents[1])

    run = run_pytest(f"--tolokaforge-runner={address}", *token_options, cwd=project, autoload=True)

    assert run.returncode == 0, run.output
    assert "plugins: " in run.output and "tolokaforge-0.1.0" in run.output  # found by its entry point
    tasks = [p.name for p in (packs_dir / "dual_control" / "tasks").iterdir()]
    assert run.outcomes == {
        **{f"tolokaforge[dual_control]::{t}::{c}": "PASSED" for t in tasks for c in ("load", "golden")},
        **{
            f"tolokaforge-runner::{name}": "PASSED"
            for name in ("health_check", "protocol_version_skew", "empty_call_id", "cleanup_idempotent")
        },
        **{
            f"tests/test_my_pack.py::{name}": "PASSED"
            for name in (
                "test_the_pack_is_loaded",
                "test_the_runner_is_the_external_one",
                "test_roaming_done_by_hand_passes",
                "test_doing_nothing_fails",
            )
        },
    }
    assert f"runner {address} status healthy" in run.output
    assert "tasks checked: 5, passed: 5, failed: 0" in run.output
