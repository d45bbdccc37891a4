"""A separate project outside the monorepo, made by the steps of the plugin's README ("Using it from
another repository"), the way a pack author uses the plugin.

``uv init --bare``, ``uv add --dev <checkout>/plugins/pytest-tolokaforge`` (uv brings the Tolokaforge
packages it needs from the same checkout), the ini keys added to its pyproject (the pack, relative
to the project, and the checks), its pack and its tests (no conftest; the fixtures), then ``uv run
pytest`` in the project's own environment: pytest finds the plugin through its ``pytest11`` entry
point. The runner under test is an external ``tolokaforge-runner`` (``--tolokaforge-runner``), whose
token the plugin finds in the file the runner wrote for its port, or is given
(``--tolokaforge-runner-token-file``). uv works offline here, from the cache the workspace's own
``uv sync`` filled.
"""

from __future__ import annotations

import os
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

PYTEST_INI = """
[tool.pytest.ini_options]
tolokaforge_packs = ["packs/dual_control"]
tolokaforge_checks = "load,golden,runner"
"""

AUTHOR_TESTS = """
import sys
from pathlib import Path

from tolokaforge.contracts.runner import HealthCheckRequest


def test_this_runs_in_the_projects_own_environment():
    assert Path(sys.prefix) == Path(__file__).resolve().parents[1] / ".venv"


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


def _uv(uv: str, *args: str, cwd: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"}
    # Offline, from the cache the workspace's sync filled; this interpreter, so no download either.
    env |= {"UV_OFFLINE": "1", "UV_PYTHON": sys.executable}
    done = subprocess.run([uv, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"uv {' '.join(args)}:\n{done.stdout}{done.stderr}"


def test_a_separate_project_runs_the_plugin_against_an_external_runner(
    run_pytest: RunPytest,
    uv: str,
    tmp_path: Path,
    packs_dir: Path,
    external_runner: tuple[str, list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    address, token_options = external_runner
    project = tmp_path / "my-pack-repo"
    project.mkdir()
    assert not project.resolve().is_relative_to(PLUGIN.parents[1])
    # The README's steps, one by one.
    _uv(uv, "init", "--bare", "--name", "my-dual-control-pack", cwd=project)
    _uv(uv, "add", "--dev", str(PLUGIN), cwd=project)
    pyproject = (project / "pyproject.toml").read_text()
    assert f'pytest-tolokaforge = {{ path = "{PLUGIN}" }}' in pyproject, pyproject
    (project / "pyproject.toml").write_text(pyproject + PYTEST_INI)
    shutil.copytree(
        packs_dir / "dual_control",
        project / "packs" / "dual_control",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (project / "tests").mkdir()
    (project / "tests" / "test_my_pack.py").write_text(AUTHOR_TESTS)

    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("UV_PYTHON", sys.executable)
    run = run_pytest(f"--tolokaforge-runner={address}", *token_options, cwd=project, uv=True)

    assert run.returncode == 0, run.output
    assert "plugins: " in run.output and "tolokaforge-0.1.0" in run.output  # found by its entry point
    assert f"rootdir: {project}" in run.output
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
                "test_this_runs_in_the_projects_own_environment",
                "test_the_pack_is_loaded",
                "test_the_runner_is_the_external_one",
                "test_roaming_done_by_hand_passes",
                "test_doing_nothing_fails",
            )
        },
    }
    assert f"runner {address} status healthy" in run.output
    assert "tasks checked: 5, passed: 5, failed: 0" in run.output
