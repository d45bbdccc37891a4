"""Read tools: they never change ``data``."""

from __future__ import annotations

from typing import Any, ClassVar

from ._common import (
    CUSTOMER_ID,
    ORDER_ID,
    PRODUCT_ID,
    Data,
    dump,
    function_schema,
    get_customer,
    get_order,
    get_product,
    order_summary,
)


class FindCustomerByEmail:
    category: ClassVar[str] = "read"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return function_schema(
            "find_customer_by_email",
            "Look up a customer's id by the email address on their account (case-insensitive).",
            {"email": {"type": "string", "format": "email", "minLength": 3}},
            ["email"],
        )

    @staticmethod
    def invoke(data: Data, email: str) -> str:
        wanted = email.strip().lower()
        for customer in data["customers"].values():
            if customer["email"] == wanted:
                return dump({"customer_id": customer["id"], "name": customer["name"]})
        raise ValueError(f"No customer with email {email}")


class GetCustomerDetails:
    category: ClassVar[str] = "read"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return function_schema(
            "get_customer_details",
            "Get a customer's profile: name, email, phone, tier, default address, payment methods "
            "(with gift card balances) and store credit balance.",
            {"customer_id": CUSTOMER_ID},
            ["customer_id"],
        )

    @staticmethod
    def invoke(data: Data, customer_id: str) -> str:
        return dump(get_customer(data, customer_id))


class ListCustomerOrders:
    category: ClassVar[str] = "read"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return function_schema(
            "list_customer_orders",
            "List a customer's orders (newest first) as short summaries, optionally only one status.",
            {
                "customer_id": CUSTOMER_ID,
                "status": {
                    "type": "string",
                    "enum": [
                        "pending",
                        "processing",
                        "shipped",
                        "delivered",
                        "return_requested",
                        "cancelled",
                    ],
                    "description": "Only orders in this status",
                },
            },
            ["customer_id"],
        )

    @staticmethod
    def invoke(data: Data, customer_id: str, status: str | None = None) -> str:
        get_customer(data, customer_id)
        orders = [
            order_summary(order)
            for order in data["orders"].values()
            if order["customer_id"] == customer_id and (status is None or order["status"] == status)
        ]
        orders.sort(key=lambda summary: (summary["placed_on"], summary["order_id"]), reverse=True)
        return dump(orders)


class GetOrderDetails:
    category: ClassVar[str] = "read"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return function_schema(
            "get_order_details",
            "Get one order in full: customer, items with unit prices, totals, coupon, payment method, "
            "shipping address, status, tracking number, promised and delivery dates.",
            {"order_id": ORDER_ID},
            ["order_id"],
        )

    @staticmethod
    def invoke(data: Data, order_id: str) -> str:
        return dump(get_order(data, order_id))


class GetProductDetails:
    category: ClassVar[str] = "read"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return function_schema(
            "get_product_details",
            "Get a product: name, category, price, units in stock and whether it is final sale.",
            {"product_id": PRODUCT_ID},
            ["product_id"],
        )

    @staticmethod
    def invoke(data: Data, product_id: str) -> str:
        return dump(get_product(data, product_id))


class SearchProducts:
    category: ClassVar[str] = "read"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return function_schema(
            "search_products",
            "Search the catalogue by words in the product name and/or by category. Returns id, name, "
            "price and stock for each match.",
            {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Words that must all appear in the name",
                },
                "category": {
                    "type": "string",
                    "enum": ["tents", "sleeping", "packs", "footwear", "apparel", "cooking", "accessories"],
                },
                "in_stock_only": {"type": "boolean", "default": False},
            },
            [],
        )

    @staticmethod
    def invoke(
        data: Data, query: str | None = None, category: str | None = None, in_stock_only: bool = False
    ) -> str:
        if query is None and category is None:
            raise ValueError("Give a query, a category, or both")
        words = (query or "").lower().split()
        matches = [
            {"product_id": p["id"], "name": p["name"], "price": p["price"], "stock": p["stock"]}
            for p in data["products"].values()
            if all(word in p["name"].lower() for word in words)
            and (category is None or p["category"] == category)
            and (not in_stock_only or p["stock"] > 0)
        ]
        return dump(matches)


class GetCoupon:
    category: ClassVar[str] = "read"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return function_schema(
            "get_coupon",
            "Get a coupon's terms: kind (percent or fixed), value, minimum subtotal, expiry date, whether "
            "it is active and the loyalty tier it requires, if any.",
            {
                "code": {
                    "type": "string",
                    "pattern": "^[A-Z0-9]{3,16}$",
                    "description": "Coupon code, upper case",
                }
            },
            ["code"],
        )

    @staticmethod
    def invoke(data: Data, code: str) -> str:
        coupon = data["coupons"].get(code)
        if coupon is None:
            raise ValueError(f"Coupon {code} not found")
        return dump(coupon)


class ListReturns:
    category: ClassVar[str] = "read"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return function_schema(
            "list_returns",
            "List a customer's return requests with their items, refund amount, method and status.",
            {"customer_id": CUSTOMER_ID},
            ["customer_id"],
        )

    @staticmethod
    def invoke(data: Data, customer_id: str) -> str:
        get_customer(data, customer_id)
        return dump([r for r in data["returns"] if r["customer_id"] == customer_id])


class GetStoreCreditHistory:
    category: ClassVar[str] = "read"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return function_schema(
            "get_store_credit_history",
            "List every store-credit movement of a customer (amount, reason, related order, date) and the "
            "current balance.",
            {"customer_id": CUSTOMER_ID},
            ["customer_id"],
        )

    @staticmethod
    def invoke(data: Data, customer_id: str) -> str:
        customer = get_customer(data, customer_id)
        entries = [e for e in data["credit_ledger"] if e["customer_id"] == customer_id]
        return dump({"customer_id": customer_id, "balance": customer["store_credit"], "entries": entries})
