"""The GRPO control panel: pick the reward, preview its schedule, train N steps at a time.

The knobs are the ones Parallel-R1 turns (docs/recipe.md#7-rewards): the reward mode, the
alternation window and how many of its steps use the tiered (parallel-aware) reward, the tiered
bonus b (a correct answer with a block scores 1 + b), the weight of the main reward and of an
optional structure bonus, and how many steps the next run takes.
Everything the panel does is a plain function, so tests and headless runs (``make tour``) call
the same code without a widget frontend:

* ``PanelState`` holds the knob values; ``config_changes(state)`` turns them into
  ``GRPOStageConfig`` fields;
* ``schedule_figure(state)`` plots which reward each step will use, before training;
* ``run_next(session, state)`` trains ``state.steps`` more steps of a ``pr1lib.grpo.GRPOSession``
  with those fields (it resumes from the session's last checkpoint, so the live dashboard goes on
  from where it stopped).

``ControlPanel(session)`` wires these to ipywidgets: sliders, a preview that redraws as they move
and a "run next N steps" button. The panel follows the session, whoever trains it (the button or
the cell): its "at step N" label and the preview's first step move with every optimizer step, and
each reward mode keeps one colour (``MODE_COLORS``) in the preview.

>>> state = PanelState(reward="alternating", window=4, parallel_steps=1, steps=8)
>>> active_modes(state)
['accuracy', 'accuracy', 'accuracy', 'tiered', 'accuracy', 'accuracy', 'accuracy', 'tiered']
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from transformers import TrainerCallback

from pr1lib.live import LiveFigure
from pr1lib.reward_modes import REWARD_MODES
from pr1lib.rewards import schedule

TIERED_MODES = ("tiered", "alternating")  # the modes whose value the bonus b changes
# One colour per reward (Okabe-Ito, safe for colour-blind readers), whatever comes first.
MODE_COLORS = {
    "accuracy": "#0072B2",
    "tiered": "#E69F00",
    "parallel_correct": "#009E73",
    "structure": "#CC79A7",
    "alternating": "#56B4E9",
    "structure bonus": "#999999",
}


@dataclass(frozen=True)
class PanelState:
    """The panel's knobs (defaults: the paper's S2 schedule, 8 accuracy steps then 2 tiered)."""

    reward: str = "alternating"
    window: int = 10
    parallel_steps: int = 2
    reward_weight: float = 1.0
    structure_weight: float = 0.0  # > 0 adds structure_reward as a second TRL reward function
    steps: int = 10  # steps per "run next" click
    start: int = 0  # the session's current step: the preview starts here
    tiered_bonus: float = 0.2  # b: the tiered reward pays 1 + b for a correct answer with a block

    def replace(self, **changes: Any) -> "PanelState":
        return replace(self, **changes)


def config_changes(state: PanelState) -> dict[str, Any]:
    """``GRPOStageConfig`` fields for a state (what ``GRPOSession.run`` receives).

    >>> config_changes(PanelState(reward="accuracy", structure_weight=0.2))["extra_rewards"]
    (('structure', 0.2),)
    >>> config_changes(PanelState(tiered_bonus=0.5))["tiered_bonus"]
    0.5
    """
    extra = (("structure", float(state.structure_weight)),) if state.structure_weight else ()
    return {
        "reward": state.reward,
        "window": int(state.window),
        "parallel_steps": int(state.parallel_steps),
        "reward_weight": float(state.reward_weight),
        "extra_rewards": extra,
        "tiered_bonus": float(state.tiered_bonus),
    }


def active_modes(state: PanelState) -> list[str]:
    """The reward used at each of the next ``state.steps`` steps (from global step ``start``)."""
    if not REWARD_MODES[state.reward].scheduled:
        return [state.reward] * state.steps
    return schedule(state.start + state.steps, state.window, state.parallel_steps)[state.start :]


def schedule_figure(state: PanelState, title: str | None = None):
    """A strip of bars, one per upcoming step (TRL's 1-based log rows), coloured by its reward."""
    import plotly.graph_objects as go

    modes = active_modes(state)
    steps = list(range(state.start + 1, state.start + len(modes) + 1))
    fig = go.Figure(
        layout=dict(
            height=220,
            margin=dict(t=40, b=40, l=40, r=20),
            barmode="stack",
            title=title
            or f"reward schedule: {state.reward}"
            + (
                f" (window {state.window}, {state.parallel_steps} tiered)"
                if REWARD_MODES[state.reward].scheduled
                else ""
            )
            + (f", tiered pays 1 + {state.tiered_bonus:g}" if state.reward in TIERED_MODES else ""),
        )
    )
    for mode in dict.fromkeys(modes):
        fig.add_bar(
            x=steps,
            y=[state.reward_weight if m == mode else 0 for m in modes],
            name=mode,
            marker_color=MODE_COLORS.get(mode),
        )
    if state.structure_weight:
        fig.add_bar(
            x=steps,
            y=[state.structure_weight] * len(steps),
            name="structure bonus",
            marker_color=MODE_COLORS["structure bonus"],
        )
    fig.update_xaxes(title="optimizer step (log row)")
    fig.update_yaxes(title="weight")
    return fig


def run_next(session: Any, state: PanelState) -> int:
    """Train ``state.steps`` more steps of ``session`` with the state's reward settings; returns
    the step reached."""
    return session.run(state.steps, **config_changes(state))


# GRPO's advantage is (r - group mean) / group std: a lone reward's weight scales both and cancels.
BONUS_NOTE = (
    "b: a correct answer with a block scores 1 + b on tiered steps; a block survives "
    "the accuracy steps only if it costs less than p f b / (2 + f b) (notebook 05)"
)
WEIGHT_NOTE = (
    "weight of the main reward: it changes training only next to a structure bonus "
    "(group normalisation cancels a lone reward's scale)"
)


class _Follow(TrainerCallback):
    """Keeps a panel's label and preview on the session's step, whoever trains it."""

    def __init__(self, panel: "ControlPanel") -> None:
        self.panel = panel

    def on_step_end(self, args, state, control, **kwargs):
        self.panel.status.value = f"at step {state.global_step}"

    def on_train_end(self, args, state, control, **kwargs):
        self.panel.follow(state.global_step)


class ControlPanel:
    """ipywidgets front end of the functions above, bound to a ``GRPOSession`` (or none: preview
    only)."""

    def __init__(self, session: Any = None, state: PanelState | None = None) -> None:
        import ipywidgets as w

        cfg = getattr(session, "cfg", None)
        self.session = session
        start = session.step if session is not None else 0
        knobs = ("reward", "window", "parallel_steps", "reward_weight", "tiered_bonus")
        base = state or PanelState(**({k: getattr(cfg, k) for k in knobs} if cfg else {}))
        base = base.replace(start=start)
        self.reward = w.Dropdown(
            options=tuple(REWARD_MODES), value=base.reward, description="reward"
        )
        self.window = w.IntSlider(value=base.window, min=1, max=20, description="window")
        self.parallel_steps = w.IntSlider(
            value=base.parallel_steps, min=0, max=20, description="tiered steps"
        )
        self.reward_weight = w.FloatSlider(
            value=base.reward_weight,
            min=0,
            max=2,
            step=0.1,
            description="weight",
            tooltip=WEIGHT_NOTE,
        )
        self.tiered_bonus = w.FloatSlider(
            value=base.tiered_bonus,
            min=0,
            max=1,
            step=0.05,
            description="bonus b",
            tooltip=BONUS_NOTE,
        )
        self.structure_weight = w.FloatSlider(
            value=base.structure_weight, min=0, max=1, step=0.05, description="structure +"
        )
        self.steps = w.IntSlider(value=base.steps, min=1, max=100, description="next steps")
        self.button = w.Button(
            description="run next steps", button_style="primary", disabled=session is None
        )
        self.status = w.Label(value=f"at step {start}")
        self.preview, self.messages = LiveFigure(live=True), w.Output()
        for control in self.controls:
            control.observe(lambda _change: self.redraw(), names="value")
        self.button.on_click(lambda _button: self.run())
        self.widget = w.VBox(
            [
                w.HBox([self.reward, self.steps]),
                w.HBox([self.window, self.parallel_steps, self.tiered_bonus]),
                w.HBox([self.reward_weight, self.structure_weight]),
                w.HBox([self.button, self.status]),
                self.preview.widget,
                self.messages,
            ]
        )
        if session is not None and hasattr(session, "callbacks"):
            session.callbacks.append(_Follow(self))
        self.redraw()

    @property
    def controls(self) -> list:
        return [
            self.reward,
            self.window,
            self.parallel_steps,
            self.tiered_bonus,
            self.reward_weight,
            self.structure_weight,
            self.steps,
        ]

    @property
    def state(self) -> PanelState:
        self.parallel_steps.max = self.window.value
        start = self.session.step if self.session is not None else 0
        return PanelState(
            self.reward.value,
            self.window.value,
            min(self.parallel_steps.value, self.window.value),
            self.reward_weight.value,
            self.structure_weight.value,
            self.steps.value,
            start,
            self.tiered_bonus.value,
        )

    def redraw(self) -> None:
        """The preview, and each knob live only where it changes the reward: window and tiered
        steps for a scheduled mode, the main weight next to a structure bonus (``WEIGHT_NOTE``)."""
        scheduled = REWARD_MODES[self.reward.value].scheduled
        self.window.disabled = self.parallel_steps.disabled = not scheduled
        self.tiered_bonus.disabled = self.reward.value not in TIERED_MODES
        self.reward_weight.disabled = not self.structure_weight.value
        self.preview.update(schedule_figure(self.state))

    def follow(self, step: int) -> None:
        """Show the session at ``step``: the label, and the preview from there on."""
        self.status.value = f"at step {step}"
        self.redraw()

    def run(self) -> int:
        """The button: train the next steps (what they print goes under the panel), then follow."""
        self.button.disabled = True
        try:
            with self.messages:
                step = run_next(self.session, self.state)
        finally:
            self.button.disabled = False
        self.follow(step)
        return step

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
