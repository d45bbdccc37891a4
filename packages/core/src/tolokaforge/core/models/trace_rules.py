"""The trace_checks block and its load-time rules: what no trajectory could decide, or what reads two ways.

Every error names the constraint as ``trace_checks.<id>`` (``trace_checks.<route>.<id>`` inside a route)
and says what to write instead. ``tolokaforge validate`` and RegisterTrial both reach these through the
models, so a pack the runner would refuse never starts a run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import model_validator

from ._base import SpecModel
from .trace_checks import MATCHER_FIELDS, Matcher, Predicate, TraceConstraint, TraceExpr, TracePath

__all__ = ["TraceChecksConfig", "check_trace_checks", "trace_check_tool_problems", "trace_tool_names"]

_VERDICT_IS_THE_MATCH = ("present", "absent", "count")
_AMONG_KINDS = {
    "tool_calls": {"tool_call"},
    "tool_results": {"tool_result"},
    "messages": {"assistant_message", "user_message"},
    "events": {"assistant_message", "user_message", "tool_call", "tool_result"},
}
_BIND_FIELDS = {"tool": {"tool_call", "tool_result"}, "result": {"tool_call", "tool_result"}}


class TraceChecksConfig(SpecModel):
    """grading.yaml: trace_checks."""

    constraints: list[TraceConstraint] = []
    alternatives: list[TracePath] | None = None

    @model_validator(mode="after")
    def _authorable(self) -> TraceChecksConfig:
        check_trace_checks(self)
        return self

    def all_constraints(self) -> list[tuple[str | None, TraceConstraint]]:
        """(route id or None for shared, constraint) for every constraint in the block."""
        found: list[tuple[str | None, TraceConstraint]] = [(None, c) for c in self.constraints]
        for path in self.alternatives or []:
            found += [(path.id, c) for c in path.constraints]
        return found


def check_trace_checks(config: TraceChecksConfig) -> None:
    """Raise ValueError listing every problem of the block, each naming its constraint."""
    problems: list[str] = []
    if not config.constraints and not config.alternatives:
        problems.append(
            "trace_checks declares neither constraints nor alternatives, so it would score nothing"
        )
    routes = config.alternatives
    if routes is not None and len(routes) < 2:
        problems.append(
            "trace_checks.alternatives declares one route: the best of one route is that route, so write its "
            "constraints under trace_checks.constraints instead (alternatives needs two or more)"
        )
    seen: dict[str, str] = {}
    for path in routes or []:
        _claim(seen, path.id, f"trace_checks.alternatives route {path.id!r}", problems)
    for route, constraint in config.all_constraints():
        where = _where(route, constraint)
        _claim(seen, constraint.id, where, problems)
        problems += [f"{where}: {problem}" for problem in _constraint_problems(constraint)]
    if routes is not None and len(routes) >= 2:
        scored_routes = [
            path.id
            for path in routes
            if any(c.severity == "scored" for c in [*config.constraints, *path.constraints])
        ]
        for path in routes:
            if path.id not in scored_routes and scored_routes:
                problems.append(
                    f"trace_checks.{path.id}: the route has nothing scored beside routes that do, so it scores 1.0 "
                    "whenever its gates hold and wins against every scored route; put its gates in the shared "
                    "trace_checks.constraints"
                )
    if problems:
        raise ValueError("; ".join(problems))


def trace_tool_names(config: TraceChecksConfig) -> list[tuple[str, str]]:
    """(where, tool name) for every tool a ``tool`` predicate names with equals or in."""
    found: list[tuple[str, str]] = []
    for route, constraint in config.all_constraints():
        where = _where(route, constraint)
        for _, matcher in _all_matchers(constraint):
            if matcher.tool is None:
                continue
            names = [matcher.tool.equals, *(matcher.tool.in_ or [])]
            found += [(where, name) for name in names if isinstance(name, str)]
    return found


def trace_check_tool_problems(config: TraceChecksConfig, tool_names: Iterable[str]) -> list[str]:
    """Tool names the block matches on that the task declares no tool by: such a matcher never selects."""
    known = set(tool_names)
    return [
        f"{where}: matches tool {name!r}, which is not one of the task's tools ({', '.join(sorted(known)) or 'none'})"
        for where, name in trace_tool_names(config)
        if name not in known
    ]


def _where(route: str | None, constraint: TraceConstraint) -> str:
    return f"trace_checks.{route}.{constraint.id}" if route else f"trace_checks.{constraint.id}"


def _claim(seen: dict[str, str], ident: str, where: str, problems: list[str]) -> None:
    if ident in seen:
        problems.append(
            f"{where}: id {ident!r} is already used by {seen[ident]}; every id in the block is unique"
        )
    else:
        seen[ident] = where


def _all_matchers(constraint: TraceConstraint) -> list[tuple[str, Matcher]]:
    found = [(role, matcher) for node in constraint.require.walk() for role, matcher in node.matchers()]
    if constraint.bind is not None:
        found.append(("bind.match", constraint.bind.match))
    return found


def _constraint_problems(constraint: TraceConstraint) -> list[str]:
    problems: list[str] = []
    nodes = constraint.require.walk()
    for node in nodes:
        problems += _node_problems(node)
    kinds = {kind for node in nodes for kind in node.kinds()}
    if constraint.on_missing is not None:
        matched = sorted(kinds & set(_VERDICT_IS_THE_MATCH))
        if matched:
            problems.append(
                f"on_missing is declared but the require tree holds {', '.join(matched)}, whose verdict is the "
                "match itself; remove on_missing"
            )
    if constraint.severity == "gate":
        if constraint.weight is not None:
            problems.append("a gate carries no weight (it is outside the weighted sum); remove weight")
        if constraint.on_missing == "pass":
            problems.append("on_missing: pass on a gate would open it whenever its anchor is missing")
        if constraint.bind is not None and constraint.bind.on_unbound == "pass":
            problems.append("on_unbound: pass on a gate would open it whenever the binder selects nothing")
    for role, matcher in _all_matchers(constraint):
        problems += _matcher_problems(role, matcher)
    problems += _binding_problems(constraint)
    return problems


def _node_problems(node: TraceExpr) -> list[str]:
    kinds = node.kinds()
    if len(kinds) != 1:
        return [f"require holds {', '.join(kinds) or 'no kind'}; each expression holds exactly one kind"]
    problems: list[str] = []
    kind = kinds[0]
    if kind in ("all_of", "any_of") and not node.children():
        problems.append(f"{kind} lists no expression")
    if node.count is not None:
        low, high = node.count.min, node.count.max
        if low is None and high is None:
            problems.append("count declares neither min nor max")
        elif low is not None and high is not None and low > high:
            problems.append(f"count: min ({low}) is above max ({high}), so no count satisfies it")
    anchors = []
    if node.absent_before is not None:
        anchors = [("anchor", node.absent_before.anchor.quantifier)]
    if node.absent_between is not None:
        anchors = [
            ("start", node.absent_between.start.quantifier),
            ("end", node.absent_between.end.quantifier),
        ]
    for role, quantifier in anchors:
        if quantifier not in ("first", "last"):
            problems.append(
                f"{kind}.{role}: quantifier {quantifier!r}; an anchor is the first or last match (over a window "
                "'any' reads as first and 'all' as last)"
            )
    spec = node.immediately_before
    if spec is not None:
        if spec.among is None:
            problems.append(
                "immediately_before needs among (tool_calls, tool_results, messages or events): there is no default"
            )
        else:
            for role, side in (("left", spec.left), ("right", spec.right)):
                if side.match.kind not in _AMONG_KINDS[spec.among]:
                    problems.append(
                        f"immediately_before.{role} matches {side.match.kind} events, which the {spec.among} view "
                        "does not hold, so it can never be adjacent"
                    )
    return problems


def _matcher_problems(role: str, matcher: Matcher) -> list[str]:
    problems: list[str] = []
    allowed = MATCHER_FIELDS[matcher.kind]
    for label, predicate in matcher.predicates():
        field = label.split(".")[0]
        if field not in allowed:
            problems.append(
                f"{role}: a {matcher.kind} event carries no {field} (it may match {', '.join(sorted(allowed))})"
            )
        if field == "args" and not label.removeprefix("args.").strip("."):
            problems.append(f"{role}: an args key names no argument path")
        problems += [f"{role}.{label}: {problem}" for problem in _predicate_problems(predicate)]
    return problems


def _predicate_problems(predicate: Predicate) -> list[str]:
    if not predicate.operators():
        return ["the predicate declares no operator"]
    if predicate.regex is not None:
        try:
            re.compile(predicate.regex)
        except re.error as error:
            return [f"invalid regex {predicate.regex!r}: {error}"]
    return []


def _binding_problems(constraint: TraceConstraint) -> list[str]:
    declared: set[str] = set(constraint.bind.values) if constraint.bind is not None else set()
    referenced: set[str] = set()
    for _, matcher in _all_matchers(constraint):
        for _, predicate in matcher.predicates():
            referenced.update(predicate.binding_names())
    problems = [
        f"references binding {name!r}, which the constraint does not bind (bind.values declares "
        f"{', '.join(sorted(declared)) or 'nothing'})"
        for name in sorted(referenced - declared)
    ]
    problems += [
        f"bind.values.{name} is bound and never referenced" for name in sorted(declared - referenced)
    ]
    if constraint.bind is None:
        return problems
    for label, predicate in constraint.bind.match.predicates():
        if predicate.binding_names():
            problems.append(f"bind.match.{label}: the binder cannot reference a binding it is what supplies")
    kind = constraint.bind.match.kind
    for name, value in constraint.bind.values.items():
        field = value.field
        if field.startswith("args."):
            if kind != "tool_call" or not field.removeprefix("args.").strip("."):
                problems.append(
                    f"bind.values.{name}: {field!r} needs a tool_call binder and an argument path"
                )
        elif field == "text":
            if kind not in ("assistant_message", "user_message"):
                problems.append(f"bind.values.{name}: a {kind} event carries no text")
        elif field in _BIND_FIELDS:
            if kind not in _BIND_FIELDS[field]:
                problems.append(f"bind.values.{name}: a {kind} event carries no {field}")
        else:
            problems.append(f"bind.values.{name}: field {field!r} is not tool, text, result or args.<path>")
        if value.pattern is not None:
            try:
                re.compile(value.pattern)
            except re.error as error:
                problems.append(f"bind.values.{name}: invalid pattern {value.pattern!r}: {error}")
    return problems
