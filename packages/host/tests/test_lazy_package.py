"""The host package loads its names on first use: the result-file helper imports none of aiohttp,
grpclib or the runner, and every public name still resolves."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import tolokaforge.host as host

HEAVY = ("aiohttp", "grpclib", "tolokaforge.runner", "tolokaforge.host.run.schedule")


def _modules_after(statement: str) -> set[str]:
    script = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(result.stdout))


def test_the_result_file_helper_imports_nothing_heavy() -> None:
    loaded = _modules_after("import tolokaforge.host.results.file_writer_main")
    assert "tolokaforge.host.results.yaml_files" in loaded
    assert not [name for name in HEAVY if name in loaded]


def test_every_public_name_resolves_and_is_listed() -> None:
    for name in host.__all__:
        assert getattr(host, name) is not None, name
    assert set(host.__all__) <= set(dir(host))
    assert "tolokaforge.host.run.schedule" in _modules_after("from tolokaforge.host import run_pack")


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        getattr(host, "no_such_name")  # noqa: B009
