"""The command line's manners, each through a real ``tolokaforge`` subprocess: ``--version``, did-you-mean
for flags, packs, task ids and categories, ``tolokaforge list``, ``--task`` globs and ``--category``, a
failure table that stops at its first rows, and no progress bar for a run refused before it starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

from tolokaforge.core.protocol import ENGINE_PROTOCOL_VERSION

RETAIL_REFUSALS = [
    "refuse_expired_coupon",
    "refuse_other_customers_order",
    "refuse_repeat_late_credit",
    "refuse_return_final_sale",
    "refuse_return_outside_window",
]


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if name != "COLUMNS"}
    return subprocess.run(
        [sys.executable, "-c", "from tolokaforge.host.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def _run_line(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout.strip().splitlines()[-1]


def test_version_names_the_host_the_runner_and_the_protocol() -> None:
    done = _cli("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"tolokaforge {version('tolokaforge-host')}",
        f"runner {version('tolokaforge-runner')}, engine protocol {ENGINE_PROTOCOL_VERSION}",
    ]


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["run", "--pak", "x"], "No such option '--pak'. (Did you mean one of: '--pack'"),
        (["list", "x", "--jsn"], "No such option '--jsn'. Did you mean '--json'?"),
        (["lst"], "No such command 'lst'. Did you mean 'list'?"),
    ],
)
def test_a_mistyped_flag_or_command_gets_the_close_name(args: list[str], hint: str) -> None:
    done = _cli(*args)
    assert done.returncode == 2
    assert done.stderr.startswith("tolokaforge: error (exit 2): ")
    assert hint in done.stderr


def test_a_mistyped_pack_path_suggests_the_folder_beside_it(packs_dir: Path, tmp_path: Path) -> None:
    done = _cli("run", "--pack", str(packs_dir / "retial"), "--output", str(tmp_path / "r"))
    assert done.returncode == 2
    assert f"is not a directory (did you mean: {packs_dir / 'retail'}?)" in done.stderr
    assert done.stdout == ""  # no progress bar for a run that never started


@pytest.mark.parametrize(
    ("pack", "hint"),
    [("tau2:airlin", "(did you mean: tau2:airline?)"), ("airline", "(did you mean: tau2:airline?)")],
)
def test_a_mistyped_tau2_domain_suggests_it(pack: str, hint: str) -> None:
    done = _cli("list", pack)
    assert done.returncode == 2
    assert hint in done.stderr


def test_a_mistyped_task_id_is_exit_2_with_close_ids_and_no_progress_bar(
    packs_dir: Path, tmp_path: Path
) -> None:
    output = tmp_path / "r"
    done = _cli(
        "run", "--pack", str(packs_dir / "retail"), "--task", "lookup_order_trackin", "--output", str(output)
    )
    assert done.returncode == 2
    assert done.stderr.startswith(
        "tolokaforge: error (exit 2): --task 'lookup_order_trackin' names no task of pack retail "
        "(did you mean: lookup_order_tracking"
    )
    assert done.stdout == ""
    assert not output.exists()


def test_a_glob_or_category_matching_nothing_is_exit_2(packs_dir: Path, tmp_path: Path) -> None:
    pack = str(packs_dir / "retail")
    done = _cli("run", "--pack", pack, "--task", "nothing_*", "--output", str(tmp_path / "a"))
    assert done.returncode == 2
    assert "--task 'nothing_*' matches no task of pack retail" in done.stderr
    done = _cli("run", "--pack", pack, "--category", "refusl", "--output", str(tmp_path / "b"))
    assert done.returncode == 2
    assert "--category 'refusl' names no category of pack retail (did you mean: refusal?)" in done.stderr
    assert "its categories: lookup, multi_step, process, refusal, single_write, transfer" in done.stderr
    done = _cli(
        "run", "--pack", pack, "--task", "refuse_*", "--category", "lookup", "--output", str(tmp_path / "c")
    )
    assert done.returncode == 2
    assert "--task refuse_* and --category lookup together select no task of pack retail" in done.stderr
    assert done.stdout == ""


def test_list_prints_tasks_with_categories_and_counts(packs_dir: Path) -> None:
    done = _cli("list", str(packs_dir / "retail"))
    assert done.returncode == 0, done.stderr
    assert "retail: 29 tasks" in done.stdout
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in done.stdout.splitlines()
            if line.count("│") == 3}  # fmt: skip
    assert rows["lookup_order_tracking"] == "lookup"
    assert rows["transfer_billing_dispute"] == "transfer"
    assert rows["refusal"] == "6"  # the per-category table
    assert all(len(line) <= 80 for line in done.stdout.splitlines())


def test_list_json_selects_as_run_does(packs_dir: Path) -> None:
    done = _cli(
        "list", str(packs_dir / "retail"), "--json", "--task", "refuse_*", "--task", "lookup_order_tracking"
    )
    assert done.returncode == 0, done.stderr
    listing = json.loads(done.stdout)
    assert listing["pack"] == "retail"
    assert [task["task_id"] for task in listing["tasks"]] == [*RETAIL_REFUSALS, "lookup_order_tracking"]
    assert listing["categories"] == {"lookup": 1, "refusal": 5}
    by_category = json.loads(
        _cli("list", str(packs_dir / "retail"), "--json", "--category", "transfer").stdout
    )
    assert [task["task_id"] for task in by_category["tasks"]] == [
        "transfer_billing_dispute",
        "transfer_safety_incident",
    ]
    assert by_category["categories"] == {"transfer": 2}


def test_run_takes_task_globs_and_categories(packs_dir: Path, tmp_path: Path) -> None:
    output = tmp_path / "r"
    done = _cli(
        "run", "--pack", str(packs_dir / "retail"), "--task", "refuse_*", "--task", "transfer_*",
        "--category", "refusal", "--output", str(output),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _run_line(done) == "exit 0: all 5 trials graded; pass rate 1.000 (5/5 passed)"
    manifest = yaml.safe_load((output / "run.yaml").read_text())
    assert manifest["tasks"] == RETAIL_REFUSALS


def test_the_failure_table_shows_its_first_rows_and_points_at_the_rest(
    packs_dir: Path, tmp_path: Path
) -> None:
    script = tmp_path / "give_up.yaml"
    script.write_text(yaml.safe_dump([{"content": "Sorry, I cannot help with that.", "done": True}]))
    output = tmp_path / "r"
    done = _cli(
        "run", "--pack", str(packs_dir / "retail"), "--agent", "scripted", "--script", str(script),
        "--output", str(output), timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    failed = len(yaml.safe_load((output / "summary.yaml").read_text())["failures"])
    assert failed > 20
    table = done.stdout.split("trials that did not pass (first 20)")[1].split("results: ")[0]
    # A row's outcome cell is filled on its first line only; folded continuation lines leave it empty.
    shown = [line for line in table.splitlines() if line.count("│") == 4 and line.split("│")[2].strip()]
    assert len(shown) == 20
    caption = " ".join(table.split())
    assert f"{failed - 20} more of {failed}; every reason in full: 'failures' in" in caption
    assert str(output / "summary.yaml") in "".join(table.split())  # a long path folds across lines
    before_results = done.stdout.split("results: ")[0]
    assert all(len(line) <= 80 for line in before_results.splitlines())
