"""The compat suite's collection: the packs' own files are data, not tests of ours.

A terminal task's verifier (the pytest file in its own tests folder) runs in the trial's sandbox
against the agent's work; collected here it would test an empty folder. ``TOLOKAFORGE_PUBLIC_CHECKOUT=none``
leaves out the module that runs the public project's own packs.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from tolokaforge.host.cli import main

collect_ignore_glob = ["packs/*"]
if os.environ.get("TOLOKAFORGE_PUBLIC_CHECKOUT") == "none":
    collect_ignore = ["test_public_checkout.py"]


Cli = Callable[[list[str]], tuple[int, str]]
"""``cli(args)``: ``tolokaforge <args>`` in this process -> (exit status, stdout + stderr)."""


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    def run(args: list[str]) -> tuple[int, str]:
        capsys.readouterr()
        with pytest.raises(SystemExit) as done:
            main(args)
        out, err = capsys.readouterr()
        return int(done.value.code or 0), out + err

    return run
