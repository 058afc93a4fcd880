"""The service's settings from flags, MINTERPR_* variables and a TOML file: flag > variable >
file > default, values typed by the ServeSettings field, bad values in one line naming the
setting and where it came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from minterpr.errors import InputError
from minterpr.serving.config import load_settings, setting_types
from minterpr.serving.settings import RateSpec, ServeSettings


def _file(tmp_path, text: str) -> Path:
    path = tmp_path / "minterpr.toml"
    path.write_text(text)
    return path


def test_flag_beats_variable_beats_file_beats_default(tmp_path):
    config = _file(
        tmp_path,
        'data_dir = "/from/file"\ndatabase_url = "sqlite:////file.db"\nmax_results = 7\n'
        'login_rate = {rate_per_s = 0.1, burst = 2}\ntrusted_proxies = ["10.0.0.1"]\n'
        'import_roots = ["/srv/in", "/srv/more"]\ncookie_secure = true\n',
    )
    environ = {
        "MINTERPR_DATABASE_URL": "postgresql+psycopg://u:secret@db/m",
        "MINTERPR_MAX_RESULTS": "9",
        "MINTERPR_TRUSTED_PROXIES": "10.0.0.2, 10.0.0.0/24",
    }
    got = load_settings({"max_results": 11, "data_dir": None}, config=config, environ=environ)
    assert got.max_results == 11  # flag
    assert got.database_url == "postgresql+psycopg://u:secret@db/m"  # variable over file
    assert got.trusted_proxies == ("10.0.0.2", "10.0.0.0/24")
    assert got.data_dir == Path("/from/file") and got.cookie_secure is True  # file (the flag was not given)
    assert got.login_rate == RateSpec(0.1, 2) and got.import_roots == (Path("/srv/in"), Path("/srv/more"))
    assert got.search_rate == ServeSettings(data_dir=Path(".")).search_rate  # default
    defaults = load_settings({}, environ={})
    assert defaults == ServeSettings(data_dir=Path("outputs/serve"))


def test_the_settings_file_may_come_from_the_environment(tmp_path):
    config = _file(tmp_path, "retention_days = 30\n")
    assert load_settings({}, environ={"MINTERPR_CONFIG": str(config)}).retention_days == 30
    environ = {"MINTERPR_CONFIG": str(config), "MINTERPR_RETENTION_DAYS": "none"}
    assert load_settings({}, environ=environ).retention_days is None  # a variable can unset what the file set


@pytest.mark.parametrize(
    "text, message",
    [
        ('max_results = "many"\n', "max_results (settings file .*): not an integer: 'many'"),
        ("max_result = 3\n", "unknown setting 'max_result': must be one of data_dir, "),
        ("cookie_secure = 3\n", "cookie_secure (settings file .*): not true or false: 3"),
        (
            "login_rate = {rate_per_s = 0, burst = 5}\n",
            "login_rate (settings file .*): rate limit needs rate_per_s > 0",
        ),
        ('trusted_proxies = ["proxy.local"]\n', "trusted_proxies: 'proxy.local' is not an IP address"),
        ("max_results = [\n", "not TOML"),
    ],
)
def test_bad_values_in_the_file_name_the_setting(tmp_path, text, message):
    with pytest.raises(
        InputError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[").replace(".*", "[^)]*")
    ):
        load_settings({}, config=_file(tmp_path, text), environ={})


@pytest.mark.parametrize(
    "variable, value, message",
    [
        ("MINTERPR_LOGIN_RATE", "fast", "login_rate (environment variable MINTERPR_LOGIN_RATE): a rate is RATE/BURST"),
        (
            "MINTERPR_MAX_UPLOAD_BYTES",
            "1.5",
            "max_upload_bytes (environment variable MINTERPR_MAX_UPLOAD_BYTES): not an integer",
        ),
        (
            "MINTERPR_LOGIN_TTL_HOURS",
            "soon",
            "login_ttl_hours (environment variable MINTERPR_LOGIN_TTL_HOURS): not a number",
        ),
    ],
)
def test_bad_variables_name_the_setting(variable, value, message):
    with pytest.raises(InputError) as err:
        load_settings({}, environ={variable: value})
    assert str(err.value).startswith(message)


@pytest.mark.parametrize(
    "variable, value",
    [
        ("MINTERPR_LOGIN_TTL_HOURS", "nan"),
        ("MINTERPR_LOGIN_TTL_HOURS", "-5"),
        ("MINTERPR_LOGIN_TTL_HOURS", "inf"),
        ("MINTERPR_MAX_UPLOAD_BYTES", "-1"),
        ("MINTERPR_MAX_REQUEST_BYTES", "0"),
        ("MINTERPR_MAX_RESULTS", "0"),
        ("MINTERPR_RESULTS_PER_TURN", "0"),
        ("MINTERPR_RETENTION_DAYS", "0"),
        ("MINTERPR_TORCH_THREADS", "-2"),
        ("MINTERPR_MAX_LIVE_SESSIONS", "0"),
        ("MINTERPR_THUMBNAIL_HEIGHT", "0"),
    ],
)
def test_settings_out_of_their_bounds_are_refused_at_start_naming_the_variable(variable, value):
    name = variable[len("MINTERPR_") :].lower()
    with pytest.raises(InputError) as err:
        load_settings({}, environ={variable: value})
    assert str(err.value).startswith(f"settings: {name} (environment variable {variable}) must be"), err.value


def test_a_bad_setting_is_one_line_and_exit_2_from_serve(tmp_path, monkeypatch, capsys):
    from minterpr.cli.main import main

    monkeypatch.setenv("MINTERPR_LOGIN_TTL_HOURS", "nan")
    assert main(["serve", "--data", str(tmp_path / "state")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "login_ttl_hours (environment variable MINTERPR_LOGIN_TTL_HOURS) must be" in err[0], err


def test_every_setting_can_be_read():
    """Each field's type is one the loader converts (a new field type fails here, not in production)."""
    examples = {
        "data_dir": "/s",
        "database_url": "sqlite://",
        "device": "cpu",
        "demo_gallery": "demo",
        "trusted_proxies": "*",
        "import_roots": "/a,/b",
        "upload_dir": "/u",
        "vlm": '{"url": "http://localhost:11434/v1", "model": "m", "uses": "reading,asking"}',
        "vlm_caption_weight": "0.5",
    }
    for name, kind in setting_types().items():
        raw = examples.get(name, "0.5/3" if kind is RateSpec else "true" if kind is bool else "3")
        load_settings({}, environ={"MINTERPR_" + name.upper(): raw})


def test_the_command_line_reads_the_environment_and_names_a_bad_value(tmp_path, monkeypatch, capsys):
    from minterpr.cli.main import build_parser, main
    from minterpr.cli.shared.service_state import settings_from

    monkeypatch.setenv("MINTERPR_DATA_DIR", str(tmp_path / "from_env"))
    monkeypatch.setenv("MINTERPR_DATABASE_URL", f"sqlite:///{tmp_path / 'env.db'}")
    args = build_parser().parse_args(["serve", "--trusted-proxy", "127.0.0.1"])
    got = settings_from(args)
    assert got.data_dir == tmp_path / "from_env" and got.resolved_database_url().endswith("env.db")
    assert got.trusted_proxies == ("127.0.0.1",) and got.cookie_secure is False
    assert (
        settings_from(build_parser().parse_args(["serve", "--data", str(tmp_path / "flag")])).data_dir
        == tmp_path / "flag"
    )
    monkeypatch.setenv("MINTERPR_MAX_RESULTS", "lots")
    assert main(["users", "list"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "max_results (environment variable MINTERPR_MAX_RESULTS): not an integer" in err[0]
