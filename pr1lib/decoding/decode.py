"""One-token decoding steps on the CPU: attention as two matmuls, and a lean Qwen3 step.

A decoding step feeds one token per row. Two things make it cheaper than the model's forward:

- ``decode_attention`` (registered as ``DECODE_ATTENTION``; ``decoding(model)`` switches an SDPA
  model to it): ``softmax(q kᵀ) v`` as two matmuls for a single query token on the CPU, where
  PyTorch's SDPA kernel was about 2x slower for one query over 300 keys. Everything else goes to
  SDPA itself.
- ``step``: for the 0.9M-parameter tiny model a 64-row step is mostly overhead: transformers runs
  about 65 modules, builds a mask and rotates with several small ops, which cost about as much as
  the arithmetic. ``step`` does the same arithmetic on the same weights (the modules' own
  tensors, read at every call, so the rollout sees every update) with far fewer calls and writes
  the keys and values into the cache as the model would. ``supported`` says when it applies: a
  float32 Qwen3 with plain layers (no LoRA or 4-bit wrappers: the rollout samples from the merged
  copy) and full attention, on the CPU; anything else takes the model's forward.

``pr1lib.decoding.kvcache.Streams`` uses both. ``row_step`` (with ``LeanWeights``: q/k/v and gate/up
joined into one matrix each, copied once per rollout) is the same step for rows whose keys sit
packed in one buffer for all layers (``pr1lib.decoding.rowcache.RowStreams``, the engine's default
where ``supported`` holds), after shared prefixes each read once for all their rows (``Bases``).
The tests check them against the model's forward and SDPA.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import torch
import torch.nn.functional as F
from transformers import AttentionInterface, Qwen3ForCausalLM
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

DECODE_ATTENTION = "pr1_sdpa"  # SDPA with SDPA's masks, but one-token CPU steps as two matmuls


def decode_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Transformers' SDPA attention, except a single query token on the CPU: ``softmax(q kᵀ) v``
    as two matmuls (the same numbers up to rounding). Registered as ``DECODE_ATTENTION``."""
    if query.shape[2] != 1 or query.device.type != "cpu":
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, scaling=scaling, **kwargs
        )
    groups = getattr(module, "num_key_value_groups", 1)
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)  # (B, H, T, D)
    scale = query.shape[-1] ** -0.5 if scaling is None else scaling
    scores = torch.matmul(query, key.transpose(-1, -2)) * scale  # (B, H, 1, T)
    if attention_mask is not None and attention_mask.dtype == torch.bool:
        scores = scores.masked_fill(~attention_mask, float("-inf"))
    elif attention_mask is not None:
        scores = scores + attention_mask  # additive
    out = torch.matmul(torch.softmax(scores, dim=-1), value)  # (B, H, 1, D)
    return out.transpose(1, 2).contiguous(), None  # (B, 1, H, D)


AttentionInterface.register(DECODE_ATTENTION, decode_attention)
AttentionMaskInterface.register(DECODE_ATTENTION, sdpa_mask)


@contextmanager
def decoding(model: Any) -> Iterator[None]:
    """While inside, a model that attends with ``sdpa`` attends with ``DECODE_ATTENTION``."""
    config = model.config
    before = getattr(config, "_attn_implementation", None)
    if before == "sdpa":
        config._attn_implementation = DECODE_ATTENTION
    try:
        yield
    finally:
        config._attn_implementation = before


def supported(model: Any) -> bool:
    """Can ``step`` stand in for ``model``'s forward? (Qwen3, float32, CPU, plain layers.)

    >>> from transformers import Qwen3Config, Qwen3ForCausalLM
    >>> model = Qwen3ForCausalLM(Qwen3Config(vocab_size=16, hidden_size=8, head_dim=4,
    ...     intermediate_size=8, num_hidden_layers=1, num_attention_heads=2,
    ...     num_key_value_heads=1))
    >>> supported(model), supported(model.to(torch.bfloat16))
    (True, False)
    """
    if not isinstance(model, Qwen3ForCausalLM):  # a PEFT or DDP wrapper is not covered either
        return False
    config, core = model.config, model.model
    if model.dtype != torch.float32 or model.device.type != "cpu":
        return False
    if any(kind != "full_attention" for kind in getattr(config, "layer_types", None) or ()):
        return False
    layers = list(core.layers)
    linears = [getattr(layer.self_attn, f"{x}_proj") for layer in layers for x in "qkvo"]
    linears += [getattr(layer.mlp, f"{x}_proj") for layer in layers for x in ("gate", "up", "down")]
    return (
        len(layers) == config.num_hidden_layers
        and type(core.embed_tokens) is torch.nn.Embedding
        and all(type(m) is torch.nn.Linear for m in linears)
    )


@torch.no_grad()
def step(
    model: Any, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, cache: Any
) -> torch.Tensor:
    """The logits ``(R, V)`` of one token per row: ``ids`` and ``positions`` ``(R, 1)``, ``mask``
    the key mask ``(R, T + 1)`` (bool, the new key last), ``cache`` a ``DynamicCache`` whose
    layers take the new keys and values (``update``), as in the model's forward.

    >>> from transformers import Qwen3Config, Qwen3ForCausalLM
    >>> from pr1lib.decoding.kvcache import new_cache
    >>> model = Qwen3ForCausalLM(Qwen3Config(vocab_size=16, hidden_size=8, head_dim=4,
    ...     intermediate_size=8, num_hidden_layers=2, num_attention_heads=2,
    ...     num_key_value_heads=1)).eval()
    >>> ids, cache = torch.tensor([[3, 4, 5]]), new_cache()
    >>> _ = model(input_ids=ids[:, :2], cache=cache, use_cache=True)  # the first two tokens
    >>> out = step(model, ids[:, 2:], torch.tensor([[2]]), torch.ones(1, 3, dtype=torch.bool),
    ...            cache)
    >>> torch.allclose(out, model(ids).logits[:, -1], atol=1e-5), cache.get_seq_length()
    (True, 3)
    """
    core = model.model
    if len(cache.layers) != len(core.layers):
        raise ValueError(
            "decode.step continues a cache that holds every layer's keys: run the "
            f"model on the prompt first ({len(cache.layers)} of {len(core.layers)})"
        )
    x = core.embed_tokens(ids)  # (R, 1, E)
    cos, sin = core.rotary_emb(x, positions)  # (R, 1, D) each
    cos, sin, keep = cos[:, None], sin[:, None], mask[:, None, None, :]  # (R, 1, 1, ·)
    for layer, kv in zip(core.layers, cache.layers):
        x = x + _attend(layer.self_attn, _norm(layer.input_layernorm, x), cos, sin, keep, kv)
        h, mlp = _norm(layer.post_attention_layernorm, x), layer.mlp
        gate = mlp.act_fn(_linear(mlp.gate_proj, h)) * _linear(mlp.up_proj, h)  # (R, 1, I)
        x = x + _linear(mlp.down_proj, gate)  # (R, 1, E)
    return model.lm_head(_norm(core.norm, x))[:, -1]  # (R, V)


def _attend(
    attn: Any, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, keep: torch.Tensor, layer: Any
) -> torch.Tensor:
    """One layer's attention output ``(R, 1, E)`` for the normed input ``h`` ``(R, 1, E)``."""
    rows, d = h.shape[0], attn.head_dim
    q = _norm(attn.q_norm, _linear(attn.q_proj, h).view(rows, 1, -1, d)).transpose(1, 2)
    k = _norm(attn.k_norm, _linear(attn.k_proj, h).view(rows, 1, -1, d)).transpose(1, 2)
    v = _linear(attn.v_proj, h).view(rows, 1, -1, d).transpose(1, 2)  # (R, H_kv, 1, D)
    q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)  # (R, H, 1, D), (R, H_kv, 1, D)
    keys, values = layer.update(k, v)  # (R, H_kv, T + 1, D)
    out, _ = decode_attention(attn, q, keys, values, keep, scaling=attn.scaling)  # (R, 1, H, D)
    return _linear(attn.o_proj, out.reshape(rows, 1, -1))


def _linear(module: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return F.linear(x, module.weight, module.bias)


def _norm(module: Any, x: torch.Tensor) -> torch.Tensor:
    """Qwen3's RMSNorm (float32: the same numbers) as one fused call."""
    return F.rms_norm(x, (x.shape[-1],), module.weight, module.variance_epsilon)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding: ``x cos + rotate_half(x) sin`` over the last dim (``(R, H, 1, D)``)."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


# ----------------------------------------------------------------------------- packed rows
class LeanWeights:
    """A supported model's weights for ``row_step``: each layer's q/k/v and gate/up projections
    joined into one matrix each (one matmul instead of three and two; the same numbers). Build
    it once per rollout: the joined matrices are copies, taken when it is built.

    >>> from transformers import Qwen3Config, Qwen3ForCausalLM
    >>> model = Qwen3ForCausalLM(Qwen3Config(vocab_size=16, hidden_size=8, head_dim=4,
    ...     intermediate_size=8, num_hidden_layers=1, num_attention_heads=2,
    ...     num_key_value_heads=1))
    >>> w = LeanWeights(model); tuple(w.layers[0][1][0].shape), tuple(w.layers[0][2][0].shape)
    ((16, 8), (16, 8))
    """

    def __init__(self, model: Any):
        config, self.model, self.core = model.config, model, model.model
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim, self.inner = config.head_dim, config.intermediate_size
        self.layers = []
        for layer in self.core.layers:
            attn, mlp = layer.self_attn, layer.mlp
            qkv = [attn.q_proj, attn.k_proj, attn.v_proj]
            self.layers.append((layer, _joined(qkv), _joined([mlp.gate_proj, mlp.up_proj])))
        self.qk_norms = [
            _stacked(layer.self_attn, self.heads, self.kv_heads) for layer in self.core.layers
        ]


def _stacked(attn: Any, heads: int, kv_heads: int) -> tuple[torch.Tensor, float]:
    """The q and k norms' weights, one row per head ``(H + H_kv, D)``, and their epsilon: one
    normalisation for both (``rms_norm`` without a weight, then the weights: the same numbers)."""
    q, k = attn.q_norm, attn.k_norm
    if q.variance_epsilon != k.variance_epsilon:
        raise ValueError("decode.LeanWeights needs one epsilon for the q and k norms")
    weight = torch.cat(
        [q.weight.detach().expand(heads, -1), k.weight.detach().expand(kv_heads, -1)]
    )
    return weight, q.variance_epsilon


def _joined(linears: list[torch.nn.Linear]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One ``(sum of outputs, inputs)`` weight (and bias) for several linears on one input."""
    weight = torch.cat([m.weight.detach() for m in linears])  # (O1 + O2 + ..., I)
    biases = [m.bias for m in linears]
    bias = None if any(b is None for b in biases) else torch.cat([b.detach() for b in biases])
    return weight, bias


@torch.no_grad()
def row_step(
    w: LeanWeights,
    ids: torch.Tensor,
    positions: torch.Tensor,
    kv: torch.Tensor,
    at: torch.Tensor,
    mask: torch.Tensor,
    base: "Bases | None" = None,
) -> torch.Tensor:
    """The logits ``(R, V)`` of one token per row when every row keeps its keys packed at the
    front of its own row of a buffer (``pr1lib.decoding.rowcache``). ``ids``, ``positions``, ``at``:
    ``(R,)``, ``at`` the column where each row's new key and value go; ``kv`` every layer's keys
    and values, ``(2 L, R', H_kv, C, D)`` (keys of layer ``l`` at ``l``, values at ``L + l``;
    rows ``:R`` in use); ``mask`` ``(R, W)`` the columns each row attends (its new key
    included). The model's arithmetic; attention is one query per row against its GQA group:
    ``q kᵀ`` and ``p v`` as two batched matmuls over ``R x H_kv``. With ``base`` (``Bases``) each
    row's keys in ``kv`` come after the keys of its *base*, a prefix it shares with other rows
    (a prompt's samples, a block's paths), kept once: the rows of one base read it together.
    ``q`` tokens per row at once (a row's forced tokens, ``pr1lib.decoding.regroup``): ``ids``
    and ``positions`` ``(R, q)``, ``mask`` ``(R, q, W)`` (each token's columns: causal), the keys
    at ``at[r]``, ``at[r] + 1``, …; returns ``(R, q, V)``.

    >>> from transformers import Qwen3Config, Qwen3ForCausalLM
    >>> model = Qwen3ForCausalLM(Qwen3Config(vocab_size=16, hidden_size=8, head_dim=4,
    ...     intermediate_size=8, num_hidden_layers=2, num_attention_heads=2,
    ...     num_key_value_heads=1)).eval()
    >>> kv, w = torch.zeros(4, 1, 1, 4, 4), LeanWeights(model)  # 2 layers, 1 row, 4 columns
    >>> for t, tok in enumerate([3, 4, 5]):  # three tokens, one at a time
    ...     mask = torch.arange(3)[None, :] <= t
    ...     out = row_step(w, torch.tensor([tok]), torch.tensor([t]), kv, torch.tensor([t]), mask)
    >>> torch.allclose(out, model(torch.tensor([[3, 4, 5]])).logits[:, -1], atol=1e-5)
    True
    >>> mask = (torch.arange(4) <= torch.arange(3)[:, None])[None]  # (1, 3, 4): all three at once
    >>> out = row_step(w, torch.tensor([[3, 4, 5]]), torch.arange(3)[None], kv, torch.tensor([0]),
    ...                mask)
    >>> torch.allclose(out, model(torch.tensor([[3, 4, 5]])).logits, atol=1e-5), tuple(out.shape)
    (True, (1, 3, 16))
    """
    rows, q = len(at), ids.numel() // len(at)  # q > 1: ids, positions (R, q), mask (R, q, W)
    x = w.core.embed_tokens(ids.reshape(-1))  # (R q, E)
    cos, sin = w.core.rotary_emb(x[:, None], positions.reshape(-1, 1))  # (R q, 1, D) each
    flat, bias = _targets(w, kv, at, mask)
    for i, (layer, qkv, gate_up) in enumerate(w.layers):
        h = _norm(layer.input_layernorm, x)
        x = x + _row_attention(
            w, layer.self_attn, h, (qkv, w.qk_norms[i]), (kv, i, flat, bias), (cos, sin), base
        )
        h, mlp = _norm(layer.post_attention_layernorm, x), layer.mlp
        both = F.linear(h, *gate_up)  # (R, 2I)
        x = x + _linear(mlp.down_proj, mlp.act_fn(both[:, : w.inner]) * both[:, w.inner :])
    logits = w.model.lm_head(_norm(w.core.norm, x))  # (R q, V)
    return logits if ids.dim() == 1 else logits.view(rows, q, -1)  # (R, V) | (R, q, V)


def _targets(
    w: LeanWeights, kv: torch.Tensor, at: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The flat rows ``(2 R q H_kv,)`` of the new keys (then values) of layer 0 in ``kv`` viewed
    as ``(2 L R' H_kv C, D)`` (row ``r``'s ``q`` tokens at columns ``at[r]`` on), and the additive
    mask ``(R H_kv, q G, W)`` (0 or -inf) from ``mask`` ``(R, W)`` or ``(R, q, W)``."""
    rows, width, groups, dev = len(at), mask.shape[-1], w.heads // w.kv_heads, at.device
    q = 1 if mask.dim() == 2 else mask.shape[1]
    layer = kv[0].numel() // kv.shape[-1]  # flat rows per layer's keys
    heads = torch.arange(w.kv_heads, device=dev) * kv.shape[3]  # (H_kv,)
    row, cols = torch.arange(rows, device=dev), at  # (R,) each: one token a row
    if q > 1:  # (R q,) each
        row, cols = row.repeat_interleave(q), (at[:, None] + torch.arange(q, device=dev)).view(-1)
    flat = (row * w.kv_heads * kv.shape[3] + cols)[:, None] + heads  # (R q, H_kv)
    flat = torch.cat([flat.reshape(-1), flat.reshape(-1) + len(w.layers) * layer])  # keys, values
    bias = torch.zeros(mask.shape, dtype=kv.dtype, device=dev).masked_fill_(~mask, float("-inf"))
    bias = bias.view(rows, 1, q, 1, width)  # (R, 1, q, 1, W)
    bias = bias.expand(rows, w.kv_heads, q, groups, width)
    return flat, bias.reshape(rows * w.kv_heads, q * groups, width)


def _row_attention(
    w: LeanWeights,
    attn: Any,
    h: torch.Tensor,
    weights: tuple[tuple[torch.Tensor, torch.Tensor | None], tuple[torch.Tensor, float]],
    cache: tuple[torch.Tensor, int, torch.Tensor, torch.Tensor],
    rotary: tuple[torch.Tensor, torch.Tensor],
    base: "Bases | None" = None,
) -> torch.Tensor:
    """One layer's attention output ``(R, E)`` for the normed input ``h`` ``(R, E)``; writes
    every row's new key and value into the buffer (``cache``: buffer, layer, flat rows, mask);
    q and k are normed and rotated together; ``base``: the rows' shared prefixes come first."""
    (kv, i, flat, bias), (cos, sin), (qkv, (norms, eps)) = cache, rotary, weights
    n, d, n_q, n_kv, width = h.shape[0], w.head_dim, w.heads, w.kv_heads, bias.shape[-1]
    rows = bias.shape[0] // n_kv  # n = R q tokens, row-major: q > 1 in a multi-token step
    out = F.linear(h, *qkv).view(n, n_q + 2 * n_kv, d)  # (R q, H + 2 H_kv, D)
    qk = F.rms_norm(out[:, : n_q + n_kv], (d,), None, eps) * norms  # (R q, H + H_kv, D) normed
    qk = qk * cos + torch.cat((-qk[..., d // 2 :], qk[..., : d // 2]), dim=-1) * sin
    new = torch.cat([qk[:, n_q:], out[:, n_q + n_kv :]]).reshape(-1, d)  # (2 R q H_kv, D)
    kv.view(-1, d).index_copy_(0, flat + i * (kv[0].numel() // d), new)
    keys = kv[i, :rows, :, :width].reshape(rows * n_kv, width, d)  # (R H_kv, W, D) a view
    values = kv[len(w.layers) + i, :rows, :, :width].reshape(rows * n_kv, width, d)
    q = qk[:, :n_q]  # (R q, H, D): each key head's group of queries, for every token
    if n > rows:
        q = q.reshape(rows, n // rows, n_kv, n_q // n_kv, d).transpose(1, 2)  # (R, H_kv, q, G, D)
    q = q.reshape(rows * n_kv, n * n_q // (rows * n_kv), d)  # (R H_kv, q G, D)
    scores = torch.baddbmm(bias, q, keys.transpose(1, 2), alpha=attn.scaling)  # (R H_kv, q G, W)
    if base is not None:
        mixed = base.attend(i, q, scores, values, attn.scaling)  # (R H_kv, q G, D)
    else:
        mixed = torch.bmm(torch.softmax(scores, dim=-1), values)  # (R H_kv, q G, D)
    if n > rows:
        mixed = mixed.view(rows, n_kv, n // rows, n_q // n_kv, d).transpose(1, 2)  # (R, q, ...)
    return _linear(attn.o_proj, mixed.reshape(n, n_q * d))  # (R q, E)


class Bases:
    """The shared prefixes of ``row_step``'s rows: ``kv`` ``(2 L, B', H_kv, C, D)`` as the rows'
    buffer, ``lens`` ``(B,)`` each base's keys, ``of`` ``(R,)`` each row's base, ``groups`` query
    heads per key head. The rows of a base read its keys in one matmul, ``k`` queries (a block's
    paths) against one copy; each row's softmax runs over its base's scores and its own together
    (the numbers of one row holding both, up to the rounding of the sums).

    >>> kv = torch.zeros(2, 1, 1, 4, 2)  # one layer, one base of four columns, two used
    >>> b = Bases(kv, [2], [0, 0], heads=1, groups=1)
    >>> b.take.tolist(), b.put.tolist(), b.k
    ([0, 1], [0, 1], 2)
    """

    def __init__(self, kv: torch.Tensor, lens: list[int], of: list[int], heads: int, groups: int):
        dev, n, width = kv.device, len(lens), max(lens)
        members: list[list[int]] = [[] for _ in range(n)]
        for r, b in enumerate(of):
            members[b].append(r)
        k = max(1, *map(len, members))
        slot = {r: j for group in members for j, r in enumerate(group)}
        # (B, H_kv, k) -> the row's query (R H_kv); row 0 where a base has fewer rows (not read)
        take = [
            (g[j] if j < len(g) else 0) * heads + h
            for g in members
            for h in range(heads)
            for j in range(k)
        ]
        put = [(b * heads + h) * k + slot[r] for r, b in enumerate(of) for h in range(heads)]
        self.kv, self.n, self.k, self.heads, self.width = kv, n, k, heads, width
        self.take = torch.tensor(take, dtype=torch.long, device=dev)  # (B H_kv k,)
        self.put = torch.tensor(put, dtype=torch.long, device=dev)  # (R H_kv,) its place there
        keep = torch.arange(width, device=dev) < torch.tensor(lens, device=dev)[:, None]
        bias = torch.zeros(n, width, dtype=kv.dtype, device=dev).masked_fill_(~keep, float("-inf"))
        bias = bias[:, None, None, :].expand(n, heads, k * groups, width)
        self.bias = bias.reshape(n * heads, k * groups, width)  # (B H_kv, k G, W)

    def attend(
        self, i: int, q: torch.Tensor, own: torch.Tensor, values: torch.Tensor, scale: float
    ) -> torch.Tensor:
        """Layer ``i``'s mix ``(R H_kv, G, D)`` of the bases' values and the rows' own
        (``q``: ``(R H_kv, G, D)``; ``own``: the scores over the rows' own keys
        ``(R H_kv, G, W_own)``, their values ``values``)."""
        n, k, h, w = self.n, self.k, self.heads, self.width
        g, d = q.shape[1], q.shape[2]
        grouped = q.index_select(0, self.take).view(n * h, k * g, d)  # (B H_kv, k G, D)
        keys = self.kv[i, :n, :, :w].reshape(n * h, w, d)  # (B H_kv, W, D) a view
        bias = self.bias  # (B H_kv, k G, W); a multi-token step's q G queries see it too
        bias = bias if bias.shape[1] == k * g else bias[:, :1].expand(n * h, k * g, w)
        scores = torch.baddbmm(bias, grouped, keys.transpose(1, 2), alpha=scale)
        mine = scores.view(n * h * k, g, w).index_select(0, self.put)  # (R H_kv, G, W)
        both = torch.cat([mine, own], dim=-1).softmax(dim=-1)  # (R H_kv, G, W + W_own)
        weights = both.new_zeros(n * h * k, g, w).index_copy_(0, self.put, both[..., :w])
        vals = self.kv[self.kv.shape[0] // 2 + i, :n, :, :w].reshape(n * h, w, d)
        mixed = torch.bmm(weights.view(n * h, k * g, w), vals).view(n * h * k, g, d)
        return mixed.index_select(0, self.put) + torch.bmm(both[..., w:], values)
