"""trace_checks load-time errors: each names the constraint and what no trajectory could decide."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from tolokaforge.core.models import GradingConfig, TaskDescription, TraceChecksConfig

PRESENT_READ = "{present: {match: {kind: tool_call, tool: {equals: read}}}}"
BEFORE = (
    "{before: {left: {quantifier: any, match: {kind: tool_call, tool: {equals: read}}},"
    " right: {quantifier: any, match: {kind: tool_call, tool: {equals: write}}}}}"
)


def load(text: str) -> TraceChecksConfig:
    return TraceChecksConfig.model_validate(yaml.safe_load(text))


def constraint(ident: str = "c", require: str = PRESENT_READ, **fields: Any) -> str:
    extra = "".join(f"  {key}: {value}\n" for key, value in fields.items())
    return f"- id: {ident}\n  description: d\n{extra}  require: {require}\n"


def test_a_valid_block_loads_with_defaults() -> None:
    config = load("constraints:\n" + constraint(require=BEFORE))
    (only,) = config.constraints
    assert (only.effective_weight, only.severity, only.missing_passes) == (1.0, "scored", False)
    assert only.require.kind == "before"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("constraints:\n" + constraint("a") + constraint("a"), "trace_checks.a: id 'a' is already used"),
        (
            "alternatives:\n- id: r\n  description: d\n  constraints:\n"
            + constraint("x").replace("- ", "  - ", 1).replace("\n  ", "\n    "),
            "alternatives declares one route",
        ),
        (
            "constraints:\n" + constraint(on_missing="fail"),
            "trace_checks.c: on_missing is declared but the require tree holds present",
        ),
        (
            "constraints:\n"
            + constraint(require=f"{{all_of: [{BEFORE}, {{negate: {PRESENT_READ}}}]}}", on_missing="pass"),
            "trace_checks.c: on_missing is declared but the require tree holds present",
        ),
        (
            "constraints:\n" + constraint(severity="gate", weight=2),
            "trace_checks.c: a gate carries no weight",
        ),
        (
            "constraints:\n" + constraint(require=BEFORE, severity="gate", on_missing="pass"),
            "trace_checks.c: on_missing: pass on a gate",
        ),
        (
            "constraints:\n"
            + constraint(require="{present: {match: {kind: tool_call, tool: {regex: '('}}}}"),
            "trace_checks.c: match.tool: invalid regex '('",
        ),
        (
            "constraints:\n" + constraint(require="{present: {match: {kind: tool_call, tool: {}}}}"),
            "declares no operator",
        ),
        (
            "constraints:\n"
            + constraint(require="{present: {match: {kind: assistant_message, tool: {equals: x}}}}"),
            "trace_checks.c: match: a assistant_message event carries no tool",
        ),
        (
            "constraints:\n"
            + constraint(require=f"{{present: {{match: {{kind: tool_call}}}}, negate: {PRESENT_READ}}}"),
            "holds present, negate",
        ),
        (
            "constraints:\n" + constraint(require="{count: {match: {kind: tool_call}, min: 3, max: 1}}"),
            "min (3) is above max (1)",
        ),
        (
            "constraints:\n" + constraint(require=BEFORE.replace("before", "immediately_before", 1)),
            "trace_checks.c: immediately_before needs among",
        ),
        (
            "constraints:\n"
            + constraint(
                require="{absent_before: {forbidden: {kind: tool_call}, anchor: {quantifier: any, match: {kind: tool_call}}}}"
            ),
            "absent_before.anchor: quantifier 'any'",
        ),
        (
            "constraints:\n"
            + constraint(require="{present: {match: {kind: tool_call, args: {id: {equals_binding: rec}}}}}"),
            "trace_checks.c: references binding 'rec', which the constraint does not bind",
        ),
        (
            "constraints:\n" + constraint(bind="{match: {kind: tool_call}, values: {rec: {field: args.id}}}"),
            "trace_checks.c: bind.values.rec is bound and never referenced",
        ),
        (
            "constraints:\n"
            + constraint(
                require="{present: {match: {kind: tool_call, args: {id: {equals_binding: rec}}}}}",
                bind="{match: {kind: tool_call}, values: {rec: {field: args.id}}, on_unbound: pass}",
                severity="gate",
            ),
            "trace_checks.c: on_unbound: pass on a gate",
        ),
        ("{}", "declares neither constraints nor alternatives"),
    ],
)
def test_load_errors_name_the_constraint(text: str, fragment: str) -> None:
    with pytest.raises(ValidationError) as caught:
        load(text)
    assert fragment in str(caught.value)


def test_route_ids_share_the_id_space_and_gate_only_routes_need_no_scored_sibling() -> None:
    routes = (
        "alternatives:\n"
        "- id: a\n  description: d\n  constraints:\n  - {id: x, description: d, require: "
        + PRESENT_READ
        + "}\n"
        "- id: b\n  description: d\n  constraints:\n  - {id: a, description: d, require: "
        + PRESENT_READ
        + "}\n"
    )
    with pytest.raises(
        ValidationError,
        match=r"trace_checks.b.a: id 'a' is already used by trace_checks.alternatives route 'a'",
    ):
        load(routes)
    gated = routes.replace("{id: a,", "{id: y, severity: gate,")
    with pytest.raises(
        ValidationError, match=r"trace_checks\.b: the route has nothing scored beside routes that do"
    ):
        load(gated)
    all_gates = gated.replace("{id: x,", "{id: x, severity: gate,")
    assert load(all_gates).alternatives is not None


def test_unknown_tool_names_are_refused_with_the_task() -> None:
    grading = GradingConfig.model_validate(
        {
            "combine_method": "weighted",
            "weights": {"trace_checks": 1.0},
            "pass_threshold": 1.0,
            "trace_checks": yaml.safe_load("constraints:\n" + constraint("typo", require=BEFORE)),
        }
    )
    tool = {"name": "read", "source": {"module_path": "tools", "class_name": "Read"}}
    with pytest.raises(
        ValidationError,
        match=r"trace_checks.typo: matches tool 'write', which is not one of the task's tools \(read\)",
    ):
        TaskDescription(task_id="t", agent_tools=[tool], tool_code={"path": "/nowhere"}, grading=grading)  # type: ignore[list-item,arg-type]


def test_the_in_operator_is_accepted_under_its_authored_name() -> None:
    config = load(
        "constraints:\n"
        + constraint(require="{present: {match: {kind: tool_call, tool: {in: [read, write]}}}}")
    )
    tool = config.constraints[0].require.present
    assert tool is not None and tool.match.tool is not None and tool.match.tool.in_ == ["read", "write"]
    # The runner receives the dump by field name and must read it back.
    assert TraceChecksConfig.model_validate_json(config.model_dump_json(exclude_unset=True)) == config
