"""Reading a YAML config into typed dataclasses: the machinery shared by every training config.

A config is a YAML mapping (a path, or the name of one shipped in ``minterpr/configs``); each
section is built into a dataclass by :func:`build_dataclass`, which refuses an unknown key by
name and file and coerces simple types ("1e-3" -> 0.001); ``--set a.b.0=value`` overrides are
applied to the mapping first (:func:`apply_overrides`). :mod:`minterpr.training.config` (the
retrieval model's recipe) and :mod:`minterpr.training.reid_config` (the appearance model's) use it.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import os
import types
import typing
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import yaml

from minterpr.errors import MinterprError

CONFIG_PACKAGE = "minterpr"  # shipped configs are package data: minterpr/configs/<name>.yaml


class ConfigError(MinterprError, ValueError):
    """A config that cannot be used; the message names the key and the file."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key  # dotted path of an unknown key, when that is the problem


def plain(value: Any) -> Any:
    """Tuples -> lists (YAML safe_dump writes plain lists only)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def coerce(value: Any, hint: Any, where: str) -> Any:
    """Check ``value`` against a simple type hint, converting int -> float and "1e-3" -> 1e-3."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in (o for o in options if o is not type(None)):
            try:
                return coerce(value, option, where)
            except ConfigError as err:
                errors.append(str(err))
        raise ConfigError(errors[-1] if errors else f"{where}: {value!r} is not allowed")
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        (item,) = typing.get_args(hint) or (Any,)
        return [coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if hint is float and not isinstance(value, bool):
        try:
            return float(value)
        except (TypeError, ValueError):
            pass
    if hint is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if hint is bool and isinstance(value, bool) or hint is str and isinstance(value, str):
        return value
    if hint is Any:
        return value
    name = getattr(hint, "__name__", str(hint))
    raise ConfigError(f"{where}: expected {name}, got {value!r}")


def build_dataclass(cls: type, raw: Any, where: str, source: str) -> Any:
    """Dataclass ``cls`` from a mapping; unknown keys are errors naming key and file."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: '{where}' must be a mapping, got {raw!r}")
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in raw if k not in names]
    if unknown:
        key = f"{where}.{unknown[0]}" if where else str(unknown[0])
        raise ConfigError(f"{source}: unknown key '{key}' (allowed: {', '.join(names)})", key)
    hints = typing.get_type_hints(cls)
    prefix = f"{where}." if where else ""
    return cls(**{k: coerce(v, hints[k], f"{source}: '{prefix}{k}'") for k, v in raw.items()})


def set_path(raw: dict[str, Any], dotted: str, value: Any, source: str) -> None:
    """Set ``a.b.0.c`` in nested dicts/lists; list items are addressed by index."""
    parts = dotted.split(".")
    node: Any = raw
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ConfigError(
                    f"{source}: '{'.'.join(parts[: depth + 1])}' is not an index of a {len(node)}-item list"
                )
            if last:
                node[int(part)] = value
            else:
                node = node[int(part)]
        elif isinstance(node, dict):
            if last:
                node[part] = value
            else:
                node = node.setdefault(part, {})
        else:
            raise ConfigError(f"{source}: cannot set '{dotted}': '{'.'.join(parts[:depth])}' is not a section")


def resolve_config_path(name_or_path: str | os.PathLike[str]) -> tuple[str, str]:
    """(YAML text, source name) of a config file path or a shipped config name."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        if not path.is_file():
            raise ConfigError(f"config file {str(path)!r} does not exist")
        return path.read_text(encoding="utf-8"), str(path)
    configs = importlib.resources.files(CONFIG_PACKAGE).joinpath("configs")
    resource = configs.joinpath(f"{name_or_path}.yaml")
    if not resource.is_file():
        if path.exists():  # a folder that happens to be called like the config the user meant
            raise ConfigError(f"config {str(path)!r} is a folder, not a config file or a shipped config name")
        names = sorted(p.name[:-5] for p in configs.iterdir() if p.name.endswith(".yaml"))
        raise ConfigError(f"unknown config {str(name_or_path)!r}: not a file, and not one of {', '.join(names)}")
    return resource.read_text(encoding="utf-8"), f"minterpr/configs/{name_or_path}.yaml"


def read_config_mapping(name_or_path: str | os.PathLike[str]) -> tuple[dict[str, Any], str]:
    """(the top-level mapping, source name) of a config file path or shipped config name."""
    text, source = resolve_config_path(name_or_path)
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{source}: not valid YAML: {err}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping")
    return raw, source


def apply_overrides(
    raw: dict[str, Any],
    overrides: Sequence[str],
    source: str,
    *,
    after_each: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, str]:
    """Apply ``key.path=value`` overrides (values parsed as YAML) to a loaded config mapping.

    Returns which ``--set`` item wrote each dotted key (to name it in a later error).

    Example:
        >>> raw = {"model": {"width": "x0_25"}}
        >>> apply_overrides(raw, ["model.width=x0_5", "epochs=3"], "<doc>")
        {'model.width': 'model.width=x0_5', 'epochs': 'epochs=3'}
        >>> raw
        {'model': {'width': 'x0_5'}, 'epochs': 3}
    """
    set_by: dict[str, str] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r} is not key=value")
        try:
            parsed = yaml.safe_load(value) if value.strip() else ""
        except yaml.YAMLError:
            parsed = value
        set_path(raw, key.strip(), parsed, f"{source} (--set {item})")
        if after_each is not None:
            after_each(raw)
        set_by[key.strip()] = item
    return set_by
