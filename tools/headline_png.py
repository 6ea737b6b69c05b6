"""The README's picture: the controls card (``results/tinyworld-controls.json``) drawn as
``reports.controls_bars`` into ``docs/headline.png``.

Run after the card changes: ``python tools/headline_png.py`` (kaleido with a local Chrome or
Chromium; Debian: ``apt install chromium``).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from pr1lib.reports import controls_bars  # noqa: E402 - the repository's own pr1lib
from pr1lib.results import committed  # noqa: E402

CARD, PNG = "tinyworld-controls", ROOT / "docs" / "headline.png"


def main() -> None:
    card = committed(CARD)
    if card is None:
        raise SystemExit(f"no results/{CARD}.json: run its command first (docs/tinyworld.md)")
    figure = controls_bars(card["numbers"])
    figure.update_layout(title=f"{figure.layout.title.text} — results/{CARD}.json")
    PNG.write_bytes(figure.to_image(format="png", width=820, height=400, scale=1))
    print(f"wrote {PNG.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
