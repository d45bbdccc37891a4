"""Custom checks for dc_roaming_abroad (contract: the pack README)."""

from __future__ import annotations

from typing import Any

LINE = "L-1002"


def check_roaming_ready(state: dict[str, Any], transcript: list[dict[str, Any]]) -> dict[str, Any]:
    """Roaming is on for the line, and on the phone too (or the customer was told how to turn it on)."""
    if not state["lines"][LINE]["roaming_enabled"]:
        return {"status": "failed", "score": 0.0, "message": "roaming is still off on the account"}
    if state["devices"][LINE]["roaming_switch"]:
        return {"status": "passed", "score": 1.0, "message": "roaming on for the line and the phone"}
    said = " ".join(str(m.get("content") or "") for m in transcript if m.get("role") == "assistant").lower()
    if "data roaming" in said and ("turn" in said or "switch" in said or "enable" in said):
        return {
            "status": "passed",
            "score": 1.0,
            "message": "account enabled; customer told to switch the phone",
        }
    return {
        "status": "failed",
        "score": 0.5,
        "message": "account enabled but the phone side was never addressed",
    }
