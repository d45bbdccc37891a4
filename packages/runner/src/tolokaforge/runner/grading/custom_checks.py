"""Custom checks: the pack's own Python checks, run in a separate process with a deadline.

The checks file (``custom_checks.file``, relative to the task's code root) defines functions named
``check_<name>(state, transcript)`` returning ``{"status": "passed"|"failed"|"skipped", "score": float,
"message": str}`` (``details`` optional). They run in a fresh interpreter -- a supervised child in
its own session, under the runner's limits, with a scrubbed environment and no network -- so that a
check cannot touch the runner, hang it, or crash it, and whatever it starts dies with it; each check's
exception becomes an ``error`` row.

Score: the mean score of the checks that reached a verdict (passed / failed). No verdict at all, or a
suite that failed to run, leaves the component unscored -- unless ``fail_on_error`` is set, which turns
either a suite failure or any erroring check into a 0.0. The segment is emitted whenever the evaluator
has something to say, because under ``fail_on_error: false`` it is the only account of why.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from tolokaforge.contracts.runner import CustomCheckResult
from tolokaforge.core.models import CustomChecksConfig

from ..process.sandbox import Limits, scrubbed_env
from ..process.supervisor import Supervised, launcher_argv
from .component import ComponentResult

__all__ = ["run_custom_checks"]

# Runs in the child interpreter: load the file, call every check_* function, print one JSON line.
_HARNESS = r"""
import importlib.util, json, sys, traceback
payload = json.load(sys.stdin)
spec = importlib.util.spec_from_file_location("tolokaforge_custom_checks", payload["file"])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
rows = []
for name in sorted(n for n in dir(module) if n.startswith("check_") and callable(getattr(module, n))):
    try:
        result = getattr(module, name)(payload["state"], payload["transcript"])
        if not isinstance(result, dict):
            raise TypeError(f"returned {type(result).__name__}, expected a dict")
        rows.append({"name": name[len("check_"):], "result": result})
    except Exception as error:
        rows.append({"name": name[len("check_"):], "error": f"{type(error).__name__}: {error}"})
sys.stdout.write("\n" + json.dumps(rows, default=str) + "\n")
"""

_STATUSES = ("passed", "failed", "skipped")


async def run_custom_checks(
    config: CustomChecksConfig,
    code_root: Path | None,
    state: dict[str, Any],
    transcript: list[dict[str, Any]],
    *,
    limits: Limits | None = None,
) -> ComponentResult:
    try:
        rows = await _run_suite(config, code_root, state, transcript, limits or Limits())
    except _SuiteError as error:
        score = 0.0 if config.fail_on_error else None
        return ComponentResult("custom_checks", score, f"Custom checks: the suite failed to run — {error}")
    results = [_to_result(row) for row in rows]
    verdicts = [r for r in results if r.status in ("passed", "failed")]
    errored = [r for r in results if r.status == "error"]
    not_passed = [f"{r.check_name} {r.status}: {r.message}" for r in results if r.status != "passed"]
    if not verdicts:
        score = 0.0 if config.fail_on_error and errored else None
        detail = "; ".join(not_passed) or "the file declares no check_ functions"
        return ComponentResult(
            "custom_checks",
            score,
            f"Custom checks: no check reached a verdict — {detail}",
            extra={"rows": results},
        )
    score = 0.0 if config.fail_on_error and errored else sum(r.score for r in verdicts) / len(verdicts)
    counts = f"{sum(r.status == 'passed' for r in results)} passed, {sum(r.status == 'failed' for r in results)} failed"
    counts += f", {sum(r.status == 'skipped' for r in results)} skipped, {len(errored)} errored"
    segment = f"Custom checks: score={score:.2f} ({counts})" + (
        f"; {'; '.join(not_passed)}" if not_passed else ""
    )
    return ComponentResult("custom_checks", score, segment, extra={"rows": results})


class _SuiteError(Exception):
    pass


async def _run_suite(
    config: CustomChecksConfig,
    code_root: Path | None,
    state: dict[str, Any],
    transcript: list[dict[str, Any]],
    limits: Limits,
) -> list[dict[str, Any]]:
    if code_root is None:
        raise _SuiteError(f"{config.file!r}: the task ships no code (tool_code) to find it in")
    path = (code_root / config.file).resolve()
    if not path.is_relative_to(code_root.resolve()) or not path.is_file():
        raise _SuiteError(f"{config.file!r} is not a file inside the task's code")
    env = scrubbed_env({}, home=str(code_root))
    child = await Supervised.spawn(
        launcher_argv(limits, [sys.executable, "-I", "-c", _HARNESS], env),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=code_root,
        env=env,
    )
    process = child.process
    payload = json.dumps({"file": str(path), "state": state, "transcript": transcript}, default=str).encode()
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(payload), timeout=config.timeout_seconds)
    except TimeoutError:
        raise _SuiteError(f"timed out after {config.timeout_seconds:g}s") from None
    finally:
        await child.stop()  # the suite's group goes with it: nothing a check started survives
    if process.returncode != 0:
        last = stderr.decode(errors="replace").strip().splitlines()[-1:] or [
            f"exit status {process.returncode}"
        ]
        raise _SuiteError(last[0])
    try:
        rows: list[dict[str, Any]] = json.loads(stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError) as error:
        raise _SuiteError(f"the harness printed no result ({error})") from error
    return rows


def _to_result(row: dict[str, Any]) -> CustomCheckResult:
    name = str(row["name"])
    if "error" in row:
        return CustomCheckResult(check_name=name, status="error", score=0.0, message=str(row["error"]))
    result: dict[str, Any] = row["result"]
    status = result.get("status")
    score = result.get("score")
    if (
        status not in _STATUSES
        or (status != "skipped" and not isinstance(score, int | float))
        or isinstance(score, bool)
    ):
        return CustomCheckResult(
            check_name=name,
            status="error",
            score=0.0,
            message=f"malformed result {json.dumps(result, default=str)[:200]}",
        )
    numeric = float(score) if isinstance(score, int | float) else 0.0
    if not 0.0 <= numeric <= 1.0:
        return CustomCheckResult(
            check_name=name, status="error", score=0.0, message=f"score {numeric} is outside 0..1"
        )
    details = result.get("details")
    return CustomCheckResult(
        check_name=name,
        status=str(status),
        score=numeric,
        message=str(result.get("message", "")),
        details_json=json.dumps(details, default=str) if details is not None else "",
    )
