"""``tolokaforge-runner``: options from flags or TOLOKAFORGE_RUNNER_*, bad ones refused in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tolokaforge.core.settings import SettingsError, env_var
from tolokaforge.runner.edge.cli import ENV_PREFIX, RunnerOptions, parse_options


def test_every_option_has_a_variable_under_the_runner_prefix() -> None:
    env = {env_var(ENV_PREFIX, name): value for name, value in
           {"host": "127.0.0.2", "port": "6000", "db_url": "http://127.0.0.1:1", "tool_timeout": "2.5",
            "isolation": "thread", "lease": "4", "golden_replay": "trial",
            "work_dir": "/srv/scratch", "token_file": "/srv/runner.token", "tls_cert": "/srv/cert.pem",
            "tls_key": "/srv/key.pem", "db_token_file": "/srv/db.token", "db_ca": "/srv/ca.pem"}.items()}  # fmt: skip
    options = parse_options([], env)
    assert options == RunnerOptions(
        host="127.0.0.2",
        port=6000,
        token_file=Path("/srv/runner.token"),
        tls_cert=Path("/srv/cert.pem"),
        tls_key=Path("/srv/key.pem"),
        store=None,
        db_url="http://127.0.0.1:1",
        db_token_file=Path("/srv/db.token"),
        db_ca=Path("/srv/ca.pem"),
        tool_timeout=2.5,
        isolation="thread",
        lease=4,
        golden_replay="trial",
        work_dir=Path("/srv/scratch"),
    )
    assert parse_options(["--port", "7000"], env).port == 7000  # a flag wins over its variable
    assert parse_options(["--isolation", "process"], env).isolation == "process"
    assert set(RunnerOptions.model_fields) == {
        "host",
        "port",
        "token_file",
        "tls_cert",
        "tls_key",
        "store",
        "db_url",
        "db_token_file",
        "db_ca",
        "tool_timeout",
        "isolation",
        "lease",
        "max_message_bytes",
        "idle_timeout",
        "receive_timeout",
        "max_streams",
        "golden_replay",
        "work_dir",
    }


def test_store_and_db_url_must_agree() -> None:
    with pytest.raises(SettingsError, match="--store http needs --db-url"):
        parse_options(["--store", "http"], {})
    with pytest.raises(SettingsError, match="exclude each other"):
        parse_options(["--store", "memory", "--db-url", "http://x"], {})


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (
            [],
            {"TOLOKAFORGE_RUNNER_PORT": "abc"},
            "tolokaforge-runner: error: TOLOKAFORGE_RUNNER_PORT='abc': ",
        ),
        (["--tool-timeout", "-1"], {}, "tolokaforge-runner: error: --tool-timeout='-1': "),
        (["--store", "disk"], {}, "tolokaforge-runner: error: --store='disk': "),
        (
            [],
            {"TOLOKAFORGE_RUNNER_ISOLATION": "none"},
            "tolokaforge-runner: error: TOLOKAFORGE_RUNNER_ISOLATION='none': ",
        ),
    ],
)
def test_a_bad_setting_is_one_line_and_status_2(args: list[str], env: dict[str, str], expected: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from tolokaforge.runner.edge.cli import main; main()", *args],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(expected), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
