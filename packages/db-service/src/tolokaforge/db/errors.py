"""Errors of the DB service and its clients: one class per HTTP error status, one body shape.

    DBServiceError                 (error, message, details) -- the OpenAPI ``Error`` body
    ├── BadRequestError            400  the body is not JSON
    ├── UnauthorizedError          401  no token, or not the service's
    ├── ForbiddenError             403  a trial-scoped door asked for another trial (the runner's gateway)
    ├── NotFoundError              404  unknown trial, table, snapshot or record
    ├── ConflictError              409  trial/snapshot exists, key taken, ambiguous selector
    │   └── VersionConflictError   409  a write's expected_version is not the trial's (someone moved it)
    ├── PayloadTooLargeError       413  body over the size limit
    ├── ValidationFailedError      422  parses but violates the contract (or a table's record schema)
    └── StoreUnreachableError      (client side only) no answer: refused, reset, timed out, reply lost

The app maps each class to its status once; the HTTP client maps a status back to the same class, so
code using either client catches the same exceptions.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "BadRequestError",
    "ConflictError",
    "DBServiceError",
    "ForbiddenError",
    "NotFoundError",
    "PayloadTooLargeError",
    "StoreUnreachableError",
    "UnauthorizedError",
    "ValidationFailedError",
    "VersionConflictError",
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


class UnauthorizedError(DBServiceError):
    code = "unauthorized"
    status = 401


class ForbiddenError(DBServiceError):
    code = "forbidden"
    status = 403


class NotFoundError(DBServiceError):
    code = "not_found"
    status = 404


class ConflictError(DBServiceError):
    code = "conflict"
    status = 409


class VersionConflictError(ConflictError):
    """The trial is at another version than the write expected: someone else changed it meanwhile.

    Answered as any 409; the body's ``details`` carry ``version`` and ``expected_version``, which is how a
    client tells it from the other conflicts.
    """


class PayloadTooLargeError(DBServiceError):
    code = "payload_too_large"
    status = 413


class ValidationFailedError(DBServiceError):
    code = "validation_error"
    status = 422


class StoreUnreachableError(DBServiceError):
    """No answer came back: the service was not reached, or the reply was lost on the way.

    Raised by clients, never answered by the service. ``outcome_unknown`` is true when the request may
    have reached the service (the connection broke after it was sent, or the wait timed out): a write
    may then have been applied, so the caller must re-read the trial before trusting its own copy.
    """

    code = "unavailable"
    status = 503

    def __init__(self, message: str, details: dict[str, Any] | None = None, *, outcome_unknown: bool) -> None:
        super().__init__(message, details)
        self.outcome_unknown = outcome_unknown
