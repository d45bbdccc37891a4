"""Custom checks for dc_airplane_mode_no_service (contract: the pack README)."""

from __future__ import annotations

from typing import Any

LINE = "L-1003"


def _assistant_text(transcript: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in transcript if m.get("role") == "assistant").lower()


def check_phone_back_online(state: dict[str, Any], transcript: list[dict[str, Any]]) -> dict[str, Any]:
    """The phone is out of airplane mode, or the agent told the customer to switch it off."""
    if not state["devices"][LINE]["airplane_mode"]:
        return {"status": "passed", "score": 1.0, "message": "airplane mode is off on the phone"}
    text = _assistant_text(transcript)
    if "airplane mode" in text and ("off" in text or "disable" in text):
        return {
            "status": "passed",
            "score": 1.0,
            "message": "agent told the customer to turn airplane mode off",
        }
    return {"status": "failed", "score": 0.0, "message": "airplane mode still on and never addressed"}


def check_account_untouched(state: dict[str, Any], transcript: list[dict[str, Any]]) -> dict[str, Any]:
    """No charge was raised for the line while fixing a phone-side fault."""
    charges = [c for c in state["charges"] if c["line_id"] == LINE]
    if charges:
        return {"status": "failed", "score": 0.0, "message": f"unexpected charges: {charges}"}
    return {"status": "passed", "score": 1.0, "message": "no charges on the line"}
