"""The web shop example pack end to end: real runner, real headless Chromium, through the CLI.

The golden agent's browser actions pass every task; scripted agents that make a planted mistake on the
site (the wrong shipping method, stopping at the cart, cancelling the wrong order) fail their task with
a reason naming the check that caught it. The seed data is what data/generate.py writes.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from tolokaforge.host.cli import main

PACK = Path(__file__).resolve().parents[2] / "examples" / "packs" / "web_shop"
TASKS = (
    "buy_headlamp_and_mugs_express",
    "buy_stove_standard",
    "cancel_stove_order",
    "cheapest_lantern_to_cart",
    "remove_mugs_then_checkout",
)

Json = dict[str, Any]


@pytest.fixture(scope="module", autouse=True)
def run_key_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Runs' signing keys go to a folder of this module, not the home directory."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TOLOKAFORGE_RUN_KEY_DIR", str(tmp_path_factory.mktemp("run-keys")))
        yield


def _tolokaforge(*args: str) -> tuple[int, str]:
    """``tolokaforge <args>`` in this process -> (exit status, stdout + stderr)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), pytest.raises(SystemExit) as done:
        main(list(args))
    return int(done.value.code or 0), out.getvalue()


def _grade(run: Path, task: str) -> Json:
    return cast(Json, yaml.safe_load((run / "trials" / task / "0" / "grade.yaml").read_text()))


def _trajectory(run: Path, task: str) -> Json:
    return cast(Json, yaml.safe_load((run / "trials" / task / "0" / "trajectory.yaml").read_text()))


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("golden") / "run"
    code, out = _tolokaforge("run", "--pack", str(PACK), "--agent", "golden", "--output", str(run))
    assert code == 0, out
    assert out.strip().splitlines()[-1] == "exit 0: all 5 trials graded; pass rate 1.000 (5/5 passed)", out
    return run


@pytest.mark.parametrize("task", TASKS)
def test_golden_browser_actions_pass_state_and_web_checks(golden: Path, task: str) -> None:
    grade = _grade(golden, task)
    assert grade["binary_pass"] is True and grade["score"] == 1.0, grade
    assert grade["components"]["state_checks"] == 1.0 and grade["components"]["web_checks"] == 1.0, grade
    assert "State: hash match" in grade["reasons"], grade["reasons"]
    calls = _trajectory(golden, task)["tool_calls"]
    assert calls and {call["name"] for call in calls} == {"browser"}
    assert all(call["status"] == "SUCCESS" for call in calls), calls


def test_the_golden_checkout_page_is_what_the_agent_read(golden: Path) -> None:
    """The last tool message of a purchase is the order page the routes rendered from the trial's tables."""
    messages = _trajectory(golden, "buy_stove_standard")["messages"]
    last = [message for message in messages if message["role"] == "tool"][-1]["content"]
    assert "Order #1005" in last and "Pocket Stove" in last and "$38.95" in last, last


Turn = dict[str, Any]


def _browser(*actions: Json) -> Turn:
    return {"content": "", "tool_calls": [{"name": "browser", "arguments": {"actions": list(actions)}}]}


def _click(selector: str) -> Json:
    return {"type": "click_at", "selector": selector}


def _checkout(shipping: str) -> Turn:
    return _browser(
        _click("#checkout"),
        {"type": "type_text_at", "selector": "#name", "text": "Ada Lovelace", "press_enter": False},
        {"type": "select", "selector": "#shipping", "text": shipping},
        _click("#place-order"),
    )


PLANTED: dict[str, tuple[list[Turn], tuple[str, ...]]] = {
    # task: (the scripted agent's turns, with its mistake; fragments the grade's reasons must hold)
    "buy_stove_standard": (  # the wrong shipping method
        [
            _browser(_click("#product-STV-100"), _click("#add-to-cart")),
            _checkout("Express shipping ($14.95)"),
            {"content": "Ordered.", "done": True},
        ],
        ("orders[1005].shipping", "shipped standard"),
    ),
    "buy_headlamp_and_mugs_express": (  # stops at the cart without checking out
        [
            _browser(_click("#product-HLP-100"), _click("#add-to-cart")),
            _browser(
                _click("#nav-home"),
                _click("#product-MUG-100"),
                {"type": "type_text_at", "selector": "#qty", "text": "2", "press_enter": False},
                _click("#add-to-cart"),
            ),
            {"content": "Both are in your cart.", "done": True},
        ],
        ("final_url",),
    ),
    "cancel_stove_order": (  # cancels the other pending order
        [
            _browser(_click("#nav-orders"), _click("#order-1003")),
            _browser(_click("#cancel-order")),
            {"content": "Cancelled.", "done": True},
        ],
        ("orders[1003].status", "the stove order is cancelled", "final_url"),
    ),
}


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One scripted run of the three tasks, each agent making its task's planted mistake."""
    root = tmp_path_factory.mktemp("planted")
    script = root / "script.yaml"
    script.write_text(yaml.safe_dump({"tasks": {task: turns for task, (turns, _) in PLANTED.items()}}))
    selected = [arg for task in PLANTED for arg in ("--task", task)]
    run = root / "run"
    code, out = _tolokaforge(
        "run", "--pack", str(PACK), *selected, "--agent", "scripted", "--script", str(script),
        "--output", str(run),
    )  # fmt: skip
    assert code == 0, out  # graded: a failed trial is the agent's verdict, not the run's error
    return run


@pytest.mark.parametrize("task", sorted(PLANTED))
def test_a_planted_mistake_on_the_site_fails_naming_the_check(planted: Path, task: str) -> None:
    calls = _trajectory(planted, task)["tool_calls"]
    assert [call["status"] for call in calls] == ["SUCCESS"] * len(calls), calls
    grade = _grade(planted, task)
    assert grade["binary_pass"] is False, grade
    failures = cast(list[Json], yaml.safe_load((planted / "summary.yaml").read_text())["failures"])
    assert [failure["kind"] for failure in failures if failure["task_id"] == task] == ["failed"], failures
    reasons = "\n".join(cast(list[str], grade["reasons"]))
    for fragment in PLANTED[task][1]:
        assert fragment in reasons, reasons


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("web_shop_generate", PACK / "data" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_seed_data_is_what_the_generator_writes() -> None:
    generator = _generator()
    render = cast(Callable[[Json], str], generator.render)
    for name, build in cast(dict[str, Callable[[], Json]], generator.FILES).items():
        committed = (PACK / "data" / name).read_text(encoding="utf-8")
        assert render(build()) == committed, f"run data/generate.py and commit {name}"
