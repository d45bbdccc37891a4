"""Agent-side tools: the support agent's view of and actions on the customer's line."""

from __future__ import annotations

from typing import Any, ClassVar

from ._shared import LINE_ID, TODAY, Data, attached, dump, line, schema


class GetLineDetails:
    side: ClassVar[str] = "agent"
    category: ClassVar[str] = "read"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return schema(
            "get_line_details",
            "Get a line's account record: holder, plan, status, roaming, data cap and usage, add-ons, SIM id. "
            "The PIN is never shown.",
            {"line_id": LINE_ID},
            ["line_id"],
        )

    @staticmethod
    def invoke(data: Data, line_id: str) -> str:
        return dump({k: v for k, v in line(data, line_id).items() if k != "pin"})


class GetNetworkStatus:
    side: ClassVar[str] = "agent"
    category: ClassVar[str] = "read"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return schema(
            "get_network_status",
            "What the network sees of the line's phone: registered or not, and the reason when not.",
            {"line_id": LINE_ID},
            ["line_id"],
        )

    @staticmethod
    def invoke(data: Data, line_id: str) -> str:
        ok, reason = attached(data, line_id)
        return dump({"line_id": line_id, "registered": ok, "detail": reason})


class EnableRoaming:
    side: ClassVar[str] = "agent"
    category: ClassVar[str] = "write"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return schema(
            "enable_roaming",
            "Turn on international roaming for the line (account side). The customer must also turn on data "
            "roaming on the phone.",
            {"line_id": LINE_ID},
            ["line_id"],
        )

    @staticmethod
    def invoke(data: Data, line_id: str) -> str:
        account = line(data, line_id)
        if account["status"] != "active":
            raise ValueError(f"Line {line_id} is {account['status']}")
        if account["roaming_enabled"]:
            raise ValueError(f"Roaming is already enabled on {line_id}")
        account["roaming_enabled"] = True
        return dump({"line_id": line_id, "roaming_enabled": True})


class PurchaseDataAddon:
    side: ClassVar[str] = "agent"
    category: ClassVar[str] = "write"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return schema(
            "purchase_data_addon",
            "Add a one-off data add-on to a capped line: raises the cap by the add-on's GB and bills its price.",
            {"line_id": LINE_ID, "addon_id": {"type": "string", "enum": ["DATA-1", "DATA-5", "DATA-10"]}},
            ["line_id", "addon_id"],
        )

    @staticmethod
    def invoke(data: Data, line_id: str, addon_id: str) -> str:
        account = line(data, line_id)
        if account["data_cap_gb"] is None:
            raise ValueError(f"Line {line_id} is unlimited; add-ons do not apply")
        addon = data["addons"][addon_id]
        account["data_cap_gb"] = round(account["data_cap_gb"] + addon["gb"], 2)
        account["addons"].append(addon_id)
        charge = {
            "charge_id": f"CH-{len(data['charges']) + 1:04d}",
            "line_id": line_id,
            "description": f"{addon_id} add-on",
            "amount": addon["price"],
            "date": TODAY,
        }
        data["charges"].append(charge)
        return dump({"line_id": line_id, "data_cap_gb": account["data_cap_gb"], "charge": charge})


class VerifyPin:
    side: ClassVar[str] = "agent"
    category: ClassVar[str] = "read"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return schema(
            "verify_pin",
            "Check the 4-digit account PIN the customer gave. Returns only whether it matches.",
            {"line_id": LINE_ID, "pin": {"type": "string", "pattern": "^[0-9]{4}$"}},
            ["line_id", "pin"],
        )

    @staticmethod
    def invoke(data: Data, line_id: str, pin: str) -> str:
        return dump({"line_id": line_id, "pin_matches": line(data, line_id)["pin"] == pin})


class SwapSim:
    side: ClassVar[str] = "agent"
    category: ClassVar[str] = "write"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return schema(
            "swap_sim",
            "Move the line to a new SIM card. Policy: only after verify_pin has matched in this conversation.",
            {"line_id": LINE_ID, "new_iccid": {"type": "string", "pattern": "^[0-9]{18,20}$"}},
            ["line_id", "new_iccid"],
        )

    @staticmethod
    def invoke(data: Data, line_id: str, new_iccid: str) -> str:
        account = line(data, line_id)
        account["sim_iccid"] = new_iccid
        return dump({"line_id": line_id, "sim_iccid": new_iccid})
