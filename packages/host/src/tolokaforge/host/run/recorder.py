"""A run folder filled one trial at a time by a caller that drives its own trials (the RL environment).

``run_pack`` decides which trials a run has; an RL trainer decides as it goes. The recorder gives such a
caller what ``tolokaforge run --output`` writes, through the same pieces: ``run.yaml`` signed with a new
run key, every trial's files signed and accepted by the run's ledger, and at the end ``summary.yaml``
over every trial written, so ``tolokaforge report`` shows them. A new folder only: there is no resume
(the trainer's episodes are not a fixed list to continue).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..packs.loader import Pack
from ..results.manifest import RunIdentity, read_manifest, utc_now, write_manifest
from ..results.outcome import TrialOutcome
from ..results.records import LEDGER_FILE, RecordSigner
from ..results.redaction import Redactor
from ..results.result_writer import ResultWriter
from ..results.run_keys import new_run_id, new_run_key, prepare_key_dir, run_ledger, store_run_key
from ..results.summary import EntryTexts, RunSummary, summarise, write_summary
from ..results.trial_files import configured_components
from ..results.trial_rows import TrialRow, row_of

__all__ = ["RunRecorder"]


class RunRecorder:
    """``open`` it, ``write`` each finished trial, ``close`` it (the summary); one event loop's object."""

    def __init__(
        self,
        output: Path,
        pack: Pack,
        *,
        agent: str,
        runner: Mapping[str, Any],
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self.output = output
        self._pack = pack
        self._agent = agent
        self._runner = dict(runner)
        self._options = dict(options or {})
        self._redactor = Redactor.from_environment()
        self._signer = RecordSigner(new_run_id(), new_run_key())
        self._started_at = utc_now()
        self._started = time.perf_counter()
        self._keys: list[tuple[str, int]] = []
        self._rows: dict[tuple[str, int], TrialRow] = {}
        self._crashes: dict[tuple[str, int], str] = {}
        self._infrastructure: set[tuple[str, int]] = set()
        self._entries = EntryTexts()
        self._writer: ResultWriter | None = None
        self._grading = {loaded.task_id: loaded.task.grading for loaded in pack.tasks}

    def open(self) -> None:
        """Refuse a folder that holds a run; make the run's key, ledger and ``run.yaml``."""
        output = self.output
        if (
            read_manifest(output) is not None
            or (output / LEDGER_FILE).exists()
            or (output / "trials").exists()
        ):
            raise ConfigError(f"{output} already holds a run: choose another output folder")
        prepare_key_dir(output)
        output.mkdir(parents=True, exist_ok=True)
        store_run_key(self._signer.run_id, self._signer.key, output)
        ledger = run_ledger(self._signer, output)
        ledger.create()
        # Through the file-writer process, as a large CLI run writes: a trainer's runs are large.
        self._writer = ResultWriter(helper=True, ledger=ledger, redactor=self._redactor)
        self._manifest(None)

    def write(self, outcome: TrialOutcome) -> None:
        """One finished trial's files (on disk by :meth:`close`); its row counts in the summary."""
        if self._writer is None:
            raise RuntimeError("RunRecorder.write before open")
        key = (outcome.task_id, outcome.trial_index)
        self._keys.append(key)
        if outcome.infrastructure_error is not None:
            self._crashes[key] = self._redactor.text(f"infrastructure: {outcome.infrastructure_error}")
            self._infrastructure.add(key)
        written = self._writer.write(
            self.output,
            outcome,
            configured_components(self._grading[outcome.task_id]),
            finished=outcome.infrastructure_error is None,
        )
        if written.grade is not None:
            row = row_of(
                outcome.task_id, outcome.trial_index, written.grade, written.trajectory, written.metrics
            )
            self._rows[key] = row
            self._entries.add(row)

    async def close(self) -> RunSummary:
        """Every trial's files on disk, ``summary.yaml`` written, ``run.yaml`` finished."""
        summary = RunSummary(pack=self._pack.name, agent=self._agent, trials_per_task=1)
        writer = self._writer
        if writer is None:
            return summary
        try:
            await writer.drain()
            texts = self._entries.texts()
        finally:
            writer.close()
            self._entries.close()
            self._writer = None
        trials: dict[str, int] = {}
        for task_id, _ in self._keys:
            trials[task_id] = trials.get(task_id, 0) + 1
        summary.trials_per_task = max(trials.values(), default=1)
        summary.wall_time_s = time.perf_counter() - self._started
        summary.ran = len(self._keys)
        summarise(self.output, sorted(self._keys), summary, self._crashes, self._rows, self._infrastructure)
        write_summary(self.output, summary, texts)
        self._manifest(utc_now(), tuple(sorted(trials)), summary.trials_per_task)
        return summary

    def _manifest(self, finished_at: str | None, tasks: tuple[str, ...] = (), trials: int = 1) -> None:
        identity = RunIdentity.of(
            self._pack,
            self._agent,
            {"agent": None},
            tasks,
            trials,
            self._redactor.value(self._options),
            categories={t.task_id: t.task.category for t in self._pack.tasks if t.task.category},
        )
        write_manifest(
            self.output,
            identity,
            runner=self._runner,
            llm_endpoint=None,
            started_at=self._started_at,
            finished_at=finished_at,
            run_id=self._signer.run_id,
            signer=self._signer,
            redactor=self._redactor,
        )
