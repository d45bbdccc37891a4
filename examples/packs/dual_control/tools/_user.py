"""User-side tools: what the simulated customer can see and do on their own phone (executor "user")."""

from __future__ import annotations

from typing import Any, ClassVar

from ._shared import LINE_ID, Data, attached, device, dump, line, schema


class CheckStatusBar:
    side: ClassVar[str] = "user"
    category: ClassVar[str] = "read"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return schema(
            "check_status_bar",
            "Look at your phone's status bar: signal, airplane-mode icon, mobile data and roaming icons.",
            {"line_id": LINE_ID},
            ["line_id"],
        )

    @staticmethod
    def invoke(data: Data, line_id: str) -> str:
        phone = device(data, line_id)
        ok, _ = attached(data, line_id)
        return dump(
            {
                "signal": "4 bars" if ok else "no service",
                "airplane_icon": phone["airplane_mode"],
                "mobile_data_icon": phone["mobile_data"] and ok,
                "roaming_icon": ok and phone["location"] != "US",
            }
        )


class CheckDataUsage:
    side: ClassVar[str] = "user"
    category: ClassVar[str] = "read"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return schema(
            "check_data_usage",
            "Open Settings > Mobile data on your phone: data used this cycle and the plan's cap.",
            {"line_id": LINE_ID},
            ["line_id"],
        )

    @staticmethod
    def invoke(data: Data, line_id: str) -> str:
        account = line(data, line_id)
        return dump({"used_gb": account["data_used_gb"], "cap_gb": account["data_cap_gb"]})


class ToggleAirplaneMode:
    side: ClassVar[str] = "user"
    category: ClassVar[str] = "write"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return schema(
            "toggle_airplane_mode",
            "Turn airplane mode on or off on your phone.",
            {"line_id": LINE_ID, "enabled": {"type": "boolean"}},
            ["line_id", "enabled"],
        )

    @staticmethod
    def invoke(data: Data, line_id: str, enabled: bool) -> str:
        device(data, line_id)["airplane_mode"] = enabled
        return f"Airplane mode is now {'on' if enabled else 'off'}."


class ToggleDataRoaming:
    side: ClassVar[str] = "user"
    category: ClassVar[str] = "write"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return schema(
            "toggle_data_roaming",
            "Turn data roaming on or off in your phone's settings.",
            {"line_id": LINE_ID, "enabled": {"type": "boolean"}},
            ["line_id", "enabled"],
        )

    @staticmethod
    def invoke(data: Data, line_id: str, enabled: bool) -> str:
        device(data, line_id)["roaming_switch"] = enabled
        return f"Data roaming is now {'on' if enabled else 'off'}."


class RestartDevice:
    side: ClassVar[str] = "user"
    category: ClassVar[str] = "write"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return schema(
            "restart_device",
            "Restart your phone (it reconnects to the network).",
            {"line_id": LINE_ID},
            ["line_id"],
        )

    @staticmethod
    def invoke(data: Data, line_id: str) -> str:
        device(data, line_id)["restarts"] += 1
        return "The phone restarted."
