"""A trial's screenshots as the report's filmstrip: one frame per image attachment, in call order.

Read from the trajectory's tool messages (their ``attachments`` references, results/attachments.py).
Each frame points at its image by a path relative to the run folder (the page adds the way from itself
to the run folder), jumps to its tool message in the transcript, and is captioned with the call's
position in ``tool_calls`` and the page it shows: the observation's ``URL`` line when it has one, else
its first line. A reference that is not an attachment's name (a hand-edited file) is left out: the page
never points anywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import quote

from ..results.attachments import is_attachment_path

__all__ = ["CAPTION_CHARS", "Frame", "attachment_refs", "filmstrip", "message_anchor"]

CAPTION_CHARS = 90
"""The most characters of an observation a caption shows."""


@dataclass(frozen=True)
class Frame:
    src: str
    """The image, relative to the run folder (URL-quoted)."""
    call_index: int | None
    """The call's position in the trajectory's ``tool_calls`` (None when no call has its id)."""
    caption: str
    target: str
    """The id of its tool message in the page."""
    label: str


def message_anchor(trial_anchor: str, position: int) -> str:
    return f"{trial_anchor}-msg-{position}"


def attachment_refs(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's attachment references whose paths are attachments' names (others are left out)."""
    raw = message.get("attachments")
    if not isinstance(raw, list):
        return []
    refs = [cast(dict[str, Any], item) for item in cast(list[Any], raw) if isinstance(item, dict)]
    return [ref for ref in refs if isinstance(ref.get("path"), str) and is_attachment_path(ref["path"])]


def _caption(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    chosen = next((line for line in lines if line.lower().startswith("url")), lines[0] if lines else "")
    return chosen if len(chosen) <= CAPTION_CHARS else chosen[: CAPTION_CHARS - 1] + "…"


def trial_folder(task_id: str, trial_index: int) -> str:
    """The trial's folder relative to the run folder, URL-quoted, ending in ``/``."""
    return f"trials/{quote(task_id, safe='')}/{trial_index}/"


def filmstrip(trajectory: dict[str, Any], trial_anchor: str, folder: str) -> list[Frame]:
    """The trial's image attachments in call order; ``folder``: :func:`trial_folder`."""
    calls = cast(list[Any], trajectory.get("tool_calls") or [])
    index_of = {
        str(cast(dict[str, Any], call).get("call_id")): position
        for position, call in enumerate(calls)
        if isinstance(call, dict)
    }
    frames: list[Frame] = []
    messages = cast(list[Any], trajectory.get("messages") or [])
    for position, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        message = cast(dict[str, Any], message)
        for ref in attachment_refs(message):
            if not str(ref.get("media_type") or "").startswith("image/"):
                continue
            frames.append(
                Frame(
                    src=folder + quote(ref["path"]),
                    call_index=index_of.get(str(message.get("tool_call_id"))),
                    caption=_caption(str(message.get("content") or "")),
                    target=message_anchor(trial_anchor, position),
                    label=str(ref.get("label") or ""),
                )
            )
    frames.sort(key=lambda frame: (frame.call_index is None, frame.call_index or 0))
    return frames
