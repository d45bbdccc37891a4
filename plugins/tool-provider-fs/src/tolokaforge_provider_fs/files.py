"""Operations on one text file: read, write, append and replace a span, beneath the workspace.

Every open goes through :mod:`tolokaforge.core.beneath` relative to the workspace's descriptor (no
symlink followed, nothing outside reached); a FIFO or device is refused before it can block. Text is
UTF-8: a file that is not is refused with a clear error rather than shown as replacement characters.
``read_file`` and ``replace_lines`` read lines as Python's text mode does (``\\r\\n`` and ``\\r`` become
``\\n``), which is what the public tools do; ``read`` returns the bytes' text as they are.
"""

from __future__ import annotations

import errno
import io
import os
import secrets
import stat
from typing import Any

from tolokaforge.contracts.tool import ToolErrorCategory
from tolokaforge.core.beneath import NotARegularFile, makedirs_beneath, open_beneath, read_beneath

from .paths import Refusal, classify, in_workspace, parent_and_name
from .schema import Outcome

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_TEXT_BYTES",
    "append_file",
    "read",
    "read_file",
    "replace_lines",
    "write",
    "write_file",
]

MAX_TEXT_BYTES = 1024 * 1024
"""The most text one read gives the model (``read``'s whole file; ``read_file``'s slice)."""
MAX_FILE_BYTES = 16 * 1024 * 1024
"""The largest file ``read_file`` slices or ``replace_lines`` edits."""

_O_PATH: int = getattr(os, "O_PATH", 0)
# O_NONBLOCK: a FIFO without a reader fails at once instead of hanging the call (no effect on files).
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY


def read(root: int, arguments: dict[str, Any]) -> Outcome:
    written = str(arguments["path"])
    data = _read_bytes(root, written, MAX_TEXT_BYTES)
    return Outcome({"path": written, "content": data.decode("utf-8", errors="replace")})


def write(root: int, arguments: dict[str, Any]) -> Outcome:
    written = str(arguments["path"])
    count = _write_bytes(root, written, str(arguments["content"]).encode("utf-8"), os.O_TRUNC)
    return Outcome({"path": written, "bytes_written": count})


def read_file(root: int, arguments: dict[str, Any]) -> Outcome:
    written = str(arguments["path"])
    lines = _text_lines(root, written)
    offset = int(arguments.get("offset", 1))
    start = offset - 1
    limit: int | None = arguments.get("limit")
    chosen = lines[start:] if limit is None else lines[start : start + limit]
    if arguments.get("with_line_numbers", False):
        content = "".join(f"{number:>6}\t{line}" for number, line in enumerate(chosen, start=offset))
    else:
        content = "".join(chosen)
    if len(content.encode("utf-8")) > MAX_TEXT_BYTES:
        raise Refusal(
            ToolErrorCategory.EXECUTION_FAILED,
            f"{written!r}: the text asked for is over {MAX_TEXT_BYTES} bytes; read it in slices "
            "with offset and limit",
        )
    output = {
        "path": written,
        "content": content,
        "total_lines": len(lines),
        "start_line": offset,
        "lines_returned": len(chosen),
    }
    return Outcome(output, content)


def write_file(root: int, arguments: dict[str, Any]) -> Outcome:
    outcome = write(root, arguments)
    return Outcome(outcome.output, f"File written successfully: {arguments['path']}")


def append_file(root: int, arguments: dict[str, Any]) -> Outcome:
    written = str(arguments["path"])
    count = _write_bytes(root, written, str(arguments["content"]).encode("utf-8"), os.O_APPEND)
    return Outcome({"path": written, "bytes_written": count}, f"Appended to {written}")


def replace_lines(root: int, arguments: dict[str, Any]) -> Outcome:
    written = str(arguments["path"])
    old, new = str(arguments["old_text"]), str(arguments["new_text"])
    text = "".join(_text_lines(root, written))
    count = text.count(old)
    if count != 1:
        why = (
            "old_text not found in the file"
            if count == 0
            else f"old_text occurs {count} times; it must be unique"
        )
        raise Refusal(ToolErrorCategory.EXECUTION_FAILED, f"{written!r}: {why}")
    data = text.replace(old, new, 1).encode("utf-8")
    _replace_whole(root, written, data)
    return Outcome({"path": written, "bytes_written": len(data)}, f"Replaced text in {written}")


def _read_bytes(root: int, written: str, limit: int) -> bytes:
    try:
        data, more = read_beneath(root, in_workspace(written), limit)
    except (OSError, ValueError) as error:
        raise classify(written, error) from error
    if more:
        raise Refusal(ToolErrorCategory.EXECUTION_FAILED, f"{written!r} is larger than {limit} bytes")
    return data


def _text_lines(root: int, written: str) -> list[str]:
    data = _read_bytes(root, written, MAX_FILE_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise classify(written, error) from error
    return io.StringIO(text, newline=None).readlines()


def _write_bytes(root: int, written: str, data: bytes, mode_flag: int) -> int:
    relative = in_workspace(written)
    try:
        folder, _ = parent_and_name(relative)
        makedirs_beneath(root, folder)
        fd = open_beneath(root, relative, _WRITE_FLAGS | mode_flag)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise NotARegularFile(errno.EPERM, "is not a regular file", relative)
            _write_all(fd, data)
        finally:
            os.close(fd)
    except (OSError, ValueError) as error:
        raise classify(written, error) from error
    return len(data)


def _replace_whole(root: int, written: str, data: bytes) -> None:
    """Write ``data`` to a new file beside ``written`` and rename it over: readers see old or new."""
    try:
        folder, name = parent_and_name(in_workspace(written))
        parent = open_beneath(root, folder, (_O_PATH or os.O_RDONLY) | os.O_DIRECTORY)
        try:
            mode = stat.S_IMODE(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
            temporary = f".{name}.{secrets.token_hex(6)}.tmp"
            # O_EXCL: never opens anything already there, a link included.
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode, dir_fd=parent)
            try:
                _write_all(fd, data)
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
            try:
                # Renaming replaces whatever holds the name now, a link itself included; nothing is followed.
                os.rename(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
            except OSError:
                os.unlink(temporary, dir_fd=parent)
                raise
        finally:
            os.close(parent)
    except (OSError, ValueError) as error:
        raise classify(written, error) from error


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
