"""Custom checks for dc_data_addon_purchase (contract: the pack README)."""

from __future__ import annotations

from typing import Any

LINE = "L-1001"


def check_charge_matches_catalogue(state: dict[str, Any], transcript: list[dict[str, Any]]) -> dict[str, Any]:
    """Every add-on on the line was billed once at its catalogue price, and the cap grew to match."""
    line = state["lines"][LINE]
    charges = [c for c in state["charges"] if c["line_id"] == LINE]
    if len(charges) != len(line["addons"]):
        return {
            "status": "failed",
            "score": 0.0,
            "message": f"{len(line['addons'])} add-ons, {len(charges)} charges",
        }
    expected_cap = 5.0 + sum(state["addons"][a]["gb"] for a in line["addons"])
    for addon_id, charge in zip(line["addons"], charges, strict=True):
        if charge["amount"] != state["addons"][addon_id]["price"]:
            return {"status": "failed", "score": 0.0, "message": f"{addon_id} billed {charge['amount']}"}
    if line["data_cap_gb"] != expected_cap:
        return {"status": "failed", "score": 0.0, "message": f"cap {line['data_cap_gb']} != {expected_cap}"}
    if not charges:
        return {"status": "failed", "score": 0.0, "message": "no add-on was sold"}
    return {
        "status": "passed",
        "score": 1.0,
        "message": f"{len(charges)} add-on(s) billed at catalogue price",
    }


def check_addon_was_needed(state: dict[str, Any], transcript: list[dict[str, Any]]) -> dict[str, Any]:
    """An add-on is sold only to a line that had used at least 80% of its plan's cap (no upselling)."""
    line = state["lines"][LINE]
    if line["addons"] and line["data_used_gb"] < 0.8 * 5.0:
        return {"status": "failed", "score": 0.0, "message": f"sold with only {line['data_used_gb']} GB used"}
    return {"status": "passed", "score": 1.0, "message": f"{line['data_used_gb']} GB of 5 GB used"}
