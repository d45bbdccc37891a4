"""``tolokaforge list PACK``: the pack's tasks with their categories, and how many tasks each category has.

``--task`` and ``--category`` select as ``tolokaforge run`` does, so a selection can be tried before a
run; ``--json`` prints the same facts as one JSON object for scripts.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from ..packs import load_pack
from ..packs.code_probe import Isolation
from ..packs.selection import select_tasks, task_categories
from .options import isolation_option, option, without_option

__all__ = ["list_command"]

NO_CATEGORY = "(none)"
"""How a task that names no category is shown in the table."""


@click.command("list")
@click.argument("pack_path", metavar="PACK", type=click.Path(path_type=Path))
@option(
    "--split",
    default=None,
    metavar="NAME",
    help="With tau2:<domain>: τ²'s task split (base, train, test, full; telecom also small) [default: base].",
)
@option("--task", "task_ids", multiple=True, metavar="ID", help="Only tasks this id or shell glob matches.")
@option("--category", "categories", multiple=True, metavar="NAME", help="Only tasks of this category.")
@option(
    "--json", "as_json", is_flag=True, help="Print one JSON object (tasks, categories) instead of tables."
)
@isolation_option
@without_option
def list_command(
    pack_path: Path,
    split: str | None,
    task_ids: tuple[str, ...],
    categories: tuple[str, ...],
    as_json: bool,
    isolation: Isolation,
    sandbox_without: tuple[str, ...],
) -> None:
    """List a pack's tasks (PACK: a pack folder or tau2:<domain>) with their categories."""
    pack = load_pack(pack_path, split=split, isolation=isolation, sandbox_without=sandbox_without)
    tasks = select_tasks(pack, task_ids, categories)
    counts = task_categories(tasks)
    if as_json:
        document = {
            "pack": pack.name,
            "tasks": [
                {
                    "task_id": loaded.task_id,
                    "category": loaded.task.category or None,
                    "name": loaded.task.name,
                }
                for loaded in tasks
            ],
            "categories": {name or NO_CATEGORY: count for name, count in sorted(counts.items())},
            "skipped": [{"task_id": task.task_id, "reason": task.reason} for task in pack.skipped],
        }
        click.echo(json.dumps(document, indent=2, ensure_ascii=False))
        return
    console = Console()
    listing = Table(title=f"{pack.name}: {len(tasks)} tasks", header_style="bold")
    listing.add_column("task", overflow="fold")
    listing.add_column("category", overflow="fold")
    for loaded in tasks:
        listing.add_row(loaded.task_id, loaded.task.category or NO_CATEGORY)
    console.print(listing)
    per_category = Table(title="per category", header_style="bold")
    per_category.add_column("category", overflow="fold")
    per_category.add_column("tasks", justify="right")
    for name, count in sorted(counts.items()):
        per_category.add_row(name or NO_CATEGORY, str(count))
    console.print(per_category)
    for skipped in pack.skipped:
        console.print(f"SKIPPED {skipped.task_id}: {skipped.reason}", highlight=False, soft_wrap=True)
