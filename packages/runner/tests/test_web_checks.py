"""The web_checks component: each check kind against a trial's web record, the score and its item rows,
the reasons naming the failing check, and the grade through a real runner (docs/web-tasks.md)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tolokaforge.contracts.runner import (
    ExecutionStatus,
    GradeErrorKind,
    GradeReasonVerdict,
    GradeTrialRequest,
    RegisterTrialRequest,
    RunnerServiceStub,
)
from tolokaforge.core.models import TrialSpec, WebCheck, WebChecksConfig
from tolokaforge.core.runner_api import GradeRequest, ToolCallRequest
from tolokaforge.core.termination import TerminationReason
from tolokaforge.runner import RunnerHandle
from tolokaforge.runner.browser.pages import ElementProbe, PageSnapshot, StepResult
from tolokaforge.runner.grading.component import ITEMS, ItemResult
from tolokaforge.runner.grading.web_checks import NEVER_USED, WebChecksUnavailable, evaluate_web_checks
from tolokaforge.runner.trials.web import WebRecord

from .conftest import Episode

CART = "http://shop.test/cart"


def _record(
    *,
    url: str = CART,
    text: str = "Your cart: Trail Mug x2. Total $24.00",
    elements: dict[str, ElementProbe] | None = None,
    visited: tuple[str, ...] = ("http://shop.test/", "http://shop.test/product/mug", CART),
) -> WebRecord:
    """A record built the way the runner fills it: one StepResult per recorded browser call."""
    record = WebRecord()
    snapshot = PageSnapshot(url=url, title="Cart", text=text, elements=elements or {})
    record.add(StepResult(observation="", error=None, snapshot=snapshot, visited=visited))
    return record


def _one(record: WebRecord, **check: Any) -> ItemResult:
    result = evaluate_web_checks(WebChecksConfig(checks=[WebCheck(**check)]), record)
    items: list[ItemResult] = result.extra[ITEMS]
    assert len(items) == 1 and result.score == (1.0 if items[0].met else 0.0)
    return items[0]


# --- each kind ----------------------------------------------------------------------------------


def test_final_url_matches_a_path_glob_or_a_whole_url() -> None:
    record = _record(url="http://shop.test/order/17?ok=1")
    assert _one(record, final_url="/order/*").met
    assert _one(record, final_url="http://shop.test/order/1?*").met
    missed = _one(record, final_url="/cart")
    assert not missed.met and missed.message == "the page ended on http://shop.test/order/17?ok=1"
    assert missed.label == "final_url '/cart'"


def test_page_contains_and_lacks_ignore_case() -> None:
    record = _record()
    assert _one(record, page_contains="TRAIL MUG").met
    assert not _one(record, page_contains="order placed").met
    assert _one(record, page_lacks="out of stock").met
    lacks = _one(record, page_lacks="total $24")
    assert not lacks.met and lacks.message.startswith(f"found on {CART}")


def test_element_is_present_and_its_text_is_read_without_case() -> None:
    record = _record(
        elements={"#total": ElementProbe(count=1, text="Total $24.00"), ".banner": ElementProbe(count=0)}
    )
    assert _one(record, element="#total").met
    assert _one(record, element="#total", element_text="$24.00").met
    wrong = _one(record, element="#total", element_text="$30.00")
    assert not wrong.met and wrong.message == "the first of 1 element reads 'Total $24.00'"
    assert wrong.label == "element '#total' with text '$30.00'"
    absent = _one(record, element=".banner")
    assert not absent.met and absent.message == f"nothing matches on {CART}"


def test_element_absent_needs_no_match() -> None:
    record = _record(elements={".error": ElementProbe(count=0), "li.item": ElementProbe(count=3, text="Mug")})
    assert _one(record, element_absent=".error").met
    present = _one(record, element_absent="li.item")
    assert not present.met and present.message == f"3 elements match on {CART}"


def test_visited_is_an_ordered_subsequence_of_page_loads() -> None:
    record = _record(
        visited=("http://shop.test/", "http://shop.test/product/mug", CART, "http://shop.test/checkout")
    )
    assert _one(record, visited=["/product/*", "/checkout"]).met
    assert _one(record, visited=["/", "/cart", "/checkout"]).met
    backwards = _one(record, visited=["/checkout", "/cart"])
    assert not backwards.met
    assert backwards.message.startswith(
        "no page load after '/checkout' matched '/cart'; visited: http://shop.test/"
    )
    assert backwards.details["visited"][-1] == "http://shop.test/checkout"
    assert backwards.label == "visited '/checkout' -> '/cart'"


def test_not_visited_fails_on_any_matching_load() -> None:
    record = _record()
    assert _one(record, not_visited="/admin*").met
    hit = _one(record, not_visited="/product/*")
    assert not hit.met and hit.message == "visited http://shop.test/product/mug"


def test_a_browser_never_used_fails_every_check_but_not_visited() -> None:
    checks = [
        WebCheck(final_url="/cart"),
        WebCheck(page_lacks="error"),
        WebCheck(element_absent=".error"),
        WebCheck(visited=["/"]),
        WebCheck(not_visited="/admin"),
    ]
    result = evaluate_web_checks(WebChecksConfig(checks=checks), WebRecord())
    items: list[ItemResult] = result.extra[ITEMS]
    assert [item.met for item in items] == [False, False, False, False, True]
    assert {item.message for item in items[:4]} == {NEVER_USED}
    assert result.score == pytest.approx(1 / 5)


def test_a_selector_never_probed_is_no_verdict() -> None:
    record = _record(elements={"#total": ElementProbe(count=1, text="$24")})
    with pytest.raises(WebChecksUnavailable, match=r"selector '#missing' was not probed .* probed: '#total'"):
        _one(record, element_absent="#missing")


# --- score, rows and reasons --------------------------------------------------------------------


def test_score_is_the_share_met_with_one_row_each_and_reasons_naming_the_failure() -> None:
    config = WebChecksConfig(
        checks=[
            WebCheck(final_url="/order/confirmed*"),
            WebCheck(page_contains="trail mug", description="the mug is in the cart"),
            WebCheck(not_visited="/admin"),
        ]
    )
    result = evaluate_web_checks(config, _record())
    assert result.score == pytest.approx(2 / 3)
    items: list[ItemResult] = result.extra[ITEMS]
    assert [(item.component, item.index, item.label, item.met) for item in items] == [
        ("web_checks", 0, "final_url '/order/confirmed*'", False),
        ("web_checks", 1, "the mug is in the cart", True),
        ("web_checks", 2, "not_visited '/admin'", True),
    ]
    reasons = result.reasons()
    assert [(r.kind, r.verdict) for r in reasons] == [
        ("web_checks", GradeReasonVerdict.PARTIAL),
        ("web_checks", GradeReasonVerdict.FAILED),
    ]
    assert reasons[0].message == "web_checks: 2/3 met"
    assert (
        reasons[1].message == f"web_checks: final_url '/order/confirmed*' not met: the page ended on {CART}"
    )


def test_a_described_check_is_named_by_its_description_and_its_spec() -> None:
    config = WebChecksConfig(checks=[WebCheck(page_contains="Order placed", description="order confirmed")])
    result = evaluate_web_checks(config, _record())
    assert result.score == 0.0
    assert result.reasons()[1].message.startswith(
        "web_checks: 'order confirmed' (page_contains 'Order placed') not met: not found on http://shop.test/cart"
    )


def test_all_met_is_one_reason() -> None:
    result = evaluate_web_checks(WebChecksConfig(checks=[WebCheck(final_url="/cart")]), _record())
    assert result.score == 1.0
    assert [(r.verdict, r.message) for r in result.reasons()] == [
        (GradeReasonVerdict.MET, "web_checks: all 1 met")
    ]


# --- through a real runner ----------------------------------------------------------------------

SpecFactory = Callable[..., dict[str, Any]]
RequestFor = Callable[..., RegisterTrialRequest]
WEB_CHECKS = {"checks": [{"final_url": "/order/*"}, {"not_visited": "/admin*"}]}


async def test_a_trial_that_never_used_its_browser_fails_the_checks_by_name(
    stub: RunnerServiceStub,
    spec_factory: SpecFactory,
    request_for: RequestFor,
    episode: Callable[[str], Episode],
) -> None:
    spec = spec_factory(
        "web:0",
        browser={"sites": ["http://shop.test"], "screenshots": False},
        grading={
            "combine_method": "weighted",
            "weights": {"web_checks": 1.0},
            "pass_threshold": 1.0,
            "web_checks": WEB_CHECKS,
        },
    )
    registered = await stub.register_trial(request_for(spec))
    assert registered.success, registered.error
    ep = episode("web:0")
    ep.say("I could not open the shop.")
    response = await ep.grade()
    assert response.success, response.error
    grade = response.grade
    assert grade is not None and grade.components is not None
    assert grade.components.web_checks == 0.5 and grade.components.terminal_tests is None
    assert (grade.binary_pass, grade.score) == (False, 0.5)
    rows = [(row.component, row.label, row.met, row.message) for row in grade.component_items]
    assert rows == [
        ("web_checks", "final_url '/order/*'", False, NEVER_USED),
        ("web_checks", "not_visited '/admin*'", True, "no page load matched; visited: nothing"),
    ]
    assert f"web_checks: final_url '/order/*' not met: {NEVER_USED}" in grade.reasons
    assert [r.kind for r in grade.reason_items if r.verdict == GradeReasonVerdict.FAILED] == ["web_checks"]


async def test_web_checks_left_out_of_grading_components_are_a_recorded_skip(
    stub: RunnerServiceStub,
    spec_factory: SpecFactory,
    request_for: RequestFor,
    episode: Callable[[str], Episode],
) -> None:
    spec = spec_factory(
        "web:1",
        browser={"sites": ["http://shop.test"]},
        grading={
            "combine_method": "weighted",
            "weights": {"web_checks": 1.0, "transcript_rules": 1.0},
            "pass_threshold": 1.0,
            "transcript_rules": {"must_contain": ["shop"]},
            "web_checks": WEB_CHECKS,
        },
    )
    assert (await stub.register_trial(request_for(spec))).success
    ep = episode("web:1")
    ep.say("The shop is open.")
    response = await stub.grade_trial(
        GradeTrialRequest(
            trial_id="web:1",
            llm_messages_json=json.dumps(ep.messages),
            termination_reason="agent_done",
            grading_components=["transcript_rules"],
        )
    )
    assert response.success, response.error
    grade = response.grade
    assert grade is not None and grade.components is not None
    assert grade.components.web_checks is None and grade.binary_pass
    assert "skipped: not requested by grading_components (web_checks)" in grade.reasons


async def test_web_checks_on_a_task_without_a_browser_cannot_be_graded(
    stub: RunnerServiceStub,
    spec_factory: SpecFactory,
    request_for: RequestFor,
    episode: Callable[[str], Episode],
) -> None:
    spec = spec_factory(
        "web:2",
        grading={
            "combine_method": "weighted",
            "weights": {"web_checks": 1.0},
            "pass_threshold": 1.0,
            "web_checks": WEB_CHECKS,
        },
    )
    assert (await stub.register_trial(request_for(spec))).success
    ep = episode("web:2")
    ep.say("Done.")
    response = await ep.grade()
    assert not response.success
    assert response.error_kind == GradeErrorKind.NOT_GRADEABLE_AS_AUTHORED
    assert (
        "web_checks reads what the trial's browser saw, but the task registers no browser" in response.error
    )


# --- end to end: real Chromium, the site answered by the trial's worker -------------------------

SITE = """
import base64
import json
from urllib.parse import urlsplit

PAGES = {
    "/": "<title>Shop</title><h1>Shop</h1><a id='go' href='/order/7'>Place the order</a>",
    "/order/7": "<title>Order 7</title><h1>Thank you</h1><p id='total'>Total: $24.00</p>",
}


class Site:
    @staticmethod
    def get_info():
        return {"type": "function", "function": {"name": "site", "parameters": {"type": "object"}}}

    @staticmethod
    def invoke(data, method, url, headers, body_b64):
        page = PAGES.get(urlsplit(url).path)
        body = f"<!doctype html><html><body>{page}</body></html>" if page else "no such page"
        return json.dumps({
            "status": 200 if page else 404,
            "headers": {"content-type": "text/html; charset=utf-8"},
            "body_b64": base64.b64encode(body.encode()).decode(),
        })
"""
E2E_CHECKS = [
    {"final_url": "/order/*", "description": "the order page is shown"},
    {"page_contains": "thank you"},
    {"element": "#total", "element_text": "$24.00"},
    {"element_absent": ".error"},
    {"visited": ["/", "/order/7"]},
    {"not_visited": "/admin*"},
]


def _site_spec(trial_id: str) -> TrialSpec:
    task: dict[str, Any] = {
        "task_id": "web_e2e",
        "agent_tools": [
            {
                "name": "site",
                "parameters": {"type": "object"},
                "source": {"module_path": "site", "class_name": "Site"},
                "hidden": True,
                "validate_arguments": False,
            }
        ],
        "tool_code": {"files": {"site.py": SITE}},
        "initial_state": {"tables": {"orders": []}},
        "browser": {
            "sites": ["http://shop.test"],
            "initial_url": "http://shop.test/",
            "site_tool": "site",
            "screenshots": False,
        },
        "grading": {
            "combine_method": "weighted",
            "weights": {"web_checks": 1.0},
            "pass_threshold": 1.0,
            "web_checks": {"checks": E2E_CHECKS},
        },
    }
    return TrialSpec.model_validate({"trial_id": trial_id, "task": task})


async def _browse(runner: RunnerHandle, trial_id: str, actions: list[dict[str, Any]]) -> None:
    arguments = json.dumps({"actions": actions})
    result = await runner.runner.execute(ToolCallRequest(trial_id, "c1", "browser", arguments, "agent"))
    assert result.status == ExecutionStatus.SUCCESS, result


async def test_a_trial_on_the_site_is_graded_by_what_its_browser_saw(runner: RunnerHandle) -> None:
    local = runner.runner
    await local.register(_site_spec("web_e2e:0"))
    await _browse(runner, "web_e2e:0", [{"type": "click_at", "selector": "#go"}])
    grade = (await local.grade(GradeRequest("web_e2e:0", None, TerminationReason.AGENT_DONE))).grade
    assert grade.components is not None and grade.components.web_checks == 1.0, grade.reasons
    assert grade.binary_pass and [row.met for row in grade.component_items] == [True] * 6
    assert grade.component_items[2].message == "1 element match on http://shop.test/order/7"

    # The wrong thing: the agent stays on the front page; the grade names what it missed.
    await local.register(_site_spec("web_e2e:1"))
    await _browse(runner, "web_e2e:1", [{"type": "navigate", "url": "http://shop.test/"}])
    grade = (await local.grade(GradeRequest("web_e2e:1", None, TerminationReason.AGENT_DONE))).grade
    assert grade.components is not None and grade.components.web_checks == pytest.approx(2 / 6)
    assert not grade.binary_pass
    assert [row.label for row in grade.component_items if not row.met] == [
        "the order page is shown",
        "page_contains 'thank you'",
        "element '#total' with text '$24.00'",
        "visited '/' -> '/order/7'",
    ]
    assert (
        "web_checks: 'the order page is shown' (final_url '/order/*') not met: "
        "the page ended on http://shop.test/" in grade.reasons
    )
