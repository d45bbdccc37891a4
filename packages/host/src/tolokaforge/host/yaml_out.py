"""A block-style YAML writer for result files, for plain data: dict, list, str, int, float, bool, None.

Result files are written once per trial, so their serialiser is on the hot path. PyYAML's dumper
builds a node graph in Python before its C emitter runs, a few milliseconds per trajectory; this
writer goes straight to text, several times faster. It is deliberately conservative: a string is
written plain only when a YAML 1.1 reader (``CSafeLoader`` reads every file back) can take it for
nothing but that string, multi-line text goes in literal blocks so the file reads like the text, and
every other string is double-quoted with escapes. Anything outside that subset (another type, a
non-string or very long key) raises :class:`Unsupported`, and the caller hands the document to PyYAML.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, cast

__all__ = ["Unsupported", "dump"]


class Unsupported(Exception):
    """The document holds something this writer leaves to PyYAML."""


# A plain scalar starts with a letter (no YAML indicator, nothing a resolver reads as a number, date
# or special float) and holds nothing that would end it or open a comment: a colon only before a
# non-space, a space only before another character that is neither a space nor '#'. The words YAML 1.1
# reads as bools or null are excluded up front.
_PLAIN = re.compile(
    r"(?!(?:y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF"
    r"|null|Null|NULL)$)"
    r"[A-Za-z](?:[A-Za-z0-9_./()'@$%+=,;!?<>\[\]{}*&|-]|:(?=[^ ])| (?=[^ #]))*"
)
# What a YAML reader refuses to see raw (PyYAML's reader accepts only this printable set) ...
_NON_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# ... and what it would read as a line break.
_EXTRA_BREAKS = re.compile("[\x85\u2028\u2029]")
_SINGLE_QUOTABLE = re.compile("[\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]+")
_MAX_KEY = 128
"""Longer keys go to PyYAML: an implicit YAML key may not exceed 1024 characters, escapes included."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xD800 <= code <= 0xDFFF:  # a lone surrogate: libyaml refuses its escape, PyYAML decides
        raise Unsupported("a lone surrogate")
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _quoted(value: str) -> str:
    # JSON's string escapes are all YAML double-quoted escapes; what JSON leaves raw and YAML refuses
    # (C1 controls, surrogates, U+FFFE/F) or reads as a line break (NEL, LS, PS) is escaped as well.
    text = json.dumps(value, ensure_ascii=False)
    text = _NON_PRINTABLE.sub(_escape, text)
    return _EXTRA_BREAKS.sub(_escape, text)


def _literal_fits(value: str) -> bool:
    """Multi-line text a literal block carries exactly: no tab, CR, control, blank-ended or leading empty line."""
    if value[0] == "\n" or "\r" in value or "\t" in value:
        return False
    if _NON_PRINTABLE.search(value) or _EXTRA_BREAKS.search(value):
        return False
    return all(not line or line[-1] != " " for line in value.split("\n"))


def _literal(value: str, indent: str) -> str:
    body = value.rstrip("\n")
    trailing = len(value) - len(body)
    chomp = "-" if trailing == 0 else ("" if trailing == 1 else "+")
    # An explicit indentation indicator when the text itself starts with spaces.
    header = "|" + ("2" if body[0] == " " else "") + chomp
    inner = indent + "  "
    lines = "\n".join(inner + line if line else "" for line in body.split("\n"))
    return f"{header}\n{lines}" + "\n" * max(trailing, 1)


def _float(value: float) -> str:
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value).lower()
    if "." not in text and "e" in text:  # YAML 1.1 reads 1e-05 as a string and 1.0e-05 as a float
        text = text.replace("e", ".0e", 1)
    return text


def _render_string(value: str) -> str:
    if not value:
        return "''"
    if _PLAIN.fullmatch(value):
        return value
    # Single quotes keep JSON and quotes legible; they escape nothing, so only printable one-liners.
    if _SINGLE_QUOTABLE.fullmatch(value) and not _EXTRA_BREAKS.search(value):
        return "'" + value.replace("'", "''") + "'"
    return _quoted(value)


# Keys and short values repeat across a run's files (role, status, tool and field names): their
# renderings are kept, up to a bound, rather than matched again. Only the event loop's thread writes.
_RENDERED: dict[str, str] = {}
_RENDERED_MAX = 8192
_SHORT = 64


def _string(value: str) -> str:
    text = _RENDERED.get(value)
    if text is None:
        text = _render_string(value)
        if len(value) <= _SHORT and len(_RENDERED) < _RENDERED_MAX:
            _RENDERED[value] = text
    return text


def _other(value: Any) -> str:
    """A scalar that is not a string; :class:`Unsupported` for anything that is not plain data."""
    if value is None:
        return "null"
    kind = type(cast(object, value))
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if kind is float:
        return _float(value)
    raise Unsupported(f"a {kind.__name__} value")


def _key(key: Any) -> str:
    if type(key) is not str or len(key) > _MAX_KEY:
        raise Unsupported(f"the key {key!r}")
    return _string(key)


def _value(value: Any, indent: str, out: list[str]) -> None:
    """Append what follows ``key:`` or ``-`` for ``value``, its collection at column ``len(indent)``."""
    kind = type(cast(object, value))
    if kind is str:
        if "\n" in value and _literal_fits(value):
            out.append(" " + _literal(value, indent))
        else:
            out.append(" " + _string(value) + "\n")
    elif kind is dict:
        if value:
            out.append("\n")
            _mapping(cast(dict[Any, Any], value), indent + "  ", out)
        else:
            out.append(" {}\n")
    elif kind is list:
        if value:
            out.append("\n")
            _sequence(cast(list[Any], value), indent + "  ", out)
        else:
            out.append(" []\n")
    else:
        out.append(" " + _other(value) + "\n")


def _mapping(mapping: dict[Any, Any], indent: str, out: list[str], first: str | None = None) -> None:
    """``first`` replaces the first key's indentation (``- `` when the mapping is a list item)."""
    for key, value in mapping.items():
        out.append((indent if first is None else first) + _key(key) + ":")
        first = None
        _value(value, indent, out)


def _sequence(items: list[Any], indent: str, out: list[str]) -> None:
    for item in items:
        if type(item) is dict and item:
            _mapping(cast(dict[Any, Any], item), indent + "  ", out, first=indent + "- ")
        else:
            out.append(indent + "-")
            _value(item, indent, out)


def dump(data: dict[str, Any]) -> str:
    """``data`` as one block-style YAML document."""
    if not data:
        return "{}\n"
    out: list[str] = []
    _mapping(data, "", out)
    return "".join(out)
