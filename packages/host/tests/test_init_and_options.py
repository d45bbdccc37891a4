"""``tolokaforge init`` writes a pack that validates and passes its golden run; every option of every
command has its variable under the one convention of ``tolokaforge.core.settings``."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
import yaml

from tolokaforge.core.settings import env_var
from tolokaforge.host.cli import cli, main
from tolokaforge.host.cli.options import ENV_PREFIX


def _main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(args)
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out + err


def test_init_then_validate_then_a_golden_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pack = tmp_path / "notes"
    code, text = _main(["init", str(pack)], capsys)
    assert code == 0 and "wrote 6 files" in text
    assert yaml.safe_load((pack / "pack.yaml").read_text())["name"] == "notes"
    code, text = _main(["validate", "--pack", str(pack)], capsys)
    assert (code, text.strip()) == (0, "notes: 1 tasks, 2 tools: OK")
    code, text = _main(["run", "--pack", str(pack), "--output", str(tmp_path / "run")], capsys)
    assert (
        code == 0
        and text.strip().splitlines()[-1] == "exit 0: all 1 trials graded; pass rate 1.000 (1/1 passed)"
    )
    grade = yaml.safe_load((tmp_path / "run" / "trials" / "close_note" / "0" / "grade.yaml").read_text())
    assert grade["score"] == 1.0


def test_init_refuses_a_folder_with_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    code, text = _main(["init", str(tmp_path)], capsys)
    assert code == 2 and "is not an empty folder" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def _options() -> list[tuple[str, click.Option]]:
    assert isinstance(cli, click.Group)
    return [
        (name, param)
        for name, command in cli.commands.items()
        for param in command.params
        if isinstance(param, click.Option) and not param.hidden
    ]


@pytest.mark.parametrize(("command", "option"), _options(), ids=lambda value: getattr(value, "name", value))
def test_every_host_option_has_its_variable(command: str, option: click.Option) -> None:
    flag = next(name for name in option.opts if name.startswith("--"))
    envvar = option.envvar if isinstance(option.envvar, list | tuple) else [option.envvar]
    assert envvar[0] == env_var(ENV_PREFIX, flag), f"tolokaforge {command} {flag}"
    assert option.show_envvar
