"""Trace checks: temporal constraints over the trial's events (grading.yaml: trace_checks).

Modules, one job each: ``events`` (the timeline as the four event kinds), ``predicates`` (value
predicates and matchers, three-valued), ``kinds`` (the ten constraint kinds), ``bindings`` (``bind``),
``scoring`` (decision sets, gates, routes), ``results`` (the Grade's messages and reasons), and
``component`` (the entry point the grading engine calls, with its ledger records).
"""

from __future__ import annotations

from .component import TRACE_GATE_FAILED, evaluate_trace_checks, populated_trace_keys

__all__ = ["TRACE_GATE_FAILED", "evaluate_trace_checks", "populated_trace_keys"]
