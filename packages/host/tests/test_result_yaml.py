"""Result files' YAML: every value reads back unchanged through the loader the host reads with, and
multi-line text stays legible (a literal block)."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
import yaml

from tolokaforge.host.results.yaml_files import dump_yaml

LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

AWKWARD = [
    "", " ", "a ", " a", "a  b", "yes", "No", "OFF", "y", "N", "null", "Null", "~", "1", "1.0", "1e5",
    "-1", "+1", "0x10", "0o7", "1_000", "12:30:00", "2026-03-15", "2026-03-15T10:00:00Z", ".inf", ".NaN",
    "<<", "=", "a: b", "a:b", "a:", "a #b", "a#b", "- a", "-", "? x", "?", "@x", "`x", "!x", "&x", "*x",
    "|", ">", "%x", "'q'", '"q"', "it's", "[a]", "{a: 1}", "a, b", "a]b", "---", "...", "\\", "a\\nb",
    "a\nb", "a\nb\n", "a\nb\n\n", "\na", " a\nb", "a \nb", "a\n b\n", "a\n\n\nb", "a\n  \nb", "a\n---\nb",
    "a\n...\n", "a\tb", "a\rb", "a\r\nb", "x\x00y", "x\x07", "\x85", "a\x85b", "\u2028x", "x\u2029",
    "x\x7f", "x\x9f", "\ufeffx", "x\ufffe", "é ü 中文", "😀 emoji", '{"order_id": "O-1", "n": 2}',
]  # fmt: skip


def _round_trip(data: dict[str, Any]) -> None:
    text = dump_yaml(data)
    assert yaml.load(text, Loader=LOADER) == data, text


@pytest.mark.parametrize("value", AWKWARD)
def test_awkward_strings_read_back_unchanged(value: str) -> None:
    _round_trip({"value": value})
    _round_trip({"list": [value, {"inner": value, "more": [value]}, [value, [value]]]})
    if value:
        _round_trip({value: value})


def test_random_strings_read_back_unchanged() -> None:
    alphabet = "ab \n\t:#-?'\"\\é😀\x85\x7f{}[],&*!|>%@`01.eE+~"
    chooser = random.Random(20)
    for _ in range(2000):
        value = "".join(chooser.choice(alphabet) for _ in range(chooser.randint(0, 12)))
        _round_trip({"k": value, "l": [value, {"x": value}]})


def test_numbers_and_constants_keep_their_types() -> None:
    values = [0, -3, 2**70, 0.0, -0.0, 1.5, 1e-5, 1e16, 1.5e300, 123456789.125, math.inf, -math.inf]
    _round_trip({"values": values, "none": None, "yes": True, "no": False, "empty": [], "nothing": {}})
    assert math.isnan(yaml.load(dump_yaml({"x": math.nan}), Loader=LOADER)["x"])


def test_multi_line_text_is_a_literal_block() -> None:
    text = dump_yaml({"messages": [{"role": "system", "content": "# Policy\n\nBe kind.\n"}]})
    assert "content: |" in text
    assert "  # Policy\n" in text
