"""The README's picture, ``docs/headline.png``: ``reports.headline_figure`` of the two controls
cards, TinyWorld's (``results/tinyworld-controls.json``: the search pays, with or without tags)
beside WideWorld's (``results/wideworld-controls.json``: accuracy within a cap on sequential
decode steps, where paths split the search).

Run after either card changes: ``python tools/headline_png.py`` (kaleido with a local Chrome or
Chromium; Debian: ``apt install chromium``).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from pr1lib.notebook.reports import headline_figure  # noqa: E402 - the repository's own pr1lib
from pr1lib.store.cards import committed  # noqa: E402

CARDS, PNG = ("tinyworld-controls", "wideworld-controls"), ROOT / "docs" / "headline.png"


def main() -> None:
    cards = [committed(name) for name in CARDS]
    missing = [name for name, card in zip(CARDS, cards) if card is None]
    if missing:
        raise SystemExit(f"no results/{missing[0]}.json: run its command first (its docs page)")
    figure = headline_figure(*(card["numbers"] for card in cards))
    figure.update_layout(title=f"results/{CARDS[0]}.json and results/{CARDS[1]}.json")
    PNG.write_bytes(figure.to_image(format="png", width=1200, height=430, scale=1))
    print(f"wrote {PNG.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
