"""ElevenLabs' usage answer, ``GET /v1/user/subscription`` (``client.user.subscription.get()``): the key's
characters counted today on every replica (``character_count``), its daily quota (``character_limit``;
without one, the most one day could take), and when the count starts again, so a dashboard written for
ElevenLabs reads our use unchanged. Every field its SDK requires is there (``Subscription``)."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from streamvoice.server.core.service import SpeechService
from streamvoice.server.core.tenancy import current, next_day_at
from streamvoice.server.surfaces.elevenlabs.request import http_error
from streamvoice.server.surfaces.kept import kept_route

UNBOUNDED = 2**31 - 1  # a key without a daily quota: a limit no count reaches


async def subscription(request: Request, service: SpeechService, owner: str) -> Response:
    tenant = current()
    used = await service.tenancy.used_today(tenant) if tenant is not None else 0
    limit = tenant.chars_per_day if tenant is not None and tenant.chars_per_day else UNBOUNDED
    return JSONResponse(
        {
            "tier": tenant.name if tenant is not None else "open",
            "character_count": used,
            "character_limit": limit,
            "max_credit_limit_extension": 0,
            "can_extend_character_limit": False,
            "allowed_to_extend_character_limit": False,
            "next_character_count_reset_unix": next_day_at(time.time()),
            "voice_slots_used": 0,
            "professional_voice_slots_used": 0,
            "professional_voice_slots_used_in_workspace": 0,
            "voice_limit": 0,
            "voice_add_edit_counter": 0,
            "professional_voice_limit": 0,
            "can_extend_voice_limit": False,
            "can_use_instant_voice_cloning": False,
            "can_use_professional_voice_cloning": False,
            "current_overage": {"amount": "0", "currency": "usd"},
            "status": "active",
            "open_invoices": [],
            "has_open_invoices": False,
        }
    )


ROUTES = [Route("/v1/user/subscription", kept_route(http_error, subscription), methods=["GET"])]
