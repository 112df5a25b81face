"""Configurations: nested dicts of JSON values, changed by dotted keys.

A problem's configuration is plain data (numbers, booleans, strings, lists, nested dicts), so it
can be written as JSON into every output file and compared on resume.  ``--set KEY=VALUE`` on the
command line changes one entry; the value is parsed as a JSON literal (a bare word that is not JSON is a
string) and must have the type of the entry it replaces (an int is accepted where a float is expected; an
entry that is null by default, an option that is off, takes any JSON value but a section, checked by the
block that reads it).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from typing import Any

__all__ = ["check_finite", "ConfigError", "apply_file", "apply_overrides", "config_hash", "merge", "read_toml", "set_value",
           "to_toml"]


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


def _coerce(key: str, old: Any, new: Any, source: str = "--set ") -> Any:
    if _non_finite(new):
        raise ConfigError(f"{source}{key}={json.dumps(new)}: not a finite number; give a finite value"
                          + (f" (the default is {json.dumps(old)})" if old is not None else ""))
    if old is None:  # an optional entry off by default: its owner validates the value
        if not isinstance(new, dict):
            return new
        raise ConfigError(f"{source}{key}: this entry is null (off) by default and takes one value (a number, string, "
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
    if isinstance(old, dict):
        raise ConfigError(f"{source}{key} is a section: set its entries ({key}.{next(iter(old), 'KEY')} and so on), "
                          f"got {json.dumps(new)}")
    raise ConfigError(f"{source}{key}: expected {_type_name(old)} (like {json.dumps(old)}), got {json.dumps(new)}")


def did_you_mean(word: str, choices) -> str:
    """``" (did you mean 'steps'?)"`` for the choice closest to a mistyped ``word`` (difflib's ratio >= 0.6), or
    ``""`` when none is close."""
    import difflib

    close = difflib.get_close_matches(word, [str(c) for c in choices], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def set_value(config: dict, key: str, value: Any, source: str = "--set ") -> None:
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
            hint = did_you_mean(part, node) if isinstance(node, dict) else ""
            raise ConfigError(f"unknown configuration key {key!r}{hint}: {where} has {choices}")
        if i == len(parts) - 1:
            node[part] = _coerce(key, node[part], value, source)
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
            raise ConfigError(f"unknown configuration key {key!r}{did_you_mean(k, out)}")
    return out


def config_hash(config: dict) -> str:
    """SHA-256 of the canonical JSON form of ``config`` (sorted keys), as 16 hex digits."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


# configuration files (TOML) -------------------------------------------------------------------------
def _toml_lines(text: str) -> dict[str, int]:
    """The line (1-based) of every dotted key assigned in TOML ``text``: ``[a.b]`` headers and ``c = ...`` lines
    (inline and dotted keys included), for error messages; a key not found is simply absent."""
    import re

    lines: dict[str, int] = {}
    table = ""
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        header = re.match(r"^\[\s*([^\[\]]+?)\s*\]", line)
        if header:
            table = ".".join(p.strip().strip("\"'") for p in header.group(1).split("."))
            lines.setdefault(table, n)
            continue
        key = re.match(r"^([A-Za-z0-9_\-.\"' ]+?)\s*=", line)
        if key:
            dotted = ".".join(p.strip().strip("\"'") for p in key.group(1).split("."))
            full = f"{table}.{dotted}" if table else dotted
            lines.setdefault(full, n)
            inline = re.match(r"^[^=]+=\s*\{(.*)\}\s*(#.*)?$", line)  # a = {b = 1, c = 2}
            for sub in re.findall(r"([A-Za-z0-9_\-]+)\s*=", inline.group(1)) if inline else ():
                lines.setdefault(f"{full}.{sub}", n)
    return lines


def read_toml(path) -> tuple[dict, dict[str, int]]:
    """Parse the TOML file at ``path``: its nested tables and the line of every key (for messages).

    Raises
    ------
    ConfigError
        If the file cannot be read or is not valid TOML: ``run.toml line 2: ...`` (the parser's own message).
    """
    import re
    from pathlib import Path

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--config {path}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        at = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        where = f"line {at.group(1)}, column {at.group(2)}" if at else "?"
        reason = re.sub(r" \(at .*\)$", "", msg)
        raise ConfigError(f"--config {path} {where}: not valid TOML ({reason})") from None
    return data, _toml_lines(text)


def apply_file(config: dict, path, *, extras: dict | None = None, parsed: tuple[dict, dict] | None = None
               ) -> tuple[dict, dict]:
    """A copy of ``config`` with every entry of the TOML file at ``path`` set, as ``--set`` would, and the file's
    entries under the names of ``extras``.

    Top-level tables are the configuration's sections (``[training]``, ``[source]``, ...).  ``extras`` maps further
    top-level names the caller reads itself to their defaults: a dict for a section (``{"parallel": {"tp": 1,
    ...}}``; its keys are checked and typed like the configuration's) or a plain value (``{"preset": "quick"}``).

    ``parsed``: what :func:`read_toml` returned for ``path``, when the caller has read it already.

    Returns
    -------
    (config, extras) : the changed configuration, and ``extras`` with the file's entries applied.

    Raises
    ------
    ConfigError
        For a bad file, an unknown key or a value of the wrong type, naming the file and the key's line.
    """
    data, lines = parsed if parsed is not None else read_toml(path)
    out = copy.deepcopy(config)
    extra = copy.deepcopy(extras or {})

    def fail(key: str, message: str):
        line = lines.get(key) or lines.get(key.rsplit(".", 1)[0])
        raise ConfigError(f"--config {path}" + (f" line {line}" if line else "") + f": {message}")

    def walk(root: dict, node: dict, prefix: str):
        for k, v in node.items():
            key = f"{prefix}{k}"
            target = root
            for part in key.split("."):
                target = target.get(part) if isinstance(target, dict) else None
            if isinstance(v, dict) and isinstance(target, dict):
                walk(root, v, key + ".")
                continue
            try:
                set_value(root, key, v, source="")
            except ConfigError as exc:
                fail(key, str(exc))

    for k, v in data.items():
        if k in extra and isinstance(extra[k], dict):
            walk(extra, {k: v}, "")
        elif k in extra:
            if isinstance(v, dict) or (extra[k] is not None and type(v) is not type(extra[k])):
                fail(k, f"{k}: expected {_type_name(extra[k])}, got {json.dumps(v)}")
            extra[k] = v
        elif k in out:
            walk(out, {k: v}, "")
        else:
            fail(k, f"unknown configuration key {k!r}{did_you_mean(k, [*out, *extra])}: the top level has "
                 f"{', '.join(sorted([*out, *extra]))}")
    return out, extra


def to_toml(config: dict, header: str = "", top: dict | None = None) -> str:
    """``config`` as TOML text (tomli-w), with ``header`` as comment lines and the entries of ``top`` (plain values)
    before the sections.  TOML has no null: an entry that is null is written as a comment (``# ridge = null``)
    and, read back, stays at its default (null)."""
    import tomli_w

    def strip(node: dict, path: str, nulls: list):
        kept = {}
        for k, v in node.items():
            if v is None:
                nulls.append(f"{path}{k}")
            elif isinstance(v, dict):
                kept[k] = strip(v, f"{path}{k}.", nulls)
            else:
                kept[k] = v
        return kept

    nulls: list[str] = []
    body = tomli_w.dumps({**(top or {}), **strip(config, "", nulls)})
    head = "".join(f"# {line}\n" for line in header.splitlines())
    if nulls:
        import textwrap

        head += "".join(f"# {line}\n" for line in textwrap.wrap(
            "null (unset) entries, left out (TOML has no null; read back, they stay null): " + ", ".join(nulls), 100))
    return head + ("\n" if head else "") + body
