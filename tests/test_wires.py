"""``server.surfaces.wire``: each wire's folder declares what the app mounts; nothing below the surfaces
names a wire."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.routing import BaseRoute

from streamvoice.asgi import openai_shape
from streamvoice.protocol import KeyForms, ProtocolError
from streamvoice.server import app
from streamvoice.server.surfaces import cartesia, deepgram, elevenlabs
from streamvoice.server.surfaces.wire import Wire, error_shapes, key_forms, shape_of, wire_at

SRC = Path(__file__).resolve().parents[1] / "src" / "streamvoice"
VENDORS = re.compile(
    r"elevenlabs|eleven labs|xi[-_]api|cartesia|deepgram|openai|wyoming|livekit|pipecat|kokoro-fastapi|home assistant",
    re.IGNORECASE,
)
# The settings table names the wires a user configures (STREAMVOICE_WYOMING_URI, the vendor voice map): it is
# read by the core, and settings are one table from the environment; it moves when each wire's settings do.
SETTINGS = SRC / "server" / "core" / "config.py"


def test_nothing_below_the_surfaces_names_a_wire() -> None:
    named = [
        f"{path.relative_to(SRC)}:{n}: {line.strip()[:80]}"
        for folder in ("protocol", "text", "server/core")
        for path in sorted((SRC / folder).rglob("*.py"))
        if path != SETTINGS
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if VENDORS.search(line)
    ]
    assert not named, "\n".join(named)


def test_the_app_serves_every_route_each_wire_declares_once() -> None:
    served = [id(r) for r in app.ROUTES]
    declared = [id(r) for wire in app.WIRES for r in wire.routes]
    assert set(declared) <= set(served) and len(served) == len(set(served))
    assert len({w.name for w in app.WIRES}) == len(app.WIRES)


def test_key_forms_join_each_wires_own_and_read_a_key_from_any_of_them() -> None:
    forms = key_forms(app.WIRES)
    assert forms == app.KEY_FORMS
    assert {"xi-api-key", "x-api-key"} <= set(forms.headers) and "token" in forms.schemes
    headers = {"authorization": "Token dg", "xi-api-key": "el", "x-api-key": "ca"}
    assert forms.presented(headers.get) == ["dg", "el", "ca"]
    assert KeyForms().presented({"authorization": "Token dg", "xi-api-key": "el"}.get) == []
    assert KeyForms().presented({"authorization": "Bearer ours"}.get) == ["ours"]
    hint = forms.unauthorized_hint()
    for wire in (elevenlabs.WIRE, cartesia.WIRE, deepgram.WIRE):
        assert wire.keys.hint in hint


def test_a_wires_paths_answer_in_its_error_shape_and_the_rest_in_the_default() -> None:
    error = ProtocolError("not_found", "x")
    assert shape_of(wire_at(app.WIRES, "/v1/text-to-speech/x/stream")) is elevenlabs.error_shape
    assert (
        shape_of(wire_at(app.WIRES, "/pronunciation-dicts/"))
        is shape_of(wire_at(app.WIRES, "/tts/bytes"))
        is cartesia.error_shape
    )
    assert shape_of(wire_at(app.WIRES, "/v2/speak")) is deepgram.error_shape
    assert shape_of(wire_at(app.WIRES, "/v1/audio/speech")) is openai_shape
    assert "request_id" in deepgram.error_shape(error)  # each shape is the wire's own
    assert all(prefix for prefix, _ in error_shapes(app.WIRES))


def test_a_new_wire_is_one_declaration() -> None:
    """What a folder adds: its Wire; the app's tables follow from the list."""
    routes: list[BaseRoute] = []
    extra = Wire(
        "acme", routes, KeyForms(headers=("acme-key",), hint="Acme: acme-key"), openai_shape, ("/acme/",)
    )
    wires = (*app.WIRES, extra)
    assert "acme-key" in key_forms(wires).headers and "Acme: acme-key" in key_forms(wires).unauthorized_hint()
    assert ("/acme/", openai_shape) in error_shapes(wires)
