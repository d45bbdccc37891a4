"""Settings come from flags or TOLOKAFORGE_DB_* once; the CLI reports a bad or missing one in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tolokaforge.core.credentials import TOKEN_DIR_ENV
from tolokaforge.core.settings import SettingsError
from tolokaforge.db.cli import main
from tolokaforge.db.settings import Settings


def test_every_setting_has_an_environment_variable() -> None:
    env = {
        "TOLOKAFORGE_DB_STORE": "postgres",
        "TOLOKAFORGE_DB_DSN": "postgresql://u@h:1/d",
        "TOLOKAFORGE_DB_HOST": "127.0.0.2",
        "TOLOKAFORGE_DB_PORT": "9999",
        "TOLOKAFORGE_DB_MAX_BODY_BYTES": "123",
        "TOLOKAFORGE_DB_LOG_LEVEL": "info",
    }
    settings = Settings.from_env(env)
    assert (settings.store, settings.dsn, settings.host, settings.port) == (
        "postgres",
        "postgresql://u@h:1/d",
        "127.0.0.2",
        9999,
    )
    assert (settings.max_body_bytes, settings.log_level) == (123, "info")
    assert Settings.from_env({}) == Settings()
    with pytest.raises(SettingsError, match="TOLOKAFORGE_DB_STORE='sqlite'"):
        Settings.from_env({"TOLOKAFORGE_DB_STORE": "sqlite"})


def test_postgres_without_a_dsn_is_refused_not_defaulted() -> None:
    with pytest.raises(SettingsError, match="--store postgres needs --dsn"):
        Settings.from_env({"TOLOKAFORGE_DB_STORE": "postgres"})
    assert Settings().dsn is None  # no maintenance-database default anywhere


def test_unreachable_postgres_is_one_line_and_status_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(TOKEN_DIR_ENV, str(tmp_path))  # the token it makes at start: not in the home directory
    code = main(["--store", "postgres", "--dsn", "postgresql://postgres@127.0.0.1:1/none", "--port", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("tolokaforge-db: cannot start:") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["--store", "postgres"], {}, "tolokaforge-db: error: --store postgres needs --dsn"),
        ([], {"TOLOKAFORGE_DB_PORT": "abc"}, "tolokaforge-db: error: TOLOKAFORGE_DB_PORT='abc': "),
        (["--port", "70000"], {}, "tolokaforge-db: error: --port='70000': "),
        (["--bogus"], {}, "tolokaforge-db: error: unrecognized arguments: --bogus"),
    ],
)
def test_the_command_refuses_a_bad_setting_in_one_line(
    args: list[str], env: dict[str, str], expected: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tolokaforge.db.cli", *args],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(expected), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
