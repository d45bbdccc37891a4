"""Task ids for τ² tasks: ours must be a file-name-safe token of at most 160 characters, τ²'s need not be.

Airline, retail and mock ids pass through unchanged. A telecom id such as
``[mobile_data_issue]airplane_mode_on|data_mode_off[PERSONA:Easy]`` becomes
``mobile_data_issue.airplane_mode_on.data_mode_off.PERSONA-Easy``: each run of other characters becomes
one ``.``, a ``:`` a ``-``. An id still too long, or one that would collide with another task's,
keeps a prefix and gains a short digest of τ²'s id, so the mapping is one to one; the τ² id is kept
beside ours for the export (``tolokaforge export --format tau2``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

__all__ = ["MAX_TASK_ID", "local_task_ids"]

MAX_TASK_ID = 160
_ALLOWED = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_OTHER = re.compile(r"[^A-Za-z0-9_.:-]+")


def _digest(tau2_id: str) -> str:
    return hashlib.sha256(tau2_id.encode()).hexdigest()[:10]


def _readable(tau2_id: str) -> str:
    if len(tau2_id) <= MAX_TASK_ID and _ALLOWED.match(tau2_id):
        return tau2_id
    token = _OTHER.sub(".", tau2_id).replace(":", "-").strip(".-_")
    return token if token and token[0].isalnum() else f"t{token}"


def _with_digest(token: str, tau2_id: str) -> str:
    suffix = "." + _digest(tau2_id)
    return token[: MAX_TASK_ID - len(suffix)].rstrip(".-_") + suffix


def local_task_ids(tau2_ids: Iterable[str]) -> dict[str, str]:
    """τ² id -> our task id, one to one, for every id of ``tau2_ids`` (a domain's whole task list)."""
    ids = list(dict.fromkeys(tau2_ids))
    readable = {tau2_id: _readable(tau2_id) for tau2_id in ids}
    counts: dict[str, int] = {}
    for token in readable.values():
        counts[token] = counts.get(token, 0) + 1
    mapped: dict[str, str] = {}
    for tau2_id, token in readable.items():
        if len(token) > MAX_TASK_ID or counts[token] > 1:
            token = _with_digest(token, tau2_id)
        mapped[tau2_id] = token
    if len(set(mapped.values())) != len(mapped):  # a digest collision: not expected, never silent
        raise ValueError("τ² task ids map onto colliding local ids")
    return mapped
