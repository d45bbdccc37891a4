"""Custom checks: the pack's own Python checks, run in a separate process with a deadline.

The checks file (``custom_checks.file``, relative to the task's code root) is run by the harness in
``tolokaforge.sdk.checks_runner`` in a fresh interpreter -- a supervised child in its own
session, under the runner's limits, with a scrubbed environment -- so a check cannot touch the runner,
hang it, or crash it, and whatever it starts dies with it. Both styles run: ``@init``/``@check`` functions (checks_interface) receiving the
CheckContext, and ``check_<name>(state, transcript)`` functions. The checks file's folder and every
``relative_imports`` folder come first on its ``sys.path``.

Score: the mean score of the checks that reached a verdict. Under ``fail_on_error`` (the default) a
suite that fails to run, or any check that errors, scores 0.0; under an explicit ``false`` the
component is unscored and the segment says so, so a check never vanishes from a grade unseen.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tolokaforge.contracts.runner import CustomCheckResult
from tolokaforge.core.models import CustomChecksConfig

from ..process.cgroups import TrialCgroup
from ..process.confinement import Confinement, View
from ..process.sandbox import Limits, scrubbed_env
from ..process.supervisor import Supervised, confined_launch
from .component import ComponentResult

__all__ = ["CheckEvidence", "run_custom_checks"]

HARNESS_MODULE = "tolokaforge.sdk.checks_runner"
_UNSCORED = "unscored (fail_on_error: false)"


@dataclass(frozen=True)
class CheckEvidence:
    """What a checks file reads: the tables before and after, the transcript wire, the task."""

    final_state: Mapping[str, Any]
    transcript: list[dict[str, Any]]
    initial_state: Mapping[str, Any] = field(default_factory=dict[str, Any])
    task: Mapping[str, str] = field(default_factory=dict[str, str])
    failed_call_ids: tuple[str, ...] = ()


async def run_custom_checks(
    config: CustomChecksConfig,
    code_root: Path | None,
    evidence: CheckEvidence,
    *,
    limits: Limits | None = None,
    confinement: Confinement | None = None,
    cgroup: TrialCgroup | None = None,
) -> ComponentResult:
    try:
        rows = await _run_suite(
            config, code_root, evidence, limits or Limits(), confinement or Confinement.process(), cgroup
        )
    except _SuiteError as error:
        if config.fail_on_error:
            return ComponentResult(
                "custom_checks", 0.0, f"Custom checks: score=0.00, the suite failed to run — {error}"
            )
        return ComponentResult(
            "custom_checks", None, f"Custom checks: {_UNSCORED}, the suite failed to run — {error}"
        )
    results = [_to_result(row) for row in rows]
    verdicts = [r for r in results if r.status in ("passed", "failed")]
    errored = [r for r in results if r.status == "error"]
    not_passed = [f"{r.check_name} {r.status}: {r.message}" for r in results if r.status != "passed"]
    if not verdicts:
        score = 0.0 if config.fail_on_error and errored else None
        detail = "; ".join(not_passed) or "the file declares no checks"
        lead = "score=0.00" if score is not None else (_UNSCORED if errored else "unscored")
        return ComponentResult(
            "custom_checks",
            score,
            f"Custom checks: {lead}, no check reached a verdict — {detail}",
            extra={"rows": results},
        )
    mean = sum(r.score for r in verdicts) / len(verdicts)
    score = 0.0 if config.fail_on_error and errored else mean
    counts = f"{sum(r.status == 'passed' for r in results)} passed, {sum(r.status == 'failed' for r in results)} failed"
    counts += f", {sum(r.status == 'skipped' for r in results)} skipped, {len(errored)} errored"
    note = (
        f"; errored checks not counted ({_UNSCORED[len('unscored ') :]})"
        if errored and not config.fail_on_error
        else ""
    )
    segment = f"Custom checks: score={score:.2f} ({counts}){note}" + (
        f"; {'; '.join(not_passed)}" if not_passed else ""
    )
    return ComponentResult("custom_checks", score, segment, extra={"rows": results})


class _SuiteError(Exception):
    pass


async def _run_suite(
    config: CustomChecksConfig,
    code_root: Path | None,
    evidence: CheckEvidence,
    limits: Limits,
    confinement: Confinement,
    cgroup: TrialCgroup | None,
) -> list[dict[str, Any]]:
    if code_root is None:
        raise _SuiteError(f"{config.file!r}: the task ships no code (tool_code) to find it in")
    root = code_root.resolve()
    path = (root / config.file).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        raise _SuiteError(f"{config.file!r} is not a file inside the task's code")
    search = [str(path.parent)]
    for relative in config.relative_imports:
        folder = (root / relative).resolve()
        if not folder.is_relative_to(root) or not folder.is_dir():
            raise _SuiteError(f"relative_imports: {relative!r} is not a folder inside the task's code")
        search.append(str(folder))
    # Sandboxed, the checks see the task's code read-only, and their HOME is the sandbox's private /tmp;
    # the evidence comes on stdin.
    env = scrubbed_env({}, home="/tmp" if confinement.sandboxed else str(code_root))
    view = View(cwd=root, read=(root,), cgroup=cgroup)
    child = await Supervised.spawn_launch(
        confined_launch(confinement, limits, [sys.executable, "-I", "-m", HARNESS_MODULE], env, view),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=code_root,
        env=env,
    )
    process = child.process
    payload = json.dumps(
        {
            "file": str(path),
            "search_paths": search,
            "final_state": evidence.final_state,
            "initial_state": evidence.initial_state,
            "transcript": evidence.transcript,
            "failed_call_ids": list(evidence.failed_call_ids),
            "task": evidence.task,
        },
        default=str,
    ).encode()
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


_STATUSES = ("passed", "failed", "skipped")


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
