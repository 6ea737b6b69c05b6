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
* ``run_next(session, state)`` trains ``state.steps`` more steps of a
  ``pr1lib.training.grpo.GRPOSession`` with those fields (it resumes from the session's last
  checkpoint, so the live dashboard goes on from where it stopped).

``ControlPanel(session)`` wires these to ipywidgets: sliders, a preview that redraws as they move
and a "run next N steps" button. The panel follows the session, whoever trains it (the button or
the cell): its "at step N" label and the preview's first step move with every optimizer step, and
each reward mode keeps one colour (``MODE_COLORS``) in the preview.

Choosing a reward also takes the clip-high the paper pairs with it (``CLIP_HIGH``: ε_high = 0.28
with the alternating reward, else symmetric 0.2), and the panel says so. Given the rows of a
dose-response card (``dose_rows``), it also shows the held-out block rate that schedule reached
there (``expected_block_rate``), and after each run the measured seconds per step.

>>> state = PanelState(reward="alternating", window=4, parallel_steps=1, steps=8)
>>> active_modes(state)
['accuracy', 'accuracy', 'accuracy', 'tiered', 'accuracy', 'accuracy', 'accuracy', 'tiered']
>>> config_changes(state)["epsilon_high"], config_changes(state.replace(reward="accuracy"))[
...     "epsilon_high"]
(0.28, None)
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, replace
from typing import Any

from transformers import TrainerCallback

from pr1lib.config import CLIP_HIGH
from pr1lib.rewards.functions import schedule
from pr1lib.rewards.modes import REWARD_MODES
from pr1lib.training.live import LiveFigure

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

    def __post_init__(self) -> None:
        why = state_problem(self)
        if why:
            raise ValueError(why)

    def replace(self, **changes: Any) -> "PanelState":
        return replace(self, **changes)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def state_problem(state: PanelState) -> str | None:
    """What is wrong with a panel state (``None``: nothing), one sentence: a reward the registry
    lacks, a count that is not a whole number in range, a weight or bonus that is not a finite
    number of 0 or more.

    >>> PanelState(window=4, parallel_steps=6)
    Traceback (most recent call last):
    ...
    ValueError: parallel_steps=6 counts tiered steps of each window: it must be a whole number from 0 to window=4
    """  # noqa: E501 - doctest output stays whole
    if state.reward not in REWARD_MODES:
        return f"reward must be one of {', '.join(REWARD_MODES)}, got {state.reward!r}"
    for name, lowest in (("window", 1), ("steps", 1), ("start", 0)):
        value = getattr(state, name)
        if not _whole(value) or value < lowest:
            return f"{name} must be a whole number of {lowest} or more, got {value!r}"
    if not _whole(state.parallel_steps) or not 0 <= state.parallel_steps <= state.window:
        return (
            f"parallel_steps={state.parallel_steps!r} counts tiered steps of each window: it "
            f"must be a whole number from 0 to window={state.window}"
        )
    for name in ("reward_weight", "structure_weight", "tiered_bonus"):
        value = getattr(state, name)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or value < 0:
            return f"{name} must be a finite number of 0 or more, got {value!r}"
    return None


def check_panel(session: Any, state: Any, dose: Any) -> None:
    """Refuse what ``ControlPanel`` cannot show as given, in one sentence: a session that is not
    a ``GRPOSession`` (``None``: a preview), a state that is not a ``PanelState``, dose rows that
    are not a list."""
    if session is not None and not (
        hasattr(session, "step") and callable(getattr(session, "run", None))
    ):
        raise ValueError(
            "session must be a pr1lib.training.grpo.GRPOSession (or None: a preview without "
            f"training), got {type(session).__name__} {session!r:.60}"
        )
    if state is not None and not isinstance(state, PanelState):
        raise ValueError(f"state must be a PanelState, got {type(state).__name__} {state!r:.60}")
    if dose is not None and not isinstance(dose, list):
        raise ValueError(
            f"dose must be a list of dose-response rows (dose_rows()), got {dose!r:.60}"
        )


def config_changes(state: PanelState) -> dict[str, Any]:
    """``GRPOStageConfig`` fields for a state (what ``GRPOSession.run`` receives).

    >>> config_changes(PanelState(reward="accuracy", structure_weight=0.2))["extra_rewards"]
    (('structure', 0.2),)
    >>> config_changes(PanelState(tiered_bonus=0.5))["tiered_bonus"]
    0.5
    >>> config_changes(PanelState(reward="alternating"))["epsilon_high"]  # the paper's S2 pairing
    0.28
    """
    extra = (("structure", float(state.structure_weight)),) if state.structure_weight else ()
    return {
        "reward": state.reward,
        "window": int(state.window),
        "parallel_steps": int(state.parallel_steps),
        "reward_weight": float(state.reward_weight),
        "extra_rewards": extra,
        "tiered_bonus": float(state.tiered_bonus),
        "epsilon_high": CLIP_HIGH.get(state.reward),  # None: symmetric, epsilon (0.2)
    }


def clip_note(state: PanelState) -> str:
    """What the chosen reward does to the PPO clip.

    >>> clip_note(PanelState(reward="alternating"))
    'alternating: clip-high ε_high = 0.28 (the paper pairs it with S2), low ε = 0.2'
    >>> clip_note(PanelState(reward="accuracy"))
    'accuracy: symmetric clip ε = 0.2 (ε_high = 0.28 comes only with alternating)'
    """
    high = CLIP_HIGH.get(state.reward)
    if high is not None:
        return (
            f"{state.reward}: clip-high ε_high = {high:g} (the paper pairs it with S2), low ε = 0.2"
        )
    return f"{state.reward}: symmetric clip ε = 0.2 (ε_high = 0.28 comes only with alternating)"


DOSE_CARDS = ("tinyworld-dose", "tinyworld-dose-s1", "tinyworld-dose-s2")  # seeds 0, 1, 2


def dose_rows(cards: tuple[str, ...] = DOSE_CARDS) -> list[dict]:
    """Every row of the committed dose-response cards (``results/NAME.json``), its seed added."""
    from pr1lib.store.cards import committed

    rows = []
    for name in cards:
        card = committed(name)
        if card is not None:
            seed = card["numbers"].get("seed")
            rows += [{**row, "seed": seed} for row in card["numbers"]["rows"]]
    return rows


def expected_block_rate(state: PanelState, rows: list[dict]) -> dict | None:
    """The held-out block rate the dose-response runs reached with ``state``'s schedule: mean,
    lowest and highest over the seeds, and where they started; ``None`` when no run matches
    (a reward the study did not run, a window whose tiered share it did not try).

    >>> rows = [{"tiered_steps": 2, "bonus": 0.2, "parallel_ratio": p, "steps": 30,
    ...          "start_parallel_ratio": 0.3} for p in (0.3, 0.5)]
    >>> expected_block_rate(PanelState(reward="alternating"), rows)["mean"]
    0.4
    >>> expected_block_rate(PanelState(reward="structure"), rows) is None
    True
    """
    share = {"accuracy": 0.0, "tiered": 1.0}.get(state.reward)
    if state.reward == "alternating" and state.window:
        share = state.parallel_steps / state.window
    if share is None:
        return None
    found = [
        r["parallel_ratio"]
        for r in rows
        if abs(r["tiered_steps"] / 10 - share) < 1e-9
        and (share == 0 or abs(r["bonus"] - state.tiered_bonus) < 1e-9)
    ]
    if not found:
        return None
    start = rows[0]["start_parallel_ratio"]
    return {
        "mean": sum(found) / len(found),
        "low": min(found),
        "high": max(found),
        "runs": len(found),
        "start": start,
        "steps": rows[0]["steps"],
    }


def facts_text(state: PanelState, rows: list[dict] | None, seconds_per_step: float | None) -> str:
    """The panel's line under the knobs: clip, expected block rate, seconds per step.

    >>> facts_text(PanelState(reward="accuracy"), None, 2.5).split(" · ")[-1]
    '2.5 s/step (measured)'
    """
    parts = [clip_note(state)]
    if rows is not None:
        block = expected_block_rate(state, rows)
        parts.append(
            "expected block rate: no dose-response run with this schedule"
            if block is None
            else f"expected block rate {block['mean']:.0%} after {block['steps']} steps "
            f"({block['low']:.0%}-{block['high']:.0%} over {block['runs']} runs; "
            f"start {block['start']:.0%}; dose-response card)"
        )
    parts.append(
        "s/step: measured after the first run"
        if seconds_per_step is None
        else f"{seconds_per_step:.1f} s/step (measured)"
    )
    return " · ".join(parts)


def measured_seconds_per_step(session: Any) -> float | None:
    """Mean ``step_time`` of the session's logged steps, else its train seconds per step."""
    rows = getattr(session, "rows", None) or []
    times = [r["step_time"] for r in rows if r.get("step_time")]
    if times:
        return sum(times) / len(times)
    seconds, step = getattr(session, "train_seconds", 0.0), getattr(session, "step", 0)
    return seconds / step if seconds and step else None


def active_modes(state: PanelState) -> list[str]:
    """The reward used at each of the next ``state.steps`` steps (from global step ``start``)."""
    if not REWARD_MODES[state.reward].scheduled:
        return [state.reward] * state.steps
    return schedule(state.start + state.steps, state.window, state.parallel_steps)[state.start :]


def schedule_figure(state: PanelState, title: str | None = None):
    """A strip of bars, one per upcoming step (TRL's 1-based log rows), coloured by its reward;
    the default title says these steps are a preview: ``steps 6-8 (not trained yet), ...``."""
    import plotly.graph_objects as go

    modes = active_modes(state)
    steps = list(range(state.start + 1, state.start + len(modes) + 1))
    span = f"steps {steps[0]}-{steps[-1]}" if steps else "no steps"
    fig = go.Figure(
        layout=dict(
            height=220,
            margin=dict(t=40, b=40, l=40, r=20),
            barmode="stack",
            title=title
            or f"{span} (not trained yet), reward schedule: {state.reward}"
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
    fig.update_xaxes(title="optimizer step (log row)", dtick=1)  # whole steps only
    fig.update_yaxes(title="weight")
    return fig


def run_next(session: Any, state: PanelState) -> int:
    """Train ``state.steps`` more steps of ``session`` with the state's reward settings; returns
    the step reached."""
    return session.run(state.steps, **config_changes(state))


def run_to(session: Any, state: PanelState, planned: int, name: str = "this run") -> str:
    """A notebook's training cell: ``run_next`` for the steps left up to ``planned`` (none left:
    the last checkpoint loads), and one line saying where the run stands, steps trained past the
    plan since (the panel's button) included, so a rerun after a click goes on from there.

    >>> class Session:
    ...     step = 18
    ...     def run(self, steps, **changes):
    ...         return self.step + steps
    >>> run_to(Session(), PanelState(), 15, "Stage 2").split(";")[0]
    "Stage 2: at step 18, 3 past this notebook's 15 (trained since, e.g. with the panel)"
    """
    done = session.step
    # the session, not the panel's state (whose steps are 1 or more): 0 steps loads its checkpoint
    reached = session.run(max(planned - done, 0), **config_changes(state))
    if reached > planned:
        return (
            f"{name}: at step {reached}, {reached - planned} past this notebook's {planned} "
            "(trained since, e.g. with the panel); what follows starts from there"
        )
    if done >= planned:
        return f"{name}: at step {reached} of {planned} already (its last checkpoint, loaded)"
    return f"{name}: trained steps {done + 1}-{reached} of {planned}"


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

    def __init__(
        self, session: Any = None, state: PanelState | None = None, dose: list[dict] | None = None
    ) -> None:
        import ipywidgets as w

        check_panel(session, state, dose)  # one sentence, before a widget is made
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
        self._hold(base)  # a knob past its slider's end widens the slider, never clamps
        self.button = w.Button(
            description="run next steps", button_style="primary", disabled=session is None
        )
        self.status = w.Label(value=f"at step {start}")
        self.dose, self.facts = dose, w.HTML()  # HTML wraps a long line; a Label cuts it
        self.preview, self.messages = LiveFigure(live=True), w.Output()
        for control in self.controls:
            control.observe(lambda _change: self.redraw(), names="value")
        self.button.on_click(lambda _button: self.run())
        self.widget = self._layout(w)
        if session is not None and hasattr(session, "callbacks"):
            session.callbacks.append(_Follow(self))
        self.redraw()

    def _hold(self, state: PanelState) -> None:
        """Each slider shows ``state``'s value: one past its end widens it (ipywidgets would
        clamp it without a word)."""
        names = ("window", "parallel_steps", "reward_weight", "tiered_bonus", "structure_weight")
        for name in (*names, "steps"):
            slider = getattr(self, name)
            slider.max = max(slider.max, getattr(state, name))
            slider.value = getattr(state, name)

    def _layout(self, w: Any) -> Any:
        return w.VBox(
            [
                w.HBox([self.reward, self.steps]),
                w.HBox([self.window, self.parallel_steps, self.tiered_bonus]),
                w.HBox([self.reward_weight, self.structure_weight]),
                w.HBox([self.button, self.status]),
                self.facts,
                self.preview.widget,
                self.messages,
            ]
        )

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
        facts = facts_text(self.state, self.dose, measured_seconds_per_step(self.session))
        self.facts.value = html.escape(facts, quote=False)
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
