"""The fs provider in process (grpclib.testing.ChannelFor): schema rules and path confinement."""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from collections.abc import Generator
from pathlib import Path

import pytest
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
from tolokaforge.core import beneath


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
        "append_file",
        "copy_file",
        "move_file",
        "delete_file",
        "grep_workspace",
        "replace_lines",
    }
    # Doing it twice is not doing it once: appending, moving, copying a folder, deleting, replacing.
    once_only = {"append_file", "copy_file", "move_file", "delete_file", "replace_lines"}
    for op in schema.operations:
        assert (
            op.kind != ToolKind.UNSPECIFIED and op.risk != 0 and op.idempotent == (op.name not in once_only)
        )
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
    # A symlink is never followed, even one that stays inside: the link could be swapped at any time.
    for path in ("../outside.txt", "/etc/passwd", "out", "a/../../outside.txt", "in"):
        [event] = await _invoke(workspace, "read", {"path": path})
        assert event.error is not None and event.error.category == ToolErrorCategory.PERMISSION_DENIED, path
    [missing] = await _invoke(workspace, "read", {"path": "missing.txt"})
    assert missing.error is not None and missing.error.category == ToolErrorCategory.NOT_FOUND
    [bad] = await _invoke(workspace, "write", {"path": "x"})
    assert bad.error is not None and bad.error.category == ToolErrorCategory.INVALID_ARGUMENTS


async def test_the_public_names_take_path_and_answer_in_text_too(tmp_path: Path) -> None:
    [written] = await _invoke(tmp_path, "write_file", {"path": "notes/a.txt", "content": "hi"})
    assert written.result is not None and json.loads(written.result.output_json)["bytes_written"] == 2
    assert written.result.text == "File written successfully: notes/a.txt"
    [read] = await _invoke(tmp_path, "read_file", {"path": "notes/a.txt"})
    assert read.result is not None and json.loads(read.result.output_json)["content"] == "hi"
    assert read.result.text == "hi"
    [listed] = await _invoke(tmp_path, "list_dir", {"path": "notes"})
    assert listed.result is not None and json.loads(listed.result.output_json) == {
        "path": "notes",
        "dirs": [],
        "files": ["a.txt"],
        "others": [],
    }
    assert listed.result.text == "file: a.txt"
    [escape] = await _invoke(tmp_path, "read_file", {"path": "../x"})
    assert escape.error is not None and escape.error.category == ToolErrorCategory.PERMISSION_DENIED
    # One spelling only: the old argument names are unknown arguments.
    for operation, old in (("read_file", "file_path"), ("list_dir", "dir_path")):
        [wrong] = await _invoke(tmp_path, operation, {old: "notes/a.txt"})
        assert wrong.error is not None and wrong.error.category == ToolErrorCategory.INVALID_ARGUMENTS


@pytest.fixture(params=["openat2", "fallback"])
def resolution(request: pytest.FixtureRequest) -> Generator[str]:
    """Each test through openat2 and through the component walk a kernel without it gets."""
    if request.param == "fallback":
        with beneath.walking_only():
            yield "fallback"
    else:
        yield "openat2"


def _error(events: list[InvokeResponse]) -> ToolErrorCategory | None:
    [event] = events
    return event.error.category if event.error is not None else None


async def test_the_root_of_the_file_system_is_not_a_workspace(resolution: str) -> None:
    for path in ("etc/shadow", "/etc/shadow", "etc/passwd"):
        assert _error(await _invoke(Path("/"), "read", {"path": path})) == ToolErrorCategory.PERMISSION_DENIED
    assert _error(await _invoke(Path("/"), "list", {})) == ToolErrorCategory.PERMISSION_DENIED
    assert (
        _error(await _invoke(Path("//"), "read", {"path": "etc/passwd"}))
        == ToolErrorCategory.PERMISSION_DENIED
    )


async def test_one_process_serves_one_workspace(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x.txt").write_text("b's")
    provider = FsProvider(1)
    async with ChannelFor([provider]) as channel:
        stub = ToolProviderServiceStub(channel)
        [first] = [e async for e in stub.invoke(_request("list", {}, tmp_path / "a"))]
        assert first.result is not None
        [other] = [e async for e in stub.invoke(_request("read", {"path": "x.txt"}, tmp_path / "b"))]
        assert other.error is not None and other.error.category == ToolErrorCategory.PERMISSION_DENIED
        [relative] = [e async for e in stub.invoke(_request("list", {}, Path("a")))]
        assert relative.error is not None and relative.error.category == ToolErrorCategory.PERMISSION_DENIED


async def test_writes_never_go_through_a_link(resolution: str, tmp_path: Path) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (outside / "file.txt").write_text("theirs")
    (workspace / "dir").symlink_to(outside, target_is_directory=True)
    (workspace / "file").symlink_to(outside / "file.txt")
    for path in ("dir/new.txt", "dir/deeper/new.txt", "file"):
        events = await _invoke(workspace, "write", {"path": path, "content": "pwned"})
        assert _error(events) == ToolErrorCategory.PERMISSION_DENIED, path
    assert sorted(p.name for p in outside.iterdir()) == ["file.txt"]
    assert (outside / "file.txt").read_text() == "theirs"
    [listed] = await _invoke(workspace, "list", {})
    assert listed.result is not None
    assert json.loads(listed.result.output_json)["entries"] == [
        {"name": "dir", "type": "other"},
        {"name": "file", "type": "other"},
    ]
    assert _error(await _invoke(workspace, "list", {"path": "dir"})) == ToolErrorCategory.PERMISSION_DENIED


async def test_odd_files_are_refused_without_blocking_or_reading_everything(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    assert _error(await _invoke(tmp_path, "read", {"path": "pipe"})) == ToolErrorCategory.PERMISSION_DENIED
    assert _error(await _invoke(tmp_path, "write", {"path": "pipe", "content": "x"})) in (
        ToolErrorCategory.PERMISSION_DENIED,
        ToolErrorCategory.EXECUTION_FAILED,  # ENXIO: a FIFO with no reader
    )
    (tmp_path / "big.bin").touch()
    os.truncate(tmp_path / "big.bin", 1 << 30)
    [big] = await _invoke(tmp_path, "read", {"path": "big.bin"})
    assert big.error is not None and big.error.category == ToolErrorCategory.EXECUTION_FAILED
    assert "larger than" in big.error.message
    assert _error(await _invoke(tmp_path, "read", {"path": "a\0b"})) == ToolErrorCategory.INVALID_ARGUMENTS


async def test_a_folder_swapped_for_a_link_mid_call_never_leaks_outside_content(
    resolution: str, tmp_path: Path
) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    (workspace / "d").mkdir(parents=True)
    (workspace / "d" / "secret.txt").write_text("inside")
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE")
    (workspace / "d.link").symlink_to(outside, target_is_directory=True)
    stop = threading.Event()
    swaps = 0

    def swap() -> None:
        nonlocal swaps
        # d is a real folder, then a link to outside, then the folder again, as fast as it goes.
        while not stop.is_set():
            os.rename(workspace / "d", workspace / "d.real")
            os.rename(workspace / "d.link", workspace / "d")
            os.rename(workspace / "d", workspace / "d.link")
            os.rename(workspace / "d.real", workspace / "d")
            swaps += 1

    seen: Counter[str] = Counter()
    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    try:
        async with ChannelFor([FsProvider(1)]) as channel:
            stub = ToolProviderServiceStub(channel)
            for _ in range(400):
                request = _request("read", {"path": "d/secret.txt"}, workspace)
                [event] = [e async for e in stub.invoke(request)]
                if event.result is not None:
                    content = json.loads(event.result.output_json)["content"]
                    assert content == "inside", content
                    seen["inside"] += 1
                else:
                    assert event.error is not None
                    assert event.error.category in (
                        ToolErrorCategory.PERMISSION_DENIED,
                        ToolErrorCategory.NOT_FOUND,
                    ), event.error
                    seen[event.error.category.name] += 1
    finally:
        stop.set()
        swapper.join()
    assert swaps > 0 and sum(seen.values()) == 400, (swaps, seen)


def _request(operation: str, arguments: dict[str, str], workspace: Path) -> InvokeRequest:
    return InvokeRequest(
        operation=operation,
        arguments_json=json.dumps(arguments),
        call_context=CallContext(trial_id="t", call_id="c", working_directory=str(workspace), attempt=1),
    )
