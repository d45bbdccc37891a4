"""The browser engine on real headless Chromium (confined in bubblewrap): each action's effect on a
small site, what is refused, probes, screenshots, and that trials share nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from tolokaforge.core.browser_tool import browser_tool_parameters
from tolokaforge.core.models.web import BrowserSettings
from tolokaforge.runner.browser import BrowserPool, BrowserSession, StepResult

from .shop_site import ORIGIN, ShopSite

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pool() -> AsyncIterator[BrowserPool]:
    browsers = BrowserPool()
    await browsers.start()
    yield browsers
    await browsers.close()


async def _session(
    pool: BrowserPool, site: ShopSite, path: str = "/", *, probes: tuple[str, ...] = (), **settings: Any
) -> BrowserSession:
    browser = BrowserSettings(initial_url=f"{ORIGIN}{path}", sites=[ORIGIN], **settings)
    return await pool.open_session(browser, site, probes=probes)


async def _run(session: BrowserSession, *actions: dict[str, Any], screenshot: bool = False) -> StepResult:
    return await session.run(list(actions), screenshot=screenshot)


async def test_a_link_clicked_by_selector_loads_its_page_and_both_loads_are_visited(
    pool: BrowserPool,
) -> None:
    site = ShopSite()
    session = await _session(pool, site)
    step = await _run(session, {"type": "click_at", "selector": "#to-form"})
    assert step.error is None
    assert step.visited == (f"{ORIGIN}/", f"{ORIGIN}/form")
    assert step.snapshot.url == f"{ORIGIN}/form"
    assert step.snapshot.title == "Order"
    assert step.observation.startswith("Clicked at #to-form\n")
    assert "Page: Order" in step.observation
    assert "selector: #name" in step.observation and "selector: #send" in step.observation
    await session.close()


async def test_the_form_posts_the_typed_name_and_the_chosen_option_then_follows_the_redirect(
    pool: BrowserPool,
) -> None:
    site = ShopSite()
    session = await _session(pool, site, "/form", probes=("#thanks",))
    step = await _run(
        session,
        {"type": "type_text_at", "selector": "#name", "text": "Alice", "press_enter": False},
        {"type": "select", "selector": "#color", "text": "green"},  # the label, in any case
        {"type": "click_at", "selector": "#send"},
    )
    assert step.error is None, step.error
    [post] = site.posts()
    assert post.url == f"{ORIGIN}/submit"
    assert post.body == b"name=Alice&color=g"
    assert step.visited == (f"{ORIGIN}/form", f"{ORIGIN}/thanks?name=Alice")
    assert step.snapshot.elements["#thanks"].count == 1
    assert step.snapshot.elements["#thanks"].text == "Thanks Alice"
    assert "Selected 'Green' at #color" in step.observation
    back = await _run(session, {"type": "go_back"})
    assert back.error is None
    assert back.snapshot.url == f"{ORIGIN}/form"
    assert back.visited == (f"{ORIGIN}/form",)
    await session.close()


async def test_enter_submits_whether_typed_with_the_text_or_pressed_as_a_key(pool: BrowserPool) -> None:
    site = ShopSite()
    session = await _session(pool, site, "/form")
    typed = await _run(
        session, {"type": "type_text_at", "selector": "#name", "text": "Bo"}
    )  # press_enter: true
    assert typed.snapshot.text.strip() == "Thanks Bo"
    keyed = await _run(
        session,
        {"type": "navigate", "url": "/form"},
        {"type": "type_text_at", "selector": "#name", "text": "Cy", "press_enter": False},
        {"type": "key_combination", "keys": ["ENTER"]},
    )
    assert keyed.error is None
    assert keyed.snapshot.url == f"{ORIGIN}/thanks?name=Cy"
    assert [post.body for post in site.posts()] == [b"name=Bo&color=r", b"name=Cy&color=r"]
    await session.close()


async def test_a_click_at_the_grid_position_listed_hits_the_same_element_as_its_selector(
    pool: BrowserPool,
) -> None:
    session = await _session(pool, ShopSite(), probes=("#count",))
    first = await _run(session, {"type": "open_web_browser"})
    # The button spans x 100-300, y 200-250 of 1440x900: its centre on the 0-999 grid is (139, 250).
    assert "[button] Count me @ (139, 250) selector: #known" in first.observation
    by_point = await _run(session, {"type": "click_at", "x": 139, "y": 250})
    assert by_point.snapshot.elements["#count"].text == "1"
    by_selector = await _run(session, {"type": "click_at", "selector": "#known"})
    assert by_selector.snapshot.elements["#count"].text == "2"
    assert by_point.observation.startswith("Clicked at (139, 250)")
    await session.close()


async def test_an_element_below_the_fold_is_scrolled_to_by_selector_and_the_document_scrolls(
    pool: BrowserPool,
) -> None:
    session = await _session(pool, ShopSite(), "/long", probes=("#bottom",))
    first = await _run(session, {"type": "open_web_browser"})
    assert "[button] Bottom button" not in first.observation  # below the fold: not listed
    clicked = await _run(session, {"type": "click_at", "selector": "#bottom"})
    assert clicked.snapshot.elements["#bottom"].text == "Bottom clicked"
    up = await _run(
        session,
        {"type": "scroll_document", "direction": "up"},
        {"type": "scroll_document", "direction": "up"},
    )
    assert up.error is None and up.observation.startswith("Scrolled up\nScrolled up\n")
    await session.close()


async def test_a_failing_action_stops_the_call_and_says_which_and_why(pool: BrowserPool) -> None:
    site = ShopSite()
    session = await _session(pool, site, allowed_actions=["click_at", "navigate"])
    step = await _run(
        session,
        {"type": "click_at", "selector": "#missing"},
        {"type": "click_at", "selector": "#to-form"},
    )
    assert (
        step.error is not None and step.error == "action 0 (click_at) failed: no element matches: '#missing'"
    )
    assert step.snapshot.url == f"{ORIGIN}/"  # the second click never ran
    assert "Error: action 0 (click_at)" in step.observation and "Page: Shop" in step.observation
    refused = await _run(session, {"type": "scroll_document", "direction": "down"})
    assert refused.error is not None and "'scroll_document' is not an allowed action" in refused.error
    await session.close()


async def test_requests_outside_the_sites_are_refused_and_listed(pool: BrowserPool) -> None:
    site = ShopSite()
    session = await _session(pool, site, "/foreign")
    loaded = await _run(session, {"type": "open_web_browser"})
    assert loaded.error is None
    assert loaded.refused == ("http://evil.example/pixel.png",)
    assert all(request.url.startswith(ORIGIN) for request in site.seen)
    navigated = await _run(session, {"type": "navigate", "url": "http://evil.example/steal"})
    assert navigated.error is not None and "navigation refused: http://evil.example/steal" in navigated.error
    assert navigated.refused == ("http://evil.example/steal",)
    assert navigated.snapshot.url == f"{ORIGIN}/foreign"
    await session.close()


async def test_search_goes_to_the_first_site_and_an_explicit_default_port_is_the_same_origin(
    pool: BrowserPool,
) -> None:
    site = ShopSite()
    session = await _session(pool, site)
    step = await _run(
        session,
        {"type": "search", "query": "red shoes"},
        {"type": "navigate", "url": "http://shop.test:80/form"},
    )
    assert step.error is None
    assert step.visited == (f"{ORIGIN}/", f"{ORIGIN}/search?q=red+shoes", f"{ORIGIN}/form")
    assert "Searched for: red shoes" in step.observation
    await session.close()


async def test_probes_count_elements_and_read_the_first_ones_text(pool: BrowserPool) -> None:
    session = await _session(pool, ShopSite(), "/form", probes=("option", "#send", ".absent", "[[bad"))
    step = await _run(session, {"type": "open_web_browser"})
    elements = step.snapshot.elements
    assert (elements["option"].count, elements["option"].text) == (2, "Red")
    assert (elements["#send"].count, elements["#send"].text) == (1, "Send")
    assert elements[".absent"].count == 0 and elements["[[bad"].count == 0
    await session.close()


async def test_screenshots_are_jpegs_when_asked_for_or_taken_by_the_action(pool: BrowserPool) -> None:
    session = await _session(pool, ShopSite())
    plain = await _run(session, {"type": "open_web_browser"})
    assert plain.screenshot is None
    asked = await _run(session, {"type": "hover_at", "selector": "#known"}, screenshot=True)
    assert asked.screenshot is not None and asked.screenshot.startswith(b"\xff\xd8")
    action = await _run(session, {"type": "screenshot"})
    assert action.screenshot is not None and action.screenshot.startswith(b"\xff\xd8")
    await session.close()


async def test_two_sessions_share_no_cookies_and_no_storage(pool: BrowserPool) -> None:
    site_a, site_b = ShopSite(), ShopSite()
    first = await _session(pool, site_a, "/set-storage")
    second = await _session(pool, site_b, "/read-storage", probes=("#seen",))
    stored = await _run(first, {"type": "navigate", "url": "/read-storage"})
    assert "storage=A cookie=mark=A" in stored.snapshot.text
    assert site_a.seen[-1].headers.get("cookie") == "mark=A"  # the site sees its own cookie
    other = await _run(second, {"type": "open_web_browser"})
    assert other.snapshot.elements["#seen"].text == "storage=none cookie=none"
    assert all("cookie" not in request.headers for request in site_b.seen)
    await first.close()
    await second.close()


async def test_the_schema_offers_the_allowed_actions_and_a_selector() -> None:
    schema = browser_tool_parameters(BrowserSettings(allowed_actions=["click_at", "navigate"]))
    action = schema["properties"]["actions"]["items"]
    assert action["properties"]["type"]["enum"] == ["click_at", "navigate"]
    assert "selector" in action["properties"]
    assert schema["required"] == ["actions"]


async def test_sessions_of_two_trials_run_at_once_each_answered_by_its_own_site(pool: BrowserPool) -> None:
    sites = [ShopSite(), ShopSite()]
    sessions = [await _session(pool, site, "/form") for site in sites]

    async def order(session: BrowserSession, name: str) -> StepResult:
        return await _run(session, {"type": "type_text_at", "selector": "#name", "text": name})

    done = await asyncio.gather(order(sessions[0], "Ann"), order(sessions[1], "Ben"))
    assert [step.snapshot.text.strip() for step in done] == ["Thanks Ann", "Thanks Ben"]
    assert [[post.body for post in site.posts()] for site in sites] == [
        [b"name=Ann&color=r"],
        [b"name=Ben&color=r"],
    ]
    for session in sessions:
        await session.close()


async def test_the_wheel_and_a_grid_position_below_the_screen_scroll_the_page(pool: BrowserPool) -> None:
    session = await _session(pool, ShopSite(), "/long", probes=("#bottom",))
    wheel = await _run(
        session, {"type": "scroll_at", "x": 500, "y": 500, "direction": "down", "magnitude": 999}
    )
    assert wheel.error is None and wheel.observation.startswith("Scrolled down at (500, 500)")
    assert "Top of the long page" in wheel.snapshot.text  # the whole text, wherever the viewport is
    # y 3000 is three screens down (the public grid's convention): the page scrolls there first.
    far = await _run(session, {"type": "click_at", "x": 500, "y": 3000})
    assert far.error is None
    assert "[button] Bottom button" in far.observation  # now in the viewport, so listed
    nothing = await _run(session, {"type": "type_text_at", "x": 500, "y": 500, "text": "x"})
    assert nothing.error is not None and "no text field at (500, 500)" in nothing.error
    await session.close()
