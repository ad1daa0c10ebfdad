"""`server.core.heard`: the caller's text split where the listener's player got, and the connection's timeline."""

from __future__ import annotations

from streamvoice.engine.alignment import WordTime
from streamvoice.server.core.heard import Timeline, Transcript, played_of
from streamvoice.text.heard import heard_words, split_written
from streamvoice.text.pronounce import written_text


def _times(*words: str, each_ms: float = 200.0) -> list[WordTime]:
    return [WordTime(w, i * each_ms, (i + 1) * each_ms) for i, w in enumerate(words)]


def test_a_word_is_heard_when_half_of_it_was_played() -> None:
    words = _times("one", "two", "three")  # 0-200, 200-400, 400-600
    assert heard_words(words, 0) == 0
    assert heard_words(words, 99) == 0
    assert heard_words(words, 100) == 1  # half of "one"
    assert heard_words(words, 299) == 1
    assert heard_words(words, 300) == 2
    assert heard_words(words, 10_000) == 3


def test_the_split_keeps_the_callers_written_form_and_punctuation() -> None:
    written = "It costs $4.50, she said.  Then at 14h30 we left."
    words = _times("It", "costs", "$4.50,", "she", "said.", "Then", "at", "14h30", "we", "left.")
    assert split_written(written, words, 500) == ("It costs $4.50,", " she said.  Then at 14h30 we left.")
    assert split_written(written, words, 0) == ("", written)
    assert split_written(written, words, 99_999) == (written, "")


def test_heard_and_unheard_give_back_the_text_character_for_character() -> None:
    # Both halves were stripped at the cut: "Well, $4.50" + "at 14h30..." lost the space between them.
    written = "  Well, $4.50 at 14h30,\n\tthen  home. "
    words = _times("Well,", "$4.50", "at", "14h30,", "then", "home.")
    for played_ms in range(0, 1400, 50):
        heard, unheard = split_written(written, words, played_ms)
        assert heard + unheard == written
    assert split_written(written, words, 300) == ("  Well, $4.50", " at 14h30,\n\tthen  home. ")


def test_a_short_word_is_found_as_a_whole_token_not_inside_a_longer_one() -> None:
    written = "that a cat sat"
    words = _times("that", "a", "cat", "sat")
    assert split_written(written, words, 300) == ("that a", " cat sat")


def test_a_word_said_in_another_form_moves_the_cut_no_further() -> None:
    # where the model's words could not be put back on the caller's (a spoken form), the cut stays put
    written = "Pay $12 now please"
    words = _times("Pay", "twelve", "dollars", "now", "please")
    assert split_written(written, words, 500) == ("Pay", " $12 now please")
    assert split_written(written, words, 700) == ("Pay $12 now", " please")


def test_text_without_spaces_is_split_inside_a_run() -> None:
    written = "今日は晴れです。明日は雨です。"
    words = _times("今日は晴れです。", "明日は雨です。", each_ms=1000)
    assert split_written(written, words, 600) == ("今日は晴れです。", "明日は雨です。")


def test_streamed_text_that_was_never_spoken_is_unheard() -> None:
    transcript = Transcript()
    for token in ("Hello ", "there, ", "friend. ", "More ", "to ", "come"):
        transcript.wrote(token)
    transcript.said(_times("Hello", "there,"))  # the rest had arrived but was not spoken yet
    cut = transcript.split(10_000)
    assert (cut.heard, cut.unheard) == ("Hello there,", " friend. More to come")


def test_a_piece_without_word_times_is_spread_over_its_audio() -> None:
    transcript = Transcript()
    transcript.wrote("aa bb cccc")
    transcript.said_untimed("aa bb cccc", 1000, 1800)  # 2 + 2 + 4 letters over 800 ms
    assert [(w.word, w.start_ms, w.end_ms) for w in transcript.words] == [
        ("aa", 1000, 1200),
        ("bb", 1200, 1400),
        ("cccc", 1400, 1800),
    ]
    assert transcript.split(1300).heard == "aa bb"


def test_ssml_and_inline_phonemes_are_reduced_to_what_the_caller_reads() -> None:
    ssml = '<speak>Call <say-as interpret-as="digits">911</say-as> now.<break time="1s"/> Bye.</speak>'
    assert written_text(ssml, None) == "Call 911 now. Bye."
    assert written_text("I say [tomato](/təˈmɑːtoʊ/) daily", None) == "I say tomato daily"
    assert written_text("<speak>broken", True) == "<speak>broken"  # refused when planned; never guessed


def test_the_timeline_counts_what_the_player_plays_and_takes_back_a_cut() -> None:
    timeline = Timeline(rate=1000)  # one sample per ms
    timeline.samples = 5000
    assert timeline.position(None, unplayed_s=2.0) == 3000  # the server's playout clock
    assert timeline.position(1200, unplayed_s=0) == 1200  # the caller's own count
    assert timeline.position(9000, unplayed_s=0) == 5000  # never more than was sent
    timeline.cut(1200, dropped=3800)
    assert (timeline.samples, timeline.floor) == (1200, 1200)  # the next answer follows on from 1200
    timeline.samples += 500
    assert timeline.position(None, unplayed_s=5.0) == 1200  # never back before the last cut


def test_what_one_answer_had_played() -> None:
    assert played_of(None, 0, 5000) == 0  # never started
    assert played_of(1000, 3000, 500) == 0  # the player had not reached it
    assert played_of(1000, 3000, 2500) == 1500
    assert played_of(1000, 3000, 9000) == 3000
