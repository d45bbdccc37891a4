"""The terminal summary: tasks checked, passed and failed, one line per failure with its reason.

Items carry ``tolokaforge_group`` (``<pack node>::<task>``, ``tolokaforge-runner``, or
``tolokaforge-provider[<name>]``, summarised one line per provider),
``tolokaforge_check``, and on failure ``tolokaforge_reason`` / on success ``tolokaforge_note`` in their
``user_properties``; the recorder reads them off the reports, so it also works from a junit-xml angle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

__all__ = ["SummaryRecorder"]

RUNNER_GROUP = "tolokaforge-runner"
PROVIDER_PREFIX = "tolokaforge-provider["


@dataclass
class _Verdict:
    failed: bool = False
    reason: str = ""
    notes: list[str] = field(default_factory=list[str])


@dataclass(eq=False)  # a plugin object: pluggy keeps plugins in sets, so identity is its hash
class SummaryRecorder:
    groups: dict[str, dict[str, _Verdict]] = field(default_factory=dict[str, dict[str, _Verdict]])

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Registered as a plugin object: every report passes here."""
        self.record(report)

    def record(self, report: pytest.TestReport) -> None:
        props = {key: value for key, value in report.user_properties if isinstance(value, str)}
        group, check = props.get("tolokaforge_group"), props.get("tolokaforge_check")
        if group is None or check is None:
            return
        verdict = self.groups.setdefault(group, {}).setdefault(check, _Verdict())
        if report.failed:
            verdict.failed = True
            verdict.reason = props.get("tolokaforge_reason") or _last_line(report)
        verdict.notes = [str(value) for key, value in report.user_properties if key == "tolokaforge_note"]

    def write(self, terminal: pytest.TerminalReporter) -> None:
        if not self.groups:
            return
        terminal.write_sep("=", "tolokaforge")
        tasks = {
            group: checks
            for group, checks in self.groups.items()
            if group != RUNNER_GROUP and not group.startswith(PROVIDER_PREFIX)
        }
        failed = {group: checks for group, checks in tasks.items() if any(v.failed for v in checks.values())}
        providers = [group for group in self.groups if group.startswith(PROVIDER_PREFIX)]
        if tasks or not providers:
            terminal.write_line(
                f"tasks checked: {len(tasks)}, passed: {len(tasks) - len(failed)}, failed: {len(failed)}"
            )
        for group in providers:
            checks = self.groups[group]
            bad = sum(1 for v in checks.values() if v.failed)
            terminal.write_line(f"{group}: {len(checks)} checked, {len(checks) - bad} passed, {bad} failed")
            failed[group] = checks
        runner = self.groups.get(RUNNER_GROUP)
        if runner is not None:
            bad = sum(1 for v in runner.values() if v.failed)
            terminal.write_line(
                f"runner contract: {len(runner)} checked, {len(runner) - bad} passed, {bad} failed"
            )
            for check, verdict in runner.items():
                if verdict.failed:
                    terminal.write_line(f"failed runner {check}: {verdict.reason}", red=True)
        for group, checks in failed.items():
            for check, verdict in checks.items():
                if verdict.failed:
                    terminal.write_line(f"failed {group} {check}: {verdict.reason}", red=True)
        for group, checks in self.groups.items():
            for check, verdict in checks.items():
                for note in verdict.notes:
                    terminal.write_line(f"note {group} {check}: {note}")


def _last_line(report: pytest.TestReport) -> str:
    lines = [line for line in report.longreprtext.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else report.outcome
