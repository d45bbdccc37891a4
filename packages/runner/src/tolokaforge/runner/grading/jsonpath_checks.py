"""JSONPath state checks over the trial's tables (grading.yaml: state_checks.jsonpaths).

Paths are rooted at ``$.db`` (``$.tables`` is the same document). Roots the runner composes nothing
for are refused before grading, because evaluating them would yield a 0.0 indistinguishable from an
agent that failed the assertion. Operators: see :class:`tolokaforge.core.models.JsonPathCheck`.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence, Sized
from typing import Any, cast

from jsonpath_ng.exceptions import JsonPathLexerError, JsonPathParserError
from jsonpath_ng.ext.parser import parse

from tolokaforge.core.json_values import json_equal
from tolokaforge.core.models import JsonPathCheck

from .component import ComponentResult

__all__ = ["UNCARRIED_ROOTS", "compiled_path", "evaluate_jsonpaths", "path_root"]

STATE_ROOTS = ("db", "tables")
UNCARRIED_ROOTS = ("filesystem", "agent", "user", "mock_web_url", "rag_corpus_dir")
_ROOT = re.compile(r"^\$(?:\.([A-Za-z_][A-Za-z0-9_]*)|\[['\"]([^'\"]+)['\"]\])")


def path_root(path: str) -> str | None:
    """The first member a path addresses (``db`` in ``$.db.orders[0]``), or None if it has none."""
    match = _ROOT.match(path.strip())
    if match is None:
        return None
    return match.group(1) or match.group(2)


@functools.lru_cache(maxsize=4096)
def compiled_path(path: str) -> Any:
    """``path`` parsed by jsonpath_ng's extended parser, once per distinct path.

    Parsing builds the parser's tables afresh each time (about 1.5 ms), and every trial of a task
    checks the same paths; a parsed path is only read by ``find``. Paths that do not parse raise
    each time (exceptions are not cached).
    """
    return parse(path)


def evaluate_jsonpaths(checks: Sequence[JsonPathCheck], tables: Mapping[str, Any]) -> ComponentResult:
    """Score = the fraction of checks that hold; the segment names every failing one."""
    document = {"db": tables, "tables": tables}
    failures: list[str] = []
    for check in checks:
        problem = _evaluate(check, document)
        if problem is not None:
            failures.append(f"{check.description or check.path}: {problem}")
    passed = len(checks) - len(failures)
    score = passed / len(checks)
    if failures:
        segment = f"JSONPath: {passed}/{len(checks)} checks passed; " + "; ".join(failures)
    else:
        segment = f"JSONPath: all {len(checks)} checks passed"
    return ComponentResult("jsonpaths", score, segment)


def _evaluate(check: JsonPathCheck, document: Mapping[str, Any]) -> str | None:
    """None when the check holds, else what was found instead."""
    try:
        expression = compiled_path(check.path)
    except (JsonPathLexerError, JsonPathParserError, Exception) as error:
        return f"path does not parse ({error})"
    values: list[Any] = [match.value for match in expression.find(document)]  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    operator, expected = check.operator, check.expected
    if operator == "exists":
        found = bool(values)
        return (
            None if found == expected else f"expected {'a' if expected else 'no'} value, found {len(values)}"
        )
    if operator == "length":
        single: Any = values[0] if len(values) == 1 else None
        actual = len(cast(Sized, single)) if isinstance(single, list | dict | str) else len(values)
        return None if actual == expected else f"expected length {expected}, got {actual}"
    if not values:
        return "no value at this path"
    if operator in ("contains", "contains_ci") and len(values) > 1:
        subject: Any = values
    elif len(values) > 1:
        return f"path matches {len(values)} values; {operator} needs exactly one"
    else:
        subject = values[0]
    return _compare(operator, subject, expected)


def _compare(operator: str, actual: Any, expected: Any) -> str | None:
    ok: bool
    if operator == "equals":
        ok = json_equal(actual, expected)
    elif operator == "not_equals":
        ok = not json_equal(actual, expected)
    elif operator == "equals_ci":
        ok = isinstance(actual, str) and actual.casefold() == str(expected).casefold()
    elif operator == "contains":
        ok = _contains(actual, expected, fold=False)
    elif operator == "contains_ci":
        ok = _contains(actual, expected, fold=True)
    else:
        if not _is_number(actual):
            return f"{operator} needs a number, got {actual!r}"
        ok = {
            "greater_than": actual > expected,
            "greater_or_equal": actual >= expected,
            "less_than": actual < expected,
            "less_or_equal": actual <= expected,
        }[operator]
    return None if ok else f"{operator} {expected!r} failed, got {actual!r}"


def _contains(actual: Any, expected: Any, *, fold: bool) -> bool:
    if isinstance(actual, str):
        if not isinstance(expected, str):
            return False
        return expected.casefold() in actual.casefold() if fold else expected in actual
    if isinstance(actual, list):
        items: list[Any] = actual  # pyright: ignore[reportUnknownVariableType]
        if fold:
            return any(
                isinstance(item, str) and item.casefold() == str(expected).casefold() for item in items
            )
        return any(json_equal(item, expected) for item in items)
    if isinstance(actual, dict):
        return expected in actual
    return False


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
