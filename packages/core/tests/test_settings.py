"""The one settings convention: names, precedence, and one-line errors naming the flag or variable."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, Field, model_validator

from tolokaforge.core.settings import SettingsError, env_var, exit_on_settings_error, parse_settings


class _Options(BaseModel):
    mode: Literal["fast", "slow"] = Field("fast", description="how")
    port: int = Field(1, ge=0, le=65535)
    target: str | None = None

    @model_validator(mode="after")
    def _slow_needs_a_target(self) -> _Options:
        if self.mode == "slow" and not self.target:
            raise ValueError("--mode slow needs --target")
        return self


def _parse(argv: list[str], environ: dict[str, str]) -> _Options:
    return parse_settings(_Options, prog="demo", prefix="DEMO_", argv=argv, environ=environ)


def test_the_variable_of_a_flag() -> None:
    assert env_var("TOLOKAFORGE_", "--llm-max-retries") == "TOLOKAFORGE_LLM_MAX_RETRIES"
    assert env_var("TOLOKAFORGE_DB_", "max_body_bytes") == "TOLOKAFORGE_DB_MAX_BODY_BYTES"


def test_a_flag_wins_over_its_variable_and_the_variable_over_the_default() -> None:
    assert _parse([], {}) == _Options(mode="fast", port=1)
    assert _parse([], {"DEMO_PORT": "7"}).port == 7
    assert _parse(["--port", "8"], {"DEMO_PORT": "7"}).port == 8
    assert _parse([], {"DEMO_PORT": ""}).port == 1  # an empty variable is unset


@pytest.mark.parametrize(
    ("argv", "environ", "message"),
    [
        ([], {"DEMO_PORT": "abc"}, "DEMO_PORT='abc': Input should be a valid integer"),
        (["--port", "70000"], {}, "--port='70000': Input should be less than or equal to 65535"),
        (["--mode", "warp"], {}, "--mode='warp': Input should be 'fast' or 'slow'"),
        (["--mode", "slow"], {}, "--mode slow needs --target"),
        (["--colour", "red"], {}, "unrecognized arguments: --colour red (see demo --help)"),
    ],
)
def test_a_bad_setting_is_one_line_naming_its_source(
    argv: list[str], environ: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError) as raised:
        _parse(argv, environ)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


def test_a_command_body_turns_a_settings_error_into_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_on_settings_error("demo", lambda: _parse([], {"DEMO_PORT": "x"}).port) == 2
    assert capsys.readouterr().err.startswith("demo: error: DEMO_PORT='x': ")
