"""The ``calculator`` operation: arithmetic on numbers, evaluated from a parsed expression tree.

Only number literals, + - * / // % ** and unary +/-, and parentheses are accepted; names, calls and
attribute access are refused, so an expression can compute and do nothing else. Exponents are capped
so one call cannot build an enormous integer.
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable

from tolokaforge.contracts.tool import OperationSchema, RiskClass, ToolKind

__all__ = ["CALCULATOR", "CalculatorError", "evaluate"]

_MAX_EXPONENT = 1000
_MAX_LENGTH = 500

CALCULATOR = OperationSchema(
    name="calculator",
    description="Evaluate an arithmetic expression: numbers, + - * / // % ** and parentheses.",
    input_schema_json=json.dumps(
        {
            "type": "object",
            "properties": {"expression": {"type": "string", "minLength": 1, "maxLength": _MAX_LENGTH}},
            "required": ["expression"],
            "additionalProperties": False,
        }
    ),
    output_schema_json=json.dumps(
        {
            "type": "object",
            "properties": {"expression": {"type": "string"}, "result": {"type": "number"}},
            "required": ["expression", "result"],
        }
    ),
    kind=ToolKind.DATA_SOURCE,
    risk=RiskClass.READ_ONLY,
    idempotent=True,
    default_timeout_seconds=5.0,
)


def _divide(a: float, b: float) -> float:
    return a / b


def _floor_divide(a: float, b: float) -> float:
    return a // b


def _power(a: float, b: float) -> float:
    result: float = a**b
    return result


_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: _divide,
    ast.FloorDiv: _floor_divide,
    ast.Mod: operator.mod,
    ast.Pow: _power,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class CalculatorError(Exception):
    """The expression is not arithmetic this operation computes (the message says why)."""


def evaluate(expression: str) -> float:
    if len(expression) > _MAX_LENGTH:
        raise CalculatorError(f"the expression is longer than {_MAX_LENGTH} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as error:
        raise CalculatorError(f"not an expression: {error.msg}") from error
    try:
        return _value(tree.body)
    except ZeroDivisionError as error:
        raise CalculatorError("division by zero") from error
    except OverflowError as error:
        raise CalculatorError("the result is too large") from error


def _value(node: ast.expr) -> float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value) if isinstance(node.value, float) else int(node.value)  # pyright: ignore[reportArgumentType]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise CalculatorError(f"exponents above {_MAX_EXPONENT} are refused")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand))
    raise CalculatorError(f"{ast.unparse(node)!r} is not arithmetic on numbers")
