"""Tolokaforge Runner: the RunnerService implementation."""
