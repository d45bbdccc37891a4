"""The shop's rules over the trial's tables: carts, checkout, cancelling. No HTML here (pages.py).

Every change is deterministic (order ids count up from the largest one; no clock, no randomness), so
the golden path's replay reaches the same state hash as a correct agent. A rule that refuses raises
:class:`ShopError` before anything is changed.
"""

from __future__ import annotations

from typing import Any

Data = dict[str, Any]
Record = dict[str, Any]

SIGNED_IN = "C-1"
"""The customer the site is signed in as (the site has no login: the agent shops for Ada)."""
CANCELLABLE = ("pending",)


class ShopError(Exception):
    """A request the shop refuses; ``status`` is the HTTP status of the page that says why."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def money(value: float) -> float:
    """Round to cents (the prices here are exact in cents)."""
    return round(value + 1e-9, 2)


def product(data: Data, sku: str) -> Record:
    found: Record | None = data["products"].get(sku)
    if found is None:
        raise ShopError(f"No product {sku}.", status=404)
    return found


def customer(data: Data) -> Record:
    return data["customers"][SIGNED_IN]


def cart_lines(data: Data) -> list[Record]:
    """The signed-in customer's cart lines ``{sku, qty}``, in the order they were added."""
    return data["carts"][SIGNED_IN]["items"]


def cart_count(data: Data) -> int:
    return sum(int(line["qty"]) for line in cart_lines(data))


def cart_subtotal(data: Data) -> float:
    return money(sum(product(data, line["sku"])["price"] * line["qty"] for line in cart_lines(data)))


def search(data: Data, query: str) -> list[Record]:
    """Products whose name or category contains every word of ``query``, by name."""
    words = query.lower().split()
    found = [
        item
        for item in data["products"].values()
        if words and all(word in f"{item['name']} {item['category']}".lower() for word in words)
    ]
    return sorted(found, key=lambda item: item["name"])


def add_to_cart(data: Data, sku: str, qty: int) -> None:
    item = product(data, sku)
    if qty < 1:
        raise ShopError("Choose a quantity of at least 1.")
    lines = cart_lines(data)
    line = next((line for line in lines if line["sku"] == sku), None)
    wanted = qty + (int(line["qty"]) if line else 0)
    if wanted > item["stock"]:
        left = "is sold out" if item["stock"] == 0 else f"has only {item['stock']} left"
        raise ShopError(f"{item['name']} {left}.", status=409)
    if line is None:
        lines.append({"sku": sku, "qty": qty})
    else:
        line["qty"] = wanted


def remove_from_cart(data: Data, sku: str) -> None:
    lines = cart_lines(data)
    kept = [line for line in lines if line["sku"] != sku]
    if len(kept) == len(lines):
        raise ShopError(f"{sku} is not in your cart.", status=404)
    lines[:] = kept


def next_order_id(data: Data) -> str:
    return str(max((int(key) for key in data["orders"]), default=1000) + 1)


def checkout(data: Data, ship_to: str, method: str) -> str:
    """Turn the cart into a pending order; returns its id."""
    lines = cart_lines(data)
    if not lines:
        raise ShopError("Your cart is empty.")
    if not ship_to.strip():
        raise ShopError("Enter the name to ship to.")
    shipping: Record | None = data["shipping_methods"].get(method)
    if shipping is None:
        raise ShopError(f"Unknown shipping method {method!r}.")
    for line in lines:
        item = product(data, line["sku"])
        if line["qty"] > item["stock"]:
            raise ShopError(f"{item['name']} has only {item['stock']} left.", status=409)
    items = [
        {"sku": line["sku"], "name": product(data, line["sku"])["name"], "qty": line["qty"],
         "price": product(data, line["sku"])["price"]}
        for line in lines
    ]  # fmt: skip
    subtotal = cart_subtotal(data)
    order_id = next_order_id(data)
    data["orders"][order_id] = {
        "order_id": order_id,
        "customer_id": SIGNED_IN,
        "ship_to": " ".join(ship_to.split()),
        "items": items,
        "shipping": method,
        "shipping_cost": shipping["price"],
        "subtotal": subtotal,
        "total": money(subtotal + shipping["price"]),
        "status": "pending",
    }
    for line in lines:
        product(data, line["sku"])["stock"] -= line["qty"]
    lines.clear()
    return order_id


def own_order(data: Data, order_id: str) -> Record:
    """One of the signed-in customer's orders (another customer's is "not found", as on a real shop)."""
    order: Record | None = data["orders"].get(order_id)
    if order is None or order["customer_id"] != SIGNED_IN:
        raise ShopError(f"No order {order_id}.", status=404)
    return order


def own_orders(data: Data) -> list[Record]:
    """The signed-in customer's orders, newest first."""
    mine = [order for order in data["orders"].values() if order["customer_id"] == SIGNED_IN]
    return sorted(mine, key=lambda order: int(order["order_id"]), reverse=True)


def cancel(data: Data, order_id: str) -> None:
    order = own_order(data, order_id)
    if order["status"] not in CANCELLABLE:
        raise ShopError(f"Order {order_id} is {order['status']}; only pending orders can be cancelled.", 409)
    order["status"] = "cancelled"
    for line in order["items"]:
        item: Record | None = data["products"].get(line["sku"])
        if item is not None:
            item["stock"] += line["qty"]
