"""The public Tolokaforge project's grading shapes, each mapped onto ours (stage four of loading a task).

grading.py calls these for the keys whose public form differs from ours: ``files[]`` by ``path``
(``must_exist`` / ``must_contain``), JSONPaths rooted at a top-level state name (``$.counter``) and
short operator names (``op: gte``), ``state_checks.env_assertions`` (``func_name``, ``assert_value``)
and the legacy ``llm_judge`` (a text rubric with ``model_ref`` / ``output_schema``). Each records what
it cannot map in the shared :class:`ProblemLog`, naming the key. docs/pack-format.md says where the
public docs and code disagree about these and what we do.
"""

from __future__ import annotations

import glob
import re
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError

from tolokaforge.core.models import (
    Criterion,
    EnvAssertion,
    EnvAssertionsConfig,
    JudgeCustomization,
    LLMJudgeConfig,
    Rubric,
)

from .files import GradingFile, JsonPathFile, LegacyJudgeFile
from .problems import ProblemLog

__all__ = [
    "OPERATOR_ALIASES",
    "llm_judge",
    "public_env_assertions",
    "public_file_check",
    "rooted_path",
]

_STATE_ROOT = re.compile(r"^\$(?:\.(db|tables)\b|\[['\"](db|tables)['\"]\])")
_TOP_NAME = re.compile(r"^\$(?:\.([A-Za-z_][A-Za-z0-9_]*)|\[['\"]([^'\"]+)['\"]\])")
OPERATOR_ALIASES = {
    "eq": "equals",
    "ne": "not_equals",
    "gt": "greater_than",
    "gte": "greater_or_equal",
    "lt": "less_than",
    "lte": "less_or_equal",
}
"""Short operator names public packs write in ``op:`` (e.g. ``op: gte``), and ours they mean."""
_LEGACY_JUDGE_FIELDS = frozenset({"score", "reasons", "reasoning"})
"""What the public legacy judge reads of its model's answer; an output_schema may ask for no more."""


def public_file_check(log: ProblemLog, written: JsonPathFile, file: Path, key: str) -> JsonPathFile | None:
    """Public ``files[] {path, must_exist, must_contain}`` as our path_glob form: one check per entry.

    ``must_contain`` implies the file exists, so with ``must_exist: true`` it is one ``contains`` check;
    ``must_exist`` alone is an ``exists`` check. The path is literal, so glob characters are escaped.
    """
    given = written.model_fields_set - {"path", "description", "reason"}
    if given - {"must_exist", "must_contain"}:
        extra = ", ".join(sorted(given - {"must_exist", "must_contain"}))
        log.add(file, key, f"a check by path takes must_exist / must_contain, not {extra} (or use path_glob)")
        return None
    if written.must_contain is not None and written.must_exist is False:
        log.add(file, f"{key}.must_exist", "false contradicts must_contain (a missing file contains nothing)")
        return None
    if written.must_contain is None and written.must_exist is None:
        log.add(file, key, "needs must_exist or must_contain")
        return None
    operator: dict[str, Any] = (
        {"contains": written.must_contain}
        if written.must_contain is not None
        else {"exists": written.must_exist}
    )
    return JsonPathFile.model_validate(
        {
            "path_glob": glob.escape(written.path or ""),
            "description": written.description,
            **({"reason": written.reason} if written.reason is not None else {}),
            **operator,
        }
    )


def rooted_path(path: str, names: set[str]) -> str | None:
    """``path`` addressed from ``$.db``: as written, or public style ``$.<name>...`` for a top-level
    name of the task's initial state (the public grader's root is the state itself). None otherwise."""
    stripped = path.strip()
    if _STATE_ROOT.match(stripped):
        return stripped
    found = _TOP_NAME.match(stripped)
    if found is None or (found.group(1) or found.group(2)) not in names:
        return None
    return "$.db" + stripped[1:]


def public_env_assertions(
    log: ProblemLog, grading: GradingFile, file: Path, weights: dict[str, float]
) -> EnvAssertionsConfig | None:
    """Public ``state_checks.env_assertions`` as our env_assertions component.

    The public grader calls each ``func_name`` on the final state and compares its answer with
    ``assert_value``; the state score is 1 when all hold, else 0, and in a block with env assertions
    it evaluates nothing else. Here each function is a tool of the task (usually hidden) called on a
    scratch copy of the final state, and the block's ``state_checks`` weight becomes the component's.
    """
    block = grading.state_checks
    if block is None or not block.env_assertions:
        return None
    key = "state_checks.env_assertions"
    mark = log.mark()
    if grading.env_assertions is not None:
        log.add(file, key, "give env_assertions once: here (public style) or at the top level, not both")
    others = [
        name
        for name, given in (
            ("hash", block.hash is not None and block.hash.enabled),
            ("jsonpaths", bool(block.jsonpaths)),
            ("files", bool(block.files)),
        )
        if given
    ]
    if others:
        log.add(
            file,
            key,
            f"cannot share state_checks with {', '.join(others)}: the public grader evaluates only the env "
            "assertions of such a block, so the others would count for nothing; move the assertions to "
            "the top-level env_assertions component",
        )
    names: list[str] = []
    for index, written in enumerate(block.env_assertions):
        given = [name for name in (written.func_name, written.tool_name) if name is not None]
        if len(given) != 1:
            log.add(file, f"{key}[{index}]", "name the function once: func_name (or tool_name)")
        else:
            names.append(given[0])
    if log.since(mark):
        return None
    if "state_checks" in weights and "env_assertions" not in weights:
        weights["env_assertions"] = weights.pop("state_checks")
    return EnvAssertionsConfig(
        assertions=[
            EnvAssertion(
                tool_name=name,
                arguments=written.arguments,
                executor="agent" if written.env_type == "assistant" else "user",
                expected=written.assert_value,
                message=written.message or "",
            )
            for name, written in zip(names, block.env_assertions, strict=True)
        ]
    )


def llm_judge(log: ProblemLog, block: dict[str, Any] | None, file: Path) -> LLMJudgeConfig | None:
    """Ours (a rubric of criteria) as is; the legacy public shape (one rubric text) as one graded criterion."""
    if block is None:
        return None
    # The public shape is a text rubric with model_ref (its runner's reading) or output_schema (its
    # model's); a bare text rubric is neither, and gets our shape's hint.
    if not isinstance(block.get("rubric"), str) or not ({"model_ref", "output_schema"} & block.keys()):
        try:
            return LLMJudgeConfig.model_validate(block)
        except ValidationError as error:
            log.add_validation_error(error, file, prefix="llm_judge")
            return None
    try:
        legacy = LegacyJudgeFile.model_validate(block)
    except ValidationError as error:
        log.add_validation_error(error, file, prefix="llm_judge")
        return None
    mark = log.mark()
    if legacy.tool_packs:
        log.add(file, "llm_judge.tool_packs", "is not supported: the judge's tools are fixed (docs/judge.md)")
    if legacy.output_schema is not None:
        problem = _legacy_schema_problem(legacy.output_schema)
        if problem is not None:
            log.add(file, "llm_judge.output_schema", problem)
    if log.since(mark):
        return None
    # The public judge answers one score in [0, 1] for the whole rubric: one graded criterion.
    return LLMJudgeConfig(
        rubric=Rubric(criteria=[Criterion(id="rubric", description=legacy.rubric, kind="graded")]),
        customization=JudgeCustomization(system_prompt=legacy.system_prompt),
    )


def _legacy_schema_problem(schema: dict[str, Any]) -> str | None:
    """Why a legacy output_schema asks for more than a score and its reasons (None when it does not)."""
    properties: Any = schema.get("properties", {})
    required: Any = schema.get("required", [])
    if schema.get("type", "object") != "object" or not isinstance(properties, dict):
        return "must describe an object: the judge answers {score, reasons}"
    names = [
        *cast(dict[str, Any], properties),
        *(cast(list[Any], required) if isinstance(required, list) else []),
    ]
    asked = {str(name) for name in names}
    beyond = sorted(asked - _LEGACY_JUDGE_FIELDS)
    if beyond:
        return (
            f"asks for {', '.join(beyond)}, which nothing grades: the judge's answer is a score in [0, 1] "
            "(and its reasons); write an llm_judge rubric of criteria to judge more"
        )
    return None
