"""Write the shop's tables: ``python data/generate.py`` rewrites both JSON files of this folder.

``initial_state.json`` is the shop every task but one starts from (empty carts);
``prefilled_cart.json`` is the same shop with Ada's cart already holding three lines (the task that
removes one). The pack's test regenerates both and fails on any difference, so edit this script,
never the JSON.

Tables (all keyed by id):
    products          SKU -> name, category, price, stock, blurb
    customers         C-1, C-2 -> name, email, city (the site is signed in as C-1)
    shipping_methods  standard / express -> label, price
    carts             customer id -> the cart's lines [{sku, qty}]
    orders            "1001" ... -> customer, lines (name and price as sold), shipping, totals, status
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent

PRODUCTS = [
    ("LNT-100", "Camp Lantern", "lighting", 24.00, 12, "A 300-lumen lantern that hangs from a tent loop."),
    ("LNT-200", "Solar Lantern Pro", "lighting", 39.00, 5, "Charges in a day of sun, lights two nights."),
    ("LNT-300", "Trail Lantern Mini", "lighting", 14.50, 30, "Pocket-sized, 120 lumens, runs on AAA cells."),
    ("LNT-400", "Ridge Lantern", "lighting", 12.00, 0, "The basic model: 80 lumens and a steel handle."),
    ("HLP-100", "Headlamp 300", "lighting", 29.00, 18, "300 lumens with a red night mode."),
    ("TNT-100", "Two-Person Tent", "shelter", 189.00, 4, "Freestanding, 2.1 kg, two doors."),
    ("BAG-100", "Down Sleeping Bag", "sleeping", 149.00, 7, "Rated to -5 C, packs to the size of a loaf."),
    ("STV-100", "Pocket Stove", "cooking", 34.00, 15, "A canister stove that boils a litre in four minutes."),
    ("MUG-100", "Enamel Mug", "cooking", 9.50, 40, "Holds 350 ml; goes on the stove."),
    ("BTL-100", "Steel Water Bottle", "hydration", 19.00, 22, "One litre, double-walled."),
]

CUSTOMERS = {
    "C-1": {"customer_id": "C-1", "name": "Ada Lovelace", "email": "ada@example.com", "city": "London"},
    "C-2": {"customer_id": "C-2", "name": "Grace Hopper", "email": "grace@example.com", "city": "Arlington"},
}

SHIPPING = {
    "standard": {"method": "standard", "label": "Standard shipping ($4.95)", "price": 4.95},
    "express": {"method": "express", "label": "Express shipping ($14.95)", "price": 14.95},
}

# (order id, customer, [(sku, qty)], shipping method, status)
ORDERS = [
    ("1001", "C-1", [("MUG-100", 2)], "standard", "delivered"),
    ("1002", "C-1", [("STV-100", 1)], "standard", "pending"),
    ("1003", "C-1", [("BTL-100", 1), ("MUG-100", 1)], "express", "pending"),
    ("1004", "C-2", [("TNT-100", 1)], "express", "shipped"),
]

PREFILLED_CART = [("TNT-100", 1), ("MUG-100", 2), ("HLP-100", 1)]


def _money(value: float) -> float:
    return round(value + 1e-9, 2)


def _order(
    order_id: str, customer: str, lines: list[tuple[str, int]], shipping: str, status: str
) -> dict[str, Any]:
    by_sku = {sku: (name, price) for sku, name, _, price, _, _ in PRODUCTS}
    items = [{"sku": sku, "name": by_sku[sku][0], "qty": qty, "price": by_sku[sku][1]} for sku, qty in lines]
    subtotal = _money(sum(qty * by_sku[sku][1] for sku, qty in lines))
    shipping_cost = float(SHIPPING[shipping]["price"])
    return {
        "order_id": order_id,
        "customer_id": customer,
        "ship_to": CUSTOMERS[customer]["name"],
        "items": items,
        "shipping": shipping,
        "shipping_cost": shipping_cost,
        "subtotal": subtotal,
        "total": _money(subtotal + shipping_cost),
        "status": status,
    }


def build_state() -> dict[str, Any]:
    """The shop with empty carts."""
    return {
        "products": {
            sku: {
                "sku": sku,
                "name": name,
                "category": category,
                "price": price,
                "stock": stock,
                "blurb": blurb,
            }
            for sku, name, category, price, stock, blurb in PRODUCTS
        },
        "customers": copy.deepcopy(CUSTOMERS),
        "shipping_methods": copy.deepcopy(SHIPPING),
        "carts": {customer: {"customer_id": customer, "items": []} for customer in CUSTOMERS},
        "orders": {order[0]: _order(*order) for order in ORDERS},
    }


def build_prefilled_state() -> dict[str, Any]:
    """The same shop with Ada's cart holding three lines."""
    state = build_state()
    state["carts"]["C-1"]["items"] = [{"sku": sku, "qty": qty} for sku, qty in PREFILLED_CART]
    return state


def render(state: dict[str, Any]) -> str:
    """The committed file's exact text."""
    return json.dumps(state, indent=2) + "\n"


FILES = {"initial_state.json": build_state, "prefilled_cart.json": build_prefilled_state}

if __name__ == "__main__":
    for name, build in FILES.items():
        (HERE / name).write_text(render(build()), encoding="utf-8")
        print(f"wrote {HERE / name}")
