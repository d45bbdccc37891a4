"""summary.yaml with per_trial entries rendered ahead of time is the same text as rendered at once."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from tolokaforge.host.results.summary import EntryTexts, RunSummary, render_summary
from tolokaforge.host.results.trial_rows import TRIAL_KINDS, TrialKind, TrialRow
from tolokaforge.host.results.yaml_files import dump_yaml

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
_rows = st.builds(
    TrialRow,
    task_id=st.sampled_from(["shop", "refund: all", "null", "über", "- dash"]),
    kind=st.sampled_from(TRIAL_KINDS),
    reason=_text,
    score=st.none() | st.floats(min_value=0.0, max_value=1.0) | st.just(1e-7),
    termination=st.none() | st.sampled_from(["agent_done", "max_turns", "yes"]),
    grading_error=st.none() | _text | st.just("line one\nline two\n"),
    unscored=st.lists(st.sampled_from(["custom_checks", "llm_judge"]), max_size=2).map(tuple),
    trace_gate_failed=st.booleans(),
)


def _summary(rows: list[TrialRow]) -> RunSummary:
    return RunSummary(pack="p", agent="golden", trials_per_task=2, rows=rows, wall_time_s=1.5, ran=len(rows))


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(_rows, max_size=12), rendered=st.data(), batch=st.integers(min_value=1, max_value=5))
def test_pre_rendered_entries_give_the_same_summary_text(
    rows: list[TrialRow], rendered: st.DataObject, batch: int
) -> None:
    rows = [dataclasses.replace(row, trial_index=index) for index, row in enumerate(rows)]  # one per trial
    summary = _summary(rows)
    entries = EntryTexts(batch)
    try:
        for row in rows:
            if rendered.draw(st.booleans()):  # some trials were rendered ahead, the others (resumed) not
                entries.add(row)
        texts = entries.texts()
    finally:
        entries.close()
    assert render_summary(summary, texts) == dump_yaml(summary.to_dict())


def test_a_summary_without_trials_is_written_as_ever() -> None:
    summary = _summary([])
    assert render_summary(summary, {("shop", 0): "- stale\n"}) == dump_yaml(summary.to_dict())


def test_a_reason_that_keeps_its_trailing_newlines_ends_the_document_as_a_whole_dump_does() -> None:
    # A ``|+`` block scalar leaves PyYAML's document open: the whole dump ends with ``...``; the parts
    # rendered apart must add up to the same text.
    kinds: list[TrialKind] = [kind for kind in TRIAL_KINDS if kind != "passed"]
    rows = [
        TrialRow(task_id="shop", trial_index=index, kind=kind, reason=" x\n\n")
        for index, kind in enumerate(kinds)
    ]
    summary = _summary(rows)
    entries = EntryTexts(1)
    try:
        entries.add(rows[0])
        texts = entries.texts()
    finally:
        entries.close()
    whole = dump_yaml(summary.to_dict())
    assert whole.endswith("\n...\n")
    assert render_summary(summary, texts) == whole
