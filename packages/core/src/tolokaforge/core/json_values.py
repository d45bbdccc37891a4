"""Equality of JSON values, as JSON means it: the one definition the db's ``where`` selectors and the
runner's grading checks share, so a record a filter matches is one a check calls equal."""

from __future__ import annotations

from typing import Any, cast

__all__ = ["json_equal"]


def json_equal(left: Any, right: Any) -> bool:
    """``true`` is not ``1``, ``1`` equals ``1.0``, ``"1"`` is not ``1``; arrays compare in order and
    objects by members, at every depth. Anything that is not a JSON value equals nothing."""
    if isinstance(left, bool) or isinstance(right, bool) or left is None or right is None:
        return left is right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, str) or isinstance(right, str):
        return type(left) is type(right) and left == right
    if isinstance(left, list) and isinstance(right, list):
        lhs, rhs = cast(list[Any], left), cast(list[Any], right)
        return len(lhs) == len(rhs) and all(map(json_equal, lhs, rhs))
    if isinstance(left, dict) and isinstance(right, dict):
        lmap, rmap = cast(dict[str, Any], left), cast(dict[str, Any], right)
        return lmap.keys() == rmap.keys() and all(
            json_equal(value, rmap[name]) for name, value in lmap.items()
        )
    return False
