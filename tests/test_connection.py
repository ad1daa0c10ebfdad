"""``server.surfaces.connection``: the one connection runtime's reader and writer (every socket wire's)."""

from __future__ import annotations

import asyncio


async def test_an_aborted_connection_closes_without_waiting_for_its_writer() -> None:
    """A reader that gave up on its client (replies past the cap) ends the connection now: the writer,
    blocked behind an answer nobody reads, is cancelled and the close is sent. Waiting for the writer kept
    the listener slot after the client had gone."""
    from streamvoice.server.surfaces.transport import run_reader_and_writer

    closed: list[tuple[int, str]] = []
    writer_cancelled = asyncio.Event()

    class Output:
        async def close(self, code: int, reason: str) -> None:
            closed.append((code, reason))

    async def reader() -> None:
        nonlocal aborted
        aborted = (1008, "too many unanswered frames")

    async def writer() -> None:
        try:
            await asyncio.Event().wait()  # blocked on a client that reads nothing
        except asyncio.CancelledError:
            writer_cancelled.set()
            raise

    aborted: tuple[int, str] | None = None
    await run_reader_and_writer(reader(), writer(), Output(), lambda: aborted)  # type: ignore[arg-type]
    assert closed == [(1008, "too many unanswered frames")] and writer_cancelled.is_set()


async def test_a_reader_that_ends_normally_lets_the_writer_finish_what_is_queued() -> None:
    from streamvoice.server.surfaces.transport import run_reader_and_writer

    sent: list[str] = []

    class Output:
        async def close(self, code: int, reason: str) -> None:
            sent.append("close")

    async def reader() -> None:
        return None  # queued its close behind the answers

    async def writer() -> None:
        for frame in ("answer", "close"):
            await asyncio.sleep(0)
            sent.append(frame)

    await run_reader_and_writer(reader(), writer(), Output(), lambda: None)  # type: ignore[arg-type]
    assert sent == ["answer", "close"]
