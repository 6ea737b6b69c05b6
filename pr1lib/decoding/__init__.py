"""decoding: models, and how they write: from one token to a batch of forked parallel rollouts.

It owns loading policy models and tokenizers (``models``), the six tags as tokens (``tokens``),
the unseen mask and position ids (``structure``), the lean one-token step (``decode``), the KV
caches rows share (``kvcache``, ``rowcache``, ``regroup``), the rollout engine's decision loop
(``engine``) and its per-phase stopwatch (``clock``), the rollout modes seen, forked and reread
(``rollout``) and steering by a logit bias (``steering``).

May import: ``config``, ``worlds``, ``format``, ``store``; never ``rewards`` (the engine decodes,
it does not grade).
"""

__all__ = [
    "clock",
    "decode",
    "engine",
    "explore",
    "kvcache",
    "models",
    "regroup",
    "rollout",
    "rowcache",
    "steering",
    "structure",
    "tokens",
]
