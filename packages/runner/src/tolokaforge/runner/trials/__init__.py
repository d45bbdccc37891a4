"""Trials the runner holds: registration, the task cache, each trial's context and workspace."""
