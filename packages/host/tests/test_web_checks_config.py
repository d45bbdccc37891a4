"""grading.yaml ``web_checks``: read into the runner's WebChecksConfig, and what ``validate`` refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from tolokaforge.core.models import WebCheck
from tolokaforge.host.cli import cli
from tolokaforge.host.errors import PackLoadError
from tolokaforge.host.packs import load_pack
from tolokaforge.host.packs.web_checks import css_selector_problem

CHECKS: list[dict[str, Any]] = [
    {"final_url": "/order/*", "description": "the order was placed"},
    {"page_contains": "Thank you"},
    {"element": "#order-total", "element_text": "$24"},
    {"element_absent": "form.checkout .error"},
    {"visited": ["/product/*", "/cart", "/checkout"]},
    {"not_visited": "/admin*"},
]


def _pack(root: Path, checks: Any, *, browser: bool = True, weights: dict[str, float] | None = None) -> Path:
    """A one-task pack whose task offers the browser on a declared site (or no tool at all)."""
    task: dict[str, Any] = {
        "task_id": "buy_mug",
        "name": "Buy a mug",
        "initial_user_message": "Buy me the trail mug, please.",
        "initial_state": {"tables": {"orders": []}},
        "grading": "grading.yaml",
    }
    if browser:
        task["tools"] = {"agent": {"enabled": ["browser"], "browser": {"initial_url": "http://shop.test/"}}}
        task["initial_state"]["mock_web"] = {"base_url": "http://shop.test"}
    grading: dict[str, Any] = {
        "combine": {"method": "weighted", "weights": weights or {"web_checks": 1.0}, "pass_threshold": 1.0},
        "web_checks": checks,
    }
    folder = root / "tasks" / "buy_mug"
    folder.mkdir(parents=True)
    (root / "pack.yaml").write_text(yaml.safe_dump({"name": "web_checks_pack", "version": "1.0.0"}))
    (folder / "task.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    (folder / "grading.yaml").write_text(yaml.safe_dump(grading, sort_keys=False))
    return root


def _problems(root: Path) -> dict[tuple[str, str], str]:
    with pytest.raises(PackLoadError) as caught:
        load_pack(root)
    return {(p.file.name, p.key): p.message for p in caught.value.problems}


def test_the_list_becomes_the_runners_web_checks_config(tmp_path: Path) -> None:
    task = load_pack(_pack(tmp_path, CHECKS)).task("buy_mug").task
    config = task.grading.web_checks
    assert config is not None
    assert config.checks == [WebCheck.model_validate(check) for check in CHECKS]
    assert [check.kind for check in config.checks] == [
        "final_url",
        "page_contains",
        "element",
        "element_absent",
        "visited",
        "not_visited",
    ]
    assert config.selectors == ("#order-total", "form.checkout .error")
    assert task.grading.weights == {"web_checks": 1.0}


def test_a_check_of_two_kinds_or_none_is_refused_naming_it(tmp_path: Path) -> None:
    problems = _problems(_pack(tmp_path, [{"final_url": "/a", "page_contains": "b"}, {"description": "x"}]))
    assert set(problems) == {("grading.yaml", "web_checks.0"), ("grading.yaml", "web_checks.1")}
    assert "found final_url, page_contains" in problems[("grading.yaml", "web_checks.0")]
    assert "found none" in problems[("grading.yaml", "web_checks.1")]


def test_an_unknown_key_and_an_empty_list_are_refused(tmp_path: Path) -> None:
    problems = _problems(_pack(tmp_path / "a", [{"final_url": "/a", "url_regex": "x"}]))
    assert problems == {
        ("grading.yaml", "web_checks.0.url_regex"): "unknown key 'url_regex' (not part of the schema)"
    }
    problems = _problems(_pack(tmp_path / "b", []))
    assert list(problems) == [("grading.yaml", "web_checks")]


def test_empty_patterns_and_bad_selectors_are_refused_each_by_its_key(tmp_path: Path) -> None:
    checks = [
        {"final_url": ""},
        {"page_contains": "  "},
        {"visited": ["/cart", ""]},
        {"element": "button >"},
        {"element_absent": "[[x"},
        {"element": "#ok", "element_text": ""},
    ]
    problems = _problems(_pack(tmp_path, checks))
    assert set(problems) == {
        ("grading.yaml", "web_checks[0].final_url"),
        ("grading.yaml", "web_checks[1].page_contains"),
        ("grading.yaml", "web_checks[2].visited[1]"),
        ("grading.yaml", "web_checks[3].element"),
        ("grading.yaml", "web_checks[4].element_absent"),
        ("grading.yaml", "web_checks[5].element_text"),
    }
    assert problems[("grading.yaml", "web_checks[3].element")].startswith(
        "'button >' is not a valid CSS selector:"
    )


def test_web_checks_need_a_weight_under_weighted(tmp_path: Path) -> None:
    problems = _problems(_pack(tmp_path, CHECKS[:1], weights={"state_checks": 1.0}))
    assert problems[("grading.yaml", "combine.weights")] == (
        "declares no weight for web_checks, which is configured and scored under method 'weighted'"
    )


def test_web_checks_on_a_task_without_a_browser_are_a_problem_validate_reports(tmp_path: Path) -> None:
    root = _pack(tmp_path, CHECKS[:1], browser=False)
    problems = _problems(root)
    assert problems[("grading.yaml", "web_checks")].startswith("the task offers no browser")
    result = CliRunner().invoke(cli, ["validate", "--pack", str(root)])
    assert result.exit_code == 1
    assert "web_checks" in result.output and "the task offers no browser" in result.output


def test_selectors_the_browser_runs_are_accepted() -> None:
    for selector in ("#add-to-cart", 'button[data-testid="buy"]', "li:has(> a.sku)", "tr:nth-of-type(2n+1)"):
        assert css_selector_problem(selector) is None, selector
    assert css_selector_problem("a >") is not None
