"""Where a trial's attachments (a browser call's screenshots) are kept, and which names are theirs.

Each attachment is one file of the trial's record, ``attachments/<NNNN>-<label>.<ext>`` in the trial's
directory: ``NNNN`` is the position of the call that produced it in the trajectory's ``tool_calls``
(so names sort in call order), ``label`` the attachment's label cut to safe characters, and a second
attachment of one call with the same label gets ``-2``, ``-3``, ... The trajectory's tool message
refers to each by that relative path; the bytes are never inline in YAML.

Standard library only: the record check (records.py) in the result-file helper process uses it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["ATTACHMENTS_DIR", "attachment_path", "is_attachment_path", "media_extension"]

ATTACHMENTS_DIR = "attachments"
"""The trial directory's subdirectory holding its attachments (only when it has some)."""

_EXTENSIONS = {
    "image/jpeg": "jpg",
    "image/png": "png",
    "image/webp": "webp",
    "image/gif": "gif",
    "text/plain": "txt",
    "application/json": "json",
}
_NAME = re.compile(r"\d{4,}-[a-z0-9][a-z0-9_-]{0,63}\.[a-z0-9]{1,5}")
_UNSAFE = re.compile(r"[^a-z0-9_-]+")


def media_extension(media_type: str) -> str:
    """The file extension of a media type (``bin`` for one this module does not know)."""
    return _EXTENSIONS.get(media_type.split(";", 1)[0].strip().lower(), "bin")


def attachment_path(call_index: int, label: str, media_type: str, taken: Iterable[str] = ()) -> str:
    """The path, relative to the trial's directory, of an attachment of call ``call_index``; ``taken``:
    the paths already given (a repeated label gets a number)."""
    stem = _UNSAFE.sub("-", label.lower()).strip("-_")[:48] or "attachment"
    extension = media_extension(media_type)
    used = set(taken)
    candidate, number = f"{ATTACHMENTS_DIR}/{call_index:04d}-{stem}.{extension}", 1
    while candidate in used:
        number += 1
        candidate = f"{ATTACHMENTS_DIR}/{call_index:04d}-{stem}-{number}.{extension}"
    return candidate


def is_attachment_path(path: str) -> bool:
    """Whether ``path`` is a name :func:`attachment_path` gives (nothing else is read or served)."""
    folder, _, name = path.partition("/")
    return folder == ATTACHMENTS_DIR and _NAME.fullmatch(name) is not None
