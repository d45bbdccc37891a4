"""The result-file helper process: it writes what it is sent, reports its failures, and its death loses nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tolokaforge.host.results.file_writer import FileWriterProcess, HelperGone, store_trial
from tolokaforge.host.results.outcome import Episode, TrialOutcome
from tolokaforge.host.results.result_writer import ResultWriter
from tolokaforge.host.results.yaml_files import TrialFiles, dump_yaml, read_yaml


def _files(directory: Path, *, finished: bool = True) -> TrialFiles:
    documents: list[tuple[str, dict[str, object] | str]] = [
        ("trajectory.yaml", {"messages": [{"role": "user", "content": "hi\nthere"}]}),
        ("metrics.yaml", {"turns": 1}),
        ("judge_transcript.json", '{"a": 1}\n'),
    ]
    if finished:
        documents.append(("grade.yaml", {"score": 1.0, "trial_id": "t:0"}))
    return TrialFiles(directory, tuple(documents), finished)


def test_the_helper_writes_every_file_as_this_process_would(tmp_path: Path) -> None:
    helper = FileWriterProcess()
    try:
        files = _files(tmp_path / "t" / "0")
        helper.write(files)
        for name, document in files.documents:
            assert not isinstance(document, bytes)  # these files hold no attachments
            text = (files.directory / name).read_text(encoding="utf-8")
            assert text == (document if isinstance(document, str) else dump_yaml(document))
        assert read_yaml(files.directory / "grade.yaml")["score"] == 1.0
        assert not list(files.directory.glob("*.tmp"))
        # An unfinished trial loses a grade.yaml left by an earlier attempt.
        helper.write(_files(files.directory, finished=False))
        assert not (files.directory / "grade.yaml").exists()
    finally:
        helper.close()
    assert not helper.alive  # closing its input ends it


def test_a_write_the_helper_cannot_do_is_raised_with_its_reason(tmp_path: Path) -> None:
    (tmp_path / "blocked").write_text("a file where a folder should be")
    helper = FileWriterProcess()
    try:
        with pytest.raises(NotADirectoryError, match="blocked"):  # raised here as it was there
            helper.write(_files(tmp_path / "blocked" / "0"))
        helper.write(_files(tmp_path / "ok" / "0"))  # and it goes on
        assert (tmp_path / "ok" / "0" / "grade.yaml").is_file()
    finally:
        helper.close()


def test_a_batch_writes_every_trial_and_answers_for_each(tmp_path: Path) -> None:
    (tmp_path / "blocked").write_text("a file where a folder should be")
    helper = FileWriterProcess()
    try:
        batch = [
            _files(tmp_path / "ok" / "0"),
            _files(tmp_path / "blocked" / "0"),
            _files(tmp_path / "ok" / "1"),
        ]
        first, second, third = helper.write_batch(batch)
        assert first is None and third is None
        assert isinstance(second, NotADirectoryError)  # one trial's failure, the others written
        for index in (0, 1):
            assert read_yaml(tmp_path / "ok" / str(index) / "grade.yaml")["trial_id"] == "t:0"
    finally:
        helper.close()


def test_a_dead_helper_loses_no_files(tmp_path: Path) -> None:
    helper = FileWriterProcess()
    helper._process.kill()  # pyright: ignore[reportPrivateUsage]  -- the OOM killer's doing
    helper._process.wait()  # pyright: ignore[reportPrivateUsage]
    with pytest.raises(HelperGone):
        helper.write(_files(tmp_path / "a" / "0"))
    helper.close()


async def test_a_run_whose_helper_dies_still_writes_every_trial(tmp_path: Path) -> None:
    writer = ResultWriter(helper=True)
    try:
        writer._write_batch([_files(tmp_path / "a" / "0")])  # pyright: ignore[reportPrivateUsage]  -- starts it
        helper = writer._helper  # pyright: ignore[reportPrivateUsage]
        assert helper is not None and helper.alive
        helper._process.kill()  # pyright: ignore[reportPrivateUsage]
        helper._process.wait()  # pyright: ignore[reportPrivateUsage]
        batch = [_files(tmp_path / "a" / str(index)) for index in range(1, 4)]
        assert writer._write_batch(batch) == [None, None, None]  # pyright: ignore[reportPrivateUsage]
    finally:
        writer.close()
    for index in range(4):
        assert read_yaml(tmp_path / "a" / str(index) / "grade.yaml")["trial_id"] == "t:0"
    assert writer._helper is None  # pyright: ignore[reportPrivateUsage]  -- and nothing is left running


def _outcome(task_id: str, index: int) -> TrialOutcome:
    return TrialOutcome(task_id=task_id, trial_index=index, trial_id=f"{task_id}:{index}", episode=Episode())


@pytest.mark.parametrize("helper", [True, False], ids=["helper", "thread"])
async def test_many_trials_written_at_once_all_reach_the_disk(tmp_path: Path, helper: bool) -> None:
    writer = ResultWriter(helper=helper)
    try:
        for index in range(300):  # faster than the thread takes them: they queue and go in batches
            writer.write(tmp_path, _outcome("burst", index))
        await writer.drain()
    finally:
        writer.close()
    assert {path.parent.name for path in (tmp_path / "trials" / "burst").glob("*/grade.yaml")} == {
        str(index) for index in range(300)
    }


async def test_a_trial_that_cannot_be_written_is_raised_by_the_drain(tmp_path: Path) -> None:
    (tmp_path / "trials").write_text("a file where the trials folder should be")
    writer = ResultWriter(helper=True)
    try:
        writer.write(tmp_path, _outcome("t", 0))
        with pytest.raises(NotADirectoryError):
            await writer.drain()
    finally:
        writer.close()


def test_a_rewrite_cut_short_leaves_the_trial_unfinished(tmp_path: Path) -> None:
    directory = tmp_path / "t" / "0"
    store_trial(_files(directory))  # an earlier attempt, finished
    assert (directory / "grade.yaml").is_file()
    (directory / "metrics.yaml").unlink()
    (directory / "metrics.yaml").mkdir()  # the rewrite will fail on this file, after trajectory.yaml
    with pytest.raises(IsADirectoryError):
        store_trial(_files(directory))
    # The old grade.yaml went before anything was rewritten: the half-written trial is not finished.
    assert not (directory / "grade.yaml").exists()
