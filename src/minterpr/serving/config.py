"""Where :class:`~minterpr.serving.settings.ServeSettings` come from: flags, environment
variables, a settings file, the defaults — in that order of precedence.

Every field of ``ServeSettings`` may be set in a TOML file (``--config FILE`` or
``MINTERPR_CONFIG``; keys are the field names) or an environment variable ``MINTERPR_<FIELD>``
(upper case), so a database password need not be on a command line (which every user of the
machine can read in the process list). Values are converted by the field's type: numbers,
``true``/``false``, a path, a list (a TOML array, or comma-separated in a variable), a rate
(``{rate_per_s = 0.2, burst = 5}`` in TOML, ``0.2/5`` — rate per second / burst — in a
variable), a record such as ``vlm`` (a TOML table of its fields, a JSON object in a variable). A bad value is one line naming the setting and where it came from.

The field list stays in ``ServeSettings`` alone (one definition of each setting, its default and
its comment); this loader reads its annotations, so a new field is configurable everywhere at
once — which a second, pydantic-settings model of the same fields would not give without
repeating them.

Example:
    >>> settings = load_settings({"data_dir": "/srv/m"}, environ={"MINTERPR_LOGIN_RATE": "0.5/3",
    ...                                                     "MINTERPR_COOKIE_SECURE": "yes", "MINTERPR_DATA_DIR": "/x"})
    >>> settings.data_dir, settings.cookie_secure, settings.login_rate
    (PosixPath('/srv/m'), True, RateSpec(rate_per_s=0.5, burst=3))
    >>> load_settings({}, environ={"MINTERPR_MAX_RESULTS": "many"})
    Traceback (most recent call last):
    ...
    minterpr.errors.InputError: max_results (environment variable MINTERPR_MAX_RESULTS): not an integer: 'many'
    >>> load_settings({}, environ={"MINTERPR_LOGIN_TTL_HOURS": "nan"})
    Traceback (most recent call last):
    ...
    minterpr.errors.InputError: settings: login_ttl_hours (environment variable MINTERPR_LOGIN_TTL_HOURS) must be a number within 0.0166667..8784, got nan
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
import types
import typing
from pathlib import Path
from typing import Any, Mapping

from minterpr.errors import InputError
from minterpr.serving.settings import RateSpec, ServeSettings

ENV_PREFIX = "MINTERPR_"  # MINTERPR_DATABASE_URL, MINTERPR_DATA_DIR, ...
CONFIG_ENV = "MINTERPR_CONFIG"  # the settings file, when --config is not given
DEFAULT_DATA_DIR = Path("outputs/serve")  # data_dir when nothing sets it
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def setting_types() -> dict[str, Any]:
    """Field name -> its type, for every field of ServeSettings."""
    hints = typing.get_type_hints(ServeSettings)
    return {f.name: hints[f.name] for f in dataclasses.fields(ServeSettings)}


def load_settings(
    flags: Mapping[str, Any], *, config: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> ServeSettings:
    """Settings from ``flags`` (field -> value; None = not given), then the environment, then the
    settings file (``config``, else ``$MINTERPR_CONFIG``), then the defaults."""
    environ = os.environ if environ is None else environ
    types = setting_types()
    unknown = sorted(set(flags) - set(types))
    if unknown:
        raise InputError(f"unknown settings {unknown}: must be among {', '.join(types)}")
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}  # setting -> where its value came from (for the one line naming it)
    path = config if config is not None else environ.get(CONFIG_ENV) or None
    if path is not None:
        for name, raw in read_settings_file(Path(path)).items():
            values[name] = convert(name, raw, types[name], f"settings file {path}")
            origin[name] = f"settings file {path}"
    for name, kind in types.items():
        variable = ENV_PREFIX + name.upper()
        if environ.get(variable, "") != "":
            values[name] = convert(name, environ[variable], kind, f"environment variable {variable}")
            origin[name] = f"environment variable {variable}"
    for name, raw in flags.items():
        if raw is not None:
            values[name] = convert(name, raw, types[name], "command line")
            origin[name] = "command line"
    values.setdefault("data_dir", DEFAULT_DATA_DIR)
    try:
        return ServeSettings(**values)
    except InputError as err:
        name, _, rest = str(err).partition(" ")
        where = f" ({origin[name]})" if name in origin else ""
        raise InputError(f"settings: {name}{where} {rest}") from None


def read_settings_file(path: Path) -> dict[str, Any]:
    """The table of a TOML settings file (keys checked against the fields)."""
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise InputError(f"settings file {path}: {err.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"settings file {path}: not TOML ({err})") from None
    types = setting_types()
    for key in table:
        if key not in types:
            raise InputError(f"settings file {path}: unknown setting {key!r}: must be one of {', '.join(types)}")
    return table


def convert(name: str, raw: Any, kind: Any, where: str) -> Any:
    """``raw`` (a string from a variable, a TOML value or a flag's value) as a value of ``kind``."""
    try:
        return _convert(raw, kind)
    except (ValueError, TypeError) as err:
        raise InputError(f"{name} ({where}): {err}") from None


def _convert(raw: Any, kind: Any) -> Any:
    args = typing.get_args(kind)
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if isinstance(raw, str) and raw.lower() in ("none", "null"):
            return None
        return _convert(raw, inner[0])
    if typing.get_origin(kind) is tuple:
        items = [s.strip() for s in raw.split(",") if s.strip()] if isinstance(raw, str) else raw
        if not isinstance(items, (list, tuple)):
            raise TypeError(f"not a list: {raw!r}")
        return tuple(_convert(item, args[0]) for item in items)
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.lower() in _TRUE + _FALSE:
            return raw.lower() in _TRUE
        raise ValueError(f"not true or false: {raw!r}")
    if kind is int:
        if isinstance(raw, bool) or not isinstance(raw, (int, str)) or isinstance(raw, str) and not _is_int(raw):
            raise ValueError(f"not an integer: {raw!r}")
        return int(raw)
    if kind is float:
        if isinstance(raw, bool):
            raise ValueError(f"not a number: {raw!r}")
        try:
            return float(raw)
        except (TypeError, ValueError):
            raise ValueError(f"not a number: {raw!r}") from None
    if kind is Path:
        if not isinstance(raw, (str, os.PathLike)) or str(raw) == "":
            raise TypeError(f"not a path: {raw!r}")
        return Path(raw)
    if kind is str:
        if not isinstance(raw, str):
            raise TypeError(f"not a string: {raw!r}")
        return raw
    if kind is RateSpec:
        if isinstance(raw, RateSpec):
            return raw
        if isinstance(raw, str) and raw.count("/") == 1:
            rate, burst = raw.split("/")
            return RateSpec(_convert(rate, float), _convert(burst, int))
        if isinstance(raw, dict) and set(raw) == {"rate_per_s", "burst"}:
            return RateSpec(_convert(raw["rate_per_s"], float), _convert(raw["burst"], int))
        raise ValueError(f"a rate is RATE/BURST (e.g. 0.2/5) or {{rate_per_s, burst}}, got {raw!r}")
    if dataclasses.is_dataclass(kind):  # a record of settings (vlm): built by flags, a TOML table, JSON in a variable
        return _record(raw, kind)
    raise TypeError(f"settings of type {getattr(kind, '__name__', kind)} cannot be read")


def _record(raw: Any, kind: Any) -> Any:
    """``raw`` as the dataclass ``kind``: itself, or a table (a dict, or a JSON object) of its fields."""
    if isinstance(raw, kind):
        return raw
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise ValueError(f"not a JSON object of {kind.__name__} fields: {raw!r}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"a table of {kind.__name__} fields, got {raw!r}")
    hints = typing.get_type_hints(kind)
    names = [f.name for f in dataclasses.fields(kind)]
    unknown = sorted(set(raw) - set(names))
    if unknown:
        raise ValueError(f"unknown {kind.__name__} fields {unknown}: must be among {', '.join(names)}")
    return kind(**{name: _convert(value, hints[name]) for name, value in raw.items()})


def _is_int(text: str) -> bool:
    return text.strip().lstrip("+-").isdigit()
