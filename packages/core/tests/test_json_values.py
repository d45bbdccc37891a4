"""JSON equality: the db's where-selectors and the runner's grading checks share this one definition."""

from __future__ import annotations

from typing import Any

import pytest

from tolokaforge.core.json_values import json_equal


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (1, 1.0),
        ({"a": [1, 2.0]}, {"a": [1.0, 2]}),
        ({"x": None, "y": "s"}, {"y": "s", "x": None}),
        ([], []),
        (True, True),
    ],
)
def test_equal_as_json(left: Any, right: Any) -> None:
    assert json_equal(left, right) and json_equal(right, left)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (True, 1),
        (0, False),
        (None, 0),
        ("1", 1),
        ([1], [1, 1]),
        ([1, 2], [2, 1]),
        ({"a": 1}, {"a": 1, "b": None}),
        ({"a": [True]}, {"a": [1]}),
        (float("nan"), float("nan")),
        ((1,), (1,)),
    ],
)
def test_unequal_as_json(left: Any, right: Any) -> None:
    assert not json_equal(left, right) and not json_equal(right, left)
