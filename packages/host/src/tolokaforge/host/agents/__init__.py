"""Agents behind one small interface (:class:`Agent`), one module per kind: golden, scripted, llm."""

from __future__ import annotations

from .base import Agent, AgentFactory
from .golden import GoldenAgent, GoldenAgentFactory
from .llm import LLMAgent, LLMAgentFactory
from .scripted import ScriptedAgent, ScriptedAgentFactory, load_script

__all__ = [
    "Agent",
    "AgentFactory",
    "GoldenAgent",
    "GoldenAgentFactory",
    "LLMAgent",
    "LLMAgentFactory",
    "ScriptedAgent",
    "ScriptedAgentFactory",
    "load_script",
]
