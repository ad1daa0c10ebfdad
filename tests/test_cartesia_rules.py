"""`server.surfaces.cartesia.rules`: Cartesia's items as lexicon entries."""

from __future__ import annotations

import pytest

from streamvoice.server.surfaces.cartesia.rules import cartesia_entry
from streamvoice.text.dictionary_rules import RuleError


def test_cartesia_items_ipa_in_double_angle_brackets_or_a_respelling() -> None:
    assert cartesia_entry({"text": "bayou", "alias": "<<ˈ|b|ɑ|ˈ|j|u>>"}) == ("bayou", "/ˈbɑˈju/")
    assert (
        cartesia_entry({"text": "tchoupitoulas", "pronunciation": "chop-uh-TOO-liss"})[1]
        == "chop-uh-TOO-liss"
    )
    with pytest.raises(RuleError):
        cartesia_entry({"text": "x"})
