"""The model's shape as a log printed it (llama.cpp's print_info / GGUF header figures), in one line.

The diagnosis reads a dozen `model_*` counts from a llama.cpp log (layers, hidden size, heads, KV heads,
head sizes, vocabulary, trained context, experts); shown one per line they bury the figures that are
about memory. `shape_words` says them as one readable line; the JSON keeps every figure as it is.
"""

from __future__ import annotations

from collections.abc import Mapping

# The figures shape_words says; the text view leaves them out of its list of figures.
SHAPE_FIGURES = frozenset(
    {
        "model_layers", "model_hidden", "model_heads", "model_kv_heads", "model_head_dim_k",
        "model_head_dim_v", "model_vocab", "model_trained_context", "model_experts",
        "model_experts_used", "model_moe_ff", "model_ff", "attention_heads", "model_swa_window",
    }
)  # fmt: skip


def _count(figures: Mapping[str, float], key: str) -> int | None:
    value = figures.get(key)
    return int(value) if value else None


def _heads(figures: Mapping[str, float]) -> str | None:
    heads = _count(figures, "model_heads") or _count(figures, "attention_heads")
    kv_heads = _count(figures, "model_kv_heads")
    if not heads:
        return f"{kv_heads} KV heads" if kv_heads else None
    words = f"{heads} heads" + (f" / {kv_heads} KV heads" if kv_heads else "")
    head_k, head_v = _count(figures, "model_head_dim_k"), _count(figures, "model_head_dim_v")
    if head_k:
        words += f" of {head_k}" if head_v in (None, head_k) else f" of {head_k} (K) / {head_v} (V)"
    return words


def _experts(figures: Mapping[str, float]) -> str | None:
    experts = _count(figures, "model_experts")
    if not experts:
        return None
    details = [f"{used} used" for used in [_count(figures, "model_experts_used")] if used]
    details += [f"{ff} wide" for ff in [_count(figures, "model_moe_ff")] if ff]
    return f"{experts} experts" + (f" ({', '.join(details)})" if details else "")


def shape_words(figures: Mapping[str, float]) -> str | None:
    """`48 layers, 2048 hidden, 32 heads / 4 KV heads of 128, 128 experts (8 used, 768 wide), vocab
    151936, trained context 40960`; None when the log printed none of it."""
    parts = [f"{layers} layers" for layers in [_count(figures, "model_layers")] if layers] + [
        f"{hidden} hidden" for hidden in [_count(figures, "model_hidden")] if hidden
    ]
    parts += [words for words in (_heads(figures), _experts(figures)) if words]
    parts += [f"feed-forward {ff}" for ff in [_count(figures, "model_ff")] if ff]
    parts += [f"vocab {vocab}" for vocab in [_count(figures, "model_vocab")] if vocab]
    window = _count(figures, "model_swa_window")
    parts += [f"sliding window {window}"] if window else []
    trained = _count(figures, "model_trained_context")
    parts += [f"trained context {trained}"] if trained else []
    return ", ".join(parts) or None


# The device figures devices_words says (each device's free memory, and their sums).
DEVICE_FIGURES = frozenset({"device_free", "device_free_gpu"})


def devices_words(figures: Mapping[str, float]) -> str | None:
    """`CUDA0 32192 MiB free, CUDA1 ...`: each device's free memory as the log printed it."""
    free = {key.split(".", 1)[1]: value for key, value in figures.items() if key.startswith("device_free.")}
    if not free and figures.get("device_free"):
        free = {"GPU": figures["device_free"]}
    return ", ".join(f"{name} {value / 2**20:.0f} MiB free" for name, value in free.items()) or None


__all__ = ["DEVICE_FIGURES", "SHAPE_FIGURES", "devices_words", "shape_words"]
