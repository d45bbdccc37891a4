"""A hostile pack for the security tests: one tool that runs the python it is given, as pack code does.

Each test sends the attempt it makes (read a secret, signal the runner, escape a namespace) and the
tool answers ``result`` -- whatever the attempt produced -- so the test can assert what was reached.
"""

from __future__ import annotations

import json
from typing import Any


class Attack:
    @staticmethod
    def invoke(data: Any, code: str) -> str:
        scope: dict[str, Any] = {"data": data, "result": None}
        exec(code, scope)
        return json.dumps(scope["result"], default=str)
