"""pr1lib.notebook.plots: the figures show exactly the masks and positions pr1lib.decoding.structure
computes."""

from __future__ import annotations

import pytest
import torch
from _tiny import ids, toy_tokenizer

from pr1lib.decoding.structure import allowed_mask, structure_tensors, tag_ids
from pr1lib.notebook import plots

TOK = toy_tokenizer()
T = tag_ids(TOK)
# The worked example of docs/recipe.md#5-stage-1-cold-start-sft: q r s <Parallel> <Path> a b </Path>
# <Path> c d e </Path> <Summary> t …
SEQ = (
    ids(TOK, "qrs")
    + [T.parallel, T.path]
    + ids(TOK, "ab")
    + [T.end_path, T.path]
    + ids(TOK, "cde")
    + [T.end_path, T.summary]
    + ids(TOK, "t")
    + [T.end_summary, T.end_parallel]
    + ids(TOK, "z")
)
LABELS = plots.token_labels(TOK.convert_ids_to_tokens(SEQ))


def structure(mode: str) -> dict[str, torch.Tensor]:
    st = structure_tensors(torch.tensor([SEQ]), TOK, mode)
    # allowed (L, L)
    return {**st, "allowed": allowed_mask(st["block"], st["path"], st["valid"])[0]}


UNSEEN, SEEN = structure("unseen"), structure("seen")


def test_heatmap_shows_the_mask_with_unique_axis_labels():
    fig = plots.mask_heatmap(UNSEEN["allowed"], LABELS, "unseen")
    heat = fig.data[0]
    assert [list(r) for r in heat.z] == UNSEEN["allowed"].int().tolist()
    assert len(set(heat.x)) == len(SEQ) and list(heat.x) == list(heat.y)
    assert [trace.name for trace in fig.data[1:]] == ["blocked", "attends"]


def test_heatmap_compare_marks_exactly_the_sibling_cells():
    # (L, L)
    z = torch.tensor(
        plots.mask_heatmap(UNSEEN["allowed"], LABELS, compare=SEEN["allowed"]).data[0].z
    )
    hidden = (z == 2).nonzero().tolist()
    # path 2 (tokens 8..12) may not look at path 1 (tokens 4..7); nothing else differs
    assert hidden == [[q, k] for q in range(8, 13) for k in range(4, 8)]
    assert torch.equal(z == 1, UNSEEN["allowed"])


def test_positions_figure_plots_structure_positions_coloured_by_path():
    pos = {m: s["position_ids"][0].tolist() for m, s in (("seen", SEEN), ("unseen", UNSEEN))}
    fig = plots.positions_figure(pos, LABELS, path=UNSEEN["path"][0].tolist())
    assert [list(d.y) for d in fig.data] == [pos["seen"], pos["unseen"]]
    assert pos["unseen"][4] == pos["unseen"][8] == 4  # both paths restart at pos(<Parallel>) + 1
    colors = fig.data[1].marker.color
    assert colors[4] == colors[7] != colors[8] == colors[12] and colors[0] == colors[13]


def test_attends_to_row_equals_the_allowed_mask_row():
    mask = UNSEEN["allowed"]
    for q in range(len(SEQ)):
        z = [
            v for line in plots.attends_to_figure(mask, LABELS, q, width=5).data[0].z for v in line
        ][: len(SEQ)]
        assert [v in (1, 3) for v in z] == mask[q].tolist()
        assert z.index(3) == q and z.count(3) == 1
        assert [k for k, v in enumerate(z) if v == 2] == [k for k in range(q) if not mask[q, k]]


def test_attends_to_grid_wraps_and_pads():
    fig = plots.attends_to_figure(UNSEEN["allowed"], LABELS, 10, width=8)
    z, text = fig.data[0].z, fig.data[0].text
    assert len(z) == 3 and all(len(line) == 8 for line in z)  # 18 tokens -> 3 lines of 8
    assert (
        list(z[-1][2:]) == [None] * 6
        and list(text[-1][2:]) == [""] * 6
        and text[1][2] == LABELS[10]
    )
    assert (
        fig.layout.title.text.startswith("token 10")
        and "attends to 7 of 11" in fig.layout.title.text
    )


def test_timing_chart_bars_are_forked_and_k_times_single():
    results = {
        "path_len": 8,
        "single_path_s": 0.5,
        "forked": {"16": {"seconds": 2.0}, "2": {"seconds": 0.6}, "4": {"seconds": 0.8}},
    }
    fig = plots.timing_chart(results)
    forked, sequential = fig.data
    assert list(forked.x) == ["k = 1", "k = 2", "k = 4", "k = 16"]  # numeric order, not text order
    assert list(forked.y) == [0.5, 0.6, 0.8, 2.0]
    assert list(sequential.y) == [0.5, 1.0, 2.0, 8.0]
    assert forked.text[2] == "2.5× faster"


def test_explorer_redraws_for_the_chosen_mask_and_token():
    box = plots.attention_explorer(
        {"unseen": UNSEEN["allowed"], "seen": SEEN["allowed"]}, LABELS, index=3
    )
    pick, token = box.children[0].children
    assert list(pick.options) == ["unseen", "seen"] and token.max == len(SEQ) - 1
    token.value = 9  # first token of path 2: under unseen it cannot see path 1
    row = [v for line in box.figure.data[0].z for v in line][: len(SEQ)]
    assert [v in (1, 3) for v in row] == UNSEEN["allowed"][9].tolist() and row[5] == 2
    pick.value = "seen"
    row = [v for line in box.figure.data[0].z for v in line][: len(SEQ)]
    assert [v in (1, 3) for v in row] == SEEN["allowed"][9].tolist() and row[5] == 1


def test_token_view_never_cuts_a_tag_and_names_its_axes():
    fig = plots.attends_to_figure(UNSEEN["allowed"], LABELS, 6, width=4)
    shown = {t for row in fig.data[0].text for t in row}
    assert "<Parallel>" in shown and "</Parallel>" in shown
    assert fig.layout.xaxis.title.text and fig.layout.yaxis.title.text and fig.layout.title.text


def test_pass_at_k_figure_has_integer_ticks_titles_and_fits_the_column():
    card = {"1": 0.37, "2": 0.54, "4": 0.71, "8": 0.83}  # a result card's keys are text
    fig = plots.pass_at_k_figure({"card": card, "run": {1: 0.3, 8: 0.8}}, "base", greedy=0.49)
    assert list(fig.layout.xaxis.tickvals) == [1, 2, 4, 8]
    assert [list(d.x) for d in fig.data] == [[1, 2, 4, 8], [1, 8]]
    assert fig.layout.title.text and fig.layout.xaxis.title.text and fig.layout.yaxis.title.text
    assert fig.layout.width <= 900


def _latency_card():
    """A latency card of the shape ``bench latency`` writes (``benchmarks/latency.py``'s
    ``report``), made-up seconds: every phase of every model at batch 1 and 64 distinct."""
    from pr1lib.decoding.clock import PARTS

    def model(base):
        seconds = {p: round(base + i / 1000, 6) for i, p in enumerate(PARTS)}
        per_step = {"step_1": 0.002, "step_k": 0.005}
        steps = {"step_1": 30.0, "step_k": 20.0}
        return {"seconds": seconds, "total": sum(seconds.values()), "steps": steps} | {
            "seconds_per_step": per_step
        }

    breakdown = {"1": {"serial": model(0.01), "unseen": model(0.02)}}
    breakdown["64"] = {"serial": model(0.003), "unseen": model(0.004)}
    ratios = {"steps_ratio": 0.5, "steps_bound": 0.55, "token_ratio": 1.7}
    numbers = {"world": "wideworld", "unseen_over_serial": {"1": 0.6, "64": 1.9}} | ratios
    return {"name": "wideworld-latency", "numbers": numbers | {"breakdown": breakdown}}


LATENCY_CARD = _latency_card()


def _widths_card():
    """A width-sweep card of the shape ``study widths`` writes (``experiments.widths``)."""
    from pr1lib.experiments.widths import crossover

    def arm(steps, s1, s64):
        return {"mean_sequential_steps": steps, "seconds_per_answer": {"1": s1, "64": s64}}

    widths = {
        "2": {"serial": arm(40, 0.2, 0.01), "unseen": arm(45, 0.3, 0.02)},
        "4": {"serial": arm(60, 0.3, 0.015), "unseen": arm(48, 0.25, 0.03)},
    }
    return {
        "name": "planworld-widths",
        "numbers": {"widths": widths, "crossover": crossover(widths)},
    }


WIDTHS_CARD = _widths_card()


def test_latency_breakdown_bars_are_the_cards_milliseconds_per_phase():
    from pr1lib.decoding.clock import PARTS
    from pr1lib.notebook import reports

    fig = reports.latency_breakdown_figure(LATENCY_CARD)
    breakdown = LATENCY_CARD["numbers"]["breakdown"]
    assert fig.layout.barmode == "stack" and len(fig.data) == len(PARTS) * 2
    for trace, (batch, part) in zip(fig.data, [(b, p) for b in ("1", "64") for p in PARTS]):
        want = [1000 * breakdown[batch][m]["seconds"][part] for m in ("serial", "unseen")]
        assert list(trace.x) == ["serial search", "R1-Unseen (forked)"]
        assert list(trace.y) == pytest.approx(want), (batch, part)
        assert trace.xaxis == ("x" if batch == "1" else "x2")
    assert [a.text for a in fig.layout.annotations] == ["batch 1", "batch 64"]
    title = fig.layout.title.text
    assert "WideWorld" in title and "wideworld-latency" in title


def test_latency_lines_read_the_card_and_name_the_command_when_it_predates_the_breakdown():
    from pr1lib.notebook import reports

    lines = reports.latency_lines(LATENCY_CARD["numbers"])
    assert lines[0].startswith("batch 1: R1-Unseen takes 0.600x") and lines[0].endswith("missed")
    assert "at most 0.550x" in lines[0] and "0.500x sequential steps" in lines[0]
    assert "1.900x" in lines[1] and "at most 1.700x" in lines[1] and lines[1].endswith("missed")
    assert "took 2.50x a one-row step" in lines[2] and len(lines) == 4
    old = {"world": "wideworld", "unseen_over_serial": {"1": 0.73, "64": 1.89}}
    (line,) = reports.latency_lines(old)
    assert "predates" in line and reports.LATENCY_COMMAND in line


def _every_helper_figure():
    """One figure from every plot helper of the library, on small made-up inputs (or a card)."""
    import json

    import pandas as pd

    from pr1lib.data.coldstart import REASONS, plot_yield
    from pr1lib.notebook import curves, reports, sweep
    from pr1lib.notebook.panel import PanelState, schedule_figure
    from pr1lib.store.paths import REPO_ROOT
    from pr1lib.training.dashboard import dashboard_figure
    from pr1lib.training.sft_live import loss_figure

    def card(name):
        return json.loads((REPO_ROOT / "results" / f"{name}.json").read_text())["numbers"]

    pos = {m: s["position_ids"][0].tolist() for m, s in (("seen", SEEN), ("unseen", UNSEEN))}
    at = {"accuracy": 0.5, "parallel_ratio": 0.25}
    mid = {"switch_step": 1, "steps": [0, 1, 2]}
    mid |= {"per_step": {a: {"1": at, "2": at} for a in ("scaffold", "control")}}
    mid |= {"held_out": {a: {s: at for s in "012"} for a in ("scaffold", "control")}}
    curve = [{"step": s, "accuracy": 0.1 * s, "parallel_ratio": 0.5, "phase": "x"} for s in (1, 2)]
    frame = pd.DataFrame(
        {"step": [1, 2], "run": "r", "parallel_ratio": [0.5, 1.0], "block_position": [0.1, 0.3]}
    )
    summary = {"pass_curve_official": {"1": 0.3, "2": 0.5}, "checker": "official"}
    batch = {
        "input_ids": torch.tensor([[5, 6]]),
        "attention_mask": torch.tensor([[[[1, 0], [1, 1]]]]),
    }
    timing = {"path_len": 8, "single_path_s": 0.5, "forked": {"2": {"seconds": 0.6}}}
    shares = {r: [0.1 if r == "no_block" else 0.0] for r in REASONS}
    yields = pd.DataFrame({"yield": [0.9], **shares}, index=["gsm8k"])
    return {
        "mask_heatmap": plots.mask_heatmap([[1, 0], [1, 1]], ["a", "b"]),
        "positions_figure": plots.positions_figure(pos, LABELS, path=UNSEEN["path"][0].tolist()),
        "attends_to_figure": plots.attends_to_figure(UNSEEN["allowed"], LABELS, 6, width=4),
        "timing_chart": plots.timing_chart(timing),
        "pass_at_k_figure": plots.pass_at_k_figure({"card": {"1": 0.4, "8": 0.8}}, "base"),
        "mask_figure": plots.mask_figure({"seen": batch, "unseen": batch}, TOK),
        "figure3": curves.figure3(frame),
        "scaffold_figure": curves.scaffold_figure(
            {"switch_step": 2, "curve": curve, "held_out": []}
        ),
        "scaffold_card_figure": curves.scaffold_card_figure(mid),
        "pass_curve_figure": reports.pass_curve_figure({"base": {"tinyworld-hard": summary}}),
        "controls_bars": reports.controls_bars(card("tinyworld-controls")),
        "controls_figure": reports.controls_figure(card("wideworld-controls")),
        "latency_breakdown_figure": reports.latency_breakdown_figure(LATENCY_CARD),
        "widths_figure": sweep.widths_figure(WIDTHS_CARD),
        "headline_figure": reports.headline_figure(
            card("tinyworld-controls"), card("wideworld-controls")
        ),
        "dashboard_figure": dashboard_figure(
            [
                {
                    "step": 1,
                    "reward": 0.5,
                    "accuracy": 0.5,
                    "frac_reward_zero_std": 0.1,
                    "completions/mean_length": 40,
                }
            ]
        ),
        "loss_figure": loss_figure({"seen": [{"step": 1, "loss": 2.0}]}),
        "plot_yield": plot_yield(yields),
        "schedule_figure": schedule_figure(PanelState(reward="alternating", steps=10)),
    }


def test_every_figure_a_plot_helper_returns_names_what_its_y_axis_measures():
    """Every panel row of every helper's figure has a y-axis title (``plots.untitled_y_axes``)."""
    untitled = {
        name: axes
        for name, fig in _every_helper_figure().items()
        if (axes := plots.untitled_y_axes(fig))
    }
    assert untitled == {}, f"figures with a panel whose y-axis has no title: {untitled}"


def test_a_schedule_preview_says_its_steps_are_not_trained_yet():
    from pr1lib.notebook.panel import PanelState, schedule_figure

    title = schedule_figure(PanelState(reward="accuracy", steps=3, start=5)).layout.title.text
    assert title == "steps 6-8 (not trained yet), reward schedule: accuracy"
