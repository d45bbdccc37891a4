"""Trials start round by round over the tasks, and results stay in task order."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tolokaforge.core.models import TaskDescription
from tolokaforge.host.agents import GoldenAgentFactory
from tolokaforge.host.agents.golden import GoldenAgent
from tolokaforge.host.packs import load_pack
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.users.router import UserRouter


@dataclass
class RecordingFactory:
    """The golden agent, noting which task each trial it plays is of, in the order trials start."""

    started: list[str] = field(default_factory=list[str])
    name: str = "golden"
    model: str | None = None

    def for_trial(self, task: TaskDescription) -> GoldenAgent:
        self.started.append(task.task_id)
        return GoldenAgentFactory().for_trial(task)


async def test_every_task_gets_a_trial_before_any_gets_its_next(packs_dir: Path, tmp_path: Path) -> None:
    pack = load_pack(packs_dir / "retail")
    chosen = tuple(loaded.task_id for loaded in pack.tasks[:3])
    factory = RecordingFactory()
    summary = await run_pack(
        pack,
        factory,
        UserRouter(),
        RunSettings(output=tmp_path, trials=3, concurrency=1, task_ids=chosen),
    )
    assert factory.started == [*chosen, *chosen, *chosen]
    assert summary.ran == 9 and summary.pass_rate == 1.0
    # The summary lists trials task by task, whatever order they ran in.
    saved = yaml.safe_load((tmp_path / "summary.yaml").read_text())
    listed = [(entry["task_id"], entry["trial_index"]) for entry in saved["per_trial"]]
    assert listed == [(task_id, index) for task_id in chosen for index in range(3)]
