"""The RunnerService called in this process: the generated stub's methods, without HTTP/2 in between.

The host's embedded runner shares its event loop. Sending each call through grpclib there costs about
as much CPU again as the trial's own work (both ends of HTTP/2, protobuf encoding and decoding, and
loopback socket writes), all on the one core the loop runs on. :class:`InProcessStub` answers like the
generated ``RunnerServiceStub`` with the servicer called directly, keeping what a caller can observe
of the wire:

* a call's ``timeout`` ends it with ``TimeoutError``, as grpclib's deadline does;
* the servicer's ``GRPCError`` (INVALID_ARGUMENT, UNAVAILABLE, ...) reaches the caller as it is;
* any other exception escaping a handler is ``INTERNAL``, as at the gRPC edge (grpc_edge.py);
* cancelling the caller cancels the handler, as a reset stream does.

Messages are passed as objects, not bytes: both ends are this code base, and neither changes a message
once it is sent. What only bytes can carry wrong (malformed protobuf, oversized messages) cannot arise.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from grpclib.const import Status
from grpclib.exceptions import GRPCError

from tolokaforge.contracts.runner import (
    CleanupTrialRequest,
    CleanupTrialResponse,
    ExecuteToolRequest,
    ExecuteToolResponse,
    GetStateRequest,
    GetStateResponse,
    GradeTrialRequest,
    GradeTrialResponse,
    HealthCheckRequest,
    HealthCheckResponse,
    RegisterTrialRequest,
    RegisterTrialResponse,
    ResetTrialRequest,
    ResetTrialResponse,
)

from .servicer import RunnerServicer

__all__ = ["InProcessStub"]

log = logging.getLogger(__name__)

_Request = TypeVar("_Request")
_Response = TypeVar("_Response")


class InProcessStub:
    """``RunnerServiceStub``'s unary methods, answered by ``servicer`` in this event loop."""

    def __init__(self, servicer: RunnerServicer) -> None:
        self._servicer = servicer

    async def _call(
        self,
        handler: Callable[[_Request], Awaitable[_Response]],
        message: _Request,
        timeout: float | None,
    ) -> _Response:
        try:
            async with asyncio.timeout(timeout):
                return await handler(message)
        except (GRPCError, TimeoutError, asyncio.CancelledError):
            raise
        except Exception as error:
            log.exception("%s failed", getattr(handler, "__name__", "RunnerService call"))
            raise GRPCError(Status.INTERNAL, f"runner error: {type(error).__name__}: {error}") from error

    async def health_check(
        self, message: HealthCheckRequest | None = None, *, timeout: float | None = None
    ) -> HealthCheckResponse:
        return await self._call(self._servicer.health_check, message or HealthCheckRequest(), timeout)

    async def register_trial(
        self, message: RegisterTrialRequest, *, timeout: float | None = None
    ) -> RegisterTrialResponse:
        return await self._call(self._servicer.register_trial, message, timeout)

    async def execute_tool(
        self, message: ExecuteToolRequest, *, timeout: float | None = None
    ) -> ExecuteToolResponse:
        return await self._call(self._servicer.execute_tool, message, timeout)

    async def grade_trial(
        self, message: GradeTrialRequest, *, timeout: float | None = None
    ) -> GradeTrialResponse:
        return await self._call(self._servicer.grade_trial, message, timeout)

    async def get_state(self, message: GetStateRequest, *, timeout: float | None = None) -> GetStateResponse:
        return await self._call(self._servicer.get_state, message, timeout)

    async def reset_trial(
        self, message: ResetTrialRequest, *, timeout: float | None = None
    ) -> ResetTrialResponse:
        return await self._call(self._servicer.reset_trial, message, timeout)

    async def cleanup_trial(
        self, message: CleanupTrialRequest, *, timeout: float | None = None
    ) -> CleanupTrialResponse:
        return await self._call(self._servicer.cleanup_trial, message, timeout)
