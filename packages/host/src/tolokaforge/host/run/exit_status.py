"""What ``tolokaforge run`` exits with, and the last line that says why.

====  =========================================================================================
0     every selected trial ran and was graded (passed or not), and the pass rate meets
      ``--fail-under`` when one is given
1     a trial is unfinished, lost or not gradeable, or the pass rate is below ``--fail-under``
2     usage, pack or configuration error; a runner or model endpoint that cannot be reached, before
      the run (nothing runs) or during it (the trials it ended are unfinished; ``--resume`` runs them)
130   interrupted
====  =========================================================================================

A graded trial that did not pass is the agent's result, not a broken run: it exits 0 unless
``--fail-under`` says the pass rate is too low.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..results.summary import RunSummary

__all__ = ["EXIT_INCOMPLETE", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "Verdict", "verdict"]

EXIT_OK = 0
EXIT_INCOMPLETE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class Verdict:
    code: int
    line: str


def verdict(summary: RunSummary, fail_under: float | None = None) -> Verdict:
    outcomes = summary.outcomes()
    total = len(summary.rows)
    broken = {kind: outcomes[kind] for kind in ("unfinished", "lost", "not_gradeable") if outcomes[kind]}
    rate = f"pass rate {summary.pass_rate:.3f} ({outcomes['passed']}/{total} passed)"
    lost_to_infrastructure = sum(row.kind == "unfinished" and row.infrastructure for row in summary.rows)
    if lost_to_infrastructure:
        return Verdict(
            EXIT_USAGE,
            f"exit 2: {lost_to_infrastructure} of {total} trials unfinished by the infrastructure "
            f"(--resume runs them again); {rate}",
        )
    if broken:
        what = ", ".join(f"{count} {kind.replace('_', ' ')}" for kind, count in broken.items())
        return Verdict(EXIT_INCOMPLETE, f"exit 1: {what} of {total} trials; {rate}")
    if fail_under is not None and summary.pass_rate < fail_under:
        return Verdict(EXIT_INCOMPLETE, f"exit 1: {rate} is below --fail-under {fail_under:g}")
    gate = f", at least --fail-under {fail_under:g}" if fail_under is not None else ""
    # Skipped tasks ran no trial: named here so a run of only runnable tasks never reads as the whole pack.
    skipped = f"; {len(summary.skipped_tasks)} task(s) SKIPPED" if summary.skipped_tasks else ""
    return Verdict(EXIT_OK, f"exit 0: all {total} trials graded; {rate}{gate}{skipped}")
