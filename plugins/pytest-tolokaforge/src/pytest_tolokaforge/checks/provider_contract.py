"""The tool-provider contract (docs/protocol/tool-providers.md), checked against a provider subprocess.

Per provider: ``describe`` (name, version, the handshake's protocol version, the runner's version) and
``schema`` (operations listed, names unique), plus ``unknown_operation`` (an Invoke of an operation the
provider does not offer ends with a classified ToolError), ``authentication`` (every RPC without the
provider's token, or with another, fails UNAUTHENTICATED) and ``configure_once`` (a second Configure, even
with the token, fails FAILED_PRECONDITION). Per operation: ``declares`` (kind, risk,
consistent ConcurrencySpec, valid input/output JSON Schemas) and ``invalid_arguments`` (arguments the
input schema rejects end with a ToolError of category INVALID_ARGUMENTS). Every ToolError seen must carry
a category other than UNSPECIFIED and PROCESS_CRASHED (the kernel's alone), a message, and -- for
UNKNOWN -- a non-empty details_json object.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any, cast

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from tolokaforge.contracts.tool import OperationSchema, RiskClass, ToolErrorCategory, ToolKind
from tolokaforge.sdk.providers import PROVIDER_PROTOCOL_VERSION

from ..errors import CheckFailure
from ..invalid_args import invalid_arguments
from ..provider import RPCS, InvokeOutcome, ProviderUnderTest, details_object

__all__ = ["OPERATION_CHECKS", "PROVIDER_CHECKS", "OperationCheck", "ProviderCheck"]

ProviderCheck = Callable[[ProviderUnderTest], Coroutine[Any, Any, list[str]]]
OperationCheck = Callable[[ProviderUnderTest, OperationSchema], Coroutine[Any, Any, list[str]]]

NO_SUCH_OPERATION = "tolokaforge_no_such_operation"


def _fail(subject: str, problems: list[str]) -> None:
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        summary = f"{subject}: {problems[0]}{more}"
        if len(problems) == 1:
            raise CheckFailure(summary)
        raise CheckFailure(summary, "\n".join([summary, *(f"  - {problem}" for problem in problems)]))


def _started(provider: ProviderUnderTest) -> None:
    if provider.start_error is not None:
        raise CheckFailure(f"provider {provider.command!r}: {provider.start_error}")


async def describe(provider: ProviderUnderTest) -> list[str]:
    _started(provider)
    if provider.describe_error is not None or provider.described is None:
        raise CheckFailure(f"Describe: {provider.describe_error or 'no answer'}")
    described, handshake = provider.described, provider.handshake
    assert handshake is not None
    problems: list[str] = []
    if not described.name.strip():
        problems.append("no name")
    if not described.version.strip():
        problems.append("no version")
    if described.protocol_version != handshake.protocol_version:
        problems.append(
            f"protocol_version {described.protocol_version} differs from the handshake's "
            f"{handshake.protocol_version}"
        )
    if handshake.protocol_version != PROVIDER_PROTOCOL_VERSION:
        problems.append(
            f"the handshake announces protocol {handshake.protocol_version}; "
            f"the runner speaks {PROVIDER_PROTOCOL_VERSION}"
        )
    _fail("Describe", problems)
    return [provider.configure_error] if provider.configure_error else []


async def schema(provider: ProviderUnderTest) -> list[str]:
    _started(provider)
    if provider.schema_error is not None or provider.schema is None:
        raise CheckFailure(f"GetSchema: {provider.schema_error or 'no answer'}")
    names = [operation.name for operation in provider.schema.operations]
    problems: list[str] = []
    if not names:
        problems.append("no operations")
    if any(not name.strip() for name in names):
        problems.append("an operation without a name")
    duplicates = sorted(name for name, count in Counter(names).items() if count > 1)
    if duplicates:
        problems.append(f"operation names are not unique: {', '.join(duplicates)}")
    _fail("GetSchema", problems)
    return []


async def unknown_operation(provider: ProviderUnderTest) -> list[str]:
    _started(provider)
    outcome = await provider.invoke(NO_SUCH_OPERATION, "{}")
    problems = _error_problems(outcome)
    if outcome.error is None and not problems:
        problems.append("answered with a result instead of a ToolError")
    _fail(f"Invoke of the unknown operation {NO_SUCH_OPERATION!r}", problems)
    return []


WRONG_TOKEN = "tolokaforge-not-the-token-" + "x" * 32


async def authentication(provider: ProviderUnderTest) -> list[str]:
    _started(provider)
    problems: list[str] = []
    for rpc in RPCS:
        for what, authorization in (("no token", None), ("a wrong token", f"Bearer {WRONG_TOKEN}")):
            answer = await provider.answer(rpc, authorization)
            if answer != "UNAUTHENTICATED":
                problems.append(f"{rpc} with {what} answered {answer}, not UNAUTHENTICATED")
    _fail("calls without the provider's token", problems)
    return []


async def configure_once(provider: ProviderUnderTest) -> list[str]:
    _started(provider)
    answer = await provider.answer("Configure", f"Bearer {provider.token}")
    if answer != "FAILED_PRECONDITION":
        raise CheckFailure(
            f"a second Configure (with the token) answered {answer}, not FAILED_PRECONDITION: "
            "a provider takes one Configure, from the runner that started it"
        )
    return []


async def declares(provider: ProviderUnderTest, operation: OperationSchema) -> list[str]:
    problems: list[str] = []
    kind = operation.kind
    if kind not in (ToolKind.RESOURCE, ToolKind.DATA_SOURCE, ToolKind.INTERACTIVE):
        problems.append("kind is UNSPECIFIED (declare resource, data_source or interactive)")
    if operation.risk not in (RiskClass.READ_ONLY, RiskClass.MUTATING, RiskClass.DESTRUCTIVE):
        problems.append("risk is UNSPECIFIED (declare read_only, mutating or destructive)")
    elif kind in (ToolKind.DATA_SOURCE, ToolKind.INTERACTIVE) and operation.risk != RiskClass.READ_ONLY:
        problems.append(f"a {_kind(kind)} operation must declare risk read_only, not {_risk(operation.risk)}")
    concurrency = operation.concurrency
    if concurrency is not None:
        if kind == ToolKind.INTERACTIVE:
            problems.append("an interactive operation must not declare a ConcurrencySpec")
        if concurrency.key_fields and not concurrency.safe:
            problems.append("ConcurrencySpec.key_fields without safe (they only mean something under safe)")
    if operation.terminates_turn and kind != ToolKind.RESOURCE:
        problems.append("terminates_turn on a non-resource operation")
    if operation.default_timeout_seconds is not None and operation.default_timeout_seconds <= 0:
        problems.append(f"default_timeout_seconds {operation.default_timeout_seconds:g} is not positive")
    input_schema, why = _json_schema(operation.input_schema_json)
    if why is not None:
        problems.append(f"input_schema_json {why}")
    elif input_schema is not None:
        if input_schema.get("type") != "object":
            problems.append('input_schema_json must describe an object ("type": "object")')
        properties = cast(dict[str, Any], input_schema.get("properties") or {})
        if concurrency is not None and properties:
            unknown = [key for key in concurrency.key_fields if key not in properties]
            if unknown:
                problems.append(f"ConcurrencySpec.key_fields name undeclared inputs: {', '.join(unknown)}")
    _, why = _json_schema(operation.output_schema_json)
    if why is not None:
        problems.append(f"output_schema_json {why}")
    _fail(f"operation {operation.name!r}", problems)
    notes = [] if operation.input_schema_json else ["no input_schema_json: any object is accepted"]
    return notes


async def invalid_arguments_check(provider: ProviderUnderTest, operation: OperationSchema) -> list[str]:
    input_schema, why = _json_schema(operation.input_schema_json)
    if why is not None:
        raise CheckFailure(
            f"operation {operation.name!r}: input_schema_json {why}; no invalid arguments derived"
        )
    derived = invalid_arguments(input_schema or {"type": "object"})
    if derived is None:
        return [
            f"operation {operation.name!r}: its input schema admits every object; nothing invalid to send"
        ]
    arguments, how = derived
    outcome = await provider.invoke(operation.name, json.dumps(arguments))
    subject = f"operation {operation.name!r} with {json.dumps(arguments)} ({how})"
    problems = _error_problems(outcome)
    if not problems:
        if outcome.error is None:
            problems.append("accepted arguments its input_schema_json rejects: answered with a result")
        elif outcome.error.category != ToolErrorCategory.INVALID_ARGUMENTS:
            problems.append(
                f"answered with category {_category(outcome.error.category)}, not INVALID_ARGUMENTS "
                f"({outcome.error.message!r})"
            )
    _fail(subject, problems)
    return []


def _error_problems(outcome: InvokeOutcome) -> list[str]:
    """What is wrong with how an Invoke stream ended, judged as a failure the provider classifies."""
    if outcome.transport is not None:
        return [f"no ToolError in the Invoke stream: {outcome.transport}"]
    terminal = [event for event in outcome.events if event in ("result", "error")]
    if not terminal:
        return ["the Invoke stream ended without a terminal event (result or error)"]
    problems: list[str] = []
    if len(terminal) > 1 or outcome.events[-1] not in ("result", "error"):
        problems.append(f"events after the terminal one: {', '.join(outcome.events)}")
    error = outcome.error
    if error is None:
        return problems
    category = error.category
    if category == ToolErrorCategory.UNSPECIFIED:
        problems.append("a ToolError without a category (UNSPECIFIED)")
    elif category == ToolErrorCategory.PROCESS_CRASHED:
        problems.append("a ToolError of category PROCESS_CRASHED, which only the kernel may synthesize")
    elif category == ToolErrorCategory.UNKNOWN and details_object(error.details_json) is None:
        problems.append(
            f"a ToolError of category UNKNOWN without details: details_json must carry the raw underlying "
            f"error as a non-empty JSON object (got {error.details_json!r}; message {error.message!r})"
        )
    if not error.message.strip():
        problems.append(f"a ToolError of category {_category(category)} without a message")
    return problems


def _json_schema(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """(the schema, None) when ``text`` is empty or a valid JSON Schema object, else (None, why not)."""
    if not text:
        return None, None
    try:
        value: Any = json.loads(text)
    except json.JSONDecodeError as error:
        return None, f"is not JSON: {error}"
    if not isinstance(value, dict):
        return None, "is not a JSON object"
    schema = cast(dict[str, Any], value)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        return None, f"is not a valid JSON Schema: {error.message}"
    return schema, None


def _category(value: int) -> str:
    try:
        return ToolErrorCategory(value).name
    except ValueError:
        return str(value)


def _kind(value: int) -> str:
    try:
        return ToolKind(value).name.lower()
    except ValueError:
        return str(value)


def _risk(value: int) -> str:
    try:
        return RiskClass(value).name.lower()
    except ValueError:
        return str(value)


PROVIDER_CHECKS: dict[str, ProviderCheck] = {
    "describe": describe,
    "schema": schema,
    "unknown_operation": unknown_operation,
    "authentication": authentication,
    "configure_once": configure_once,
}
OPERATION_CHECKS: dict[str, OperationCheck] = {
    "declares": declares,
    "invalid_arguments": invalid_arguments_check,
}
