"""Settings come from TOLOKAFORGE_DB_* once; the CLI reports a missing prerequisite in one line."""

from __future__ import annotations

import pytest

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
    with pytest.raises(ValueError, match="memory or postgres"):
        Settings.from_env({"TOLOKAFORGE_DB_STORE": "sqlite"})


def test_unreachable_postgres_is_one_line_and_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--store", "postgres", "--dsn", "postgresql://postgres@127.0.0.1:1/none", "--port", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("tolokaforge-db: cannot start:") and err.count("\n") == 1
