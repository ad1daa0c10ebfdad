"""What a wire's folder mounts on the server, as Starlette mounts a sub-application: its routes, where its
clients put their key, the shape its errors take and the paths that answer in it. The app lists the wires it
speaks (``server.app.WIRES``), one line each, and builds routes, key forms and error shapes from that list;
nothing below the surfaces names a wire. Checked by ``pytest tests/test_wires.py``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from streamvoice.asgi import ErrorShape, openai_shape
from streamvoice.protocol import BEARER_ONLY, KeyForms


@dataclass(frozen=True)
class Wire:
    name: str
    routes: Sequence[BaseRoute]
    keys: KeyForms = BEARER_ONLY
    error_shape: ErrorShape | None = None
    paths: tuple[str, ...] = ()  # path prefixes whose errors (unknown routes included) take ``error_shape``
    # (path prefix, what an unknown route under it adds to its 404: e.g. why a path did not match)
    not_found_hints: tuple[tuple[str, str], ...] = ()
    # The wire's answer to ``GET /v1/models`` when a request carries one of its own key headers.
    models: Callable[[Request], Awaitable[Response]] | None = None


def key_forms(wires: Sequence[Wire]) -> KeyForms:
    return KeyForms.joined(w.keys for w in wires)


def error_shapes(wires: Sequence[Wire]) -> tuple[tuple[str, ErrorShape], ...]:
    """(path prefix, error shape) for every wire that answers in its own shape; longest prefix first."""
    pairs = [(p, w.error_shape) for w in wires if w.error_shape is not None for p in w.paths]
    return tuple(sorted(pairs, key=lambda pair: -len(pair[0])))


def wire_at(wires: Sequence[Wire], path: str) -> Wire | None:
    """The wire whose paths hold ``path`` (the longest prefix), if any."""
    found = [(len(p), w) for w in wires for p in w.paths if path.startswith(p)]
    return max(found, key=lambda pair: pair[0])[1] if found else None


def shape_of(wire: Wire | None) -> ErrorShape:
    """The error shape of ``wire`` (``wire_at``'s answer): its own, else the server's default."""
    return wire.error_shape if wire is not None and wire.error_shape is not None else openai_shape
