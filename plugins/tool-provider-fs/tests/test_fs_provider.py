"""The fs provider in process (grpclib.testing.ChannelFor): schema rules and path confinement."""

from __future__ import annotations

import json
from pathlib import Path

from grpclib.testing import ChannelFor
from tolokaforge_provider_fs.service import FsProvider

from tolokaforge.contracts.tool import (
    CallContext,
    GetSchemaRequest,
    InvokeRequest,
    InvokeResponse,
    ToolErrorCategory,
    ToolKind,
    ToolProviderServiceStub,
)


async def _invoke(workspace: Path, operation: str, arguments: dict[str, str]) -> list[InvokeResponse]:
    async with ChannelFor([FsProvider(1)]) as channel:
        stub = ToolProviderServiceStub(channel)
        request = InvokeRequest(
            operation=operation,
            arguments_json=json.dumps(arguments),
            call_context=CallContext(trial_id="t", call_id="c", working_directory=str(workspace), attempt=1),
        )
        return [event async for event in stub.invoke(request)]


async def test_every_operation_declares_kind_risk_and_idempotent() -> None:
    async with ChannelFor([FsProvider(1)]) as channel:
        schema = await ToolProviderServiceStub(channel).get_schema(GetSchemaRequest())
    assert {op.name for op in schema.operations} == {
        "read",
        "write",
        "list",
        "read_file",
        "write_file",
        "list_dir",
    }
    for op in schema.operations:
        assert op.kind != ToolKind.UNSPECIFIED and op.risk != 0 and op.idempotent
        assert not op.process_backed and json.loads(op.output_schema_json)["type"] == "object"


async def test_write_then_read(tmp_path: Path) -> None:
    [written] = await _invoke(tmp_path, "write", {"path": "a/b.txt", "content": "hé"})
    assert written.result is not None and json.loads(written.result.output_json)["bytes_written"] == 3
    [read] = await _invoke(tmp_path, "read", {"path": "a/b.txt"})
    assert read.result is not None and json.loads(read.result.output_json)["content"] == "hé"


async def test_escapes_are_permission_denied_and_missing_files_not_found(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "outside.txt").write_text("no")
    (workspace / "out").symlink_to(tmp_path / "outside.txt")
    (workspace / "in").symlink_to(workspace / "target.txt")
    (workspace / "target.txt").write_text("yes")
    for path in ("../outside.txt", "/etc/passwd", "out", "a/../../outside.txt"):
        [event] = await _invoke(workspace, "read", {"path": path})
        assert event.error is not None and event.error.category == ToolErrorCategory.PERMISSION_DENIED, path
    [inside] = await _invoke(workspace, "read", {"path": "in"})  # a link that stays inside is fine
    assert inside.result is not None
    [missing] = await _invoke(workspace, "read", {"path": "missing.txt"})
    assert missing.error is not None and missing.error.category == ToolErrorCategory.NOT_FOUND
    [bad] = await _invoke(workspace, "write", {"path": "x"})
    assert bad.error is not None and bad.error.category == ToolErrorCategory.INVALID_ARGUMENTS


async def test_the_public_names_are_the_same_operations(tmp_path: Path) -> None:
    [written] = await _invoke(tmp_path, "write_file", {"file_path": "notes/a.txt", "content": "hi"})
    assert written.result is not None and json.loads(written.result.output_json)["bytes_written"] == 2
    [read] = await _invoke(tmp_path, "read_file", {"file_path": "notes/a.txt"})
    assert read.result is not None and json.loads(read.result.output_json)["content"] == "hi"
    [listed] = await _invoke(tmp_path, "list_dir", {"dir_path": "notes"})
    assert listed.result is not None and json.loads(listed.result.output_json)["entries"] == [
        {"name": "a.txt", "type": "file"}
    ]
    [escape] = await _invoke(tmp_path, "read_file", {"file_path": "../x"})
    assert escape.error is not None and escape.error.category == ToolErrorCategory.PERMISSION_DENIED
    [wrong] = await _invoke(tmp_path, "read_file", {"path": "notes/a.txt"})
    assert wrong.error is not None and wrong.error.category == ToolErrorCategory.INVALID_ARGUMENTS
