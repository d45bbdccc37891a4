"""The shop's HTML pages, rendered on the server from the trial's tables (no script on any page).

Every element an agent acts on has an ``id`` (or ``data-testid`` for repeated rows), so golden paths
and scripted agents address it with a CSS ``selector`` rather than a screen position.
"""

from __future__ import annotations

from html import escape

from .shop import CANCELLABLE, Data, Record, cart_count, cart_lines, cart_subtotal, customer, product

SHOP = "Tolokaforge Outfitters"


def dollars(value: float) -> str:
    return f"${value:,.2f}"


def layout(data: Data, title: str, body: str, *, query: str = "") -> str:
    """A whole page: the header (home, search, orders, cart) around ``body``."""
    # The empty data: icon stops Chromium asking the site for /favicon.ico on every page.
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)} · {SHOP}</title>
<link rel="icon" href="data:,"><link rel="stylesheet" href="/style.css"></head>
<body><header>
<a id="nav-home" class="brand" href="/">{SHOP}</a>
<form id="search-form" action="/search" method="get">
<input id="search-box" name="q" type="search" value="{escape(query)}" placeholder="Search the shop">
<button id="search-button" type="submit">Search</button></form>
<nav><a id="nav-orders" href="/orders">My orders</a> <a id="nav-cart" href="/cart">Cart ({cart_count(data)})</a></nav>
<span id="signed-in">Signed in as {escape(customer(data)["name"])}</span>
</header>
<main><h1 id="page-title">{escape(title)}</h1>
{body}
</main></body></html>
"""


def _stock(item: Record) -> str:
    return "Sold out" if item["stock"] == 0 else f"{item['stock']} in stock"


def _product_rows(items: list[Record], prefix: str) -> str:
    rows = "".join(
        f'<tr data-testid="{prefix}-row-{item["sku"]}">'
        f'<td><a id="{prefix}-{item["sku"]}" href="/product/{item["sku"]}">{escape(item["name"])}</a></td>'
        f'<td class="price">{dollars(item["price"])}</td><td>{_stock(item)}</td></tr>'
        for item in items
    )
    return f"<table><tr><th>Product</th><th>Price</th><th>Availability</th></tr>{rows}</table>"


def catalog(data: Data) -> str:
    items = sorted(data["products"].values(), key=lambda item: (item["category"], item["name"]))
    return layout(data, "Catalog", _product_rows(items, "product"))


def search_results(data: Data, query: str, found: list[Record]) -> str:
    body = (
        _product_rows(found, "result")
        if found
        else f'<p id="no-results">Nothing matches “{escape(query)}”.</p>'
    )
    return layout(data, f"Results for “{query}”", body, query=query)


def product_page(data: Data, item: Record) -> str:
    disabled = " disabled" if item["stock"] == 0 else ""
    body = f"""<p class="blurb">{escape(item["blurb"])}</p>
<p>Price: <span id="price">{dollars(item["price"])}</span> · <span id="stock">{_stock(item)}</span></p>
<form id="add-form" method="post" action="/cart/add">
<input type="hidden" name="sku" value="{item["sku"]}">
<label for="qty">Quantity</label> <input id="qty" name="qty" type="number" min="1" value="1">
<button id="add-to-cart" type="submit"{disabled}>Add to cart</button>
</form>"""
    return layout(data, item["name"], body)


def _line_rows(data: Data, removable: bool) -> str:
    rows = ""
    for line in cart_lines(data):
        item = product(data, line["sku"])
        remove = (
            f'<td><form method="post" action="/cart/remove"><input type="hidden" name="sku" value="{item["sku"]}">'
            f'<button id="remove-{item["sku"]}" type="submit">Remove</button></form></td>'
            if removable
            else ""
        )
        rows += (
            f'<tr data-testid="cart-line-{item["sku"]}"><td>{escape(item["name"])}</td><td>{line["qty"]}</td>'
            f"<td>{dollars(item['price'])}</td><td>{dollars(item['price'] * line['qty'])}</td>{remove}</tr>"
        )
    head = "<th>Product</th><th>Qty</th><th>Price</th><th>Total</th>" + ("<th></th>" if removable else "")
    return f"<table><tr>{head}</tr>{rows}</table>"


def cart_page(data: Data) -> str:
    if not cart_lines(data):
        return layout(data, "Your cart", '<p id="cart-empty">Your cart is empty.</p>')
    body = f"""{_line_rows(data, removable=True)}
<p>Subtotal: <span id="cart-subtotal">{dollars(cart_subtotal(data))}</span></p>
<p><a id="checkout" class="button" href="/checkout">Check out</a></p>"""
    return layout(data, "Your cart", body)


def checkout_page(data: Data, error: str = "") -> str:
    if not cart_lines(data):
        return layout(data, "Checkout", '<p id="cart-empty">Your cart is empty.</p>')
    options = "".join(
        f'<option value="{method["method"]}">{escape(method["label"])}</option>'
        for method in data["shipping_methods"].values()
    )
    shown_error = f'<p id="error" class="error">{escape(error)}</p>' if error else ""
    body = f"""{shown_error}{_line_rows(data, removable=False)}
<p>Subtotal: <span id="cart-subtotal">{dollars(cart_subtotal(data))}</span></p>
<form id="checkout-form" method="post" action="/checkout">
<p><label for="name">Ship to (full name)</label> <input id="name" name="name" placeholder="Full name"></p>
<p><label for="shipping">Shipping</label> <select id="shipping" name="shipping">{options}</select></p>
<button id="place-order" type="submit">Place order</button>
</form>"""
    return layout(data, "Checkout", body)


def order_page(data: Data, order: Record) -> str:
    rows = "".join(
        f'<tr data-testid="order-line-{line["sku"]}"><td>{escape(line["name"])}</td><td>{line["qty"]}</td>'
        f"<td>{dollars(line['price'])}</td></tr>"
        for line in order["items"]
    )
    shipping = data["shipping_methods"][order["shipping"]]["label"]
    cancel = (
        f'<form method="post" action="/order/{order["order_id"]}/cancel">'
        '<button id="cancel-order" type="submit">Cancel order</button></form>'
        if order["status"] in CANCELLABLE
        else ""
    )
    body = f"""<p>Status: <span id="order-status">{order["status"]}</span></p>
<p>Ship to: <span id="ship-to">{escape(order["ship_to"])}</span></p>
<table><tr><th>Product</th><th>Qty</th><th>Price</th></tr>{rows}</table>
<p>Shipping: <span id="order-shipping">{escape(shipping)}</span></p>
<p>Total: <span id="order-total">{dollars(order["total"])}</span></p>
{cancel}"""
    return layout(data, f"Order #{order['order_id']}", body)


def orders_page(data: Data, orders: list[Record]) -> str:
    rows = "".join(
        f'<tr data-testid="order-row-{order["order_id"]}">'
        f'<td><a id="order-{order["order_id"]}" href="/order/{order["order_id"]}">Order #{order["order_id"]}</a></td>'
        f"<td>{escape(', '.join(line['name'] for line in order['items']))}</td>"
        f"<td>{dollars(order['total'])}</td><td>{order['status']}</td></tr>"
        for order in orders
    )
    body = f"<table><tr><th>Order</th><th>Items</th><th>Total</th><th>Status</th></tr>{rows}</table>"
    return layout(data, "My orders", body if orders else '<p id="no-orders">No orders yet.</p>')


def error_page(data: Data, message: str) -> str:
    return layout(
        data,
        "Sorry",
        f'<p id="error" class="error">{escape(message)}</p><p><a href="/">Back to the shop</a></p>',
    )
