"""Noticing when streamed text stops: an async stream with a marker after each spell of silence.

The chunker decides a sentence's end only when the next character arrives (``"evening."`` could still
become ``"evening.com"``); a language model that writes a one-sentence reply and stops sends no next
character. Callers feed the chunker as usual and, on ``QUIET``, call ``IncrementalSentenceChunker.quiet``,
which releases a finished sentence at the end of the text (and nothing else).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Final

from streamvoice.text.chunker import QUIET_CUT_S


class _Quiet:
    def __repr__(self) -> str:
        return "QUIET"


QUIET: Final = _Quiet()
_END = object()


async def with_quiet[T](source: AsyncIterator[T], quiet_s: float = QUIET_CUT_S) -> AsyncIterator[T | _Quiet]:
    """``source``'s items, and ``QUIET`` once whenever ``quiet_s`` pass after an item with no next one.

    The source is read by a task of its own (cancelling a pending ``anext`` would end the source), and
    closed when this ends; its exception is raised here. ``quiet_s <= 0``: the items alone."""
    queue: asyncio.Queue[object] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for item in source:
                await queue.put(item)
        except BaseException as exc:
            await queue.put(exc if isinstance(exc, Exception) else _END)
            return
        await queue.put(_END)

    task = asyncio.create_task(pump())
    armed = False
    try:
        while True:
            if armed and quiet_s > 0:
                try:
                    item = await asyncio.wait_for(queue.get(), quiet_s)
                except TimeoutError:
                    armed = False
                    yield QUIET
                    continue
            else:
                item = await queue.get()
            if item is _END:
                return
            if isinstance(item, Exception):
                raise item
            armed = True
            yield item  # type: ignore[misc]
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
