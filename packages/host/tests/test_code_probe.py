"""Loading a pack asks a sandboxed child what the pack's code declares; the loader never runs it itself.

Each test plants code in a copy of the retail pack that runs when its tool module is imported, and
loads the pack: the tools are still described, and what the planted code could see or do shows it ran
in the sandbox -- never in the loading process, never with its environment.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tolokaforge.host.errors import ConfigError, PackLoadError
from tolokaforge.host.packs import code_probe as probe_module
from tolokaforge.host.packs import load_pack

SECRET = "tf-loader-secret-0123456789"
TOOL = "find_customer_by_email"

# Appended to the retail copy's read tools module: one tool's description reports what the import saw.
EVIDENCE = """
import os as _os
_seen = {
    "uid": _os.getuid(),
    "key": _os.environ.get("OPENAI_API_KEY", "absent"),
    "secret_file": _os.path.exists(SECRET_FILE),
    "home": _os.environ.get("HOME"),
    "pid_namespace": _os.readlink("/proc/self/ns/pid"),
}
_described = FindCustomerByEmail.get_info


def _with_evidence() -> dict[str, Any]:
    info = _described()
    info["function"]["description"] = repr(_seen)
    return info


FindCustomerByEmail.get_info = staticmethod(_with_evidence)
"""


def _plant(pack: Path, code: str) -> None:
    read = pack / "tools" / "read.py"
    read.write_text(read.read_text() + code)


def _description(pack: Path, **options: object) -> str:
    loaded = load_pack(pack, **options)  # pyright: ignore[reportArgumentType]
    for task in loaded.tasks:
        for tool in task.task.agent_tools:
            if tool.name == TOOL:
                return tool.description
    raise AssertionError(f"no {TOOL} in the loaded pack")


def test_the_pack_code_a_load_runs_sees_neither_the_environment_nor_the_host(
    pack_copy: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    secret_file = tmp_path / "host-only.txt"
    secret_file.write_text(SECRET)
    pack = pack_copy("retail")
    _plant(pack, f"\nSECRET_FILE = {str(secret_file)!r}\n" + EVIDENCE)
    seen = eval(_description(pack))  # the planted repr of plain values
    assert seen["key"] == "absent"
    assert seen["secret_file"] is False
    assert seen["home"] == "/tmp"
    assert seen["pid_namespace"] != os.readlink("/proc/self/ns/pid")
    if os.geteuid() == 0:
        assert seen["uid"] == 65534
    # and nothing of the pack was imported here
    assert not [name for name in sys.modules if name.startswith("_tolokaforge_pack_")]


def test_at_isolation_process_the_child_still_gets_an_empty_environment(
    pack_copy: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    pack = pack_copy("retail")
    _plant(pack, f"\nSECRET_FILE = {str(tmp_path / 'absent')!r}\n" + EVIDENCE)
    seen = eval(_description(pack, isolation="process"))
    assert seen["key"] == "absent"
    assert seen["pid_namespace"] == os.readlink("/proc/self/ns/pid")  # no sandbox: said, not hidden


def test_output_the_import_prints_cannot_forge_an_answer(pack_copy: Callable[[str], Path]) -> None:
    pack = pack_copy("retail")
    forged = '{"ok": [{"name": "forged", "description": "", "parameters": {}}]}'
    _plant(pack, f"\nprint({forged!r})\nimport sys as _sys\n_sys.stdout.write({forged!r} + '\\n')\n")
    loaded = load_pack(pack)
    names = {tool.name for task in loaded.tasks for tool in task.task.agent_tools}
    assert TOOL in names and "forged" not in names


@pytest.mark.parametrize(
    ("planted", "said"),
    [
        ("\nimport os as _os\n_os._exit(3)\n", "ended the process reading it (exit status 3)"),
        ("\nraise RuntimeError('no import for you')\n", "raised RuntimeError: no import for you"),
        ("\nimport time as _time\n_time.sleep(60)\n", "took longer than 1s"),
    ],
)
def test_an_import_that_dies_raises_or_hangs_is_the_packs_problem(
    pack_copy: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch, planted: str, said: str
) -> None:
    if "took longer" in said:  # only the hang is cut short: a loaded machine may start a child slowly
        monkeypatch.setattr(probe_module, "IMPORT_TIMEOUT_S", 1.0)
    pack = pack_copy("retail")
    _plant(pack, planted)
    with pytest.raises(PackLoadError) as raised:
        load_pack(pack)
    messages = [problem.message for problem in raised.value.problems]
    assert any(said in message for message in messages), messages


def test_a_missing_sandbox_layer_stops_the_load_naming_the_fix(
    pack_copy: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    pack = pack_copy("retail")
    _plant(pack, "\n# a new digest: nothing is answered from an earlier load\n")
    monkeypatch.setenv("PATH", "/nonexistent")  # no bwrap to find
    monkeypatch.setattr(probe_module, "_confinements", {})
    with pytest.raises(ConfigError) as raised:
        load_pack(pack)
    assert "bubblewrap" in str(raised.value) and "--isolation process" in str(raised.value)
