"""Simulated users: scripted flows and an LLM user, both ending the conversation with ###STOP###."""

from __future__ import annotations

from .base import STOP_MARKER, UserSimulator, UserSimulatorFactory
from .llm import LLMUser, LLMUserFactory
from .scripted import ScriptedUser, ScriptedUserFactory

__all__ = [
    "STOP_MARKER",
    "LLMUser",
    "LLMUserFactory",
    "ScriptedUser",
    "ScriptedUserFactory",
    "UserSimulator",
    "UserSimulatorFactory",
]
