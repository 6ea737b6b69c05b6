"""The dashboard callback (rows, CSV, resume) and the control panel's headless functions."""

from __future__ import annotations

from types import SimpleNamespace

from pr1lib.notebook.panel import (
    ControlPanel,
    PanelState,
    active_modes,
    config_changes,
    dose_rows,
    expected_block_rate,
    schedule_figure,
)
from pr1lib.training.dashboard import Dashboard, dashboard_figure, eta_text, keep_row, read_metrics


def _log(dash: Dashboard, step: int, **logs) -> None:
    dash.on_log(None, SimpleNamespace(global_step=step, max_steps=10), None, logs=logs)


def _begin(dash: Dashboard, step: int) -> None:
    dash.on_train_begin(None, SimpleNamespace(global_step=step, max_steps=10), None)


def test_dashboard_writes_each_step_and_skips_the_train_summary(tmp_path):
    seen = []
    dash = Dashboard(tmp_path / "metrics.csv", live=False, on_row=seen.append)
    _begin(dash, 0)
    _log(
        dash,
        1,
        reward=-1.0,
        accuracy=0.0,
        parallel_ratio=0.25,
        **{"rewards/accuracy_reward/mean": -1.0},
    )
    _log(
        dash, 2, reward=0.5, accuracy=0.75, parallel_ratio=0.5, **{"completions/clipped_ratio": 0.1}
    )
    _log(dash, 2, train_runtime=3.0, train_loss=0.0)  # Trainer's final summary: no "reward"
    rows = read_metrics(tmp_path / "metrics.csv")
    assert [r["step"] for r in rows] == [1, 2] and [r["step"] for r in seen] == [1, 2]
    assert (
        rows[0]["rewards/accuracy_reward/mean"] == -1.0
        and rows[1]["completions/clipped_ratio"] == 0.1
    )
    assert "train_runtime" not in rows[-1]


def test_dashboard_resumes_its_history_up_to_the_checkpoint(tmp_path):
    first = Dashboard(tmp_path / "metrics.csv", live=False)
    _begin(first, 0)
    for step in (1, 2, 3):  # step 3 was logged but the last checkpoint is at step 2
        _log(first, step, reward=float(step))
    again = Dashboard(tmp_path / "metrics.csv", live=False)
    _begin(again, 2)
    _log(again, 3, reward=30.0)
    assert [(r["step"], r["reward"]) for r in read_metrics(tmp_path / "metrics.csv")] == [
        (1, 1.0),
        (2, 2.0),
        (3, 30.0),
    ]


def test_figure_has_one_trace_per_logged_series():
    rows = [
        keep_row(
            1,
            {
                "reward": 0.1,
                "accuracy": 0.2,
                "parallel_ratio": 0.3,
                "frac_reward_zero_std": 0.5,
                "completions/mean_length": 40.0,
                "loss": 0.0,
            },
        )
    ]
    names = [t.name for t in dashboard_figure(rows).data]
    assert names == [
        "reward",
        "accuracy",
        "parallel ratio",
        "zero-std groups",
        "mean completion length",
    ]


def _looks(rows):
    """Each trace's (legend, colour, dash, marker symbol), by its name."""
    return {
        t.name: (t.legend or "legend", t.line.color, t.line.dash, t.marker.symbol)
        for t in dashboard_figure(rows).data
    }


def test_each_panel_has_its_own_legend_and_a_series_keeps_its_look_when_another_appears():
    """The issue's dashboard: one legend of 16 entries over four panels, colours repeated in pairs,
    series on top of each other at 0, colours that shift when a series appears."""
    first = [{"step": 1, "reward": -1.0, "accuracy": 0.0, "frac_reward_zero_std": 1.0}]
    more = [
        {
            **first[0],
            "term/accuracy": -1.0,
            "parallel_ratio": 0.0,
            "completions/clipped_ratio": 0.0,
            "clip_ratio/region_mean": 0.0,
        }
    ]
    before, after = _looks(first), _looks(more)
    assert all(after[name] == look for name, look in before.items())  # nothing shifted
    legends = {}
    for name, (legend, colour, dash, symbol) in after.items():
        legends.setdefault(legend, []).append((colour, dash, symbol))
    assert set(legends) == {"legend", "legend2", "legend3"}  # reward, answers, is it learning?
    for looks in legends.values():  # within a panel: no two series drawn alike
        assert len({c for c, _, _ in looks}) == len(looks)
        assert len({(d, s) for _, d, s in looks}) == len(looks)
    assert after["accuracy"][1] == after["accuracy term"][1]  # one concept, one colour
    fig = dashboard_figure(more)
    assert all(fig.layout[name].y is not None for name in legends)  # each beside its panel
    assert len({fig.layout[name].y for name in legends}) == len(legends)


def test_dashboard_ticks_whole_steps_only():
    for n in (3, 7, 40):
        fig = dashboard_figure([{"step": s, "reward": 0.0} for s in range(1, n + 1)])
        axis = fig.layout.xaxis
        assert float(axis.dtick).is_integer() and axis.dtick >= 1 and axis.tickformat == "d"


def test_eta_counts_the_remaining_steps():
    assert eta_text(0, 10, None) == "step 0/10"
    assert eta_text(4, 10, 30.0) == "step 4/10 · 30.0 s/step · ETA 3.0 min"


def test_panel_functions_without_a_frontend():
    state = PanelState(reward="alternating", window=5, parallel_steps=2, steps=10, start=3)
    modes = active_modes(state)  # global steps 3..12: the last 2 of every 5 are tiered
    assert modes == [
        "tiered",
        "tiered",
        "accuracy",
        "accuracy",
        "accuracy",
        "tiered",
        "tiered",
        "accuracy",
        "accuracy",
        "accuracy",
    ]
    assert active_modes(state.replace(reward="structure")) == ["structure"] * 10
    fig = schedule_figure(state.replace(structure_weight=0.3))
    assert [t.name for t in fig.data] == ["tiered", "accuracy", "structure bonus"]
    assert list(fig.data[0].x) == list(range(4, 14))
    assert config_changes(state) == {
        "reward": "alternating",
        "window": 5,
        "parallel_steps": 2,
        "reward_weight": 1.0,
        "extra_rewards": (),
        "tiered_bonus": 0.2,
        "epsilon_high": 0.28,  # the paper's clip-high comes with the alternating reward
    }
    assert config_changes(state.replace(reward="accuracy"))["epsilon_high"] is None


def test_control_panel_reads_its_widgets():
    panel = ControlPanel()  # no session: preview only, the run button is disabled
    panel.reward.value, panel.window.value, panel.parallel_steps.value = "alternating", 4, 9
    state = panel.state
    assert state.parallel_steps == 4 and panel.parallel_steps.max == 4  # capped at the window
    assert panel.button.disabled


def test_control_panel_disables_the_knobs_a_mode_ignores():
    """Window and tiered steps only move a scheduled reward; the main weight only matters next to
    a structure bonus (group normalisation cancels a lone reward's scale)."""
    panel = ControlPanel()
    panel.reward.value = "accuracy"
    assert panel.window.disabled and panel.parallel_steps.disabled and panel.reward_weight.disabled
    panel.reward.value = "alternating"
    assert not panel.window.disabled and not panel.parallel_steps.disabled
    panel.structure_weight.value = 0.3
    assert not panel.reward_weight.disabled and not panel.tiered_bonus.disabled
    panel.tiered_bonus.value = 0.5
    assert panel.state.tiered_bonus == 0.5 and "1 + 0.5" in panel.preview.figure.layout.title.text
    panel.reward.value = "parallel_correct"
    assert panel.tiered_bonus.disabled


class _FakeSession:
    """What the panel reads of a ``GRPOSession`` (config, step, callbacks); ``run`` fakes it."""

    def __init__(self):
        from pr1lib.config import GRPOStageConfig

        self.cfg, self.step, self.callbacks = GRPOStageConfig.for_stage(3, "smoke"), 0, []

    def run(self, steps, **changes):
        for _ in range(steps):
            self.step += 1
            for cb in self.callbacks:
                cb.on_step_end(None, SimpleNamespace(global_step=self.step), None)
        for cb in self.callbacks:
            cb.on_train_end(None, SimpleNamespace(global_step=self.step), None)
        return self.step


def test_panel_follows_the_session_whoever_trains_it():
    session = _FakeSession()
    state = PanelState(reward="alternating", window=4, parallel_steps=1, steps=3)
    panel = ControlPanel(session, state)
    session.run(5)  # the notebook cell trains, not the button
    assert panel.status.value == "at step 5"
    assert list(panel.preview.figure.data[0].x)[0] == 6  # the preview starts after step 5
    assert panel.run() == 8 and panel.status.value == "at step 8"  # the button: 3 more


def test_each_reward_mode_keeps_its_colour():
    def colours(state):
        return {t.name: t.marker.color for t in schedule_figure(state).data}

    first = colours(PanelState(reward="alternating", window=4, parallel_steps=1, steps=8, start=0))
    second = colours(PanelState(reward="alternating", window=4, parallel_steps=1, steps=8, start=3))
    assert list(second)[0] == "tiered"  # tiered comes first from step 3, in its own colour
    assert first == second and first["accuracy"] != first["tiered"]
    assert colours(PanelState(reward="accuracy", steps=2))["accuracy"] == first["accuracy"]


def test_expected_block_rate_reads_the_committed_dose_cards():
    rows = dose_rows()
    assert {r["seed"] for r in rows} == {0, 1, 2}  # the three committed seeds
    paper = expected_block_rate(PanelState(reward="alternating"), rows)  # 2 tiered of 10, b 0.2
    found = [r["parallel_ratio"] for r in rows if (r["tiered_steps"], r["bonus"]) == (2, 0.2)]
    assert paper["runs"] == 3 and paper["mean"] == sum(found) / 3
    accuracy = expected_block_rate(PanelState(reward="accuracy"), rows)
    every = expected_block_rate(PanelState(reward="tiered"), rows)
    assert accuracy["mean"] < paper["mean"] < every["mean"]  # the dose orders the block rate
    assert expected_block_rate(PanelState(window=4, parallel_steps=1), rows) is None  # not run
    assert expected_block_rate(PanelState(reward="parallel_correct"), rows) is None


def test_panel_says_the_clip_and_the_expected_block_rate():
    session = _FakeSession()
    panel = ControlPanel(session, PanelState(reward="accuracy"), dose=dose_rows())
    assert "symmetric clip" in panel.facts.value and "expected block rate" in panel.facts.value
    panel.reward.value = "alternating"
    assert "ε_high = 0.28" in panel.facts.value
    assert panel.state.reward == "alternating"
    assert "s/step: measured after the first run" in panel.facts.value
    session.rows = [{"step": 1, "step_time": 2.0}, {"step": 2, "step_time": 4.0}]
    panel.follow(2)
    assert "3.0 s/step (measured)" in panel.facts.value
