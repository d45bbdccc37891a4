"""The shop's routes (``initial_state.mock_web.routes``): ``ROUTES`` maps "METHOD /path" to a handler.

Each handler gets the trial's tables and the request, and answers with a page. A form POST that
changes something answers with a 303 to the page showing the result, so reloading it changes nothing.
A request the shop refuses gets an error page with a 4xx status and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from tolokaforge.sdk.web import Request, Response, redirect

from . import pages, shop
from .shop import Data, ShopError

Handler = Callable[[Data, Request], Response | str]


def _refusal(data: Data, error: ShopError) -> Response:
    return Response(pages.error_page(data, str(error)), status=error.status)


def _guarded(handler: Handler) -> Handler:
    """Turn the shop's refusals into error pages (anything else is a defect: the site answers 500)."""

    def guarded(data: Data, request: Request) -> Response | str:
        try:
            return handler(data, request)
        except ShopError as error:
            return _refusal(data, error)

    guarded.__doc__ = handler.__doc__
    return guarded


def catalog(data: Data, request: Request) -> str:
    return pages.catalog(data)


def search(data: Data, request: Request) -> str:
    query = request.query.get("q", "").strip()
    return pages.search_results(data, query, shop.search(data, query))


def show_product(data: Data, request: Request) -> str:
    return pages.product_page(data, shop.product(data, request.params["sku"]))


def add_to_cart(data: Data, request: Request) -> Response:
    qty = request.form.get("qty", "1").strip() or "1"
    if not qty.isdigit():
        raise ShopError(f"Quantity {qty!r} is not a whole number.")
    shop.add_to_cart(data, request.form.get("sku", ""), int(qty))
    return redirect("/cart")


def show_cart(data: Data, request: Request) -> str:
    return pages.cart_page(data)


def remove_from_cart(data: Data, request: Request) -> Response:
    shop.remove_from_cart(data, request.form.get("sku", ""))
    return redirect("/cart")


def show_checkout(data: Data, request: Request) -> str:
    return pages.checkout_page(data)


def place_order(data: Data, request: Request) -> Response:
    try:
        order_id = shop.checkout(data, request.form.get("name", ""), request.form.get("shipping", ""))
    except ShopError as error:
        return Response(pages.checkout_page(data, str(error)), status=error.status)
    return redirect(f"/order/{order_id}")


def show_order(data: Data, request: Request) -> str:
    return pages.order_page(data, shop.own_order(data, request.params["order_id"]))


def list_orders(data: Data, request: Request) -> str:
    return pages.orders_page(data, shop.own_orders(data))


def cancel_order(data: Data, request: Request) -> Response:
    order_id = request.params["order_id"]
    shop.cancel(data, order_id)
    return redirect(f"/order/{order_id}")


ROUTES: dict[str, Handler] = {
    pattern: _guarded(handler)
    for pattern, handler in {
        "GET /": catalog,
        "GET /search": search,
        "GET /product/{sku}": show_product,
        "POST /cart/add": add_to_cart,
        "GET /cart": show_cart,
        "POST /cart/remove": remove_from_cart,
        "GET /checkout": show_checkout,
        "POST /checkout": place_order,
        "GET /orders": list_orders,
        "GET /order/{order_id}": show_order,
        "POST /order/{order_id}/cancel": cancel_order,
    }.items()
}
