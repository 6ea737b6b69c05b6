"""Prompt templates and GSM8K-style solution helpers shared by every stage.

The ``v3`` template is the paper's parallel-thinking instruction (the one used for SFT, RL and
evaluation, docs/recipe.md#3-prompts); ``baseline`` is its sequential-GRPO prompt; ``tiny`` is
this project's short prompt for the embedded tiny model, whose context is too small for ``v3``.
A profile picks the style through ``ModelConfig.prompt_style``.
"""

from __future__ import annotations

import re

PARALLEL_PROMPT_V3 = (
    "Solve the following problem step by step.\n"
    "During the reasoning process, whenever you encounter a step that may benefit from multiple "
    "perspectives or independent reasoning, insert a parallel block at that point.\n\n"
    "Within each parallel block:\n"
    "Begin the block with <Parallel>.\n"
    "Include at least two distinct and independent reasoning paths.\n"
    "Each path must be enclosed within <Path> and </Path> tags.\n"
    "Do not include any ordering information or cross-references between paths, as they are "
    "generated simultaneously and independently.\n"
    "Close the block with </Parallel>.\n"
    "Immediately after each </Parallel>, write a concise summary of insights or conclusions drawn "
    "from all paths, enclosed in <Summary> and </Summary> tags.\n\n"
    "Repeat this process adaptively as needed throughout the reasoning.\n"
    "Do not explicitly mention that you are triggering parallel thinking—just insert the parallel "
    "block naturally within the reasoning chain.\n\n"
    "End your response with a line starting with Final Answer: followed by the final result.\n\n"
    "Problem: {problem}"
)
BASELINE_PROMPT = (
    '{problem} Let\'s think step by step and output the final answer after "Final Answer: ".'
)
TINY_PROMPT = "Problem: {problem}\nSolution:\n"
PROMPT_STYLES = {"v3": PARALLEL_PROMPT_V3, "baseline": BASELINE_PROMPT, "tiny": TINY_PROMPT}


def prompt_text(problem: str, style: str = "v3") -> str:
    """The user-turn text for ``problem`` in one of ``PROMPT_STYLES``.

    >>> prompt_text("What is 2+3?", "tiny")
    'Problem: What is 2+3?\\nSolution:\\n'
    """
    if style not in PROMPT_STYLES:
        raise ValueError(f"unknown prompt style {style!r}; choose one of {sorted(PROMPT_STYLES)}")
    return PROMPT_STYLES[style].format(problem=problem.strip())


def chat_prompt(problem: str, tokenizer=None, style: str = "v3") -> str:
    """The full model input: the tokenizer's chat template (user turn + generation prompt) when it
    has one and the style is not ``tiny``, else the plain prompt text."""
    text = prompt_text(problem, style)
    if style == "tiny" or tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return text
    messages = [{"role": "user", "content": text}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


_FINAL = re.compile(r"^####\s*(.+?)\s*$", re.MULTILINE)


def split_gsm8k_answer(answer: str) -> tuple[list[str], str]:
    """A GSM8K ``answer`` field -> (its step lines, the final value after ``####``, commas removed).

    >>> split_gsm8k_answer("He has 2+3=<<2+3=5>>5 apples.\\n#### 5")
    (['He has 2+3=<<2+3=5>>5 apples.'], '5')
    """
    match = _FINAL.search(answer)
    if match is None:
        raise ValueError("not a GSM8K-style answer: no '#### N' line")
    steps = [line.strip() for line in answer[: match.start()].splitlines() if line.strip()]
    return steps, match.group(1).replace(",", "").strip()


def linear_solution(answer: str) -> str:
    """A GSM8K ``answer`` as a plain chain of thought ending in the ``Final Answer:`` line.

    >>> linear_solution("2+3=<<2+3=5>>5\\n#### 5")
    '2+3=<<2+3=5>>5\\nFinal Answer: 5'
    """
    steps, final = split_gsm8k_answer(answer)
    return "\n".join([*steps, f"Final Answer: {final}"])
