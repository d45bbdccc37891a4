"""Stage four of loading a task: grading.yaml (either style) -> the runner-form GradingConfig.

Renames: ``combine.method`` -> ``combine_method``, ``hash.enabled`` -> ``hash_enabled``, ``hash.weight``
-> ``hash_weight``, ``hash.golden_errors`` -> ``golden_errors``, golden actions ``{name, kwargs,
executor}`` -> ``{tool_name, arguments, executor}``. Public-style forms
are rewritten to ours (``op``/``expected`` -> the operator key, ``reason`` -> ``description``,
``must_contain_phrases`` -> ``must_contain``, the ``tool_expectations`` mapping -> call bounds; the
public grading shapes that need more than a rename are mapped in public_grading.py). What
has no meaning here is refused naming the key and why. The shapes the grader would refuse at grade
time (a weighted component without a weight, a hash blended with JSONPaths without ``hash.weight``,
a JSONPath over state the runner does not hold, one that does not parse or names a table the initial
state lacks) are refused here, so a pack that validates grades.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from jsonpath_ng.ext.parser import parse  # pyright: ignore[reportMissingTypeStubs]
from pydantic import ValidationError

from tolokaforge.core.models import (
    FILE_CHECK_OPERATORS,
    JSONPATH_OPERATORS,
    CustomChecksConfig,
    FileCheck,
    GoldenAction,
    GradingConfig,
    InitialState,
    JsonPathCheck,
    StateChecksConfig,
    ToolExpectation,
    TranscriptRulesConfig,
)

from .code_probe import code_probe
from .files import (
    CustomChecksFile,
    GradingFile,
    JsonPathFile,
    StateChecksFile,
    TranscriptRulesFile,
)
from .problems import ProblemLog
from .public_grading import OPERATOR_ALIASES, llm_judge, public_env_assertions, public_file_check, rooted_path
from .task_parts import AGENT_VISIBLE, resolve
from .web_checks import web_checks_config

__all__ = ["CHECKS_INTERFACE_VERSIONS", "to_grading_config"]


CHECKS_INTERFACE_VERSIONS = ("1.0",)
_TABLE = re.compile(
    r"^\$(?:\.(?:db|tables)|\[['\"](?:db|tables)['\"]\])"
    r"(?:\.([A-Za-z_][A-Za-z0-9_]*)|\[['\"]([^'\"]+)['\"]\])"
)
"""The table a path rooted at ``$.db`` (or ``$.tables``) names first, when it names one literally."""


def to_grading_config(
    log: ProblemLog, grading: GradingFile, *, file: Path, folder: Path, initial_state: InitialState | None
) -> GradingConfig | None:
    """Translate a validated grading file; None after recording every problem found in it."""
    mark = log.mark()
    weights: dict[str, float] = {name: share for name, share in grading.combine.weights.items()}
    env_assertions = public_env_assertions(log, grading, file, weights)
    state_checks = _state_checks(log, grading.state_checks, file, initial_state)
    transcript = _transcript_rules(log, grading.transcript_rules, file)
    custom = _custom_checks(log, grading.custom_checks, file, folder)
    judge = llm_judge(log, grading.llm_judge, file)
    web = web_checks_config(log, grading.web_checks, file)
    _weights_cover_components(log, grading, file, weights)
    if log.since(mark):
        return None
    try:
        return GradingConfig.model_validate(
            {
                "combine_method": grading.combine.method,
                "weights": weights,
                "pass_threshold": grading.combine.pass_threshold,
                "state_checks": state_checks,
                "transcript_rules": transcript,
                "llm_judge": judge,
                "custom_checks": custom,
                "trace_checks": grading.trace_checks,
                "env_assertions": env_assertions or grading.env_assertions,
                "tau2_actions": grading.tau2_actions,
                "tau2_communicate": grading.tau2_communicate,
                "web_checks": web,
                "zero_unless_ended_by": grading.zero_unless_ended_by,
            }
        )
    except ValidationError as error:
        log.add_validation_error(error, file)
        return None


def _state_checks(
    log: ProblemLog, block: StateChecksFile | None, file: Path, initial_state: InitialState | None
) -> StateChecksConfig | None:
    if block is None:
        return None
    hash_block = block.hash
    if hash_block is not None and hash_block.expected_state_hash is not None:
        log.add(
            file,
            "state_checks.hash.expected_state_hash",
            "is not supported: the expected state is computed by replaying golden_actions, "
            "so give those instead of a literal digest",
        )
    if block.db_hash_check:
        log.add(
            file,
            "state_checks.db_hash_check",
            "is not supported: it compares with a literal digest; give hash.golden_actions instead",
        )
    checks: list[JsonPathCheck] = []
    files: list[FileCheck] = []
    written_checks = [(f"state_checks.jsonpaths[{i}]", w) for i, w in enumerate(block.jsonpaths)]
    for index, written in enumerate(block.files or []):
        key = f"state_checks.files[{index}]"
        if written.path is not None:
            public = public_file_check(log, written, file, key)
            if public is not None:
                written_checks.append((key, public))
            continue
        written_checks.append((key, written))
    names = set(initial_state.tables) if initial_state is not None else set[str]()
    for key, written in written_checks:
        check = _assertion(log, written, file, key, names)
        if isinstance(check, JsonPathCheck):
            checks.append(check)
        elif check is not None:
            files.append(check)
    hash_enabled = hash_block.enabled if hash_block is not None else False
    if hash_enabled and (checks or files) and (hash_block is None or hash_block.weight is None):
        log.add(
            file,
            "state_checks.hash.weight",
            "is required when hash and jsonpaths (or file checks) both score: nothing else says how to blend them",
        )
    if (hash_enabled or checks) and initial_state is not None and not initial_state.provisions_database:
        log.add(
            file,
            "state_checks",
            "reads the trial's database, but initial_state declares no tables; declare them or drop the checks",
        )
    return StateChecksConfig(
        hash_enabled=hash_enabled,
        hash_weight=hash_block.weight if hash_block is not None else None,
        golden_actions=[
            GoldenAction(tool_name=action.name, arguments=action.kwargs, executor=action.executor)
            for action in (hash_block.golden_actions if hash_block is not None else [])
        ],
        golden_errors=hash_block.golden_errors if hash_block is not None else "fail",
        jsonpaths=checks,
        files=files,
    )


def _assertion(
    log: ProblemLog, written: JsonPathFile, file: Path, key: str, names: set[str]
) -> JsonPathCheck | FileCheck | None:
    """One state check in either style: a JSONPath over the tables, or (``path_glob``) a file check."""
    mark = log.mark()
    for public in ("must_exist", "must_contain"):
        if public in written.model_fields_set:
            log.add(file, f"{key}.{public}", "belongs to a files[] check by path (state_checks.files)")
    if written.path is None and written.path_glob is None:
        log.add(file, f"{key}.path", "is required (or path_glob, for a check over the workspace's files)")
        return None
    if written.path is not None and written.path_glob is not None:
        log.add(
            file, f"{key}.path_glob", "give path (the tables) or path_glob (the workspace's files), not both"
        )
        return None
    path = rooted_path(written.path, names) if written.path is not None else None
    if written.path is not None and path is None:
        log.add(
            file,
            f"{key}.path",
            f"{written.path!r} must address the trial's state as $.db.<table>... (or $.tables..., or "
            "$.<name>... for a top-level name of initial_state)",
        )
    if path is not None:
        problem = _path_problem(path, names)
        if problem is not None:
            log.add(file, f"{key}.path", problem)
    if written.required is False:
        log.add(file, f"{key}.required", "false is not supported: every state check is scored")
    description = written.description
    if written.reason is not None:
        if description:
            log.add(file, f"{key}.reason", "give description or reason (the same thing), not both")
        description = written.reason
    known = JSONPATH_OPERATORS if written.path is not None else FILE_CHECK_OPERATORS
    operators = {op: getattr(written, op) for op in JSONPATH_OPERATORS if op in written.model_fields_set}
    if written.op is not None:
        op = OPERATOR_ALIASES.get(written.op, written.op)
        if op not in known:
            aliases = [alias for alias, meant in OPERATOR_ALIASES.items() if meant in known]
            log.add(
                file, f"{key}.op", f"unknown operator {written.op!r} (known: {', '.join([*known, *aliases])})"
            )
        elif "expected" not in written.model_fields_set:
            log.add(file, f"{key}.expected", f"is required with op {written.op!r}")
        elif operators:
            log.add(file, f"{key}.op", f"give op/expected or {', '.join(operators)}, not both")
        else:
            operators = {op: written.expected}
    elif "expected" in written.model_fields_set:
        log.add(file, f"{key}.expected", "needs op (the operator it is compared with)")
    elif not operators and written.path is not None:
        # Public style: a path with no operator holds when it matches something.
        operators = {"exists": True}
    if written.path_glob is not None:
        for op in operators:
            if op not in FILE_CHECK_OPERATORS:
                log.add(
                    file, f"{key}.{op}", f"is not a file-check operator ({', '.join(FILE_CHECK_OPERATORS)})"
                )
    if log.since(mark):
        return None
    try:
        if path is not None:
            return JsonPathCheck.model_validate({"path": path, "description": description, **operators})
        glob = _workspace_glob(written.path_glob or "")
        if glob is None:
            log.add(
                file,
                f"{key}.path_glob",
                f"{written.path_glob!r} must lie in the workspace ({AGENT_VISIBLE}...)",
            )
            return None
        return FileCheck.model_validate({"path_glob": glob, "description": description, **operators})
    except ValidationError as error:
        log.add_validation_error(error, file, prefix=key)
        return None


def _path_problem(path: str, tables: set[str]) -> str | None:
    """Why the grader could not evaluate ``path`` over the trial's tables: it does not parse (the
    grader's dialect), or it names a table the initial state does not have. ``tables`` empty: unknown."""
    try:
        _parsed(path)
    except Exception as error:  # jsonpath_ng raises several unrelated types for a bad path
        return f"{path!r} is not a JSONPath the grader can parse: {' '.join(str(error).split())}"
    found = _TABLE.match(path)
    table = (found.group(1) or found.group(2)) if found is not None else None
    if tables and table is not None and table not in tables:
        return (
            f"{path!r} reads table {table!r}, which the task's initial state does not have "
            f"(tables: {', '.join(sorted(tables))})"
        )
    return None


@functools.lru_cache(maxsize=1024)
def _parsed(path: str) -> object:
    # Parsing builds the parser's tables each time (about a millisecond): a pack repeats its paths.
    return parse(path)


def _workspace_glob(pattern: str) -> str | None:
    """A glob relative to the workspace; public packs write the workspace as /env/fs/agent-visible/."""
    if pattern.startswith(AGENT_VISIBLE):
        pattern = pattern[len(AGENT_VISIBLE) :]
    if not pattern or pattern.startswith("/") or ".." in pattern.split("/"):
        return None
    return pattern


def _transcript_rules(
    log: ProblemLog, block: TranscriptRulesFile | None, file: Path
) -> TranscriptRulesConfig | None:
    if block is None:
        return None
    expectations = block.tool_expectations
    if not isinstance(expectations, list):
        expectations = [ToolExpectation(name=name, min_calls=1) for name in expectations.required_tools] + [
            ToolExpectation(name=name, max_calls=0) for name in expectations.disallowed_tools
        ]
    return TranscriptRulesConfig(
        max_turns=block.max_turns,
        min_assistant_turns=block.min_assistant_turns,
        must_contain=[*block.must_contain, *block.must_contain_phrases],
        disallow_regex=block.disallow_regex,
        required_actions=block.required_actions,
        communicate_info=block.communicate_info,
        tool_expectations=expectations,
    )


def _custom_checks(
    log: ProblemLog, block: CustomChecksFile | None, file: Path, folder: Path
) -> CustomChecksConfig | None:
    """The checks file and its import folders, re-expressed relative to the pack root (the code bundle's root)."""
    if block is None:
        return None
    key = "custom_checks"
    mark = log.mark()
    if block.interface_version is not None and block.interface_version not in CHECKS_INTERFACE_VERSIONS:
        log.add(
            file,
            f"{key}.interface_version",
            f"{block.interface_version!r} is not supported (supported: {', '.join(CHECKS_INTERFACE_VERSIONS)})",
        )
    if block.weight is not None and block.weight != 1.0:
        log.add(
            file,
            f"{key}.weight",
            "only 1.0 has a meaning: the suite is one component, weighted by combine.weights.custom_checks",
        )
    checks_path = _inside_pack(log, block.file, folder, file, f"{key}.file", want_file=True)
    imports: list[str] = []
    for index, relative in enumerate(block.relative_imports):
        found = _inside_pack(log, relative, folder, file, f"{key}.relative_imports[{index}]", want_file=False)
        if found is not None:
            imports.append(found)
    if checks_path is None:
        return None
    if block.enabled and not log.since(mark):
        failure = code_probe().checks_failure(checks_path, imports)
        if failure is not None:
            log.add(file, f"{key}.file", f"cannot be loaded, so every grade would fail: {failure}")
    return CustomChecksConfig(
        enabled=block.enabled,
        file=checks_path,
        timeout_seconds=block.timeout_seconds,
        fail_on_error=block.fail_on_error,
        relative_imports=imports,
    )


def _inside_pack(
    log: ProblemLog, relative: str, folder: Path, file: Path, key: str, *, want_file: bool
) -> str | None:
    found = resolve(log.root, relative, folder)
    if found is None or (found.is_file() if not want_file else not found.is_file()):
        log.add(file, key, f"{'file' if want_file else 'folder'} {relative!r} not found")
        return None
    if not found.is_relative_to(log.root.resolve()):
        log.add(file, key, "must lie inside the pack (only the pack's files travel to the runner)")
        return None
    return found.relative_to(log.root.resolve()).as_posix() or "."


def _weights_cover_components(
    log: ProblemLog, grading: GradingFile, file: Path, weights: dict[str, float]
) -> None:
    """Under ``weighted``, a component that will be scored needs a weight, or the grade is refused."""
    if grading.combine.method != "weighted":
        return
    scored: list[str] = []
    state = grading.state_checks
    if state is not None and (
        (state.hash is not None and state.hash.enabled) or state.jsonpaths or state.files
    ):
        scored.append("state_checks")
    if state is not None and state.env_assertions:
        scored.append("env_assertions")
    if grading.transcript_rules is not None:
        scored.append("transcript_rules")
    if grading.custom_checks is not None and grading.custom_checks.enabled:
        scored.append("custom_checks")
    if grading.llm_judge is not None:
        scored.append("llm_judge")
    if grading.trace_checks is not None:
        scored.append("trace_checks")
    scored += [
        name
        for name, block in (
            ("env_assertions", grading.env_assertions),
            ("tau2_actions", grading.tau2_actions),
            ("tau2_communicate", grading.tau2_communicate),
            ("web_checks", grading.web_checks),
        )
        if block is not None
    ]
    for name in scored:
        if name not in weights:
            log.add(
                file,
                "combine.weights",
                f"declares no weight for {name}, which is configured and scored under method 'weighted'",
            )
