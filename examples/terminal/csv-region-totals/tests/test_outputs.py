"""Checks for csv-region-totals: totals.csv has the right header, rows, order and formatting."""

import csv
from pathlib import Path

APP = Path("/app")
EXPECTED = [["east", "16.00"], ["north", "150.50"], ["south", "99.99"], ["west", "100.00"]]


def _rows() -> list[list[str]]:
    with (APP / "totals.csv").open(encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def test_header() -> None:
    assert _rows()[0] == ["region", "total"]


def test_totals_sorted_by_region() -> None:
    assert _rows()[1:] == EXPECTED


def test_input_untouched() -> None:
    lines = (APP / "data" / "sales.csv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "date,region,amount" and len(lines) == 8
