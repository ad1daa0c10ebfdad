"""Settings declared once, read from the environment once: the server's and the agent's.

A setting is a dataclass field made by ``setting``: its default, its range (numbers) or its choices (words),
and a one-line meaning. From those alone: ``from_environ`` reads ``STREAMVOICE_<FIELD>`` (or the field's own
variable) as the field's type, ``check`` refuses a value out of range naming the variable and the range, and
``markdown_table`` / ``help_lines`` render the docs and ``--help``. Checked by ``pytest tests/test_config.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import Field, field, fields
from typing import Any

PREFIX = "STREAMVOICE_"


# The services' --log-level: uvicorn's names, "trace" (its level 5) included, which the logging module lacks.
LOG_LEVELS = {"critical": 50, "error": 40, "warning": 30, "info": 20, "debug": 10, "trace": 5}


class ConfigError(ValueError):
    """A setting that cannot be read; the message names the variable."""


def setting(
    default: Any,
    meaning: str,
    low: float | None = None,
    high: float | None = None,
    choices: tuple[str, ...] = (),
    env: str | None = None,
    from_env: bool = True,
) -> Any:
    """A field with its default, its range (``low``-``high`` for a number, ``choices`` for a word) and what it
    means, in one line; ``env`` names its variable when it is not ``STREAMVOICE_<FIELD>``, and a field that
    only code sets says ``from_env=False``."""
    meta = {
        "meaning": meaning,
        "low": low,
        "high": high,
        "choices": choices,
        "env": env,
        "from_env": from_env,
    }
    return field(default=default, metadata=meta)


def env_name(f: Field[Any]) -> str:
    return str(f.metadata.get("env") or f"{PREFIX}{f.name.upper()}")


def reads_env(f: Field[Any]) -> bool:
    return bool(f.metadata.get("from_env", True))


def env_names(cls: type) -> frozenset[str]:
    """Every variable ``cls`` reads."""
    return frozenset(env_name(f) for f in fields(cls) if reads_env(f))


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def shown(value: Any) -> str:
    """A default as it is written in the environment."""
    if value is None or value == ():
        return "unset"
    if isinstance(value, bool):
        return "`1`" if value else "`0`"
    if isinstance(value, tuple):
        return "`" + ",".join(value) + "`"
    return f"`{_number(value)}`" if isinstance(value, int | float) else f"`{value}`"


def allowed(f: Field[Any]) -> str:
    """A setting's range, as the docs and the errors say it."""
    meta = f.metadata
    if meta["choices"]:
        return " / ".join(meta["choices"])
    if meta["low"] is not None:
        return f"{_number(meta['low'])}-{_number(meta['high'])}"
    if isinstance(f.default, bool):
        return "0 or 1"
    return "comma-separated" if isinstance(f.default, tuple) else "text"


def convert(raw: str, kind: type) -> Any:
    """``raw`` as a value of ``kind`` (a tuple is a comma-separated list); ValueError when it is not one."""
    if kind is bool:
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if kind is int:
        return int(raw)
    if kind is float:
        return float(raw)
    if kind is tuple:
        return tuple(part.strip() for part in raw.split(",") if part.strip())
    return raw


def from_environ(cls: type, environ: Mapping[str, str]) -> dict[str, Any]:
    """The value of every setting of ``cls`` whose variable is set in ``environ``, as the field's type."""
    values: dict[str, Any] = {}
    for f in fields(cls):
        name = env_name(f)
        raw = environ.get(name)
        if raw is None or not reads_env(f):
            continue
        kind = type(f.default) if f.default is not dataclasses.MISSING else str
        if not raw.strip() and kind not in (int, float, bool) and not f.metadata["choices"]:
            continue  # empty free text is unset (an empty number, or a word not among the choices, is refused)
        try:
            values[f.name] = convert(raw, kind)
        except ValueError:
            raise ConfigError(f"{name}={raw[:40]!r} is not a valid {kind.__name__}") from None
    return values


def check(config: Any) -> None:
    """Refuse a value out of its setting's range or choices, naming the variable and what it takes."""
    for f in fields(config):
        value, meta = getattr(config, f.name), f.metadata
        if "meaning" not in meta:
            continue
        number = isinstance(value, int | float) and not isinstance(value, bool)
        outside = meta["low"] is not None and number and not meta["low"] <= value <= meta["high"]
        if outside or (meta["choices"] and value is not None and value not in meta["choices"]):
            raise ConfigError(
                f"{env_name(f)}={value!r} is out of range: it takes {allowed(f)} ({meta['meaning']})"
            )


def markdown_table(cls: type) -> str:
    """The settings of ``cls`` as a Markdown table: variable, default, range, meaning."""
    lines = ["| setting | default | range | meaning |", "| --- | --- | --- | --- |"]
    for f in fields(cls):
        if reads_env(f):
            lines.append(f"| `{env_name(f)}` | {shown(f.default)} | {allowed(f)} | {f.metadata['meaning']} |")
    return "\n".join(lines) + "\n"


def help_lines(cls: type) -> str:
    """The same, for a command's ``--help``."""
    return "\n".join(
        f"  {env_name(f)} (default {shown(f.default).strip('`')}; {allowed(f)}): {f.metadata['meaning']}"
        for f in fields(cls)
        if reads_env(f)
    )


def with_table(page: str, start: str, end: str, table: str) -> str:
    """``page`` with ``table`` rendered anew between the markers ``start`` and ``end``."""
    before, found, rest = page.partition(start)
    if not found:
        raise ValueError(f"the page has no {start!r} marker")
    _, _, after = rest.partition(end)
    return f"{before}{start}\n{table}{end}{after}"
