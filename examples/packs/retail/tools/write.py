"""Write tools: they change ``data`` in place.

Every write is deterministic (ids from table sizes, dates from the policy clock) except
:class:`CreateSupportTicket`, which behaves like a real ticketing system: a random ticket id and the
wall-clock creation time. Tasks that create tickets declare ``tickets.ticket_id``, ``tickets.created_at``
(and the free-text ``tickets.summary``) as unstable fields.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, ClassVar

from ._common import (
    ADDRESS_SCHEMA,
    CANCELLABLE,
    CUSTOMER_ID,
    ORDER_ID,
    REFUND_METHODS,
    RETURN_ITEMS_SCHEMA,
    RETURN_REASONS,
    TODAY,
    Data,
    dump,
    function_schema,
    get_customer,
    get_order,
    money,
    refund_quote,
)

_TIER_RANK = {"standard": 0, "silver": 1, "gold": 2}


def _require_open(order: dict[str, Any], action: str) -> None:
    if order["status"] not in CANCELLABLE:
        raise ValueError(
            f"Order {order['id']} is {order['status']}; {action} only pending or processing orders"
        )


class CancelOrder:
    category: ClassVar[str] = "write"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return function_schema(
            "cancel_order",
            "Cancel a pending or processing order. The full total is refunded to the order's payment method "
            "and the items go back into stock.",
            {
                "order_id": ORDER_ID,
                "reason": {
                    "type": "string",
                    "enum": ["no_longer_needed", "ordered_by_mistake", "found_better_price", "other"],
                },
            },
            ["order_id", "reason"],
        )

    @staticmethod
    def invoke(data: Data, order_id: str, reason: str) -> str:
        order = get_order(data, order_id)
        _require_open(order, "can cancel")
        for line in order["items"]:
            product = data["products"].get(line["product_id"])
            if product is not None:
                product["stock"] += int(line["quantity"])
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        order["refund_amount"] = order["total"]
        return dump(
            {
                "order_id": order_id,
                "status": "cancelled",
                "refund_amount": order["total"],
                "refund_to": order["payment_method_id"],
            }
        )


class UpdateShippingAddress:
    category: ClassVar[str] = "write"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return function_schema(
            "update_shipping_address",
            "Replace the shipping address of a pending or processing order.",
            {"order_id": ORDER_ID, "address": ADDRESS_SCHEMA},
            ["order_id", "address"],
        )

    @staticmethod
    def invoke(data: Data, order_id: str, address: dict[str, Any]) -> str:
        order = get_order(data, order_id)
        _require_open(order, "can change the address of")
        order["shipping_address"] = {key: address[key] for key in ("street", "city", "state", "zip")}
        return dump({"order_id": order_id, "shipping_address": order["shipping_address"]})


class ApplyCoupon:
    category: ClassVar[str] = "write"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return function_schema(
            "apply_coupon",
            "Apply an active coupon to a pending or processing order that has none, and recompute its total. "
            "The promotions system checks only that the coupon is active, the minimum subtotal and the tier; "
            "the agent must check the expiry date.",
            {
                "order_id": ORDER_ID,
                "code": {"type": "string", "pattern": "^[A-Z0-9]{3,16}$"},
            },
            ["order_id", "code"],
        )

    @staticmethod
    def invoke(data: Data, order_id: str, code: str) -> str:
        order = get_order(data, order_id)
        _require_open(order, "coupons apply to")
        coupon = data["coupons"].get(code)
        if coupon is None:
            raise ValueError(f"Coupon {code} not found")
        if not coupon["active"]:
            raise ValueError(f"Coupon {code} is not active")
        if order["coupon_code"]:
            raise ValueError(f"Order {order_id} already has coupon {order['coupon_code']}")
        if order["subtotal"] < coupon["min_subtotal"]:
            raise ValueError(f"Coupon {code} needs a subtotal of at least {coupon['min_subtotal']:.2f}")
        customer = get_customer(data, order["customer_id"])
        required = coupon["tier_required"]
        if required and _TIER_RANK[customer["tier"]] < _TIER_RANK[required]:
            raise ValueError(f"Coupon {code} requires {required} tier; customer is {customer['tier']}")
        if coupon["kind"] == "percent":
            discount = money(order["subtotal"] * coupon["value"] / 100)
        else:
            discount = min(float(coupon["value"]), float(order["subtotal"]))
        order["coupon_code"] = code
        order["discount"] = discount
        order["total"] = money(order["subtotal"] - discount + order["shipping_fee"])
        return dump(
            {"order_id": order_id, "coupon_code": code, "discount": discount, "total": order["total"]}
        )


class ChangePaymentMethod:
    category: ClassVar[str] = "write"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return function_schema(
            "change_payment_method",
            "Charge a pending or processing order to another of the customer's saved payment methods. A gift "
            "card must have a balance covering the order's current total.",
            {
                "order_id": ORDER_ID,
                "payment_method_id": {"type": "string", "pattern": "^PM-[0-9]{3}-[0-9]$"},
            },
            ["order_id", "payment_method_id"],
        )

    @staticmethod
    def invoke(data: Data, order_id: str, payment_method_id: str) -> str:
        order = get_order(data, order_id)
        _require_open(order, "can change the payment method of")
        customer = get_customer(data, order["customer_id"])
        method = next((m for m in customer["payment_methods"] if m["id"] == payment_method_id), None)
        if method is None:
            raise ValueError(f"Payment method {payment_method_id} does not belong to {customer['id']}")
        if method["id"] == order["payment_method_id"]:
            raise ValueError(f"Order {order_id} is already paid with {payment_method_id}")
        if method["type"] == "gift_card" and method["balance"] < order["total"]:
            raise ValueError(
                f"Gift card {payment_method_id} balance {method['balance']:.2f} does not cover the order "
                f"total {order['total']:.2f}"
            )
        order["payment_method_id"] = payment_method_id
        return dump({"order_id": order_id, "payment_method_id": payment_method_id, "total": order["total"]})


class CreateReturn:
    category: ClassVar[str] = "write"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return function_schema(
            "create_return",
            "File a return request for items of a delivered order. The refund is computed as quote_refund "
            "computes it. The order becomes return_requested.",
            {
                "order_id": ORDER_ID,
                "items": RETURN_ITEMS_SCHEMA,
                "reason": {"type": "string", "enum": RETURN_REASONS},
                "refund_method": {"type": "string", "enum": REFUND_METHODS},
            },
            ["order_id", "items", "reason", "refund_method"],
        )

    @staticmethod
    def invoke(
        data: Data, order_id: str, items: list[dict[str, Any]], reason: str, refund_method: str
    ) -> str:
        quote = refund_quote(data, order_id, items, reason, refund_method)
        order = get_order(data, order_id)
        record = {
            "return_id": f"R-{len(data['returns']) + 1:04d}",
            "order_id": order_id,
            "customer_id": order["customer_id"],
            "items": [
                {"product_id": line["product_id"], "quantity": line["quantity"]} for line in quote["items"]
            ],
            "reason": reason,
            "refund_method": refund_method,
            "refund_amount": quote["refund_amount"],
            "status": "requested",
            "requested_on": TODAY.isoformat(),
        }
        data["returns"].append(record)
        order["status"] = "return_requested"
        return dump(record)


class IssueStoreCredit:
    category: ClassVar[str] = "write"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return function_schema(
            "issue_store_credit",
            "Add store credit to a customer's account and record it in the credit ledger.",
            {
                "customer_id": CUSTOMER_ID,
                "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 500},
                "reason": {"type": "string", "enum": ["late_delivery", "service_recovery"]},
                "order_id": ORDER_ID,
            },
            ["customer_id", "amount", "reason"],
        )

    @staticmethod
    def invoke(data: Data, customer_id: str, amount: float, reason: str, order_id: str | None = None) -> str:
        customer = get_customer(data, customer_id)
        if order_id is not None and get_order(data, order_id)["customer_id"] != customer_id:
            raise ValueError(f"Order {order_id} does not belong to {customer_id}")
        amount = money(amount)
        entry = {
            "entry_id": f"L-{len(data['credit_ledger']) + 1:04d}",
            "customer_id": customer_id,
            "amount": amount,
            "reason": reason,
            "order_id": order_id,
            "created_on": TODAY.isoformat(),
        }
        data["credit_ledger"].append(entry)
        customer["store_credit"] = money(customer["store_credit"] + amount)
        return dump({**entry, "new_balance": customer["store_credit"]})


class CreateSupportTicket:
    category: ClassVar[str] = "write"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return function_schema(
            "create_support_ticket",
            "Open a support ticket for follow-up by the specialist team. Returns the new ticket id.",
            {
                "customer_id": CUSTOMER_ID,
                "category": {
                    "type": "string",
                    "enum": ["shipping", "product_issue", "billing", "account", "other"],
                },
                "priority": {"type": "string", "enum": ["low", "normal", "high"]},
                "summary": {"type": "string", "minLength": 10, "maxLength": 500},
                "order_id": ORDER_ID,
            },
            ["customer_id", "category", "priority", "summary"],
        )

    @staticmethod
    def invoke(
        data: Data, customer_id: str, category: str, priority: str, summary: str, order_id: str | None = None
    ) -> str:
        get_customer(data, customer_id)
        if order_id is not None and get_order(data, order_id)["customer_id"] != customer_id:
            raise ValueError(f"Order {order_id} does not belong to {customer_id}")
        ticket = {
            # Random and clock-based on purpose, like a real ticketing system: declared unstable by tasks.
            "ticket_id": f"T-{uuid.uuid4().hex[:8].upper()}",
            "customer_id": customer_id,
            "order_id": order_id,
            "category": category,
            "priority": priority,
            "status": "open",
            "summary": summary,
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        data["tickets"].append(ticket)
        return dump(ticket)


class TransferToHumanAgents:
    category: ClassVar[str] = "read"  # hands the chat over; changes no table

    @staticmethod
    def get_info() -> dict[str, Any]:
        return function_schema(
            "transfer_to_human_agents",
            "Hand the conversation to a human agent. Use only when the policy says so; after it, tell the "
            "customer they are being transferred and end the conversation.",
            {
                "customer_id": CUSTOMER_ID,
                "reason": {
                    "type": "string",
                    "enum": ["billing_dispute", "safety_incident", "account_security", "other"],
                },
                "summary": {"type": "string", "minLength": 10, "maxLength": 500},
            },
            ["customer_id", "reason", "summary"],
        )

    @staticmethod
    def invoke(data: Data, customer_id: str, reason: str, summary: str) -> str:
        get_customer(data, customer_id)
        return "Transfer successful. A human agent will take over this conversation."
