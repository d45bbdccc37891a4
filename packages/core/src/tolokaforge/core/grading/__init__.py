"""Authoring APIs for a pack's custom checks (checks.py): the interface, helpers, and the harness."""

from __future__ import annotations
