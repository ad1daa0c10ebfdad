"""Cartesia's shapes every route of it shares: errors and cursor pages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamvoice.asgi import shaped_errors
from streamvoice.protocol import ProtocolError, whole_number


def error_shape(error: ProtocolError) -> dict[str, Any]:
    title = str(error.code).replace("_", " ")
    return {"error": error.message, "title": title, "error_code": str(error.code), "message": error.message}


http_error = shaped_errors(error_shape)


def cursor_page(items: list[dict[str, Any]], query: Mapping[str, str]) -> tuple[list[dict[str, Any]], bool]:
    """Cartesia's cursor pages: ``limit`` (1-100, default 10) after ``starting_after`` or before
    ``ending_before`` (an id); its SDK walks them until a page comes back empty."""
    raw = query.get("limit", "10")
    number = whole_number(raw)
    limit = min(max(number, 1), 100) if number is not None else 10
    ids = [item["id"] for item in items]
    if (after := query.get("starting_after")) is not None:
        start = ids.index(after) + 1 if after in ids else len(items)
        page = items[start : start + limit]
        return page, start + limit < len(items)
    if (before := query.get("ending_before")) is not None:
        end = ids.index(before) if before in ids else 0
        return items[max(0, end - limit) : end], end - limit > 0
    return items[:limit], limit < len(items)
