"""``bench.figures``: README's results table and docs/results.md's are rendered from the result files kept
in docs/results/, so the text and the files cannot disagree (issue #69 found five figures that did)."""

from __future__ import annotations

import copy
import json

import pytest

from streamvoice.bench import figures


def test_each_page_is_what_its_result_files_render() -> None:
    results = figures.load()
    for page in figures.PAGES:
        text = page.read_text()
        rendered = figures.render(text, results, readme=page.name == "README.md")
        assert text == rendered, (
            f"{page.name} disagrees with docs/results/: run `python -m streamvoice.bench.figures` to render it"
        )


def test_every_measured_row_has_its_file_with_machine_date_and_commit() -> None:
    results = figures.load()
    for row in figures.ROWS:
        if isinstance(row, figures.Measured):
            result = results[row.source]
            assert result["machine"]["when"] and result["machine"]["processor"], row.source
            assert result.get("commit"), row.source


def test_a_changed_result_file_changes_the_page() -> None:
    """The check above is not vacuous: a figure edited in its file no longer matches the page."""
    results = figures.load()
    changed = copy.deepcopy(results)
    rows = changed["transport"]["rows"]
    fast = next(r for r in rows if r["case"] == "streamvoice session: fast first piece")
    fast["of_baseline"] += 0.25
    readme = figures.PAGES[0]
    assert figures.render(readme.read_text(), changed, readme=True) != readme.read_text()


def test_a_missing_result_file_says_how_to_make_it() -> None:
    results = figures.load()
    del results["continuity"]
    with pytest.raises(FileNotFoundError, match=r"bench\.continuity"):
        figures.table(results, readme=True)


def test_kept_files_are_valid_json_named_for_their_benchmark() -> None:
    for path in figures.KEPT_DIR.glob("*.json"):
        assert json.loads(path.read_text())["benchmark"] == path.stem
