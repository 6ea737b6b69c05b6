"""A model folder's files, read without torch: checked before anything loads, and hashed by content.

``check_model_files`` refuses a folder whose ``config.json`` is not a model config, whose
safetensors files are cut short or damaged (the 8-byte header length, the JSON header, every
tensor's bytes inside the file and the file's size), or whose tensors do not have the shapes the
config says (embedding, layers, norms, attention and MLP): each failure is one ``ValueError``
naming the file and what is wrong with it. ``model_hash`` is a short SHA-256 of the files that
decide what a model answers (config, tokenizer, weights): the key of every evaluation cache, so
two models at the same path, or one folder retrained in place, never share results.

>>> from pr1lib.store.paths import REPO_ROOT
>>> check_model_files(REPO_ROOT / "data/tiny-base")
>>> len(model_hash(REPO_ROOT / "data/tiny-base"))
16
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import struct
import zipfile
from pathlib import Path
from typing import Any

# bytes per element of each safetensors dtype
DTYPE_BYTES = {
    **dict.fromkeys(("F64", "I64", "U64"), 8),
    **dict.fromkeys(("F32", "I32", "U32"), 4),
    **dict.fromkeys(("F16", "BF16", "I16", "U16"), 2),
    **dict.fromkeys(("I8", "U8", "BOOL", "F8_E4M3", "F8_E5M2"), 1),
}
# config fields that, when present, are counts (a whole number above 0)
SIZES = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "head_dim",
    "max_position_embeddings",
)
HASHED = ("config.json", "tokenizer.json", "tokenizer_config.json")  # besides the weights
MAX_HEADER = 100_000_000  # safetensors' own limit on the JSON header
_HASHES: dict[tuple, str] = {}  # (path, size, mtime) of every hashed file -> its hash


def read_config(folder: Path) -> dict[str, Any]:
    """``folder/config.json`` after checking it is a model config (an object with a
    ``model_type`` and positive sizes)."""
    path = folder / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not a model config: it is not text") from None
    except ValueError as err:
        raise ValueError(f"{path} is not a model config: not valid JSON ({err})") from None
    if not isinstance(config, dict):
        raise ValueError(
            f"{path} is not a model config: it holds a JSON {type(config).__name__}, not an object"
        )
    if not isinstance(config.get("model_type"), str) or not config["model_type"]:
        raise ValueError(f"{path} is not a model config: it has no \"model_type\"")
    for key in SIZES:
        value = config.get(key)
        if key in config and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ValueError(
                f"{path}: {key} must be a whole number above 0, got {value!r} (a damaged config?)"
            )
    return config


def safetensors_header(path: Path) -> dict[str, Any]:
    """The tensors of a safetensors file (name -> dtype, shape, offsets) after checking that the
    header is whole and every tensor's bytes lie inside the file, which ends with the last one."""
    size = path.stat().st_size
    damaged = f"{path} is damaged"
    if size < 8:
        raise ValueError(
            f"{damaged}: it holds {size} bytes, fewer than a header (a copy cut short?)"
        )
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        if length > min(MAX_HEADER, size - 8):
            raise ValueError(
                f"{damaged}: its header claims {length} bytes but the file holds {size} "
                "(not a safetensors file, or a copy cut short)"
            )
        raw = f.read(length)
    try:
        header = json.loads(raw)
        tensors = {k: v for k, v in header.items() if k != "__metadata__"}
        end = max((_tensor_end(name, entry) for name, entry in tensors.items()), default=0)
    except (ValueError, AttributeError, TypeError) as err:
        raise ValueError(f"{damaged}: its header is not a safetensors header ({err})") from None
    if 8 + length + end != size:
        raise ValueError(
            f"{damaged}: its tensors need {8 + length + end} bytes, the file holds {size} "
            f"({'a copy cut short' if size < 8 + length + end else 'extra bytes at the end'})"
        )
    return tensors


def _tensor_end(name: str, entry: dict) -> int:
    """Where a tensor's bytes end, after checking its dtype, shape and offsets agree."""
    begin, end = entry["data_offsets"]
    shape, width = entry["shape"], DTYPE_BYTES.get(entry["dtype"])
    if width is None:
        raise ValueError(f"tensor {name} has an unknown dtype {entry['dtype']!r}")
    if not all(isinstance(n, int) and n >= 0 for n in [*shape, begin, end]):
        raise ValueError(f"tensor {name} has a bad shape or offsets")
    if end - begin != math.prod(shape) * width:
        raise ValueError(f"tensor {name}: {shape} of {entry['dtype']} is not {end - begin} bytes")
    return end


def weight_files(folder: Path) -> list[Path]:
    """The safetensors files of a model folder (every shard its index names)."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ValueError(f"{index} is damaged: it has no weight_map of shard files") from None
        missing = [n for n in names if not (folder / n).is_file()]
        if missing:
            raise ValueError(f"{index} names {missing[0]}, which is not in {folder}")
        return [folder / n for n in names]
    return sorted(folder.glob("*.safetensors"))


def parameter_count(folder: str | Path) -> int:
    """The numbers a model folder's weights hold (a tied embedding once: it is stored once)."""
    return sum(
        math.prod(entry["shape"])
        for path in weight_files(Path(folder))
        for name, entry in safetensors_header(path).items()
        if name != "__metadata__"
    )


def model_label(folder: str | Path) -> str:
    """How a table names the model in ``folder``, from its own files: architecture and size.

    >>> from pr1lib.store.paths import REPO_ROOT
    >>> model_label(REPO_ROOT / "data/tinyworld-sft")
    'Qwen3 (0.92M params)'
    """
    config = read_config(Path(folder))
    arch = (config.get("architectures") or [config["model_type"]])[0]
    n = parameter_count(folder)
    value, unit = (n / 1e9, "B") if n >= 1e9 else (n / 1e6, "M")
    digits = max(0, 1 - math.floor(math.log10(value)))  # two significant figures: 0.92M, 4.0B
    return f"{arch.removesuffix('ForCausalLM')} ({value:.{digits}f}{unit} params)"


def expected_shapes(config: dict[str, Any]) -> dict[str, list[int]]:
    """Tensor-name patterns -> the shape ``config`` gives them (decoder-only models: Qwen, Llama).

    >>> expected_shapes({"vocab_size": 8, "hidden_size": 4})["embed_tokens.weight"]
    [8, 4]
    """
    v, h, i = (config.get(k) for k in ("vocab_size", "hidden_size", "intermediate_size"))
    heads = config.get("num_attention_heads")
    kv = config.get("num_key_value_heads") or heads
    d = config.get("head_dim") or (h // heads if h and heads else None)
    shapes = {
        "embed_tokens.weight": [v, h],
        "lm_head.weight": [v, h],
        "input_layernorm.weight": [h],
        "post_attention_layernorm.weight": [h],
        "model.norm.weight": [h],
        "mlp.gate_proj.weight": [i, h],
        "mlp.up_proj.weight": [i, h],
        "mlp.down_proj.weight": [h, i],
    }
    if heads and d:
        shapes.update(
            {
                "self_attn.q_proj.weight": [heads * d, h],
                "self_attn.k_proj.weight": [kv * d, h],
                "self_attn.v_proj.weight": [kv * d, h],
                "self_attn.o_proj.weight": [h, heads * d],
                "self_attn.q_norm.weight": [d],
                "self_attn.k_norm.weight": [d],
            }
        )
    return {k: s for k, s in shapes.items() if all(isinstance(n, int) for n in s)}


def check_shapes(config: dict[str, Any], tensors: dict[str, dict], folder: Path) -> None:
    """Refuse weights whose shapes or layer count differ from ``config.json``'s."""
    if "quantization_config" in config:  # packed 4-/8-bit weights have other shapes
        return
    shapes = expected_shapes(config)
    for name, entry in sorted(tensors.items()):
        for suffix, shape in shapes.items():
            if name.endswith(suffix) and list(entry["shape"]) != shape:
                raise ValueError(
                    f"{folder}: tensor {name} has shape {entry['shape']} but config.json says "
                    f"{shape} (the config does not belong to these weights)"
                )
    layers = {int(m.group(1)) for n in tensors if (m := re.search(r"\.layers\.(\d+)\.", n))}
    wanted = config.get("num_hidden_layers")
    if layers and wanted is not None and max(layers) + 1 != wanted:
        raise ValueError(
            f"{folder}: the weights hold {max(layers) + 1} layers but config.json says {wanted} "
            "(the config does not belong to these weights)"
        )


def check_model_files(folder: str | Path) -> None:
    """Refuse a model folder whose config, tokenizer files or safetensors weights are damaged or
    do not match (one ``ValueError`` naming the file); a folder without safetensors passes."""
    folder = Path(folder)
    config = read_config(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        path = folder / name
        if path.is_file():
            try:
                json.loads(path.read_text(encoding="utf-8"))
            except ValueError as err:
                raise ValueError(f"{path} is damaged: not valid JSON ({err})") from None
    tensors: dict[str, dict] = {}
    for path in weight_files(folder):
        tensors.update(safetensors_header(path))
    if tensors:
        check_shapes(config, tensors, folder)


def torch_file_damage(path: Path) -> str | None:
    """What is wrong with a file ``torch.save`` wrote (a zip archive; ``None``: nothing seen):
    one cut short has no end of archive. Read without torch.

    >>> torch_file_damage(Path("/no/such/state.pt"))
    'it is missing'
    """
    if not path.is_file():
        return "it is missing"
    return None if zipfile.is_zipfile(path) else "it is not a whole torch file (a write cut short?)"


def file_hash(path: Path) -> str:
    """SHA-256 of a file's bytes, kept per (path, size, time) for this process."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _HASHES:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        _HASHES[key] = digest.hexdigest()
    return _HASHES[key]


def model_hash(folder: str | Path) -> str:
    """16 hex digits of SHA-256 over a model folder's config, tokenizer and weight files (names
    and bytes): the same model wherever it lies, another one as soon as one byte differs."""
    folder = Path(folder)
    files = [folder / n for n in HASHED if (folder / n).is_file()]
    weights = weight_files(folder) or sorted(folder.glob("*.bin"))
    digest = hashlib.sha256()
    for path in files + weights:
        digest.update(f"{path.name}:{file_hash(path)}\n".encode())
    return digest.hexdigest()[:16]
