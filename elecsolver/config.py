"""Configurations: nested dicts of JSON values, changed by dotted keys.

A problem's configuration is plain data (numbers, booleans, strings, lists, nested dicts), so it
can be written as JSON into every output file and compared on resume.  ``--set KEY=VALUE`` on the
command line changes one entry; the value is parsed as a JSON literal and must have the type of
the entry it replaces (an int is accepted where a float is expected; an entry that is null by default, an
option that is off, takes any JSON value but a section, checked by the block that reads it).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from typing import Any

__all__ = ["check_finite", "ConfigError", "apply_overrides", "config_hash", "merge", "set_value"]


class ConfigError(ValueError):
    """A configuration entry that does not exist or a value of the wrong type."""


def _type_name(v: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a section"}.get(type(v), type(v).__name__)


def _non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return any(_non_finite(v) for v in value)
    return False


def check_finite(config: dict, path: str = "") -> None:
    """Refuse a NaN or infinite number anywhere in ``config`` (in lists too), naming its key and value.

    Raises
    ------
    ConfigError
        For the first such entry: ``cavity.a = nan: not a finite number; give a finite value``.
    """
    for k, v in config.items():
        key = f"{path}{k}"
        if isinstance(v, dict):
            check_finite(v, key + ".")
        elif _non_finite(v):
            raise ConfigError(f"{key} = {json.dumps(v)}: not a finite number; give a finite value")


def _coerce(key: str, old: Any, new: Any) -> Any:
    if _non_finite(new):
        raise ConfigError(f"--set {key}={json.dumps(new)}: not a finite number; give a finite value"
                          + (f" (the default is {json.dumps(old)})" if old is not None else ""))
    if old is None:  # an optional entry off by default: its owner validates the value
        if not isinstance(new, dict):
            return new
        raise ConfigError(f"--set {key}: this entry is null (off) by default and takes one value (a number, string, "
                          f"boolean or list; its section's documentation says which), not a section: got "
                          f"{json.dumps(new)}")
    if isinstance(old, bool) or isinstance(new, bool):
        if isinstance(old, bool) and isinstance(new, bool):
            return new
    elif isinstance(old, float) and isinstance(new, (int, float)):
        return float(new)
    elif isinstance(old, int) and isinstance(new, int):
        return new
    elif isinstance(old, int) and isinstance(new, float) and new.is_integer():
        return int(new)
    elif type(old) is type(new) and not isinstance(old, dict):
        return new
    raise ConfigError(f"--set {key}: expected {_type_name(old)} (like {json.dumps(old)}), got {json.dumps(new)}")


def set_value(config: dict, key: str, value: Any) -> None:
    """Set the entry at dotted ``key`` to ``value`` in place, keeping its type.

    Raises
    ------
    ConfigError
        If the key does not exist or the value has the wrong type.
    """
    parts = key.split(".")
    node = config
    for i, part in enumerate(parts):
        if not isinstance(node, dict) or part not in node:
            where = ".".join(parts[:i]) or "the top level"
            choices = ", ".join(sorted(node)) if isinstance(node, dict) else "none"
            raise ConfigError(f"unknown configuration key {key!r}: {where} has {choices}")
        if i == len(parts) - 1:
            node[part] = _coerce(key, node[part], value)
        else:
            node = node[part]


def apply_overrides(config: dict, assignments: list[str]) -> dict:
    """Return a copy of ``config`` with ``KEY=VALUE`` assignments applied (VALUE a JSON literal).

    A VALUE that is not valid JSON is taken as a string, so ``--set network.kind=mlp`` works
    without quotes.

    Raises
    ------
    ConfigError
        For a malformed assignment, an unknown key or a value of the wrong type.
    """
    out = copy.deepcopy(config)
    for item in assignments:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set needs KEY=VALUE, got {item!r}")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        set_value(out, key.strip(), value)
    return out


def merge(base: dict, changes: dict, path: str = "") -> dict:
    """Deep copy of ``base`` with the nested ``changes`` applied (keys must exist in ``base``)."""
    out = copy.deepcopy(base)
    for k, v in changes.items():
        key = f"{path}{k}"
        if isinstance(v, dict):
            if not isinstance(out.get(k), dict):
                raise ConfigError(f"unknown configuration section {key!r}")
            out[k] = merge(out[k], v, key + ".")
        elif k in out:
            out[k] = _coerce(key, out[k], v)
        else:
            raise ConfigError(f"unknown configuration key {key!r}")
    return out


def config_hash(config: dict) -> str:
    """SHA-256 of the canonical JSON form of ``config`` (sorted keys), as 16 hex digits."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]
