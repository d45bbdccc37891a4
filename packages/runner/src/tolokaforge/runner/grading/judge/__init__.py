"""The LLM rubric judge (grading.yaml: llm_judge), run inside the runner next to the trial's state.

prompt.py builds the judge's evidence, state.py its read-only view of the state, chat.py/mock.py the
model it talks to, loop.py the tool-calling loop, report.py the terminal submit_report tool, scoring.py
the rubric's score and evaluate.py the component. See docs/judge.md.
"""

from __future__ import annotations

from .evaluate import JudgeOutcome, judge_trial

__all__ = ["JudgeOutcome", "judge_trial"]
