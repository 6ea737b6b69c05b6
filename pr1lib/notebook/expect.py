""" "You should see": one readable line per expected range, recorded so the tour can report it.

A notebook's "You should see" cell calls ``should_see(name, value, PROFILE)``. The range comes
from ``EXPECTED[name]`` for that profile (the ``"*"`` entry holds for every profile), or from
``low`` / ``high`` given in the call. It prints one line, and when ``PR1_EXPECT_FILE`` names a file
(``pr1lib.notebook.runner.execute`` sets it for every notebook it runs) it appends the check there
as one JSON line. A value outside its range never raises: ``make tour`` shows it highlighted in its
report, and the smoke tests fail on it. A check with no range for the profile is still recorded,
with its value, so a measured tour shows what a range should be.

>>> should_see("hacks paid more than honest_parallel", 0, "smoke")
you should see hacks paid more than honest_parallel = 0: got 0 ✓
True
>>> should_see("a number nobody has measured", 0.25, "tiny")
a number nobody has measured: got 0.25 (no range for the tiny profile yet)
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

EXPECT_ENV = (
    "PR1_EXPECT_FILE"  # set by pr1lib.notebook.runner.execute: where a kernel records its checks
)
Range = tuple  # (low, high); either end may be None (open)

# name -> {profile or "*": (low, high)}. smoke ranges are loose (random weights; they catch broken
# plumbing, not bad learning); tiny ranges only where a reason is written next to them; the lead
# fills in the rest from a measured `make tour` (the report lists every unranged value).
EXPECTED: dict[str, dict[str, Range]] = {
    # 01: the cases table is fixed text, so these counts hold in every profile
    "validator table rows only the official checker accepts": {"*": (4, 4)},
    # 01: the 341 traces of the shared data (the strict grammar finds three real slips)
    "real traces only the official checker accepts": {"*": (3, 3)},
    # 01: the tiny tokenizer's tag pieces: opening tags share "<", so the mean-of-pieces start puts
    # <Parallel> nearer <Path> (0.988) than <Path> nearer </Path> (0.892); the prose reads this.
    # In smoke the tag rows start from random vectors: either order (the lesson is read on tiny)
    "<Parallel>/<Path> closer than <Path>/</Path> (1 = yes)": {"tiny": (1, 1), "smoke": (0, 1)},
    # 00: the shipped TinyWorld base on 50 hard items x 8 at T = 1 (card, 200 x 8: pass@8 0.83,
    # mean@8 0.37, gap 0.46; one SD of the gap at 50 items is ~0.05); pass@k >= mean@k always
    "TinyWorld base, hard: pass@8 minus mean@8": {"smoke": (0, 1), "tiny": (0.25, 0.65)},
    # 00: its check line copies the total (measured: 252 of 257 wrong answers marked ✓, 50 x 8)
    "TinyWorld base, hard: share of wrong answers whose check says ✓": {
        "smoke": (0, 1),
        "tiny": (0.8, 1),
    },
    # 02: the TinyWorld cold start is deterministic: the tiny profile's 12,000 rows are the
    # shipped SFT's (data/tinyworld-sft's card hash); smoke builds 24 rows, never the same
    "TinyWorld cold start has the shipped SFT's rows (1 = the same hash)": {
        "smoke": (0, 0),
        "tiny": (1, 1),
    },
    # 03: fp32 everywhere on CPU (TOL = 1e-4); the seen and summary rows must move well above it
    "second path max |Δ logit|, unseen": {"smoke": (0, 1e-4), "tiny": (0, 1e-4)},
    "second path max |Δ logit|, seen": {"smoke": (1e-3, None), "tiny": (1e-3, None)},
    "summary max |Δ logit|, unseen": {"smoke": (1e-3, None), "tiny": (1e-3, None)},
    # 03: the shipped unseen TinyWorld SFT, one forced forked block on 50 hard items (measured:
    # 0.49 of 80 blocks differ in tests/test_world.py; one SD at 50 is ~0.07): about half the same
    "unseen SFT, forked: share of blocks whose paths start from the same price": {
        "smoke": (0, 1),
        "tiny": (0.25, 0.8),
    },
    # 03: WideWorld's shipped unseen SFT (a tiny-profile model on every profile), one forced forked
    # block after a failed guess (study split, 250 items: 0.93 at T = 1, 0.98 greedy); steps of
    # nine forked paths over the same tokens in one stream (teacher traces: ~0.3)
    "WideWorld unseen SFT, forked: share of blocks whose paths take their own deal": {
        "*": (0.75, 1)
    },
    "WideWorld unseen SFT: forked steps over the same tokens in one stream": {"*": (0.15, 0.55)},
    # 05: the hacking table is fixed text: every profile
    "hacks paid more than honest_parallel": {"*": (0, 0)},
    "tiered reward of honest_parallel": {"*": (1.2, 1.2)},
    # 05: the doctor loads the Stage 2 session of notebook 06's start (TinyWorld: the shipped seen
    # SFT), never the base model; from it every check passes (tiny, measured on seeds 0-5 with 4
    # dry-run groups: at most 1 of 4 groups flat). smoke's short completion budget cuts some
    # samples (seed 1: 4 of 4 groups flat), so one failing check is allowed there
    "the doctor loads a trained checkpoint (1 = yes)": {"*": (1, 1)},
    "doctor checks that fail on the trained checkpoint": {"*": (0, 0), "smoke": (0, 1)},
    # 04: the shipped seen SFT minus the TinyWorld base, hard mean@4 at T = 1 on 200 items
    # (measured in the notebook: +0.045, paired 95 % interval -0.009 to +0.10; the cards, k = 4
    # vs k = 8: +0.12); the SFT opens a block on a fifth of the items, so the gain is small
    "TinyWorld hard: shipped seen SFT minus base, accuracy at T = 1": {
        "smoke": (-1, 1),
        "tiny": (-0.05, 0.25),
    },
    # 06: Stage 2 (15 steps) then 60 accuracy-only Stage-3 steps from data/tinyworld-sft
    # (measured: hard ratio 0.23 -> 0.95, accuracy +0.128 at 200 x 4); floors ~3 SD below
    "TinyWorld hard parallel ratio after Stage 3": {"smoke": (0, 1), "tiny": (0.6, 1)},
    "TinyWorld hard accuracy gain, Stage 3": {"smoke": (-1, 1), "tiny": (0.05, 0.5)},
    # 07: pass@k >= mean@k always; the base model was never trained on the tags, so it opens
    # (almost) no block (tiny: 0.0 % in every measured table); smoke's random model may write tags
    "pass@k minus mean@k, base model": {"*": (0, 1)},
    "parallel ratio, base model": {"smoke": (0, 1), "tiny": (0, 0.05)},
    # tiny: TinyWorld's base on hard items, 36.8 % at T = 1 (results/tinyworld-base-hard-t1.json)
    "mean@k, base model": {"smoke": (0, 0.5), "tiny": (0.25, 0.5)},
    # 07's headline, TinyWorld hard at T = 1: Parallel-R1-Seen over its SFT and over plain GRPO.
    # On 3 seeds (results/tinyworld-controls.json, 300 x 8): +15.4 to +19.7 points over the SFT,
    # +26.2 over plain GRPO on average; notebook 06's own run at 200 x 4: +12.8 and +24.2
    "R1-Seen minus SFT-Seen, hard mean@k": {"smoke": (-1, 1), "tiny": (0.08, 0.35)},
    "R1-Seen minus plain GRPO, hard mean@k": {"smoke": (-1, 1), "tiny": (0.10, 0.45)},
    # 07's live scaffold on tiny: data/tinyworld-sft-unseen on its own world's hard items (30 x 4
    # at T = 1; measured 0.49 at the start, 0.54 after 20 steps, seed 0; at 200 x 4: 43.5 %; one
    # SD at 30 items ~0.06); 0 when it trains and is scored on another world's problems, as it
    # did before it carried its world
    "scaffold, hard mean@k at the start": {"smoke": (0, 1), "tiny": (0.2, 0.7)},
    "scaffold, hard mean@k at the end": {"smoke": (0, 1), "tiny": (0.15, 0.75)},
    # 07 section 8 reads the committed WideWorld cards (every profile): R1-Unseen in 0.49x the
    # serial arm's sequential steps (results/wideworld-controls.json; the target <= 0.6)
    # and, at batch 1, the seconds ratio results/wideworld-latency.json holds (unseen_over_serial.1,
    # its target steps_bound: 1.1x the steps ratio); the cell prints whether the seconds save less
    # than the steps (the low end: well under the steps ratio, which the seconds do not beat)
    "WideWorld: R1-Unseen's sequential steps over the serial arm's": {"*": (0.3, 0.6)},
    "WideWorld: R1-Unseen's seconds per answer over serial's, batch 1": {"*": (0.4, 0.95)},
    # 07 section 9 reads the committed PlanWorld cards (every profile). results/planworld-controls:
    # R1-Unseen's plans widen from the cold start's mix of 2 and 3 deals (about 2.5 paths per
    # block) to about 3, the widest plan the cold start holds, and no further (the high end);
    # the forced split with the plan against the plan-removed control's
    # (results/planworld-control-noplan: about 0.11); the serial arm ends above R1-Unseen
    "PlanWorld: R1-Unseen's paths per block, after RL minus after SFT": {"*": (0.2, 1.0)},
    "PlanWorld: R1-Unseen's paths per block after RL": {"*": (2.6, 3.05)},
    "PlanWorld: split rate with the plan minus without": {"*": (0.4, 1.0)},
    "PlanWorld: R1-Unseen minus serial, hard mean@k": {"*": (-0.25, -0.02)},
    # results/planworld-plans-coldstart: a forced plan of three deals finds what it holds (measured
    # -2 points), of four far less (-19); results/planworld-rl-explore: no wider after RL (2.98)
    "PlanWorld: a forced plan of 3 deals, right minus in reach": {"*": (-0.08, 0.05)},
    "PlanWorld: a forced plan of 4 deals, right minus in reach": {"*": (-0.5, -0.1)},
    "PlanWorld: RL with the width explored, paths per block after RL": {"*": (2.6, 3.05)},
    # results/planworld-plans-explore: that RL made a four-deal block worse (measured -20 points)
    "PlanWorld: a forced plan of 4 deals, right after that RL minus before": {"*": (-0.4, -0.05)},
    # results/planworld-plans-hidden: with the plan hidden, a four-deal block splits (measured 0.90)
    # and is right about as often as a three-deal one (measured -0.01)
    "PlanWorld: plan hidden, a forced plan of 4 deals, paths on their own deals": {"*": (0.7, 1.0)},
    "PlanWorld: plan hidden, a forced plan of 4 deals, right minus 3 deals": {"*": (-0.12, 0.08)},
    # results/planworld-rl-hidden-guess, -rl-hidden: RL narrows the plans to two when a guess pays
    # (measured 2.0), widens them to three when only checked letters pay (measured 2.97)
    "PlanWorld: plan hidden, RL paying any right letter, paths per block after RL": {
        "*": (1.9, 2.4)
    },
    "PlanWorld: plan hidden, RL paying checked letters, paths per block after RL": {
        "*": (2.7, 3.2)
    },
    # results/planworld-controls-wide (regime 9, 3 SFT seeds per arm): R1-Unseen's plans widen from
    # the cold start's 2 or 3 deals to about 6 paths per block (measured 6.15), its mean@4 rises by
    # about 26 points over the seeds (measured 0.262), and it ends within the noise of the serial
    # search on the same problems and steps (measured -5.7 points, interval -21.7 to +7.9)
    "PlanWorld regime 9: R1-Unseen minus serial, hard mean@k": {"*": (-0.15, 0.05)},
    "PlanWorld regime 9: R1-Unseen's paths per block after RL": {"*": (5.0, 8.0)},
    "PlanWorld regime 9: R1-Unseen's mean@k gain from its cold start": {"*": (0.15, 0.4)},
    # results/planworld-widths-wide (regime 9, seed 0 of each arm): at 10 deals unseen about
    # matches serial (measured -0.8 points) in 0.47x its seconds at batch 1; at 2 deals, after RL
    # on ten-deal lists only, its short plans come out broken (measured -92 points)
    "PlanWorld sweep: unseen minus serial mean@k at 10 deals": {"*": (-0.08, 0.06)},
    "PlanWorld sweep: unseen's seconds over serial's at 10 deals, batch 1": {"*": (0.3, 0.7)},
    "PlanWorld sweep: unseen minus serial mean@k at 2 deals": {"*": (-1.0, -0.5)},
    # results/planworld-controls-mixed and -widths-mixed (regime 10: RL on lists of 2 to 10
    # deals): R1-Unseen ends below the serial search at ten deals beyond the noise (measured
    # -13.6 points, interval -27.6 to -1.2); on two deals its seed 0 is right 45.2 % (6.0 % after
    # ten-deal RL, 96.5 % after its cold start)
    "PlanWorld regime 10: R1-Unseen minus serial, hard mean@k": {"*": (-0.3, -0.05)},
    "PlanWorld regime 10 sweep: unseen mean@k at 2 deals": {"*": (0.2, 0.8)},
    # results/planworld-controls-honest (regime 12: a false check costs the answer in both arms'
    # RL): the unseen arm's blocks split more than after regime 9 (measured 70.8 % pooled; seeds 0
    # and 1 above 90 %, seed 2 collapsed), its plans widen less (measured 4.69 paths) and it ends
    # below the serial search (measured -15.8 points, interval -34.7 to +0.2)
    "PlanWorld regime 12: R1-Unseen's median seed, blocks on distinct, correct deals": {
        "*": (0.85, 1.0)
    },
    "PlanWorld regime 12: R1-Unseen's paths per block after RL": {"*": (3.0, 5.5)},
    "PlanWorld regime 12: R1-Unseen minus serial, hard mean@k": {"*": (-0.35, -0.03)},
    # results/planworld-switch (regime 13: regime 9's runs, then 150 steps at 5e-5 under the
    # honest grader; controls: the same steps under the checked grader, and the serial arm under
    # the honest one): measured 91.7 % of blocks on distinct, correct deals (lowest seed 88.5 %;
    # checked: 67.5 %), 5.47 paths (checked: 6.22), honest minus checked -1.1 points (-16.5 to
    # +15.3), unseen minus serial -6.8 points (-19.5 to +5.7)
    "PlanWorld regime 13: R1-Unseen's blocks on distinct, correct deals": {"*": (0.85, 1.0)},
    "PlanWorld regime 13: R1-Unseen's lowest seed, blocks on distinct, correct deals": {
        "*": (0.85, 1.0)
    },
    "PlanWorld regime 13: R1-Unseen's paths per block": {"*": (4.5, 6.5)},
    "PlanWorld regime 13: honest minus checked steps, hard mean@k": {"*": (-0.1, 0.1)},
    "PlanWorld regime 13: R1-Unseen minus serial, hard mean@k": {"*": (-0.2, 0.0)},
    # 06 section 10: PlanWorld's 30-step RL from data/planworld-sft-unseen (regime 9; the tiny
    # sizes on every profile but smoke), its training log's last 5 steps against its first 5: the
    # same run as the study's first 30 steps (seed 0: 2.02 -> 3.36 paths per block, past the cold
    # start's widest plan of 3; split rate 0.37 -> 0.54, the late letters' paths check other
    # deals); smoke's few steps may move the width either way, within 0..10 paths
    "PlanWorld RL: paths per block, last steps minus first": {"smoke": (-8, 8), "tiny": (0.5, 5)},
    "PlanWorld RL: paths per block, last steps": {"smoke": (0, 10), "tiny": (3.0, 10)},
    "PlanWorld RL: blocks on distinct, correct deals, last steps": {
        "smoke": (0, 1),
        "tiny": (0.3, 0.75),
    },
}


def _fmt(x: float | None) -> str:
    if x is None:
        return "?"
    if float(x).is_integer() and abs(x) < 1e6:
        return str(int(x))
    return f"{x:.3g}"


def expected_range(name: str, profile: str) -> Range | None:
    """The ``(low, high)`` a check should land in for ``profile`` (``None``: none set yet)."""
    ranges = EXPECTED.get(name, {})
    return ranges.get(profile, ranges.get("*"))


@dataclass(frozen=True)
class Seen:
    """One check: a value, the range it should be in (ends may be ``None``) and its profile."""

    name: str
    value: float
    low: float | None
    high: float | None
    profile: str

    @property
    def ranged(self) -> bool:
        return self.low is not None or self.high is not None

    @property
    def ok(self) -> bool | None:
        """True inside the range (ends included), False outside or NaN, None with no range."""
        if not self.ranged:
            return None
        if math.isnan(self.value):
            return False
        return (self.low is None or self.value >= self.low) and (
            self.high is None or self.value <= self.high
        )

    def expected(self) -> str:
        """The range in words: ``0.9–1``, ``= 4``, ``≤ 0.0001``, ``≥ 0.001``."""
        if self.low is not None and self.high is not None:
            if self.low == self.high:
                return f"= {_fmt(self.low)}"
            return f"{_fmt(self.low)}–{_fmt(self.high)}"
        return f"≤ {_fmt(self.high)}" if self.low is None else f"≥ {_fmt(self.low)}"

    def line(self) -> str:
        got = _fmt(self.value)
        if not self.ranged:
            return f"{self.name}: got {got} (no range for the {self.profile} profile yet)"
        mark = "✓" if self.ok else "✗ outside the range"
        return f"you should see {self.name} {self.expected()}: got {got} {mark}"


def should_see(
    name: str,
    value: float,
    profile: str,
    low: float | None = None,
    high: float | None = None,
) -> bool | None:
    """Print whether ``value`` is in its range and record it for the tour; return ``Seen.ok``.

    ``low`` / ``high`` (either one) replace ``EXPECTED[name]`` for this call.
    """
    if low is None and high is None:
        low, high = expected_range(name, profile) or (None, None)
    seen = Seen(name, float(value), low, high, profile)
    print(seen.line())
    path = os.environ.get(EXPECT_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({**asdict(seen), "ok": seen.ok}, ensure_ascii=False) + "\n")
    return seen.ok


def read_checks(path: str | Path) -> list[dict]:
    """The checks a kernel recorded in ``path`` (``[]`` when there is no such file)."""
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
