"""The fast encoder yields the reference bytes exactly, on arbitrary JSON and on orjson's known differences."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tolokaforge.core.stable_hash import canonical_bytes
from tolokaforge.db.encoding import encode, encode_members

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.floats(min_value=-1e-3, max_value=1e-3, allow_nan=False)
    | st.text()
    | st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x200))
)
JSON = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=6), children, max_size=5)
    ),
    max_leaves=30,
)


# Generating recursive JSON is slow on a loaded machine; that says nothing about the encoder.
@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(JSON)
def test_encode_equals_the_reference_on_any_json(value: Any) -> None:
    assert encode(value) == canonical_bytes(value)


@given(st.lists(st.dictionaries(st.text(max_size=4), JSON, max_size=4), min_size=1, max_size=6))
def test_members_of_a_chunk_are_the_reference_without_brackets(records: list[dict[str, Any]]) -> None:
    assert b"[" + encode_members(records) + b"]" == canonical_bytes(records)


@pytest.mark.parametrize(
    "value",
    [
        6.19e-05,
        1e-05,
        1e-7,
        -2.5e-9,
        1e16,
        1e22,
        5e-324,
        1.7976931348623157e308,
        -0.0,
        2**64,
        -(2**63) - 1,
        10**40,
        "Zoë Ångström ☃ 😀",
        '\x7f\x00\x1f\b\f\n\r\t"\\/',
        "\u2028\u2029",
        "\ud800 lone surrogate",
        {"é": 1, "e": 2, "😀": 3, "\uffff": 4},
        "sample e-mail 0.00001",
        json.loads("[" * 300 + "]" * 300),
    ],
)
def test_known_differences_of_orjson_are_handled(value: Any) -> None:
    assert encode(value) == canonical_bytes(value)
