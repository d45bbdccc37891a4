"""Tolokaforge DB Service: per-trial table state (memory and PostgreSQL stores), its ASGI app and clients."""
