"""training: the stages that change weights, and what they log while they run.

It owns the tiny base model's pretraining (``pretrain``), Stage 1's SFT (``sft``, its live loss
``sft_live``), Stages 2-3's GRPO (``grpo``; TRL's trainer and its wiring ``grpo_trainer``; its
completions from the engine ``completions``; the loss's bucketed forward ``buckets``), run
folders and where a stage starts (``runs``, ``starts``), the pre-flight doctor (``doctor``,
``preflight``), the live dashboard and figures that redraw in place (``dashboard``, ``live``)
and the export to verl (``verl``).

May import: ``evaluation``, ``data``, ``rewards``, ``decoding``, ``config``, ``worlds``,
``format``, ``store``.
"""

__all__ = [
    "buckets",
    "completions",
    "dashboard",
    "doctor",
    "grpo",
    "grpo_trainer",
    "live",
    "preflight",
    "pretrain",
    "runs",
    "sft",
    "sft_live",
    "starts",
    "verl",
]
