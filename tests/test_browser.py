"""The web page in a real headless Chromium (Debian's, driven by Playwright): text streams, audio is
decoded and scheduled through Web Audio, and time to first audio is shown."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import RunningServer, start_agent, system_binary


@pytest.fixture(scope="module")
def chromium_path() -> str:
    return system_binary("chromium", "chromium-browser", package="chromium")


def launch(p: Any, chromium_path: str) -> Any:
    """Debian's Chromium, headless, allowed to play audio without a click."""
    return p.chromium.launch(
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


@pytest.mark.slow
def test_page_streams_text_and_schedules_audio(speech_server: RunningServer, chromium_path: str) -> None:
    from playwright.sync_api import sync_playwright

    from streamvoice.agent.llm import ScriptedTextSource

    # A short answer at an LLM's pace (the local model end to end is test_agent.py's): what is tested is the
    # page. With a token, as a deployed agent runs: the page sends it (browsers cannot be given it otherwise).
    answer_text = "Leaves change colour because the green chlorophyll fades. The yellow was there all along."
    agent = start_agent(ScriptedTextSource(answer_text), speech_server.url, auth_token="page-token")
    try:
        with sync_playwright() as p:
            browser = launch(p, chromium_path)
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


@pytest.mark.slow
def test_page_shows_the_timeline_and_speaks_any_language(
    speech_server: RunningServer, chromium_path: str
) -> None:
    """The voice picker lists every installed voice by language; a Japanese voice says its sample; the
    live timeline shows the text, the pieces, the audio and when speech was heard."""
    import os
    from pathlib import Path

    from playwright.sync_api import sync_playwright

    from streamvoice.agent.llm import ScriptedTextSource

    artefacts = Path(os.environ.get("STREAMVOICE_RESULTS", "results"))
    artefacts.mkdir(parents=True, exist_ok=True)
    agent = start_agent(ScriptedTextSource("Unused here."), speech_server.url)
    try:
        with sync_playwright() as p:
            browser = launch(p, chromium_path)
            page = browser.new_page(viewport={"width": 900, "height": 800})
            page.goto(agent.url + "/")
            page.wait_for_function("window.streamvoiceVoices > 0", timeout=30_000)
            voices = page.evaluate("window.streamvoiceVoices")
            groups = page.eval_on_selector_all("#voice optgroup", "gs => gs.map(g => g.label)")
            page.select_option("#voice", "jf_alpha")
            page.click("#sample")
            page.wait_for_function("window.streamvoiceStats.done === true", timeout=120_000)
            stats = page.evaluate("window.streamvoiceStats")
            counts = {k: page.locator(f"#lane-{k} .mark").count() for k in ("text", "piece", "audio")}
            heard_shown = page.is_visible("#heard")
            prompt = page.input_value("#prompt")
            page.screenshot(path=str(artefacts / "browser-timeline.png"), full_page=True)
            browser.close()
    finally:
        agent.stop()
    assert voices == 54 and "Japanese" in groups and "Mandarin Chinese" in groups
    assert stats["errors"] == [] and stats["voice"] == "jf_alpha"
    assert any("\u3040" <= ch <= "\u9fff" for ch in prompt)  # the Japanese sample sentence
    assert stats["samplesDecoded"] > 24_000  # the Japanese voice's audio, received and scheduled
    assert counts["text"] > 0 and counts["piece"] > 0 and counts["audio"] > 0 and heard_shown
    assert stats["heardMs"] is not None and stats["heardMs"] >= stats["firstAudioMs"]


@pytest.mark.slow
def test_speaking_while_the_answer_plays_interrupts_it_and_shows_what_was_heard(
    speech_server: RunningServer, chromium_path: str
) -> None:
    """The page sends a second prompt while the first answer plays: its audio stops, the agent answers what
    was heard (by the page's own player count), the page shows it, and the agent's history holds only it."""
    from playwright.sync_api import sync_playwright

    from streamvoice.agent.llm import ScriptedTextSource
    from streamvoice.store import owner as owner_of

    answer_text = (
        "Leaves change colour because the green chlorophyll fades in the cold. The yellow and orange were "
        "there all along, hidden under the green. Red comes from new pigments made in the autumn sun."
    )
    agent = start_agent(ScriptedTextSource(answer_text, tokens_per_s=20), speech_server.url)
    try:
        with sync_playwright() as p:
            browser = launch(p, chromium_path)
            page = browser.new_page()
            page.goto(agent.url + "/")
            page.fill("#prompt", "Why do leaves change colour?")
            page.click("#go")
            page.wait_for_function("playedMs() > 2000", timeout=120_000)  # two seconds heard
            page.fill("#prompt", "And why red?")
            page.click("#go")
            page.wait_for_function("window.streamvoiceStats.interrupted !== null", timeout=120_000)
            cut = page.evaluate("window.streamvoiceStats.interrupted")
            cid = page.evaluate("window.streamvoiceStats.conversation")
            heard_shown = page.inner_text("#history .heard")
            unheard_shown = page.inner_text("#history .unheard")
            page.wait_for_function("window.streamvoiceStats.done === true", timeout=120_000)
            page.click("#new")
            forgotten = page.evaluate("window.streamvoiceStats.conversation")
            browser.close()
        history = agent.server.config.app.state.conversations.history(owner_of(None), cid)  # type: ignore[attr-defined]
    finally:
        agent.stop()
    assert cut["played_ms"] >= 2000 and cut["heard"] and cut["unheard"], cut
    assert (
        answer_text.startswith(cut["heard"])
        and heard_shown.strip() == cut["heard"].strip()
        and unheard_shown.strip() == cut["unheard"].strip()
    )
    assert (
        history[1].text == cut["heard"].strip() and history[1].cut_off
    )  # the agent kept only what was heard
    assert forgotten is None
