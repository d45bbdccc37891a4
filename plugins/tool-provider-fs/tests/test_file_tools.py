"""The public file tool family served by the fs provider: every operation, its text, its refusals."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from grpclib.testing import ChannelFor
from tolokaforge_provider_fs.service import FsProvider

from tolokaforge.contracts.tool import CallContext, InvokeRequest, ToolErrorCategory, ToolProviderServiceStub
from tolokaforge.core import beneath

Category = ToolErrorCategory


async def _call(workspace: Path, operation: str, **arguments: Any) -> tuple[dict[str, Any], str]:
    """The operation's (structured output, text); a ToolError fails the test."""
    answer = await _answer(workspace, operation, arguments)
    assert not isinstance(answer, ToolErrorCategory), (operation, arguments, answer)
    return answer


async def _refused(workspace: Path, operation: str, **arguments: Any) -> ToolErrorCategory:
    answer = await _answer(workspace, operation, arguments)
    assert isinstance(answer, ToolErrorCategory), (operation, arguments, answer)
    return answer


async def _answer(
    workspace: Path, operation: str, arguments: dict[str, Any]
) -> tuple[dict[str, Any], str] | ToolErrorCategory:
    async with ChannelFor([FsProvider(1)]) as channel:
        request = InvokeRequest(
            operation=operation,
            arguments_json=json.dumps(arguments),
            call_context=CallContext(trial_id="t", call_id="c", working_directory=str(workspace), attempt=1),
        )
        [event] = [e async for e in ToolProviderServiceStub(channel).invoke(request)]
    if event.error is not None:
        assert event.error.message
        return event.error.category
    assert event.result is not None
    return json.loads(event.result.output_json), event.result.text


@pytest.fixture(params=["openat2", "fallback"])
def resolution(request: pytest.FixtureRequest) -> Generator[str]:
    """Through openat2, and through the component walk a kernel without it gets."""
    if request.param == "fallback":
        with beneath.walking_only():
            yield "fallback"
    else:
        yield "openat2"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src" / "sub").mkdir(parents=True)
    (root / "src" / "hello.py").write_text("def hello():\n    print('hi')\n")
    (root / "src" / "sub" / "deep.py").write_text("import os\n")
    (root / "world.txt").write_text("hello world\r\ngoodbye world\n")
    (tmp_path / "secret.txt").write_text("outside")
    return root


async def test_read_file_slices_lines_and_numbers_them(workspace: Path) -> None:
    (workspace / "data.txt").write_text("L1\nL2\nL3\nL4\nL5\n")
    output, text = await _call(workspace, "read_file", path="data.txt", offset=2, limit=2)
    assert text == "L2\nL3\n" == output["content"]
    assert (output["start_line"], output["lines_returned"], output["total_lines"]) == (2, 2, 5)
    _, text = await _call(workspace, "read_file", path="data.txt", offset=4, with_line_numbers=True)
    assert text == "     4\tL4\n     5\tL5\n"
    output, text = await _call(workspace, "read_file", path="data.txt", offset=100)
    assert (text, output["lines_returned"]) == ("", 0)
    # Text mode, as the public tool reads: \r\n arrives as \n.
    _, text = await _call(workspace, "read_file", path="world.txt")
    assert text == "hello world\ngoodbye world\n"


async def test_absolute_paths_under_the_agent_visible_root_are_the_workspace(workspace: Path) -> None:
    _, text = await _call(workspace, "read_file", path="/env/fs/agent-visible/src/sub/deep.py")
    assert text == "import os\n"
    await _call(workspace, "write_file", path="/work/out/report.md", content="done")
    assert (workspace / "out" / "report.md").read_text() == "done"
    _, text = await _call(workspace, "list_dir", path="/env/fs/agent-visible")
    assert text == "dir: out\ndir: src\nfile: world.txt"
    _, text = await _call(workspace, "list_dir", path=" /env/fs/agent-visible/out/ ")
    assert text == "file: report.md"


async def test_append_creates_then_appends(workspace: Path) -> None:
    output, text = await _call(workspace, "append_file", path="logs/run.log", content="one\n")
    assert (output, text) == ({"path": "logs/run.log", "bytes_written": 4}, "Appended to logs/run.log")
    await _call(workspace, "append_file", path="logs/run.log", content="two\n")
    assert (workspace / "logs" / "run.log").read_text() == "one\ntwo\n"


async def test_replace_lines_needs_exactly_one_occurrence(workspace: Path) -> None:
    _, text = await _call(workspace, "replace_lines", path="src/hello.py", old_text="'hi'", new_text="'hey'")
    assert text == "Replaced text in src/hello.py"
    assert (workspace / "src" / "hello.py").read_text() == "def hello():\n    print('hey')\n"
    assert await _refused(workspace, "replace_lines", path="world.txt", old_text="xyz", new_text="1") == (
        Category.EXECUTION_FAILED
    )
    assert await _refused(workspace, "replace_lines", path="world.txt", old_text="world", new_text="1") == (
        Category.EXECUTION_FAILED
    )
    assert await _refused(workspace, "replace_lines", path="world.txt", old_text="", new_text="1") == (
        Category.INVALID_ARGUMENTS
    )
    assert await _refused(workspace, "replace_lines", path="nope.txt", old_text="a", new_text="b") == (
        Category.NOT_FOUND
    )
    assert sorted(p.name for p in workspace.iterdir()) == ["src", "world.txt"]  # no temporary left behind


async def test_copy_files_and_folders(workspace: Path) -> None:
    _, text = await _call(workspace, "copy_file", source="world.txt", destination="backup/world.txt")
    assert text == "Copied world.txt -> backup/world.txt"
    assert (workspace / "backup" / "world.txt").read_bytes() == (workspace / "world.txt").read_bytes()
    await _call(workspace, "copy_file", source="src/hello.py", destination="backup")  # into the folder
    assert (workspace / "backup" / "hello.py").exists()
    await _call(workspace, "copy_file", source="src", destination="src_copy")
    assert (workspace / "src_copy" / "sub" / "deep.py").read_text() == "import os\n"
    assert (
        await _refused(workspace, "copy_file", source="src", destination="src_copy")
        == Category.EXECUTION_FAILED
    )
    assert (
        await _refused(workspace, "copy_file", source="src", destination="src/inner")
        == Category.INVALID_ARGUMENTS
    )
    assert await _refused(workspace, "copy_file", source="world.txt", destination="world.txt") == (
        Category.INVALID_ARGUMENTS
    )
    assert await _refused(workspace, "copy_file", source="missing", destination="x") == Category.NOT_FOUND


async def test_move_renames_and_moves_into_folders(workspace: Path) -> None:
    _, text = await _call(workspace, "move_file", source="world.txt", destination="docs/w.txt")
    assert text == "Moved world.txt -> docs/w.txt"
    assert not (workspace / "world.txt").exists() and (workspace / "docs" / "w.txt").exists()
    await _call(workspace, "move_file", source="docs/w.txt", destination="src")
    assert (workspace / "src" / "w.txt").exists()
    (workspace / "w.txt").write_text("another")
    assert (
        await _refused(workspace, "move_file", source="w.txt", destination="src") == Category.EXECUTION_FAILED
    )
    assert (
        await _refused(workspace, "move_file", source="src", destination="src/sub")
        == Category.INVALID_ARGUMENTS
    )
    assert await _refused(workspace, "move_file", source="gone", destination="x") == Category.NOT_FOUND


async def test_delete_files_and_empty_folders_only(workspace: Path) -> None:
    _, text = await _call(workspace, "delete_file", path="src/sub/deep.py")
    assert text == "Deleted src/sub/deep.py"
    await _call(workspace, "delete_file", path="/env/fs/agent-visible/src/sub")
    assert not (workspace / "src" / "sub").exists()
    assert await _refused(workspace, "delete_file", path="src") == Category.EXECUTION_FAILED  # not empty
    assert await _refused(workspace, "delete_file", path="src/sub") == Category.NOT_FOUND
    assert await _refused(workspace, "delete_file", path=".") == Category.INVALID_ARGUMENTS
    assert (
        await _refused(workspace, "delete_file", path="/env/fs/agent-visible") == Category.INVALID_ARGUMENTS
    )


async def test_grep_by_content_by_name_and_capped(workspace: Path) -> None:
    output, text = await _call(workspace, "grep_workspace", pattern="hello")
    assert text == "src/hello.py:1:def hello():\nworld.txt:1:hello world"
    assert output["matches"] == ["src/hello.py:1:def hello():", "world.txt:1:hello world"]
    _, text = await _call(workspace, "grep_workspace", file_glob="*.py")
    assert text == "src/hello.py\nsrc/sub/deep.py"
    _, text = await _call(workspace, "grep_workspace", pattern="import", path="src/sub")
    assert text == "src/sub/deep.py:1:import os"
    _, text = await _call(workspace, "grep_workspace", pattern="zzz-nothing")
    assert text == "(no matches)"
    (workspace / "many.txt").write_text("x\n" * 500)
    output, text = await _call(workspace, "grep_workspace", pattern="x", file_glob="many.txt")
    assert output["truncated"] and len(output["matches"]) == 200
    assert text.endswith("\n... (truncated at 200 matches)")
    assert await _refused(workspace, "grep_workspace") == Category.INVALID_ARGUMENTS
    assert await _refused(workspace, "grep_workspace", pattern="(") == Category.INVALID_ARGUMENTS
    assert await _refused(workspace, "grep_workspace", pattern="a", path="nowhere") == Category.NOT_FOUND
    assert (
        await _refused(workspace, "grep_workspace", pattern="a", path="world.txt")
        == Category.EXECUTION_FAILED
    )


async def test_binary_and_oversized_files_get_a_clear_error(workspace: Path) -> None:
    (workspace / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    assert await _refused(workspace, "read_file", path="image.png") == Category.EXECUTION_FAILED
    assert await _refused(workspace, "replace_lines", path="image.png", old_text="P", new_text="Q") == (
        Category.EXECUTION_FAILED
    )
    (workspace / "big.txt").write_text("y" * 2_000_000)
    assert await _refused(workspace, "read_file", path="big.txt") == Category.EXECUTION_FAILED


async def test_arguments_are_checked_against_the_schema(workspace: Path) -> None:
    for operation, arguments in (
        ("read_file", {"path": "world.txt", "offset": 0}),
        ("read_file", {"path": "world.txt", "limit": "3"}),
        ("read_file", {"path": "world.txt", "with_line_numbers": 1}),
        ("read_file", {"file_path": "world.txt"}),
        ("list_dir", {"dir_path": "."}),
        ("list_dir", {}),
        ("append_file", {"path": "a.txt"}),
        ("copy_file", {"source": "world.txt"}),
        ("move_file", {"source": 1, "destination": "x"}),
        ("grep_workspace", {"pattern": "a", "case_insensitive": True}),
    ):
        assert await _refused(workspace, operation, **arguments) == Category.INVALID_ARGUMENTS, arguments


async def test_escapes_and_links_are_refused_by_every_tool(
    resolution: str, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "out_link").symlink_to(tmp_path / "secret.txt")
    (workspace / "out_dir").symlink_to(tmp_path, target_is_directory=True)
    (workspace / "in_link").symlink_to(workspace / "world.txt")
    denied = [
        ("read_file", {"path": "../secret.txt"}),
        ("read_file", {"path": str(tmp_path / "secret.txt")}),
        ("read_file", {"path": "/env/fs/agent-visible/../secret.txt"}),
        ("read_file", {"path": "/env/fs/agent-visiblex/secret.txt"}),
        ("read_file", {"path": "out_link"}),
        ("read_file", {"path": "in_link"}),
        ("write_file", {"path": "out_dir/planted.txt", "content": "x"}),
        ("append_file", {"path": "out_link", "content": "x"}),
        ("list_dir", {"path": "out_dir"}),
        ("replace_lines", {"path": "out_link", "old_text": "outside", "new_text": "pwned"}),
        ("copy_file", {"source": "out_link", "destination": "copied.txt"}),
        ("copy_file", {"source": "out_dir/secret.txt", "destination": "copied.txt"}),
        ("copy_file", {"source": "world.txt", "destination": "out_dir/world.txt"}),
        ("copy_file", {"source": "world.txt", "destination": "/tmp/world.txt"}),
        ("move_file", {"source": "world.txt", "destination": "../world.txt"}),
        ("move_file", {"source": "world.txt", "destination": "out_dir"}),
        ("move_file", {"source": "in_link", "destination": "moved"}),
        ("delete_file", {"path": "out_link"}),
        ("delete_file", {"path": "out_dir/secret.txt"}),
        ("grep_workspace", {"pattern": "outside", "path": "out_dir"}),
        ("grep_workspace", {"pattern": "outside", "path": ".."}),
    ]
    for operation, arguments in denied:
        assert await _refused(workspace, operation, **arguments) == Category.PERMISSION_DENIED, (
            operation,
            arguments,
        )
    assert (tmp_path / "secret.txt").read_text() == "outside"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret.txt", "ws"]
    _, text = await _call(workspace, "list_dir", path=".")
    assert text == "other: in_link\nother: out_dir\nother: out_link\ndir: src\nfile: world.txt"
    # A search lists links as nothing: it never follows one.
    _, text = await _call(workspace, "grep_workspace", pattern="outside|hello world")
    assert text == "world.txt:1:hello world"
    # A folder holding a link is not copied through it.
    (workspace / "src" / "sub" / "escape").symlink_to(tmp_path / "secret.txt")
    assert (
        await _refused(workspace, "copy_file", source="src", destination="copy") == Category.PERMISSION_DENIED
    )


async def test_fifos_are_refused_without_blocking(workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    assert await _refused(workspace, "read_file", path="pipe") == Category.PERMISSION_DENIED
    assert (
        await _refused(workspace, "copy_file", source="pipe", destination="p2") == Category.PERMISSION_DENIED
    )
    assert await _refused(workspace, "append_file", path="pipe", content="x") in (
        Category.PERMISSION_DENIED,
        Category.EXECUTION_FAILED,  # ENXIO: a FIFO with no reader
    )
    _, text = await _call(workspace, "grep_workspace", file_glob="p*")
    assert text == "(no matches)"


async def test_a_folder_swapped_for_a_link_mid_call_never_lets_a_write_out(
    resolution: str, tmp_path: Path
) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    (workspace / "d").mkdir(parents=True)
    (workspace / "src.txt").write_text("data")
    outside.mkdir()
    (workspace / "d.link").symlink_to(outside, target_is_directory=True)
    stop = threading.Event()

    swaps = 0

    def swap() -> None:
        nonlocal swaps
        # The tools create missing folders too, so a step may find its name taken: it is skipped.
        steps = [("d", "d.real"), ("d.link", "d"), ("d", "d.link"), ("d.real", "d")]
        while not stop.is_set():
            for old, new in steps:
                with contextlib.suppress(OSError):
                    os.rename(workspace / old, workspace / new)
                    swaps += 1

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    calls = [
        ("write_file", {"path": "d/w.txt", "content": "x"}),
        ("append_file", {"path": "d/a.txt", "content": "x"}),
        ("copy_file", {"source": "src.txt", "destination": "d/c.txt"}),
        ("move_file", {"source": "d/a.txt", "destination": "d/m.txt"}),
        ("delete_file", {"path": "d/w.txt"}),
        ("replace_lines", {"path": "d/c.txt", "old_text": "data", "new_text": "atad"}),
    ]
    try:
        for index in range(300):
            operation, arguments = calls[index % len(calls)]
            answer = await _answer(workspace, operation, arguments)
            if isinstance(answer, ToolErrorCategory):
                assert answer in (Category.PERMISSION_DENIED, Category.NOT_FOUND, Category.EXECUTION_FAILED)
    finally:
        stop.set()
        swapper.join()
    assert swaps > 0 and list(outside.iterdir()) == []
