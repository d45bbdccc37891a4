"""Calculation tools: they compute from ``data`` (or nothing) and never change it."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any, ClassVar

from ._common import (
    ORDER_ID,
    REFUND_METHODS,
    RETURN_ITEMS_SCHEMA,
    RETURN_REASONS,
    Data,
    dump,
    function_schema,
    money,
    refund_quote,
)


def _add(a: float, b: float) -> float:
    return a + b


def _sub(a: float, b: float) -> float:
    return a - b


def _mul(a: float, b: float) -> float:
    return a * b


def _div(a: float, b: float) -> float:
    return a / b


_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: _add,
    ast.Sub: _sub,
    ast.Mult: _mul,
    ast.Div: _div,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
    ):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand)
    raise ValueError("Only numbers, + - * / and parentheses are allowed")


class Calculate:
    category: ClassVar[str] = "compute"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return function_schema(
            "calculate",
            "Evaluate an arithmetic expression (numbers, + - * / and parentheses) and return the result "
            "rounded to cents.",
            {
                "expression": {
                    "type": "string",
                    "pattern": "^[0-9+\\-*/(). ]+$",
                    "maxLength": 200,
                    "description": "e.g. '(249 + 89) * 0.85'",
                }
            },
            ["expression"],
        )

    @staticmethod
    def invoke(data: Data, expression: str) -> str:
        try:
            tree = ast.parse(expression, mode="eval")
            result = _evaluate(tree)
        except ZeroDivisionError as error:
            raise ValueError("Division by zero") from error
        except SyntaxError as error:
            raise ValueError(f"Not an arithmetic expression: {expression!r}") from error
        return f"{money(result):.2f}"


class QuoteRefund:
    category: ClassVar[str] = "compute"

    @staticmethod
    def get_info() -> dict[str, Any]:
        return function_schema(
            "quote_refund",
            "Compute, without filing anything, the refund a return of the given items would earn: the items' "
            "paid prices, less the 7.95 return shipping fee unless the reason is defective or wrong_item or "
            "the refund goes to store credit.",
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
        return dump(refund_quote(data, order_id, items, reason, refund_method))
