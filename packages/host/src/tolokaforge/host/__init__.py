"""Tolokaforge host: pack loader, agents, user simulator, trial loop, results and the `tolokaforge` CLI."""
