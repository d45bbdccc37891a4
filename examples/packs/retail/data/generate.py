"""Generate the Harbor & Pine seed data: ``python data/generate.py`` rewrites ``initial_state.json``.

Deterministic (one seeded ``random.Random``), so the committed JSON is exactly what this script prints;
the pack's sanity test regenerates it and compares. Tasks refer to records by id, so changing the seed
or the shapes below means re-checking every task that names a record.

Tables (keyed = ``{id: record}``, list = ``[record, ...]``):
    customers      keyed  C-101 ...      profile, tier, payment methods, store credit
    products       keyed  P-1001 ...     catalogue with price, stock and final-sale flag
    orders         keyed  O-50001 ...    items, totals, status, dates, shipping address
    coupons        keyed  by code        percent or fixed discounts with expiry and tier rules
    returns        list                  return requests with their refund
    tickets        list                  support tickets (ids/timestamps as a ticketing system makes them)
    credit_ledger  list                  every store-credit movement
"""

from __future__ import annotations

import json
import random
from datetime import date, timedelta
from pathlib import Path
from typing import Any

SEED = 20260315
TODAY = date(2026, 3, 15)
OUT = Path(__file__).with_name("initial_state.json")

FIRST = [
    "Ava",
    "Liam",
    "Noah",
    "Mia",
    "Ethan",
    "Sofia",
    "Lucas",
    "Chloe",
    "Mateo",
    "Isla",
    "Omar",
    "Priya",
    "Hiro",
    "Elena",
    "Kwame",
    "Zoe",
    "Diego",
    "Amara",
    "Jonas",
    "Leah",
    "Ravi",
    "Nora",
    "Tariq",
    "Grace",
]
LAST = [
    "Nguyen",
    "Patel",
    "Garcia",
    "Okafor",
    "Kim",
    "Schmidt",
    "Rossi",
    "Silva",
    "Cohen",
    "Ivanova",
    "Haddad",
    "Larsen",
    "Moreau",
    "Tanaka",
    "Brooks",
    "Mensah",
    "Duarte",
    "Novak",
    "Walsh",
    "Reyes",
]
STREETS = ["Maple Ave", "Harbor St", "Pine Ridge Rd", "Lakeview Dr", "Cedar Ln", "Summit Blvd", "Elm Ct"]
CITIES = [
    ("Portland", "OR", "972"),
    ("Seattle", "WA", "981"),
    ("Denver", "CO", "802"),
    ("Austin", "TX", "787"),
    ("Boise", "ID", "837"),
    ("Madison", "WI", "537"),
    ("Burlington", "VT", "054"),
    ("Asheville", "NC", "288"),
]
CATALOGUE: dict[str, list[tuple[str, float]]] = {
    "tents": [
        ("Trailhead 2P Tent", 249.0),
        ("Basecamp 4P Tent", 389.0),
        ("Ultralight Bivy", 179.0),
        ("Family Cabin 6P Tent", 529.0),
        ("Summit 1P Tent", 299.0),
        ("Tarp Shelter 3x3", 89.0),
    ],
    "sleeping": [
        ("Ember 20F Sleeping Bag", 189.0),
        ("Glacier 0F Sleeping Bag", 329.0),
        ("Cloud Air Pad", 119.0),
        ("Foam Trail Pad", 39.5),
        ("Down Camp Quilt", 259.0),
        ("Travel Pillow", 29.0),
    ],
    "packs": [
        ("Ridgeline 45L Pack", 199.0),
        ("Daytripper 22L Pack", 89.0),
        ("Expedition 70L Pack", 299.0),
        ("Hydration Vest 8L", 129.0),
        ("Summit Sling", 49.0),
        ("Roll-top Dry Bag 20L", 34.0),
    ],
    "footwear": [
        ("Granite Mid Hiking Boot", 179.0),
        ("Trail Runner TR2", 139.0),
        ("Camp Sandal", 59.0),
        ("Winter Pac Boot", 219.0),
        ("Approach Shoe", 149.0),
        ("Wool Hiking Socks 3-pack", 36.0),
    ],
    "apparel": [
        ("Storm Shell Jacket", 229.0),
        ("Fleece Midlayer", 99.0),
        ("Merino Base Top", 85.0),
        ("Puffy Down Jacket", 249.0),
        ("Convertible Trail Pant", 79.0),
        ("Sun Hoodie", 55.0),
        ("Rain Pant", 119.0),
        ("Beanie", 25.0),
    ],
    "cooking": [
        ("Titan Canister Stove", 69.95),
        ("Two-Burner Camp Stove", 139.0),
        ("Nesting Cook Set", 59.0),
        ("Titanium Spork", 12.5),
        ("Insulated Mug", 24.0),
        ("Water Filter Squeeze", 44.95),
        ("Bear Canister", 84.0),
    ],
    "accessories": [
        ("Headlamp 400", 44.0),
        ("Trekking Poles Pair", 109.0),
        ("First Aid Kit", 39.0),
        ("Solar Lantern", 34.0),
        ("Multi-tool 14", 64.0),
        ("Compass Pro", 29.95),
        ("Camp Chair", 79.0),
        ("Hammock Single", 69.0),
        ("GPS Messenger", 349.0),
        ("Trail Map Set", 18.0),
        ("Emergency Blanket 2-pack", 9.5),
    ],
}
TICKET_SUMMARIES = {
    "shipping": [
        "Package shows delivered but not received",
        "Tracking has not updated for days",
        "Asked to reroute delivery",
    ],
    "product_issue": [
        "Zipper broke after first use",
        "Missing stakes in tent bag",
        "Sole separating on boot",
    ],
    "billing": ["Charged twice for one order", "Coupon not applied at checkout", "Refund not yet received"],
    "account": ["Cannot log in to account", "Wants to update email address"],
    "other": ["Asked about store opening hours", "Feedback about website search"],
}


def _money(value: float) -> float:
    return round(value + 1e-9, 2)


def _customers(rng: random.Random) -> dict[str, dict[str, Any]]:
    customers: dict[str, dict[str, Any]] = {}
    used_emails: set[str] = set()
    for n in range(101, 181):
        cid = f"C-{n}"
        first, last = rng.choice(FIRST), rng.choice(LAST)
        email = f"{first}.{last}@example.com".lower()
        if email in used_emails:
            email = f"{first}.{last}{n}@example.com".lower()
        used_emails.add(email)
        city, state, zip3 = rng.choice(CITIES)
        methods: list[dict[str, Any]] = [
            {
                "id": f"PM-{n}-1",
                "type": "credit_card",
                "brand": rng.choice(["visa", "mastercard", "amex"]),
                "last4": f"{rng.randint(0, 9999):04d}",
            }
        ]
        if rng.random() < 0.4:
            methods.append({"id": f"PM-{n}-2", "type": "paypal", "account": email})
        if rng.random() < 0.35:
            methods.append(
                {
                    "id": f"PM-{n}-3",
                    "type": "gift_card",
                    "balance": float(rng.choice([25, 50, 75, 100, 150, 200])),
                }
            )
        customers[cid] = {
            "id": cid,
            "name": f"{first} {last}",
            "email": email,
            "phone": f"+1-555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}",
            "tier": rng.choices(["standard", "silver", "gold"], weights=[6, 3, 1])[0],
            "address": {
                "street": f"{rng.randint(10, 9999)} {rng.choice(STREETS)}",
                "city": city,
                "state": state,
                "zip": f"{zip3}{rng.randint(0, 99):02d}",
            },
            "payment_methods": methods,
            "store_credit": 0.0,
            "member_since": (date(2019, 1, 1) + timedelta(days=rng.randint(0, 2500))).isoformat(),
        }
    return customers


def _products(rng: random.Random) -> dict[str, dict[str, Any]]:
    products: dict[str, dict[str, Any]] = {}
    n = 1001
    for category, items in CATALOGUE.items():
        for name, price in items:
            pid = f"P-{n}"
            products[pid] = {
                "id": pid,
                "name": name,
                "category": category,
                "price": price,
                "stock": rng.choice([0, 2, 5, 8, 12, 20, 35]),
                "final_sale": rng.random() < 0.15,
                "weight_kg": round(rng.uniform(0.05, 6.0), 2),
            }
            n += 1
    return products


def _orders(
    rng: random.Random, customers: dict[str, dict[str, Any]], products: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    orders: dict[str, dict[str, Any]] = {}
    customer_ids = sorted(customers)
    product_ids = sorted(products)
    for n in range(50001, 50221):
        oid = f"O-{n}"
        customer = customers[rng.choice(customer_ids)]
        recent = rng.random() < 0.25
        placed = TODAY - timedelta(days=rng.randint(0, 7) if recent else rng.randint(8, 100))
        age = (TODAY - placed).days
        items: list[dict[str, Any]] = []
        for pid in rng.sample(product_ids, rng.choice([1, 1, 2, 2, 3])):
            product = products[pid]
            items.append(
                {
                    "product_id": pid,
                    "name": product["name"],
                    "quantity": rng.choice([1, 1, 1, 2]),
                    "unit_price": product["price"],
                }
            )
        subtotal = _money(sum(i["unit_price"] * i["quantity"] for i in items))
        shipping_fee = 0.0 if subtotal >= 75 else 6.95
        order: dict[str, Any] = {
            "id": oid,
            "customer_id": customer["id"],
            "items": items,
            "subtotal": subtotal,
            "discount": 0.0,
            "coupon_code": None,
            "shipping_fee": shipping_fee,
            "total": _money(subtotal + shipping_fee),
            "payment_method_id": rng.choice(
                [m for m in customer["payment_methods"] if m.get("balance", 1e9) >= subtotal + shipping_fee]
            )["id"],
            "shipping_address": dict(customer["address"]),
            "placed_on": placed.isoformat(),
            "promised_by": (placed + timedelta(days=6)).isoformat(),
            "status": "pending",
            "tracking_number": None,
            "delivered_on": None,
        }
        if age <= 1:
            order["status"] = rng.choice(["pending", "processing"])
        elif age <= 3:
            order["status"] = rng.choice(["processing", "shipped"])
        elif age <= 7:
            order["status"] = rng.choice(["shipped", "shipped", "delivered"])
        else:
            order["status"] = rng.choices(["delivered", "cancelled"], weights=[9, 1])[0]
        if order["status"] in ("shipped", "delivered"):
            order["tracking_number"] = f"1Z{rng.randint(10**9, 10**10 - 1)}"
        if order["status"] == "delivered":
            late = rng.random() < 0.2
            days = rng.randint(7, 11) if late else rng.randint(2, 6)
            delivered = min(placed + timedelta(days=days), TODAY)
            order["delivered_on"] = delivered.isoformat()
        if order["status"] == "cancelled":
            order["cancel_reason"] = rng.choice(
                ["no_longer_needed", "ordered_by_mistake", "found_better_price"]
            )
            order["refund_amount"] = order["total"]
        orders[oid] = order
    return orders


def _coupons() -> dict[str, dict[str, Any]]:
    rows: list[tuple[str, str, float, float, str, bool, str | None]] = [
        ("SPRING15", "percent", 15, 100, "2026-04-30", True, None),
        ("TRAIL10", "percent", 10, 50, "2026-06-30", True, None),
        ("WELCOME20", "fixed", 20, 80, "2026-12-31", True, None),
        ("GOLD25", "percent", 25, 150, "2026-05-31", True, "gold"),
        ("SILVER12", "percent", 12, 60, "2026-05-31", True, "silver"),
        ("WINTER30", "percent", 30, 120, "2026-02-28", True, None),
        ("HOLIDAY50", "fixed", 50, 250, "2025-12-31", True, None),
        ("FREESHIP", "fixed", 6.95, 0, "2026-09-30", True, None),
        ("CAMP5", "fixed", 5, 30, "2026-08-31", True, None),
        ("FLASH40", "percent", 40, 100, "2026-03-20", False, None),
        ("REFER15", "fixed", 15, 75, "2026-12-31", True, None),
        ("BOOTS20", "percent", 20, 130, "2026-03-10", True, None),
    ]
    return {
        code: {
            "code": code,
            "kind": kind,
            "value": float(value),
            "min_subtotal": float(minimum),
            "expires_on": expires,
            "active": active,
            "tier_required": tier,
        }
        for code, kind, value, minimum, expires, active, tier in rows
    }


def _returns(rng: random.Random, orders: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    returns: list[dict[str, Any]] = []
    delivered = sorted(oid for oid, o in orders.items() if o["status"] == "delivered")
    for oid in rng.sample(delivered, 30):
        order = orders[oid]
        item = order["items"][0]
        reason = rng.choice(["defective", "wrong_item", "no_longer_needed", "did_not_fit"])
        method = rng.choice(["original_payment", "store_credit"])
        fee = 0.0 if reason in ("defective", "wrong_item") or method == "store_credit" else 7.95
        returns.append(
            {
                "return_id": f"R-{len(returns) + 1:04d}",
                "order_id": oid,
                "customer_id": order["customer_id"],
                "items": [{"product_id": item["product_id"], "quantity": 1}],
                "reason": reason,
                "refund_method": method,
                "refund_amount": _money(item["unit_price"] - fee),
                "status": rng.choice(["requested", "received", "refunded"]),
                "requested_on": order["delivered_on"],
            }
        )
        order["status"] = "return_requested"
    returns.sort(key=lambda r: (r["requested_on"], r["order_id"]))
    for index, record in enumerate(returns, start=1):
        record["return_id"] = f"R-{index:04d}"
    return returns


def _tickets(rng: random.Random, orders: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    tickets: list[dict[str, Any]] = []
    order_ids = sorted(orders)
    for _ in range(40):
        order = orders[rng.choice(order_ids)]
        category = rng.choice(sorted(TICKET_SUMMARIES))
        created = date.fromisoformat(order["placed_on"]) + timedelta(days=rng.randint(0, 5))
        created = min(created, TODAY)
        tickets.append(
            {
                "ticket_id": f"T-{rng.getrandbits(32):08X}",
                "customer_id": order["customer_id"],
                "order_id": order["id"],
                "category": category,
                "priority": rng.choice(["low", "normal", "normal", "high"]),
                "status": rng.choice(["open", "pending", "resolved", "resolved"]),
                "summary": rng.choice(TICKET_SUMMARIES[category]),
                "created_at": f"{created.isoformat()}T{rng.randint(8, 20):02d}:{rng.randint(0, 59):02d}:00Z",
            }
        )
    tickets.sort(key=lambda t: t["created_at"])
    return tickets


def _credit_ledger(
    rng: random.Random, customers: dict[str, dict[str, Any]], orders: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    ledger: list[dict[str, Any]] = []
    late = sorted(
        oid for oid, o in orders.items() if o["delivered_on"] and o["delivered_on"] > o["promised_by"]
    )
    for oid in late[: len(late) // 2]:
        order = orders[oid]
        amount = min(_money(order["total"] * 0.10), 25.0)
        ledger.append(
            {
                "customer_id": order["customer_id"],
                "amount": amount,
                "reason": "late_delivery",
                "order_id": oid,
                "created_on": order["delivered_on"],
            }
        )
    for cid in rng.sample(sorted(customers), 30):
        ledger.append(
            {
                "customer_id": cid,
                "amount": float(rng.choice([5, 10, 15, 20])),
                "reason": "service_recovery",
                "order_id": None,
                "created_on": (TODAY - timedelta(days=rng.randint(5, 300))).isoformat(),
            }
        )
    ledger.sort(key=lambda e: (e["created_on"], e["customer_id"]))
    numbered = [{"entry_id": f"L-{index:04d}", **entry} for index, entry in enumerate(ledger, start=1)]
    for entry in numbered:
        customer = customers[entry["customer_id"]]
        customer["store_credit"] = _money(customer["store_credit"] + entry["amount"])
    return numbered


def _scenario_fixtures(customers: dict[str, dict[str, Any]]) -> None:
    """Hand-placed facts some tasks rely on, applied after the random draw (documented in README)."""
    # multi_coupon_then_gift_card: a gift card that covers O-50153 only after a 10% coupon.
    customers["C-117"]["payment_methods"].append({"id": "PM-117-3", "type": "gift_card", "balance": 90.0})


def build_state() -> dict[str, Any]:
    """The whole seed state, built from :data:`SEED` alone."""
    rng = random.Random(SEED)
    customers = _customers(rng)
    products = _products(rng)
    orders = _orders(rng, customers, products)
    returns = _returns(rng, orders)
    tickets = _tickets(rng, orders)
    ledger = _credit_ledger(rng, customers, orders)
    _scenario_fixtures(customers)
    return {
        "customers": customers,
        "products": products,
        "orders": orders,
        "coupons": _coupons(),
        "returns": returns,
        "tickets": tickets,
        "credit_ledger": ledger,
    }


def render(state: dict[str, Any]) -> str:
    """The committed file's exact text."""
    return json.dumps(state, indent=2, sort_keys=False) + "\n"


if __name__ == "__main__":
    OUT.write_text(render(build_state()), encoding="utf-8")
    print(f"wrote {OUT}")
