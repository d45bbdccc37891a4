"""The ``tolokaforge.tool.v1`` contract: the ToolError taxonomy and the ToolProviderService.

Generated from ``contracts/proto/tolokaforge/tool/v1/``; see docs/protocol/tool-providers.md.
"""

from __future__ import annotations

from ._gen.proto.tolokaforge.tool.v1 import (
    CallContext,
    ConcurrencySpec,
    ConfigureRequest,
    ConfigureResponse,
    DescribeRequest,
    DescribeResponse,
    ExitStatus,
    GetSchemaRequest,
    GetSchemaResponse,
    InvokeRequest,
    InvokeResponse,
    InvokeResult,
    OperationSchema,
    OutputChunk,
    OutputStream,
    Progress,
    RiskClass,
    ToolError,
    ToolErrorCategory,
    ToolKind,
    ToolProviderServiceBase,
    ToolProviderServiceStub,
)

__all__ = [
    "CallContext",
    "ConcurrencySpec",
    "ConfigureRequest",
    "ConfigureResponse",
    "DescribeRequest",
    "DescribeResponse",
    "ExitStatus",
    "GetSchemaRequest",
    "GetSchemaResponse",
    "InvokeRequest",
    "InvokeResponse",
    "InvokeResult",
    "OperationSchema",
    "OutputChunk",
    "OutputStream",
    "Progress",
    "RiskClass",
    "ToolError",
    "ToolErrorCategory",
    "ToolKind",
    "ToolProviderServiceBase",
    "ToolProviderServiceStub",
]
