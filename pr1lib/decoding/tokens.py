"""The six parallel tags as single tokens, and a good starting point for their embeddings.

``add_parallel_tags(tokenizer, model)`` is the one call a stage needs. It

1. adds the tags missing from the tokenizer as single tokens;
2. grows the model's embedding matrix if the tokenizer outgrew it;
3. sets each new tag's row to the mean of the rows of the pieces the tag used to split into
   (``<Path>`` -> ``<``, ``Path``, ``>``), in the input embeddings and, when untied, the LM head.

Departures from the paper (docs/recipe.md#1-tags-and-grammar, #5-stage-1-cold-start-sft), both
deliberate:

* The tags are **normal added tokens**, not special ones. TRL decodes completions with
  ``skip_special_tokens=True``; special tags would vanish before the reward functions see them
  (the official code decodes twice to get around this). Normal added tokens are still matched
  before the BPE runs, so each tag is one id, and they survive any decode.
* Rows are initialised explicitly. The official code only resizes, so the tags inherit whatever
  sat in Qwen's unused padding rows; in Qwen3-0.6B those rows are identical and the tags stayed
  indistinguishable (docs/recipe.md#54-initial-embeddings-of-the-tags). Mean-of-pieces rows start
  distinct and near related words.

``lora_kwargs_for_tags`` gives PEFT's ``trainable_token_indices`` so a LoRA run also trains
exactly these rows (peft >= 0.15; tied heads follow the embedding).
"""

from __future__ import annotations

from typing import Any

import torch

from pr1lib.format.grammar import TAGS


def tag_pieces(tokenizer, tags: tuple[str, ...] = TAGS) -> dict[str, list[int]]:
    """The ids each tag splits into under the base vocabulary (added tokens are ignored).

    Uses the fast tokenizer's normalizer, pre-tokenizer and model directly, so the answer is the
    same before and after the tags are added.

    >>> from pr1lib.decoding.models import train_tiny_tokenizer
    >>> tok = train_tiny_tokenizer(["the path"] * 5, vocab_size=270)
    >>> [tok.convert_ids_to_tokens(i) for i in tag_pieces(tok)["<Path>"]]
    ['<', 'P', 'ath', '>']
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:  # slow tokenizer: only correct before the tags are added
        return {tag: tokenizer.encode(tag, add_special_tokens=False) for tag in tags}
    pieces = {}
    for tag in tags:
        text = backend.normalizer.normalize_str(tag) if backend.normalizer else tag
        words = (
            backend.pre_tokenizer.pre_tokenize_str(text)
            if backend.pre_tokenizer
            else [(text, None)]
        )
        pieces[tag] = [token.id for word, _ in words for token in backend.model.tokenize(word)]
    return pieces


def _single_id(tokenizer, tag: str) -> int | None:
    ids = tokenizer.encode(tag, add_special_tokens=False)
    return ids[0] if len(ids) == 1 else None


def add_tag_tokens(tokenizer) -> list[str]:
    """Add the tags that are not yet single tokens, as normal (non-special) added tokens.

    Returns the tags it added; a second call adds nothing and returns ``[]``.

    >>> from pr1lib.decoding.models import train_tiny_tokenizer
    >>> tok = train_tiny_tokenizer(["a b"] * 5, vocab_size=270)
    >>> len(add_tag_tokens(tok)), add_tag_tokens(tok)
    (6, [])
    """
    from tokenizers import AddedToken

    missing = [tag for tag in TAGS if _single_id(tokenizer, tag) is None]
    if missing:
        # normalized=False: match the raw text; special=False: kept by skip_special_tokens=True
        tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in missing])
    return missing


def tag_token_ids(tokenizer) -> dict[str, int]:
    """``{tag: id}`` for the six tags; raises if a tag is not a single token yet.

    >>> from pr1lib.decoding.models import train_tiny_tokenizer
    >>> tok = train_tiny_tokenizer(["a b"] * 5, vocab_size=270)
    >>> ids = add_parallel_tags(tok)
    >>> tag_token_ids(tok) == ids, tok.decode([ids["<Path>"]], skip_special_tokens=True)
    (True, '<Path>')
    """
    ids = {tag: _single_id(tokenizer, tag) for tag in TAGS}
    missing = [tag for tag, i in ids.items() if i is None]
    if missing:
        raise ValueError(
            f"not single tokens: {missing}; call pr1lib.decoding.tokens.add_parallel_tags first"
        )
    return ids


def embeddings_tied(model) -> bool:
    """True when the LM head shares its weight tensor with the input embeddings.

    >>> from transformers import Qwen3Config, Qwen3ForCausalLM
    >>> from pr1lib.decoding.models import train_tiny_tokenizer
    >>> tok = train_tiny_tokenizer(["a path"] * 5, vocab_size=270)
    >>> model = Qwen3ForCausalLM(
    ...     Qwen3Config(
    ...         vocab_size=len(tok),
    ...         hidden_size=16,
    ...         head_dim=8,
    ...         intermediate_size=32,
    ...         num_hidden_layers=1,
    ...         num_attention_heads=2,
    ...         num_key_value_heads=1,
    ...     )
    ... )
    >>> embeddings_tied(model)  # Qwen3Config does not tie by default (the tiny model does)
    False
    """
    head = model.get_output_embeddings()
    return head is None or head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()


@torch.no_grad()
def init_tag_embeddings(model, tokenizer, pieces: dict[str, list[int]], tags=None) -> None:
    """Set each tag's row (input embeddings, and the LM head when untied) to its pieces' mean.

    >>> from transformers import Qwen3Config, Qwen3ForCausalLM
    >>> from pr1lib.decoding.models import train_tiny_tokenizer
    >>> tok = train_tiny_tokenizer(["a path"] * 5, vocab_size=270)
    >>> model = Qwen3ForCausalLM(
    ...     Qwen3Config(
    ...         vocab_size=len(tok),
    ...         hidden_size=16,
    ...         head_dim=8,
    ...         intermediate_size=32,
    ...         num_hidden_layers=1,
    ...         num_attention_heads=2,
    ...         num_key_value_heads=1,
    ...     )
    ... )
    >>> pieces = tag_pieces(tok)
    >>> _ = add_tag_tokens(tok)
    >>> _ = model.resize_token_embeddings(len(tok))
    >>> init_tag_embeddings(model, tok, pieces)
    >>> w = model.get_input_embeddings().weight
    >>> bool(torch.allclose(w[tag_token_ids(tok)["<Path>"]], w[pieces["<Path>"]].mean(0)))
    True
    """
    ids = tag_token_ids(tokenizer)
    matrices = [model.get_input_embeddings().weight]  # (V, H)
    if not embeddings_tied(model):
        matrices.append(model.get_output_embeddings().weight)  # (V, H) as well
    for tag in tags if tags is not None else pieces:
        for weight in matrices:
            rows = weight[pieces[tag]].float()  # (n_pieces, H)
            weight[ids[tag]] = rows.mean(dim=0).to(weight.dtype)


def add_parallel_tags(tokenizer, model=None) -> dict[str, int]:
    """Make the tags single tokens and (with ``model``) give their rows a mean-of-pieces start.

    Idempotent: rows are only initialised for tags that were just added or that fell outside the
    old embedding matrix, so a second call (or a model already trained with the tags) is left as is.
    Returns ``{tag: id}``.

    >>> from transformers import Qwen3Config, Qwen3ForCausalLM
    >>> from pr1lib.decoding.models import train_tiny_tokenizer
    >>> tok = train_tiny_tokenizer(["a path"] * 5, vocab_size=270)
    >>> model = Qwen3ForCausalLM(
    ...     Qwen3Config(
    ...         vocab_size=len(tok),
    ...         hidden_size=16,
    ...         head_dim=8,
    ...         intermediate_size=32,
    ...         num_hidden_layers=1,
    ...         num_attention_heads=2,
    ...         num_key_value_heads=1,
    ...     )
    ... )
    >>> ids = add_parallel_tags(tok, model)
    >>> (
    ...     model.get_input_embeddings().weight.shape[0] == len(tok),
    ...     add_parallel_tags(tok, model) == ids,
    ... )
    (True, True)
    """
    pieces = tag_pieces(tokenizer)  # before adding: what each tag splits into today
    added = add_tag_tokens(tokenizer)
    ids = tag_token_ids(tokenizer)
    if model is None:
        return ids
    old_rows = model.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > old_rows:
        # mean_resizing=False: the rows we care about are set below; keep the resize cheap
        model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    fresh = [tag for tag in TAGS if tag in added or ids[tag] >= old_rows]
    init_tag_embeddings(model, tokenizer, pieces, tags=fresh)
    return ids


def lora_kwargs_for_tags(tokenizer, model=None) -> dict[str, Any]:
    """``LoraConfig`` keyword arguments that make PEFT train the six tag rows too.

    Tied (or ``model`` not given): a list of ids on the input embeddings; PEFT ties the head.
    Untied: the same ids on both the embedding module and the LM head, by module name.

    >>> from transformers import Qwen3Config, Qwen3ForCausalLM
    >>> from pr1lib.decoding.models import train_tiny_tokenizer
    >>> tok = train_tiny_tokenizer(["a path"] * 5, vocab_size=270)
    >>> model = Qwen3ForCausalLM(
    ...     Qwen3Config(
    ...         vocab_size=len(tok),
    ...         hidden_size=16,
    ...         head_dim=8,
    ...         intermediate_size=32,
    ...         num_hidden_layers=1,
    ...         num_attention_heads=2,
    ...         num_key_value_heads=1,
    ...     )
    ... )
    >>> ids = add_parallel_tags(tok, model)
    >>> kwargs = lora_kwargs_for_tags(tok, model)["trainable_token_indices"]  # untied: a dict
    >>> sorted(kwargs), kwargs["lm_head"] == sorted(ids.values())
    (['embed_tokens', 'lm_head'], True)
    """
    ids = sorted(tag_token_ids(tokenizer).values())
    if model is None or embeddings_tied(model):
        return {"trainable_token_indices": ids}
    names = {module: name for name, module in model.named_modules()}
    embed = names[model.get_input_embeddings()].split(".")[-1]
    head = names[model.get_output_embeddings()].split(".")[-1]
    return {"trainable_token_indices": {embed: ids, head: ids}}


@torch.no_grad()
def tag_similarity(model, tokenizer, which: str = "input") -> torch.Tensor:
    """Cosine similarity between the tag rows: a ``(6, 6)`` float tensor in ``TAGS`` order.

    >>> from transformers import Qwen3Config, Qwen3ForCausalLM
    >>> from pr1lib.decoding.models import train_tiny_tokenizer
    >>> tok = train_tiny_tokenizer(["a path"] * 5, vocab_size=270)
    >>> model = Qwen3ForCausalLM(
    ...     Qwen3Config(
    ...         vocab_size=len(tok),
    ...         hidden_size=16,
    ...         head_dim=8,
    ...         intermediate_size=32,
    ...         num_hidden_layers=1,
    ...         num_attention_heads=2,
    ...         num_key_value_heads=1,
    ...     )
    ... )
    >>> _ = add_parallel_tags(tok, model)
    >>> sim = tag_similarity(model, tok)
    >>> tuple(sim.shape), bool(torch.allclose(sim.diagonal(), torch.ones(6)))
    ((6, 6), True)
    """
    module = model.get_input_embeddings() if which == "input" else model.get_output_embeddings()
    ids = list(tag_token_ids(tokenizer).values())
    rows = module.weight[ids].float()  # (6, H)
    rows = torch.nn.functional.normalize(rows, dim=-1)
    return rows @ rows.T  # (6, 6)


def has_tags(tokenizer) -> bool:
    """True when every parallel tag is a single token of ``tokenizer`` (the engine needs that).

    >>> from pr1lib.decoding.models import train_tiny_tokenizer
    >>> tok = train_tiny_tokenizer(["a b"] * 5, vocab_size=270); before = has_tags(tok)
    >>> _ = add_parallel_tags(tok); before, has_tags(tok)
    (False, True)
    """
    ids = [tokenizer.convert_tokens_to_ids(tag) for tag in TAGS]
    return all(i is not None and i != getattr(tokenizer, "unk_token_id", None) for i in ids)
