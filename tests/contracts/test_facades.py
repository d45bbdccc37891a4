"""The public façades re-export exactly what the generated modules define: nothing missing, nothing extra."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from types import ModuleType

import pytest

from tolokaforge.contracts import db_api, runner, tool


def _generated_names(module: ModuleType) -> set[str]:
    if hasattr(module, "__all__"):
        return set(module.__all__)
    return {
        name
        for name, obj in vars(module).items()
        if inspect.isclass(obj)
        and obj.__module__ == module.__name__
        and name.isidentifier()  # pydantic also registers "RootModel[...]" aliases
        and not name.startswith("_")
    }


@pytest.mark.parametrize(
    ("facade", "generated"),
    [
        (runner, "tolokaforge.contracts._gen.proto.tolokaforge.runner.v1"),
        (tool, "tolokaforge.contracts._gen.proto.tolokaforge.tool.v1"),
        (db_api, "tolokaforge.contracts._gen.db_service"),
    ],
    ids=["runner", "tool", "db_api"],
)
def test_facade_exports_every_generated_name(facade: ModuleType, generated: str) -> None:
    source = importlib.import_module(generated)
    assert set(facade.__all__) - FACADE_OWN == _generated_names(source)
    for name in set(facade.__all__) - FACADE_OWN:
        assert getattr(facade, name) is getattr(source, name)


FACADE_OWN = {"openapi_document"}
"""What a facade adds beside the generated names (the db API's shipped OpenAPI document)."""


def test_the_shipped_openapi_document_is_the_contract() -> None:
    shipped = db_api.openapi_document().read_text(encoding="utf-8")
    source = (Path(__file__).resolve().parents[2] / "contracts/openapi/db-service.yaml").read_text(
        encoding="utf-8"
    )
    assert shipped.splitlines()[1:] == source.splitlines()
    assert "DO NOT EDIT" in shipped.splitlines()[0]
