"""``--tolokaforge-provider CMD``: the provider contract checked against real provider subprocesses."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import psutil

from .conftest import RunPytest

BIN = Path(sys.executable).parent
BAD = Path(__file__).resolve().parent / "fixtures" / "bad_provider.py"

FS_OPERATIONS = (
    "read",
    "write",
    "list",
    "read_file",
    "write_file",
    "list_dir",
    "append_file",
    "copy_file",
    "move_file",
    "delete_file",
    "grep_workspace",
    "replace_lines",
)
PROVIDER_ITEMS = ("describe", "schema", "unknown_operation", "authentication", "configure_once")


def _ids(provider: str, operations: tuple[str, ...]) -> set[str]:
    base = f"tolokaforge-provider[{provider}]"
    ids = {f"{base}::{check}" for check in PROVIDER_ITEMS}
    for operation in operations:
        ids |= {f"{base}::{operation}::declares", f"{base}::{operation}::invalid_arguments"}
    return ids


def _leftovers(tag: str) -> list[psutil.Process]:
    found: list[psutil.Process] = []
    for process in psutil.process_iter():
        try:
            if tag in " ".join(process.cmdline()):
                found.append(process)
        except psutil.Error:
            continue
    return found


def test_builtin_providers_pass_every_item(run_pytest: RunPytest, tmp_path: Path) -> None:
    """Both built-in providers, named by the ini key (one command per line)."""
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\ntolokaforge_providers =\n"
        f"    {BIN / 'tolokaforge-tool-provider-fs'}\n"
        f"    {BIN / 'tolokaforge-tool-provider-exec'}\n"
    )
    run = run_pytest(cwd=tmp_path)
    expected = _ids("fs", FS_OPERATIONS) | _ids("exec", ("run", "bash", "calculator"))
    assert set(run.outcomes) == expected, run.output
    assert run.failed() == set(), run.output
    assert "tolokaforge-provider[exec]: 11 checked, 11 passed, 0 failed" in run.output
    assert "tolokaforge-provider[fs]: 29 checked, 29 passed, 0 failed" in run.output
    assert "tasks checked" not in run.output


def test_misbehaving_provider_fails_the_right_items(run_pytest: RunPytest) -> None:
    tag = f"tolokaforge-test-{uuid.uuid4().hex}"
    bad = f"{sys.executable} {BAD} --tag {tag}"
    run = run_pytest(
        "--tolokaforge-provider",
        bad,
        "--tolokaforge-provider",
        f"{bad} --duplicate --describe-version 2",
        "--tolokaforge-provider",
        "no-such-provider-command-7f3a",
    )
    assert run.returncode == 1, run.output
    operations = ("good", "wrong_category", "no_kind", "interactive_parallel", "silent_unknown")
    first = "tolokaforge-provider[bad]"
    assert _ids("bad", operations) <= set(run.outcomes), run.output
    assert {nodeid for nodeid in run.failed() if nodeid.startswith(first + "::")} == {
        f"{first}::describe",
        f"{first}::unknown_operation",
        f"{first}::authentication",
        f"{first}::configure_once",
        f"{first}::wrong_category::invalid_arguments",
        f"{first}::no_kind::declares",
        f"{first}::interactive_parallel::declares",
        f"{first}::silent_unknown::invalid_arguments",
    }, run.output
    assert "no version" in run.section(f"{first}::describe")
    assert "UNKNOWN without details" in run.section(f"{first}::unknown_operation")
    # It asks for no token and takes any number of Configures.
    assert "Describe with no token answered OK, not UNAUTHENTICATED" in run.section(
        f"{first}::authentication"
    )
    assert "answered OK, not FAILED_PRECONDITION" in run.section(f"{first}::configure_once")
    assert "EXECUTION_FAILED, not INVALID_ARGUMENTS" in run.section(
        f"{first}::wrong_category::invalid_arguments"
    )
    declares = run.section(f"{first}::no_kind::declares")
    assert "kind is UNSPECIFIED" in declares and "risk is UNSPECIFIED" in declares
    assert "must not declare a ConcurrencySpec" in run.section(f"{first}::interactive_parallel::declares")
    assert "UNKNOWN without details" in run.section(f"{first}::silent_unknown::invalid_arguments")

    second = "tolokaforge-provider[bad]#2"
    assert run.outcomes[f"{second}::schema"] == "FAILED"
    assert "operation names are not unique: good" in run.output
    assert "protocol_version 2 differs from the handshake's 1" in run.output

    missing = "tolokaforge-provider[no-such-provider-command-7f3a]"
    assert {nodeid for nodeid in run.outcomes if nodeid.startswith(missing)} == {
        f"{missing}::{check}" for check in PROVIDER_ITEMS
    }
    assert run.failed() >= {f"{missing}::describe", f"{missing}::schema"}
    assert "cannot start 'no-such-provider-command-7f3a'" in run.output
    assert _leftovers(tag) == [], "provider processes outlived the session"
