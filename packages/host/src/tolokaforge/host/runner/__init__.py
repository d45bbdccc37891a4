"""The host's way to a runner: the embedded one, or the gRPC client adapter and what it keeps on the wire."""

from __future__ import annotations

from .grpc_runner import GrpcRunner, parse_address
from .open import open_runner

__all__ = ["GrpcRunner", "open_runner", "parse_address"]
