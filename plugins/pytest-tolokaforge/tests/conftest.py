"""Fixtures: pytest run in a subprocess on a pack, and writable copies of the example packs.

pytester needs its plugin loaded by the outermost configuration (``-p pytester``), which a conftest
below the monorepo's root cannot do; so runs go through ``python -m pytest`` in a subprocess, from a
directory outside the repository, with the workspace's interpreter -- what a pack author does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKS = Path(__file__).resolve().parents[3] / "examples" / "packs"
_OUTCOME = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)", re.MULTILINE)


@dataclass(frozen=True)
class Run:
    returncode: int
    output: str

    @property
    def outcomes(self) -> dict[str, str]:
        """nodeid -> PASSED / FAILED / ... (from ``-rA``)."""
        return {nodeid: outcome for outcome, nodeid in _OUTCOME.findall(self.output)}

    def failed(self) -> set[str]:
        return {nodeid for nodeid, outcome in self.outcomes.items() if outcome != "PASSED"}

    def section(self, nodeid: str) -> str:
        """The failure report of one item (its repr_failure text), from the FAILURES section."""
        title = re.escape(_report_title(nodeid))
        match = re.search(rf"_+ {title} _+\n(.*?)(?=\n_{{3,}} |\n={{3,}} )", self.output, re.DOTALL)
        assert match is not None, f"no failure section for {nodeid}:\n{self.output}"
        return match.group(1)


def _report_title(nodeid: str) -> str:
    """CheckItem.reportinfo: ``tolokaforge <check> <task>``."""
    *_, task, check = nodeid.split("::")
    return f"tolokaforge {check} {task}"


RunPytest = Callable[..., Run]


@pytest.fixture
def run_pytest(tmp_path_factory: pytest.TempPathFactory) -> RunPytest:
    """``run_pytest(*args, cwd=None, autoload=False, columns=240, uv=False)``: pytest in a subprocess
    outside the repo.

    Without ``autoload`` only this plugin is loaded (``-p pytest_tolokaforge.plugin``), which keeps
    the run quick; with it, pytest finds the plugin through its ``pytest11`` entry point. With ``uv``
    it is ``uv run pytest`` in the project ``cwd``, in that project's own environment (entry point
    included).
    """

    def run(
        *args: str,
        cwd: Path | None = None,
        autoload: bool = False,
        timeout: float = 240,
        columns: int = 240,
        uv: bool = False,
    ) -> Run:
        where = cwd or tmp_path_factory.mktemp("run")
        env = {**os.environ, "COLUMNS": str(columns)}
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-W", "error"]
        if uv:
            env.pop("VIRTUAL_ENV", None)  # the workspace's: uv would warn that it is not the project's
            env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
            command = [uv_executable(), "run", *command[2:]]
        elif autoload:
            env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        else:
            env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
            command += ["-p", "pytest_tolokaforge.plugin"]
        done = subprocess.run(
            [*command, *args],
            cwd=where,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return Run(done.returncode, done.stdout + done.stderr)

    return run


def uv_executable() -> str:
    """The uv running this suite (``uv run`` names itself in ``UV``), else the one on PATH."""
    found = os.environ.get("UV") or shutil.which("uv")
    if found is None:
        pytest.fail("the separate-project tests drive uv, and no uv is on PATH (pip install uv)")
    return found


@pytest.fixture
def uv() -> str:
    return uv_executable()


@pytest.fixture
def pack_copy(tmp_path: Path) -> Callable[[str], Path]:
    """``pack_copy(name)`` -> a writable copy of an example pack."""

    def copy(name: str) -> Path:
        target = tmp_path / "packs" / name
        shutil.copytree(PACKS / name, target, ignore=shutil.ignore_patterns("__pycache__"))
        return target

    return copy


@pytest.fixture
def packs_dir() -> Path:
    return PACKS
