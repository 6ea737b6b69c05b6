"""rewards: what a completion is paid, and whether its answer is right.

It owns the answer graders (``graders``), the paper's reward functions in TRL's signature
(``functions``), the reward modes by name that the panel, training, the verl export and the
command line read (``modes``) and the reward-hacking lab (``hacking``). The design's reward
functions are exported here: ``pr1lib.rewards.accuracy_reward`` and its siblings.

>>> accuracy_reward(["Final Answer: 4"], answer=["4"])
[1.0]

May import: ``config``, ``worlds``, ``format``, ``store``; never ``decoding`` (a reward reads
text, not tensors).
"""

from pr1lib.rewards.functions import (
    accuracy_reward,
    alternating_reward,
    parallel_correct_reward,
    structure_reward,
    tiered_reward,
)

__all__ = [
    "accuracy_reward",
    "alternating_reward",
    "parallel_correct_reward",
    "structure_reward",
    "tiered_reward",
    "functions",
    "graders",
    "hacking",
    "modes",
]
