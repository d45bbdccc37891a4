"""The compiled fast validator and the reference jsonschema validator reach the same verdicts; so does
the patch-request shortcut (patch_check.py) and the compiled validator.

Bodies are valid seeds for each request schema, mutated by hypothesis: a sub-value replaced by any
JSON value, a key dropped, a key added, a string given a trailing newline. Whatever the mutation,
the two validators must agree, because the service trusts the fast one's verdict. The reference here
is jsonschema with JSON Schema's ``pattern`` semantics restored (``$`` is the end of the string, as in
ECMA-262, not "before a final newline" as in Python's ``re``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastjsonschema  # pyright: ignore[reportMissingTypeStubs]
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tolokaforge.db.errors import ValidationFailedError
from tolokaforge.db.patch_check import PatchCheck
from tolokaforge.db.spec import ApiSpec

SEEDS: dict[str, list[Any]] = {
    "InitRequest": [
        {
            "tables": {"orders": [{"id": "O-1", "total": 1.5}], "users": {"U-1": {"name": "Zoë"}}, "log": []},
            "schemas": [{"table_name": "orders", "record_schema": {"type": "object"}}],
            "unstable_fields": [{"table_name": "orders", "field_name": "ts", "reason": "timestamp"}],
        }
    ],
    "StatePatchRequest": [
        {
            "changes": [
                {
                    "table_name": "orders",
                    "operations": [
                        {"op": "insert", "record": {"id": "O-2"}, "index": 0},
                        {"op": "update", "where": {"id": "O-1"}, "set": {"total": 2}, "unset": ["x"]},
                        {"op": "delete", "key": "K-1"},
                        {"op": "upsert", "index": 3, "record": {"id": "O-3"}},
                    ],
                }
            ],
            "expected_version": 4,
        }
    ],
    "TablePatchRequest": [
        {"operations": [{"op": "upsert", "key": "U-1", "record": {"a": [1, {"b": None}]}}]}
    ],
}

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
    | st.sampled_from(["insert", "update", "delete", "upsert", "orders", "", "a\n", "0"]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    paths = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():  # pyright: ignore[reportUnknownVariableType]
            paths += _paths(item, (*prefix, key))  # pyright: ignore[reportUnknownArgumentType]
    elif isinstance(value, list):
        for index, item in enumerate(value):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
            paths += _paths(item, (*prefix, index))
    return paths


@st.composite
def mutated(draw: st.DrawFn, name: str) -> Any:
    body = copy.deepcopy(draw(st.sampled_from(SEEDS[name])))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(body)))
        if not path:
            continue
        parent: Any = body
        for part in path[:-1]:
            parent = parent[part]
        kind = draw(st.sampled_from(["replace", "drop", "add", "newline"]))
        if kind == "replace":
            parent[path[-1]] = draw(JSON)
        elif kind == "drop" and isinstance(parent, dict):
            del parent[path[-1]]
        elif kind == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=6))] = draw(JSON)
        elif kind == "newline" and isinstance(parent[path[-1]], str):
            parent[path[-1]] += "\n"
    return body


def _ecma_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not isinstance(instance, str):
        return
    if re.search(pattern, instance) is None or (pattern.endswith("$") and instance.endswith("\n")):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


ExactPatterns: Any = validators.extend(Draft202012Validator, {"pattern": _ecma_pattern})  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]


@pytest.fixture(scope="module")
def reference() -> Any:
    spec = ApiSpec.load()
    resource: Resource[Any] = Resource(contents=spec.document, specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource("urn:ref", resource)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType, reportUnknownVariableType]
    return spec, registry


@pytest.mark.parametrize("name", sorted(SEEDS))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fast_and_reference_verdicts_agree(reference: Any, name: str, data: st.DataObject) -> None:
    spec, registry = reference
    body = data.draw(mutated(name))
    exact = ExactPatterns({"$ref": f"urn:ref#/components/schemas/{name}"}, registry=registry)
    expected = exact.is_valid(body)  # pyright: ignore[reportUnknownMemberType]
    try:
        spec.fast_validator(name)(body)
        fast = True
    except fastjsonschema.JsonSchemaException:  # pyright: ignore[reportUnknownMemberType]
        fast = False
    assert fast == expected, body


def test_seeds_are_valid_and_refusals_name_the_place() -> None:
    spec = ApiSpec.load()
    for name, seeds in SEEDS.items():
        for seed in seeds:
            spec.validate(name, seed)
    with pytest.raises(ValidationFailedError, match="operations"):
        spec.validate("TablePatchRequest", {"operations": [{"op": "insert"}]})
    with pytest.raises(ValidationFailedError):  # "$" is the end of the string, not before a newline
        spec.validate("TableChange", {"table_name": "orders\n", "operations": [{"op": "delete", "index": 0}]})


PATCH_REQUESTS = ("StatePatchRequest", "TablePatchRequest")


def _fast_accepts(spec: ApiSpec, name: str, body: Any) -> bool:
    try:
        spec.fast_validator(name)(body)
    except fastjsonschema.JsonSchemaException:  # pyright: ignore[reportUnknownMemberType]
        return False
    return True


@pytest.fixture(scope="module")
def patch_check() -> PatchCheck:
    return PatchCheck(ApiSpec.load())


@pytest.mark.parametrize("name", PATCH_REQUESTS)
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_patch_shortcut_agrees_with_the_full_validation(
    patch_check: PatchCheck, name: str, data: st.DataObject
) -> None:
    body = data.draw(mutated(name))
    spec = ApiSpec.load()
    assert patch_check._accepts(name, body) == _fast_accepts(spec, name, body), body  # pyright: ignore[reportPrivateUsage]


def test_valid_requests_take_the_shortcut_and_refusals_name_the_place(patch_check: PatchCheck) -> None:
    body: dict[str, Any] = {
        "changes": [{"table_name": "orders", "operations": [{"op": "upsert", "index": 0, "record": {}}]}]
    }
    assert patch_check._accepts("StatePatchRequest", body)  # pyright: ignore[reportPrivateUsage]
    patch_check.validate("StatePatchRequest", body)
    with pytest.raises(ValidationFailedError, match="operations"):
        patch_check.validate("TablePatchRequest", {"operations": [{"op": "insert"}]})
    with pytest.raises(ValidationFailedError):
        patch_check.validate(
            "StatePatchRequest", {"changes": [{"table_name": "t", "operations": [{"op": "drop"}]}]}
        )


def test_operations_not_told_apart_by_op_turn_the_shortcut_off(tmp_path: Path) -> None:
    document = copy.deepcopy(ApiSpec.load().document)
    # A contract where deletes may also be written as inserts: "op" alone does not say which schema applies.
    document["components"]["schemas"]["DeleteOperation"]["properties"]["op"] = {"enum": ["delete", "insert"]}
    path = tmp_path / "db-service.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    check = PatchCheck(ApiSpec.load(path))
    body = {"operations": [{"op": "delete", "index": 0}]}
    assert not check._accepts("TablePatchRequest", body)  # pyright: ignore[reportPrivateUsage]
    check.validate("TablePatchRequest", body)  # the full validation still decides
    assert PatchCheck(ApiSpec.load())._accepts("TablePatchRequest", body)  # pyright: ignore[reportPrivateUsage]
