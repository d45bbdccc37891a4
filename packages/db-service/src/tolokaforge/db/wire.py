"""JSON on the wire: strict parsing of request bodies and compact encoding of responses.

Python's ``json`` accepts ``NaN``, ``Infinity`` and ``1e999`` (parsed as infinity), none of which is JSON
and none of which it could write back as JSON, so parsing refuses them (400). Deep nesting, invalid UTF-8
and integers longer than Python's digit limit are refused the same way, never as a server error.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tolokaforge.db.errors import BadRequestError, ValidationFailedError

__all__ = ["dump_body", "parse_body"]


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number out of range: {text[:40]}")
    return value


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_body(data: bytes) -> Any:
    """The JSON value in ``data``; BadRequestError when it is not one."""
    try:
        return json.loads(data, parse_float=_finite, parse_constant=_constant)
    except (ValueError, RecursionError) as exc:
        raise BadRequestError(f"the body is not valid JSON: {str(exc)[:200]}") from None


def dump_body(value: Any) -> bytes:
    """Compact JSON for a request or response body; ValidationFailedError for a value JSON cannot hold."""
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValidationFailedError(f"not representable as JSON: {str(exc)[:200]}") from None
