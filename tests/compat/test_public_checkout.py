"""The public Tolokaforge project's own packs, run from a checkout of it exactly as a user would.

Nothing of the public repository is vendored: ``tools/dev/public-checkout`` names (or makes) a
checkout, and every case points ``--pack`` into it unchanged. The agents' turns below are written
here: what a correct agent does, and a planted mistake that must fail with a reason naming the check.
The user simulator and the judge these packs configure are LLMs; they are answered by a real HTTP
server on loopback speaking the OpenAI chat API (the one edge that cannot run here).

Set ``TOLOKAFORGE_PUBLIC_CHECKOUT`` to a checkout to use your own; ``tests/compat/conftest.py`` leaves
this module out only when it is set to ``none``.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

if TYPE_CHECKING:
    from conftest import ChatServer, Cli, JudgeReport

REPO = Path(__file__).resolve().parents[2]
LLM_KEY = "sk-loopback-public-checkout"


@pytest.fixture(scope="module")
def checkout() -> Path:
    found = subprocess.run(
        [str(REPO / "tools/dev/public-checkout")], capture_output=True, text=True, check=False
    )
    if found.returncode != 0:
        pytest.fail(
            "no checkout of the public Tolokaforge project: set TOLOKAFORGE_PUBLIC_CHECKOUT to one "
            "(or to 'none' to leave this module out)"
        )
    return Path(found.stdout.strip())


@dataclass
class Models:
    """The loopback models: ``url``; the judge scores 0.9 when the evidence holds ``judge_needle``
    (else 0.1) and its scores land in ``judged``; the user simulator says it is done."""

    url: str
    judge_needle: str = ""
    judged: list[float] = field(default_factory=list[float])


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch, chat_server: ChatServer, judge_report: JudgeReport) -> Models:
    monkeypatch.setenv("TOLOKAFORGE_LLM_API_KEY", LLM_KEY)
    monkeypatch.setenv("TOLOKAFORGE_JUDGE_API_KEY", LLM_KEY)
    models = Models(url="")

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        tools = [tool["function"]["name"] for tool in body.get("tools", [])]
        if "submit_report" not in tools:
            return {"role": "assistant", "content": "Great, thank you. ###STOP###"}
        met = models.judge_needle.lower() in json.dumps(body["messages"][1:]).lower()
        models.judged.append(0.9 if met else 0.1)
        return judge_report(models.judged[-1], "read the rationale")

    models.url = chat_server(LLM_KEY, answer)
    return models


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def _run(
    tmp_path: Path,
    cli: Cli,
    pack: Path,
    turns: list[dict[str, Any]] | None,
    *extra: str,
) -> dict[str, dict[str, Any]]:
    """Run ``pack`` (scripted when ``turns`` are given, else golden); every trial's grade by task id."""
    agent = ["--agent", "golden"]
    if turns is not None:
        script = tmp_path / "script.yaml"
        script.write_text(yaml.safe_dump(turns, sort_keys=False))
        agent = ["--agent", "scripted", "--script", str(script)]
    run = tmp_path / "run"
    code, out = cli(["run", "--pack", str(pack), *agent, "--output", str(run), *extra])
    assert code in (0, 1), out
    grades: dict[str, dict[str, Any]] = {}
    for path in sorted((run / "trials").glob("*/*/grade.yaml")):
        grades[path.parent.parent.name] = yaml.safe_load(path.read_text())
    assert grades, out
    return grades


def _reasons(grade: dict[str, Any]) -> str:
    return json.dumps(grade)


# -- calc_basic: a file check and transcript rules, the built-in write_file ---------------------------

CALC_RIGHT = [
    _call("write_file", path="/env/fs/agent-visible/result.txt", content="391\n"),
    {"content": "17 times 23 is 391; I saved it to result.txt.", "done": True},
]
CALC_WRONG = [
    _call("write_file", path="result.txt", content="392\n"),
    {"content": "17 times 23 is 392; I saved it to result.txt.", "done": True},
]


def test_calc_basic_passes_as_it_is(checkout: Path, tmp_path: Path, cli: Cli) -> None:
    grades = _run(tmp_path, cli, checkout / "tests/data/tasks/calc_basic", CALC_RIGHT)
    assert grades["calc_basic"]["binary_pass"] is True


def test_calc_basic_planted_mistake_fails_naming_the_file(checkout: Path, tmp_path: Path, cli: Cli) -> None:
    grades = _run(tmp_path, cli, checkout / "tests/data/tasks/calc_basic", CALC_WRONG)
    grade = grades["calc_basic"]
    assert grade["binary_pass"] is False
    assert "result.txt" in _reasons(grade)


# -- food_delivery_2: a module-shaped MCP server, golden hash replay, custom checks with imports -----


def test_food_delivery_golden_passes_every_task(checkout: Path, tmp_path: Path, cli: Cli) -> None:
    grades = _run(tmp_path, cli, checkout / "tests/data/projects/food_delivery_2", None)
    assert set(grades) == {"order_modify_with_checks", "order_six_items_golden"}
    assert all(grade["binary_pass"] for grade in grades.values()), grades


def test_food_delivery_planted_mistake_fails_on_the_state_hash(
    checkout: Path, tmp_path: Path, cli: Cli, llm: Models
) -> None:
    # One of the three orders placed, with the wrong quantity: the hash replay must tell.
    turns = [
        _call("get_user_details", user_id="user_9515"),
        _call(
            "create_order",
            user_id="user_9515",
            restaurant_id="restaurant_75303418",
            menu_items=[{"id": "restaurant_75303418_item_0", "quantity": 2}],
            credit_card_id="pm021",
            delivery_address={"city_id": "la310", "address": "264 Lawrence Well Apt. 599", "zip": "62109"},
        ),
        {"content": "Your order is placed.", "done": True},
    ]
    pack = checkout / "tests/data/projects/food_delivery_2"
    grades = _run(
        tmp_path,
        cli,
        pack,
        turns,
        "--task",
        "order_six_items_golden",
        "--user-model",
        "user-1",
        "--llm-base-url",
        llm.url,
    )
    grade = grades["order_six_items_golden"]
    assert grade["binary_pass"] is False
    assert "State: 3 removed" in _reasons(grade)


# -- package_api minimal dataset: filesystem.copy, conditional scripted user, path_glob checks ---------

MINIMAL_RIGHT = [
    _call("read_file", path="problem.txt"),
    _call(
        "write_file", path="/env/fs/agent-visible/submissions/answer.md", content="6 * 7 = 42\n\nAnswer: 42\n"
    ),
    {"content": "The product is 42; analysis complete."},
]


def test_package_api_minimal_passes_as_it_is(checkout: Path, tmp_path: Path, cli: Cli) -> None:
    grades = _run(tmp_path, cli, checkout / "examples/package_api/minimal_dataset", MINIMAL_RIGHT)
    assert grades["package_public_example_01"]["binary_pass"] is True


def test_package_api_minimal_planted_mistake_fails(checkout: Path, tmp_path: Path, cli: Cli) -> None:
    wrong = [
        *MINIMAL_RIGHT[:1],
        _call("write_file", path="submissions/answer.md", content="6 + 7 = 13\n"),
        MINIMAL_RIGHT[2],
    ]
    grades = _run(tmp_path, cli, checkout / "examples/package_api/minimal_dataset", wrong)
    grade = grades["package_public_example_01"]
    assert grade["binary_pass"] is False
    assert "expected computed value" in _reasons(grade)


# -- custom_grading: path_glob checks, required actions and the legacy llm_judge ----------------------

RATIONALE = (
    "Hypothesis B is the stronger one: the errors began within minutes of the rollback and were seen "
    "in three regions at once. Evidence: the timeline and the regional error rates. Assumption: no "
    "other change shipped then. Residual uncertainty: the cache metrics are missing for one hour.\n"
)
GRADING_RIGHT = [
    _call("read_file", path="prompt.txt"),
    _call("write_file", path="submissions/knowledge_hypothesis_rationale.md", content=RATIONALE),
    {"content": "I wrote the rationale: Hypothesis B, with its evidence, assumptions and uncertainty."},
    {"content": "Tightened to under 120 words and finalized."},
]


def test_custom_grading_passes_with_its_judge(checkout: Path, tmp_path: Path, cli: Cli, llm: Models) -> None:
    llm.judge_needle = "rollback"
    pack = checkout / "examples/custom_grading/dataset"
    grades = _run(tmp_path, cli, pack, GRADING_RIGHT, "--judge-model", "judge-1", "--judge-base-url", llm.url)
    assert grades["knowledge_public_example_02"]["binary_pass"] is True
    assert llm.judged == [0.9]


def test_custom_grading_planted_mistake_fails(checkout: Path, tmp_path: Path, cli: Cli, llm: Models) -> None:
    llm.judge_needle = "rollback"
    wrong = [
        GRADING_RIGHT[0],
        _call("write_file", path="submissions/knowledge_hypothesis_rationale.md", content="Hypothesis A.\n"),
        *GRADING_RIGHT[2:],
    ]
    pack = checkout / "examples/custom_grading/dataset"
    grades = _run(tmp_path, cli, pack, wrong, "--judge-model", "judge-1", "--judge-base-url", llm.url)
    grade = grades["knowledge_public_example_02"]
    assert grade["binary_pass"] is False
    assert "stronger evidence-backed hypothesis" in _reasons(grade)


# -- shop_orders_02: an in-process-state MCP server, an LLM user, hash + JSONPaths + transcript rules --

ITEMS = [
    {"product_id": "P-001", "quantity": 1, "unit_price": 89.99},
    {"product_id": "P-002", "quantity": 2, "unit_price": 34.5},
]
SHOP_RIGHT = [
    _call("list_products"),
    _call("get_customer", customer_id="C-101"),
    _call("place_order", customer_id="C-101", items=ITEMS),
    _call("confirm_payment", order_id="O-001"),
    {"content": "Order O-001 is placed and paid (158.99). Your remaining balance is 141.01."},
]


def test_shop_orders_passes_with_its_llm_user(checkout: Path, tmp_path: Path, cli: Cli, llm: Models) -> None:
    pack = checkout / "tests/data/tasks/shop_orders_02"
    grades = _run(tmp_path, cli, pack, SHOP_RIGHT, "--user-model", "user-1", "--llm-base-url", llm.url)
    assert grades["shop_orders_02"]["binary_pass"] is True


def test_shop_orders_planted_mistake_fails(checkout: Path, tmp_path: Path, cli: Cli, llm: Models) -> None:
    unpaid = [
        *SHOP_RIGHT[:3],
        {"content": "Order O-001 is placed and paid. Your remaining balance is 141.01."},
    ]
    pack = checkout / "tests/data/tasks/shop_orders_02"
    grades = _run(tmp_path, cli, pack, unpaid, "--user-model", "user-1", "--llm-base-url", llm.url)
    grade = grades["shop_orders_02"]
    assert grade["binary_pass"] is False
    assert "Order status is 'paid' after confirm_payment" in _reasons(grade)


# -- what does not run here, said per task: never a silent pass ------------------------------------


def test_terminal_bench_echo_hello_is_skipped_with_its_reason(
    checkout: Path, tmp_path: Path, cli: Cli
) -> None:
    run = tmp_path / "run"
    code, out = cli(
        [
            "run",
            "--pack",
            str(checkout / "tests/data/terminal_bench_tasks"),
            "--agent",
            "golden",
            "--output",
            str(run),
        ]
    )
    assert "SKIPPED" in out and "echo-hello" in out, out
    summary = yaml.safe_load((run / "summary.yaml").read_text())
    assert [entry["task_id"] for entry in summary["skipped_tasks"]] == ["echo-hello"]
    assert "RUN" in summary["skipped_tasks"][0]["reason"]
    assert code != 0 or summary.get("trials", 0) == 0


def test_the_test_task_folder_names_what_it_cannot_run(checkout: Path, cli: Cli) -> None:
    # The public test-task folder as one pack: update_counter is a tool no source provides, in the public
    # project too; browser_basic (the browser over inline workspace files) loads.
    code, out = cli(["validate", "--pack", str(checkout / "tests" / "data" / "tasks")])
    assert code == 1
    assert "update_counter" in out
    assert "browser_basic" not in out
    assert "1 problem(s)" in out, out


def test_the_browser_task_example_validates(checkout: Path, cli: Cli) -> None:
    code, out = cli(["validate", "--pack", str(checkout / "examples" / "browser_task" / "dataset")])
    assert code == 0, out
    assert "1 tasks" in out and "OK" in out, out
