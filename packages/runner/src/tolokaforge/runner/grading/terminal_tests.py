"""The terminal_tests component: a Terminal-Bench task's own verifier, run once the episode is over.

The verifier is the task folder's ``tests/`` (TerminalTestsConfig.files); it reaches the runner only
inside the grading config, so the agent never sees it. Here it is written to a fresh folder and run as
``bash /tests/<script>`` in a sandbox of the trial's kind: the trial's workspace at the task's working
directory (and at its own path, where the agent's tools saw it), the tests at ``/tests``, a writable
``/logs/verifier`` for the reward, under the task's verifier timeout (docs/terminal.md).

Score: the reward the script wrote (``/logs/verifier/reward.txt``, a number, or ``reward.json``, an
object with ``reward``), kept within 0..1 as Terminal-Bench harnesses do; with no reward file, exit
status 0 scores 1 and any other 0. Items: one per test the script reported (a CTRF report
``/logs/verifier/ctrf.json``, else the ``path::name PASSED`` lines of ``pytest -v`` output), then the
exit status with the output's tail as evidence.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, cast

from tolokaforge.core.models import TerminalTestsConfig

from ..process.cgroups import TrialCgroup
from ..process.confinement import Confinement, View
from ..process.sandbox import Limits, scrubbed_env
from ..process.supervisor import Supervised, confined_launch
from .component import ITEMS, ComponentResult, ItemResult

__all__ = ["TerminalTestsUnavailable", "run_terminal_tests"]

NAME = "terminal_tests"
TESTS_INSIDE = "/tests"
LOGS_INSIDE = "/logs/verifier"
OUTPUT_TAIL = 4000
"""The characters of the verifier's output kept as evidence (its end: where pytest says what failed)."""

_PYTEST_LINE = re.compile(r"^(\S+::\S+)\s+(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b", re.MULTILINE)
_CTRF_MET = {"passed": True, "failed": False, "skipped": None, "pending": None, "other": False}
_PYTEST_MET = {"PASSED": True, "XPASS": True, "XFAIL": True, "FAILED": False, "ERROR": False}


class TerminalTestsUnavailable(Exception):
    """The verifier cannot run as written here (its fixed paths need the sandbox)."""


async def run_terminal_tests(
    config: TerminalTestsConfig,
    workspace: Path | None,
    *,
    confinement: Confinement,
    cgroup: TrialCgroup | None,
    limits: Limits | None = None,
) -> ComponentResult:
    if workspace is None:
        raise TerminalTestsUnavailable("the trial has no workspace for the verifier to check")
    if not confinement.sandboxed:
        raise TerminalTestsUnavailable(
            f"a terminal verifier sees {TESTS_INSIDE}, {LOGS_INSIDE} and {config.workdir} at fixed paths, "
            "which only the sandbox can give it: run with --isolation sandbox"
        )
    fixed = (TESTS_INSIDE, LOGS_INSIDE)
    workdir = config.workdir.rstrip("/") or "/"
    if confinement.shadows(workdir) or any(p == workdir or p.startswith(workdir + "/") for p in fixed):
        raise TerminalTestsUnavailable(
            f"the task's working directory {config.workdir} would hide what the verifier's sandbox needs "
            "(the system, the Python environment, /tests or /logs/verifier) on this machine"
        )
    scratch = Path(tempfile.mkdtemp(prefix="verifier-", dir=workspace.parent))
    try:
        tests, logs = scratch / "tests", scratch / "logs"
        for relative, text in config.files.items():
            target = tests / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        logs.mkdir()
        confinement.own(scratch)
        status, output = await _run(config, workspace, tests, logs, confinement, cgroup, limits or Limits())
        return await asyncio.to_thread(_verdict, status, output, logs, config)
    finally:
        await asyncio.to_thread(shutil.rmtree, scratch, True)


async def _run(
    config: TerminalTestsConfig,
    workspace: Path,
    tests: Path,
    logs: Path,
    confinement: Confinement,
    cgroup: TrialCgroup | None,
    limits: Limits,
) -> tuple[int | None, str]:
    """The script's exit status (None: it ran out of time) and its output, stdout and stderr merged."""
    binds = [(tests, TESTS_INSIDE), (logs, LOGS_INSIDE)]
    if config.workdir != str(workspace):
        binds.append((workspace, config.workdir))
    view = View(cwd=Path(config.workdir), write=(workspace,), binds=tuple(binds), cgroup=cgroup)
    env = scrubbed_env({**config.env, "TEST_DIR": TESTS_INSIDE}, home="/tmp")
    script = f"{TESTS_INSIDE}/{config.script}"
    child = await Supervised.spawn_launch(
        confined_launch(confinement, limits, ["bash", script], env, view),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=workspace,
        env=env,
    )
    try:
        stdout, _ = await asyncio.wait_for(child.process.communicate(), timeout=config.timeout_s)
    except TimeoutError:
        return None, ""
    finally:
        await child.stop()  # whatever the verifier started goes with it
    return child.process.returncode, stdout.decode("utf-8", "replace")


def _verdict(status: int | None, output: str, logs: Path, config: TerminalTestsConfig) -> ComponentResult:
    tail = output[-OUTPUT_TAIL:]
    items = _test_items(logs, output)
    ran = "timed out" if status is None else f"exit status {status}"
    items.append(
        ItemResult(
            NAME,
            len(items),
            f"{config.script} {ran}",
            status == 0,
            f"ran out of its {config.timeout_s:g}s" if status is None else ran,
            {"output_tail": tail} if tail else {},
        )
    )
    reward, source, problem = _reward(logs)
    if status is None:
        score, why = 0.0, f"{config.script} timed out after {config.timeout_s:g}s"
    elif problem is not None:
        score, why = 0.0, problem
    elif reward is not None:
        score = min(1.0, max(0.0, reward))
        why = f"{source} {reward:g}" + (" (kept within 0..1)" if score != reward else "") + f"; {ran}"
    else:
        score, why = (1.0 if status == 0 else 0.0), f"no reward file; {ran}"
    failed = [item.label for item in items[:-1] if not item.met]
    counts = (
        f"{sum(item.met for item in items[:-1])} passed, {len(failed)} not passed" if len(items) > 1 else ""
    )
    segment = f"Terminal tests: score={score:.2f} ({why}" + (f"; {counts}" if counts else "") + ")"
    if failed:
        segment += f"; not passed: {', '.join(failed[:10])}" + (" ..." if len(failed) > 10 else "")
    elif status != 0 and score < 1.0:
        segment += f"; output ends: {tail[-300:].strip()!r}"
    return ComponentResult(NAME, score, segment, extra={ITEMS: items})


def _reward(logs: Path) -> tuple[float | None, str, str | None]:
    """(reward, file it came from, problem): a reward file that exists but cannot be read is a problem."""
    text_file, json_file = logs / "reward.txt", logs / "reward.json"
    if text_file.is_file():
        raw = text_file.read_text(encoding="utf-8", errors="replace").strip()
        try:
            return float(raw.splitlines()[-1]), "reward.txt", None
        except (ValueError, IndexError):
            return None, "reward.txt", f"reward.txt holds no number: {raw[:80]!r}"
    if json_file.is_file():
        try:
            value: Any = json.loads(json_file.read_text(encoding="utf-8"))
        except ValueError as error:
            return None, "reward.json", f"reward.json is not JSON: {error}"
        reward: Any = cast(dict[str, Any], value).get("reward") if isinstance(value, dict) else value
        if isinstance(reward, int | float) and not isinstance(reward, bool):
            return float(reward), "reward.json", None
        return None, "reward.json", "reward.json holds no numeric reward"
    return None, "", None


def _test_items(logs: Path, output: str) -> list[ItemResult]:
    ctrf = logs / "ctrf.json"
    if ctrf.is_file():
        try:
            tests: Any = json.loads(ctrf.read_text(encoding="utf-8"))["results"]["tests"]
        except (ValueError, KeyError, TypeError):
            tests = None
        if isinstance(tests, list):
            items: list[ItemResult] = []
            for test in tests:  # pyright: ignore[reportUnknownVariableType]
                row: dict[str, Any] = test if isinstance(test, dict) else {}  # pyright: ignore[reportUnknownVariableType]
                status = str(row.get("status", "other"))
                met = _CTRF_MET.get(status, False)
                if met is not None:
                    items.append(ItemResult(NAME, len(items), str(row.get("name", "?")), met, status))
            return items
    found: list[ItemResult] = []
    for name, status in _PYTEST_LINE.findall(output):
        met = _PYTEST_MET.get(status)
        if met is not None:
            found.append(ItemResult(NAME, len(found), name, met, status.lower()))
    return found
