"""Errors of the DB service and its clients: one class per HTTP error status, one body shape.

    DBServiceError                 (error, message, details) -- the OpenAPI ``Error`` body
    ├── BadRequestError            400  the body is not JSON
    ├── NotFoundError              404  unknown trial, table, snapshot or record
    ├── ConflictError              409  trial/snapshot exists, key taken, ambiguous selector, stale version
    ├── PayloadTooLargeError       413  body over the size limit
    └── ValidationFailedError      422  parses but violates the contract (or a table's record schema)

The app maps each class to its status once; the HTTP client maps a status back to the same class, so
code using either client catches the same exceptions.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "BadRequestError",
    "ConflictError",
    "DBServiceError",
    "NotFoundError",
    "PayloadTooLargeError",
    "ValidationFailedError",
]


class DBServiceError(Exception):
    """A typed DB-service failure; ``code`` is the OpenAPI ErrorCode, ``status`` its HTTP status."""

    code: ClassVar[str] = ""
    status: ClassVar[int] = 0

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details or {}

    def to_body(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, "details": self.details}


class BadRequestError(DBServiceError):
    code = "bad_request"
    status = 400


class NotFoundError(DBServiceError):
    code = "not_found"
    status = 404


class ConflictError(DBServiceError):
    code = "conflict"
    status = 409


class PayloadTooLargeError(DBServiceError):
    code = "payload_too_large"
    status = 413


class ValidationFailedError(DBServiceError):
    code = "validation_error"
    status = 422
