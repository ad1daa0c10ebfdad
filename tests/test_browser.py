"""The web page in a real headless Chromium (Debian's, driven by Playwright): text streams, audio is
decoded and scheduled through Web Audio, and time to first audio is shown."""

from __future__ import annotations

import shutil

import pytest

from tests.helpers import RunningServer, start_agent


@pytest.fixture(scope="module")
def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail(
            "Debian's chromium is required for the browser test: apt-get install chromium (make test does it)"
        )
    return path


@pytest.mark.slow
def test_page_streams_text_and_schedules_audio(
    speech_server: RunningServer, local_llm, chromium_path: str
) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import sync_playwright

    # With a token, as a deployed agent runs: the page sends it (browsers cannot be given it otherwise).
    agent = start_agent(local_llm, speech_server.url, auth_token="page-token")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=chromium_path,
                args=[
                    "--no-sandbox",
                    "--autoplay-policy=no-user-gesture-required",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--no-first-run",
                ],
            )
            page = browser.new_page()
            page.goto(agent.url + "/")
            page.click("#auth summary")
            page.fill("#token", "page-token")
            page.fill("#prompt", "Why do leaves change colour in autumn?")
            page.click("#go")
            page.wait_for_function("window.streamvoiceStats.done === true", timeout=120_000)
            stats = page.evaluate("window.streamvoiceStats")
            first_audio_shown = page.inner_text("#first-audio")
            answer = page.inner_text("#answer")
            page.screenshot(path="/tmp/streamvoice-page.png")
            browser.close()
    finally:
        agent.stop()
    assert stats["errors"] == []
    assert stats["chunksScheduled"] > 0
    assert stats["samplesDecoded"] > 24_000  # more than a second of audio decoded into AudioBuffers
    assert first_audio_shown.isdigit() and int(first_audio_shown) == stats["firstAudioMs"]
    assert len(answer.split()) > 5
