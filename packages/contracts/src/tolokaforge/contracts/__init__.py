"""Tolokaforge wire contracts, generated from ``contracts/`` at the repository root.

Import from the public façades, never from ``_gen`` (generated, never hand-edited):

- :mod:`tolokaforge.contracts.runner` -- ``tolokaforge.runner.v1``: RunnerService messages, grpclib
  client stub and server base.
- :mod:`tolokaforge.contracts.tool` -- ``tolokaforge.tool.v1``: the ToolError taxonomy and the
  ToolProviderService for out-of-process tool providers.
- :mod:`tolokaforge.contracts.db_api` -- pydantic models of the DB Service HTTP API
  (``contracts/openapi/db-service.yaml``).

Regenerate with ``tools/codegen``.
"""

from __future__ import annotations

__all__: list[str] = []
