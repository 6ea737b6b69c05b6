"""The prose stays true to its evidence: every number the README, the docs and the notebooks'
markdown quote from a result card equals the card, linked or not (the convention is in
``_prose`` and tests/README.md), and every file, anchor and section they cite exists."""

from __future__ import annotations

import json
import re

import pytest
from _prose import (
    DOC_ANCHOR,
    MD_LINK,
    REPO_PATH,
    all_pages,
    anchors,
    blocks,
    cited_cards,
    measured_numbers,
    notebook_pages,
    section_numbers,
    sentences,
    table_numbers,
    unmatched,
)

from pr1lib.store.cards import LINK, lookup, quoted_matches
from pr1lib.store.paths import REPO_ROOT

PAGES = all_pages()
IDS = [p.name for p in PAGES]


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_linked_number_equals_its_card(page):
    for text, path, key in LINK.findall(page.text):
        card = json.loads((REPO_ROOT / path).read_text())
        assert quoted_matches(text, lookup(card, key)), (
            f"{page.name} says {text!r}; {path}#{key} holds {lookup(card, key)!r}"
        )


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_number_in_a_sentence_citing_a_card_is_one_of_its_values(page):
    wrong = []
    for kind, block in blocks(page.text):
        units = sentences(block) if kind == "prose" else []
        for unit in units:
            cards = cited_cards(unit)
            missing = [c for c in cards if not (REPO_ROOT / "results" / f"{c}.json").is_file()]
            assert not missing, f"{page.name} cites cards that do not exist: {missing}"
            if cards:
                wrong += [(n, cards, unit) for n in unmatched(measured_numbers(unit), cards)]
    assert not wrong, f"{page.name}: numbers no cited card holds:\n" + "\n".join(
        f"  {n} (cards {c}) in: {u[:160]}" for n, c, u in wrong
    )


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_number_in_a_table_is_one_of_its_captions_cards(page):
    caption_cards: list[str] = []
    wrong = []
    for kind, block in blocks(page.text):
        if kind == "table" and caption_cards:
            wrong += [(n, caption_cards) for n in unmatched(table_numbers(block), caption_cards)]
        elif kind != "table":  # a table after a table keeps the first one's caption
            caption_cards = cited_cards(block) if kind == "prose" else []
    assert not wrong, f"{page.name}: table numbers no card of the caption holds: {wrong}"


def _target(page, target: str):
    """The file a relative link points at, and its anchor (``None`` for web links)."""
    if re.match(r"[a-z]+:", target):
        return None, None
    path, _, anchor = target.partition("#")
    return (page.folder / path if path else None), anchor


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_link_names_a_file_and_heading_that_exist(page):
    for text, target in MD_LINK.findall(re.sub(r"`[^`\n]*`", "", page.text)):  # not in code
        file, anchor = _target(page, target)
        if file is None and anchor is None:
            continue
        file = file or REPO_ROOT / page.name
        assert file.exists(), f"{page.name} links to {target!r}: no such file"
        if anchor and file.suffix == ".md":
            assert anchor in anchors(file.resolve()), (
                f"{page.name} links to {target!r}: no such heading in {file.name}"
            )
        number = re.search(r"§(\d+(?:\.\d+)?)", text)
        if number and anchor and file.suffix == ".md":
            assert anchor.startswith(number[1].replace(".", "") + "-"), (
                f"{page.name}: the link {text!r} points at #{anchor}"
            )


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_file_and_doc_section_named_in_the_text_exists(page):
    for path in REPO_PATH.findall(page.text):
        if any(c.isupper() for c in path.split("/")[-1].split(".")[0]):
            continue  # a placeholder, NAME or RUN
        hits = list(REPO_ROOT.glob(path.rstrip("/"))) if "*" in path else [REPO_ROOT / path]
        assert hits and all(h.exists() for h in hits), f"{page.name} names {path}: not found"
    for doc, anchor in DOC_ANCHOR.findall(page.text):
        if doc != doc.lower():
            continue  # a placeholder, docs/X.md
        assert (REPO_ROOT / doc).is_file(), f"{page.name} cites {doc}: not found"
        assert anchor in anchors(REPO_ROOT / doc), f"{page.name} cites {doc}#{anchor}: no heading"


NOTEBOOKS = {p.name.split("/")[1][:2]: p for p in notebook_pages()}
SECTION = re.compile(r"(?:[Nn]otebook (\d\d)(?:'s|,)? )?(?:§|sections? )(\d+(?:\.\d+)?)")


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_notebook_section_cited_exists(page):
    """A section cited as "notebook 04 §6.1", "notebook 06, section 9" or, inside a notebook,
    "section 11" is a heading of that notebook (docs name the notebook whose section they cite)."""
    own = page.name.split("/")[1][:2] if page.name.startswith("notebooks/") else None
    for nb, number in SECTION.findall(page.text):
        if nb or own:
            assert number in section_numbers(NOTEBOOKS[nb or own]), (
                f"{page.name} cites notebook {nb or own} section {number}: no such heading"
            )
