"""The settings as a reader meets them: the table of ``docs/configuration.md`` and ``streamvoice serve
--help``, rendered from ``config.ServerConfig``'s fields (``python -m streamvoice.server.core.config_docs``
rewrites the page; ``pytest tests/test_config.py`` fails when it is stale), and what the start-up log says
about them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields

from streamvoice.server.core.config import ServerConfig
from streamvoice.settings import help_lines, markdown_table, with_table


def settings_markdown() -> str:
    """The settings table of ``docs/configuration.md``, from the fields themselves."""
    return markdown_table(ServerConfig)


def settings_help() -> str:
    """The same, for ``streamvoice serve --help``."""
    return help_lines(ServerConfig)


# Names platforms set for their own purposes: never read as ours without the prefix, and not warned about.
_COMMON_NAMES = frozenset({"HOST", "PORT"})


def startup_notes(config: ServerConfig, environ: Mapping[str, str]) -> list[tuple[bool, str]]:
    """What the start-up log says about settings, as (is a warning, line): whether callers need the token,
    and each setting of ours found without its ``STREAMVOICE_`` prefix (ignored: ``AUTH_TOKEN=...`` alone
    left a server open without a word)."""
    notes: list[tuple[bool, str]] = []
    if config.auth_token:
        notes.append(
            (False, "authentication on: every route but /ping needs the token (STREAMVOICE_AUTH_TOKEN)")
        )
    else:
        notes.append(
            (
                False,
                "authentication off: anyone who reaches this port can use it (set STREAMVOICE_AUTH_TOKEN)",
            )
        )
    for f in fields(ServerConfig):
        bare = f.name.upper()
        if bare in environ and bare not in _COMMON_NAMES and f"STREAMVOICE_{bare}" not in environ:
            notes.append((True, f"{bare} is set but ignored: this server reads STREAMVOICE_{bare}"))
    return notes


TABLE_START = (
    "<!-- settings: rendered from server/core/config.py by python -m streamvoice.server.core.config_docs -->"
)
TABLE_END = "<!-- end of settings -->"


def with_settings(page: str) -> str:
    """``docs/configuration.md`` with its settings table rendered anew between its two markers."""
    return with_table(page, TABLE_START, TABLE_END, settings_markdown())


if __name__ == "__main__":
    from pathlib import Path

    path = Path(__file__).resolve().parents[4] / "docs" / "configuration.md"
    path.write_text(with_settings(path.read_text()))
    print("wrote", path)
