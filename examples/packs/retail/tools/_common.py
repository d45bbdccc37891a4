"""Shared helpers for the Harbor & Pine tools: record lookups, money rounding, the policy clock."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

TODAY = date(2026, 3, 15)
"""The store's policy date. Fixed so that return windows and coupon expiry grade deterministically."""

RETURN_WINDOW_DAYS = 30
RETURN_SHIPPING_FEE = 7.95
FEE_FREE_REASONS = ("defective", "wrong_item")
CANCELLABLE = ("pending", "processing")

Data = dict[str, Any]


def money(value: float) -> float:
    """Round to cents, half up for the values this store produces."""
    return round(value + 1e-9, 2)


def dump(value: Any) -> str:
    """What the model sees: stable, readable JSON."""
    return json.dumps(value, indent=2, sort_keys=True)


def get_customer(data: Data, customer_id: str) -> dict[str, Any]:
    customer = data["customers"].get(customer_id)
    if customer is None:
        raise ValueError(f"Customer {customer_id} not found")
    return customer


def get_order(data: Data, order_id: str) -> dict[str, Any]:
    order = data["orders"].get(order_id)
    if order is None:
        raise ValueError(f"Order {order_id} not found")
    return order


def get_product(data: Data, product_id: str) -> dict[str, Any]:
    product = data["products"].get(product_id)
    if product is None:
        raise ValueError(f"Product {product_id} not found")
    return product


def returned_quantity(data: Data, order_id: str, product_id: str) -> int:
    """How many units of ``product_id`` earlier return requests on ``order_id`` already cover."""
    total = 0
    for record in data["returns"]:
        if record["order_id"] != order_id:
            continue
        for item in record["items"]:
            if item["product_id"] == product_id:
                total += int(item["quantity"])
    return total


def refund_quote(
    data: Data, order_id: str, items: list[dict[str, Any]], reason: str, refund_method: str
) -> dict[str, Any]:
    """The refund a return of ``items`` would earn; raises when the items cannot be returned.

    Checks what the order system itself enforces (order delivered, items on the order, quantities not
    already returned). The 30-day window and final-sale rule are policy: the agent applies them.
    """
    order = get_order(data, order_id)
    if order["status"] not in ("delivered", "return_requested"):
        raise ValueError(f"Order {order_id} is {order['status']}; only delivered orders can be returned")
    if not items:
        raise ValueError("At least one item is required")
    lines: list[dict[str, Any]] = []
    items_total = 0.0
    for item in items:
        product_id, quantity = item["product_id"], int(item["quantity"])
        ordered = next((line for line in order["items"] if line["product_id"] == product_id), None)
        if ordered is None:
            raise ValueError(f"Product {product_id} is not on order {order_id}")
        available = int(ordered["quantity"]) - returned_quantity(data, order_id, product_id)
        if quantity > available:
            raise ValueError(
                f"Only {available} unit(s) of {product_id} on order {order_id} can still be returned"
            )
        amount = money(float(ordered["unit_price"]) * quantity)
        items_total = money(items_total + amount)
        lines.append({"product_id": product_id, "quantity": quantity, "amount": amount})
    fee = 0.0
    if reason not in FEE_FREE_REASONS and refund_method == "original_payment":
        fee = RETURN_SHIPPING_FEE
    return {
        "order_id": order_id,
        "items": lines,
        "items_total": items_total,
        "return_shipping_fee": fee,
        "refund_amount": money(items_total - fee),
        "refund_method": refund_method,
    }


def order_summary(order: dict[str, Any]) -> dict[str, Any]:
    return {
        "order_id": order["id"],
        "status": order["status"],
        "placed_on": order["placed_on"],
        "total": order["total"],
        "items": [f"{line['quantity']} x {line['name']}" for line in order["items"]],
    }


ADDRESS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "street": {"type": "string", "minLength": 3, "description": "House number and street"},
        "city": {"type": "string", "minLength": 2},
        "state": {"type": "string", "pattern": "^[A-Z]{2}$", "description": "Two-letter US state code"},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$", "description": "Five-digit ZIP code"},
    },
    "required": ["street", "city", "state", "zip"],
    "additionalProperties": False,
}

RETURN_ITEMS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "properties": {
            "product_id": {"type": "string", "pattern": "^P-[0-9]{4}$"},
            "quantity": {"type": "integer", "minimum": 1},
        },
        "required": ["product_id", "quantity"],
        "additionalProperties": False,
    },
}

RETURN_REASONS = ["defective", "wrong_item", "no_longer_needed", "did_not_fit"]
REFUND_METHODS = ["original_payment", "store_credit"]


def function_schema(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    """An OpenAI function schema with a closed parameter object."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


CUSTOMER_ID = {"type": "string", "pattern": "^C-[0-9]{3}$", "description": "Customer id, e.g. C-101"}
ORDER_ID = {"type": "string", "pattern": "^O-[0-9]{5}$", "description": "Order id, e.g. O-50001"}
PRODUCT_ID = {"type": "string", "pattern": "^P-[0-9]{4}$", "description": "Product id, e.g. P-1001"}
