"""``tolokaforge validate --pack PATH``: load the pack and report every problem at once (exit 1 if any)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from ..errors import PackLoadError
from ..llm.chat import DEFAULT_BASE_URL
from ..packs import load_pack
from ..packs.code_probe import Isolation
from ..run.golden_check import check_golden_paths
from .options import isolation_option, option, without_option
from .run_command import judge_model_config

__all__ = ["validate_command"]


@click.command("validate")
@option(
    "--pack",
    "pack_path",
    required=True,
    type=click.Path(path_type=Path),
    help="The pack root, or its tasks/ folder; or tau2:<domain> (airline, retail, telecom, mock: docs/tau2.md).",
)
@option(
    "--split",
    default=None,
    metavar="NAME",
    help="With --pack tau2:<domain>: τ²'s task split (base, train, test, full; telecom also small) [default: base].",
)
@option(
    "--golden",
    is_flag=True,
    default=False,
    help="Also play every task's golden path (golden actions; a terminal task's solution/solve.sh) on "
    "the embedded runner: a task whose golden trial does not pass is a problem.",
)
@option(
    "--judge-model",
    default=None,
    help="With --golden: the judge for tasks graded by an LLM judge (e.g. tolokaforge-mock-judge).",
)
@isolation_option
@without_option
def validate_command(
    pack_path: Path,
    split: str | None,
    golden: bool,
    judge_model: str | None,
    isolation: Isolation,
    sandbox_without: tuple[str, ...],
) -> None:
    """Check a pack: every file, key, referenced file and tool, all problems in one report."""
    try:
        pack = load_pack(pack_path, split=split, isolation=isolation, sandbox_without=sandbox_without)
    except PackLoadError as error:
        for problem in error.problems:
            click.echo(str(problem))
        click.echo(f"{len(error.problems)} problem(s) in {pack_path}", err=True)
        sys.exit(1)
    tools = {
        tool.name for loaded in pack.tasks for tool in (*loaded.task.agent_tools, *loaded.task.user_tools)
    }
    # Built-in tools a provider serves are named by the server's enabled list (an MCP server's own
    # tools are known only once it runs).
    tools |= {
        name for loaded in pack.tasks for server in loaded.task.tool_servers for name in server.enabled or ()
    }
    for skipped in pack.skipped:
        click.echo(f"SKIPPED {skipped.task_id}: {skipped.reason}")
    skipped_note = f" ({len(pack.skipped)} skipped)" if pack.skipped else ""
    if golden:
        judge = judge_model_config(judge_model, DEFAULT_BASE_URL, None) if judge_model else None
        check = asyncio.run(
            check_golden_paths(pack, judge_model=judge, isolation=isolation, sandbox_without=sandbox_without)
        )
        for task_id in check.without_path:
            click.echo(f"NO GOLDEN PATH {task_id}: no golden_actions and no golden_response to play")
        for task_id, reason in check.failed.items():
            click.echo(f"{task_id}: golden path did not pass: {reason}")
        if check.failed:
            click.echo(f"{len(check.failed)} problem(s) in {pack_path}", err=True)
            sys.exit(1)
        skipped_note += f", {len(check.passed)} golden paths passed"
    click.echo(f"{pack.name}: {len(pack.tasks)} tasks{skipped_note}, {len(tools)} tools: OK")
