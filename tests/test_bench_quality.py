"""``bench.quality``'s modes: what it refuses before any model loads."""

from __future__ import annotations

import pytest

from streamvoice.bench import quality


def test_sentence_leads_needs_two_leads_for_a_standard_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        quality.main(["--sentence-leads", "1"])
    assert exited.value.code == 2
    assert "--sentence-leads takes 2 or more leads" in capsys.readouterr().err
