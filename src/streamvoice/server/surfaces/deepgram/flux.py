"""Deepgram's Flux TTS API (``/v2/speak``) on the speech server: turn-based streaming built for voice agents,
whose interruption says what the listener heard. ``deepgram-sdk``'s ``speak.v2``, ``@deepgram/sdk``'s
``speak.v2.connect`` and LiveKit's ``deepgram.TTSv2`` reach Kokoro by changing their base URL.

- ``WS /v2/speak?model=&encoding=&sample_rate=&speed=``: ``Connected`` first. ``{"type": "Speak", "text"}``
  opens a turn (or adds to the open one), spoken as the server's chunker cuts it; ``Flush`` ends the turn:
  ``SpeechStarted {speech_id}`` before its first audio, binary audio, ``SpeechMetadata`` (its audio and
  character counts), then ``Flushed``. A turn with nothing to say is answered ``Warning
  NO_SYNTHESIZABLE_TEXT`` and a zero-length ``SpeechMetadata``.
- ``{"type": "Interrupt", "playback_offset": {"type": "time_ms", "value"}}``: the listener barged in after
  its player had played ``value`` ms of the session's audio (cumulative from the session's start, the audio
  dropped at earlier interrupts not counted; each offset must advance past the last one). The turn playing
  there and every turn after it stop; ``SpeechInterrupted`` says ``audio_played_ms``, ``text_spoken`` (the
  turn's own text as written, up to the last word at least half played: ``server.core.heard``) and
  ``text_remaining``. Without an offset, as Deepgram documents it, the texts are left out and
  ``audio_played_ms`` is all the audio generated so far. Refused, with the documented ``Warning`` codes:
  nothing generated yet (``NO_AUDIO_GENERATED``), nothing playing (``NO_ACTIVE_SPEECH``), an offset that
  does not advance or is not a number from 0 up (``INVALID_INTERRUPT_OFFSET``), one while the last is still
  stopping its turns (``INTERRUPT_IN_PROGRESS``).
- ``{"type": "Configure", "speed"}``: 0.5 to 1.5 in 0.05 steps, for the turns that follow
  (``ConfigureSuccess {applied}``; else ``ConfigureFailure`` with ``SPEED_OUT_OF_RANGE`` or
  ``SPEED_INCREMENT_INVALID``). ``Close``: the turns queued are answered, then ``SessionMetadata``.
- ``POST /v2/speak``: ``{"text"}`` in, the audio out (the ``/v1/speak`` call's query).

The voice is ``model`` (``flux-{voice}-{language}`` through the vendor voice map, or one of ours). The key
goes in ``Authorization: Token`` / ``Bearer`` or a browser's subprotocols ``token, KEY``. Checked by
``pytest tests/test_deepgram_flux.py``.
"""

from __future__ import annotations

import json
import math
import secrets
import uuid
from dataclasses import dataclass, replace
from typing import Any

from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from streamvoice.protocol import ErrorCode, ProtocolError, required_text
from streamvoice.server.core.events import Completed
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.contexts import Context, Frame, serve
from streamvoice.server.surfaces.deepgram.request import (
    BROWSER_KEY,
    MODEL_UUID,
    MODEL_VERSION,
    bad,
    resolve,
    speak_call,
    warning,
)
from streamvoice.server.surfaces.deepgram.turns import TurnSocket

DEFAULT_MODEL = "flux-alexis-en"
SPEEDS = (0.5, 1.5, 0.05)  # lowest, highest, step: what Flux accepts (the SDKs and LiveKit check it too)
NO_CONTROLS = {"pronunciations_applied": 0, "breaks_applied": 0, "pronunciation_warnings": 0}


def speed_problem(value: object) -> tuple[str, str] | None:
    """(code, why) when ``value`` is not a Flux speed; None when it is."""
    low, high, step = SPEEDS
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "SPEED_OUT_OF_RANGE", f"speed must be a number from {low} to {high}"
    if not low - 1e-9 <= value <= high + 1e-9:
        return "SPEED_OUT_OF_RANGE", f"speed {value:g} is outside {low} to {high}"
    if abs(value / step - round(value / step)) > 1e-6:
        return "SPEED_INCREMENT_INVALID", f"speed {value:g} is not a multiple of {step}"
    return None


def flux_speed(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    problem = speed_problem(value)
    if problem is not None:
        raise bad(problem[1], "speed")
    return value


def _warn(code: str, description: str) -> str:
    return json.dumps({"type": "Warning", "code": code, "description": description})


def interrupt_offset(obj: dict[str, Any]) -> tuple[float | None, str | None]:
    """The ``Interrupt``'s ``playback_offset`` in ms (None when absent), or why it is not one."""
    raw = obj.get("playback_offset")
    if raw is None:
        return None, None
    value = raw.get("value") if isinstance(raw, dict) else None
    if not isinstance(raw, dict) or raw.get("type", "time_ms") != "time_ms":
        return None, 'playback_offset must be {"type": "time_ms", "value": <ms played>}'
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e12:
        return None, "playback_offset.value must be the ms of session audio played: a number from 0 up"
    return float(value), None


@dataclass
class FluxTurn:
    """What Flux keeps per turn."""

    flushed: bool = False  # ended by the client's Flush (answered Flushed), not by the server


class FluxSocket(TurnSocket[FluxTurn]):
    name = "deepgram-flux"

    def new_state(self) -> FluxTurn:
        return FluxTurn()

    def __init__(self, ws: WebSocket, service: SpeechService, connection_id: str) -> None:
        super().__init__(ws, service, connection_id)
        self.model = ws.query_params.get("model") or DEFAULT_MODEL
        self.request, _ = resolve(service, ws.query_params, True, DEFAULT_MODEL, flux_speed)
        self.speed_set = "speed" in ws.query_params
        self.interrupted_at: float | None = None  # the last Interrupt's position, ms: the next must pass it
        self.input_chars = 0
        self.send(
            json.dumps(
                {
                    "type": "Connected",
                    "request_id": str(uuid.uuid4()),
                    "model_name": self.model,
                    "model_version": MODEL_VERSION,
                    "model_uuids": [MODEL_UUID],
                }
            )
        )

    async def on_object(self, obj: dict[str, Any]) -> bool:
        match obj.get("type"):
            case "Speak":
                self._speak(required_text(obj))
            case "Flush":
                self._flush()
            case "Interrupt":
                self._interrupt(obj)
            case "Configure":
                self._configure(obj)
            case "Close":
                self._flush(quiet=True)
                self.reply_later(self._session_metadata)
                return True
            case kind:
                raise ProtocolError(
                    ErrorCode.UNKNOWN_TYPE,
                    f'"type" {str(kind)[:32]!r} is not one of Speak, Flush, Interrupt, Configure, Close',
                )
        return False

    # -- the client's messages ----------------------------------------------------------------------
    def _speak(self, text: str) -> None:
        if self.speak(text, self.request, lambda: f"dg_sp_{secrets.token_hex(6)}") is not None:
            self.input_chars += len(text)

    def _flush(self, quiet: bool = False) -> None:
        if (turn := self.flushed()) is not None:
            turn.wire.flushed = True
            self.end(turn)
        elif not quiet:
            self.notice(_warn("NO_ACTIVE_SPEECH", "Flush with no turn open: send Speak first"))

    def _interrupt(self, obj: dict[str, Any]) -> None:
        offset, why = interrupt_offset(obj)
        if why is not None:
            self.notice(_warn("INVALID_INTERRUPT_OFFSET", why))
            return
        if self.playout.timeline.samples == 0 and not any(a.sent_samples for a in self.answering):
            self.notice(
                _warn("NO_AUDIO_GENERATED", "this session has produced no audio yet: nothing to interrupt")
            )
            return
        if any(c.utterance.cancelled for c in self.answering):
            self.notice(_warn("INTERRUPT_IN_PROGRESS", "the last Interrupt is still stopping its turns"))
            return
        floor_ms = self.playout.timeline.ms(self.playout.timeline.floor)
        # The player cannot go back: past the last cut (the timeline's floor, moved by any cut, one that
        # found nothing playing included) and past the last Interrupt's offset.
        bar = max(floor_ms, self.interrupted_at if self.interrupted_at is not None else floor_ms)
        if offset is not None and (offset < floor_ms or (self.interrupted_at is not None and offset <= bar)):
            self.notice(
                _warn(
                    "INVALID_INTERRUPT_OFFSET",
                    f"playback_offset {offset:g} does not advance past {bar:g}, where the last "
                    "Interrupt left the player (count the session's audio played, without what an interrupt "
                    "dropped)",
                )
            )
            return
        played = offset if offset is not None else self.playout.timeline.ms(self.playout.timeline.samples)
        cut = self.cut(None, max(played, floor_ms))
        self.current = None
        if not cut.heard:
            self.notice(_warn("NO_ACTIVE_SPEECH", "nothing was playing: no turn to interrupt"))
            return
        self.interrupted_at = cut.played_ms
        turn, heard = cut.heard[0]
        frame: dict[str, Any] = {"type": "SpeechInterrupted", "audio_played_ms": round(cut.played_ms)}
        if offset is not None:
            frame["text_spoken"] = heard.heard
            frame["text_remaining"] = heard.unheard
        frame["metadata"] = self._turn_metadata(turn)
        self.send(json.dumps(frame))  # behind the turns it stopped, which end at once

    def _configure(self, obj: dict[str, Any]) -> None:
        applied: dict[str, Any] = {}
        if "speed" in obj:
            speed = obj["speed"]
            problem = speed_problem(speed)
            if problem is not None:
                code, why = problem
                failure: dict[str, Any] = {"type": "ConfigureFailure", "code": code, "field": "speed"}
                failure["description"] = why
                if isinstance(speed, int | float) and not isinstance(speed, bool) and math.isfinite(speed):
                    failure["value"] = speed
                self.notice(json.dumps(failure))
                return
            self.request = replace(self.request, speed=float(speed))
            self.speed_set = True
        if self.speed_set:
            applied["speed"] = self.request.speed
        self.notice(json.dumps({"type": "ConfigureSuccess", "applied": applied}))

    # -- rendering ----------------------------------------------------------------------------------
    def render_started(self, answer: Context[FluxTurn], index: int) -> list[Frame]:
        if index:
            return []
        return [json.dumps({"type": "SpeechStarted", "speech_id": answer.id})]

    def render_completed(self, answer: Context[FluxTurn], done: Completed) -> list[Frame]:
        return self._turn_end(answer)

    def render_failed(self, answer: Context[FluxTurn], error: ProtocolError) -> list[Frame]:
        if error.code == ErrorCode.EMPTY_TEXT:
            why = _warn(
                "NO_SYNTHESIZABLE_TEXT", "the turn's text has nothing to say (only spaces or punctuation)"
            )
            return [why, *self._turn_end(answer)]
        self.count_error(error)
        return [refusal(error)]

    def error_frame(self, error: ProtocolError, context_id: str | None) -> Frame | None:
        return warning(error)

    def _turn_end(self, answer: Context[FluxTurn]) -> list[Frame]:
        frames: list[Frame] = [json.dumps({"type": "SpeechMetadata", **self._turn_metadata(answer)})]
        if answer.wire.flushed:
            frames.append(json.dumps({"type": "Flushed", "speech_id": answer.id}))
        return frames

    def _turn_metadata(self, answer: Context[FluxTurn]) -> dict[str, Any]:
        chars = answer.utterance.chars
        return {
            "speech_id": answer.id,
            "audio_duration_ms": round(self.playout.timeline.ms(answer.sent_samples)),
            "input_character_count": chars,
            "billable_character_count": chars,
            "controls_applied": NO_CONTROLS,
        }

    def _session_metadata(self) -> Frame:
        return json.dumps(
            {
                "type": "SessionMetadata",
                "total_audio_duration_ms": round(self.playout.timeline.ms(self.playout.timeline.samples)),
                "total_input_character_count": self.input_chars,
                "total_billable_character_count": self.input_chars,
            }
        )


def refusal(error: ProtocolError) -> str:
    """Why the connection does not start (a bad query, the server busy or shutting down): Flux's ``Error``."""
    return json.dumps({"type": "Error", "code": "DATA-0000", "description": error.message})


async def websocket(ws: WebSocket) -> None:
    await serve(ws, FluxSocket, refusal, BROWSER_KEY)


ROUTES = [
    WebSocketRoute("/v2/speak", websocket),
    Route("/v2/speak", speak_call(DEFAULT_MODEL, flux_speed), methods=["POST"]),
]
