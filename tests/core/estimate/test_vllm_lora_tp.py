"""vLLM's --max-loras slots under tensor (and pipeline) parallelism: each rank holds its shard.

vLLM's lora/layers (base_linear.create_lora_weights): every LoRA-wrapped linear layer preallocates, per
slice, A as (max_loras, 1, max_lora_rank, input_size) and B as (max_loras, 1, output_size, max_lora_rank),
where a column-parallel layer's output_size is its rank's output partition and a row-parallel layer's
input_size is its rank's input partition (without fully_sharded_loras). The merged qkv_proj has 3
slices (q, k, v), gate_up_proj 2; o_proj and down_proj are row-parallel."""

from __future__ import annotations

import json
from pathlib import Path

from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import load_model_info
from vramtui.core.units import GIB

# DeepSeek-R1-Distill-Qwen-14B's config.json (Qwen2.5-14B's shape)
QWEN25_14B = dict(
    architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=5120, intermediate_size=13824,
    num_attention_heads=40, num_key_value_heads=8, num_hidden_layers=48, vocab_size=152064,
    max_position_embeddings=131072, tie_word_embeddings=False, torch_dtype="bfloat16",
)  # fmt: skip
LORAS, RANK = 4, 32


def _info(tmp_path: Path) -> object:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(QWEN25_14B))
    return load_model_info(str(path))


def _slots_per_rank(tp: int) -> int:
    """The preallocated A and B tensors of one rank, element by element as vLLM shapes them (bf16)."""
    h, heads, kv_heads, head, ff = 5120, 40, 8, 128, 13824
    kv_kept = max(1, kv_heads // tp)
    tensors = [  # (slices' A inputs, slices' B outputs) per layer on this rank
        ([h, h, h], [heads * head // tp, kv_kept * head, kv_kept * head]),  # qkv_proj: column, 3 slices
        ([heads * head // tp], [h]),  # o_proj: row
        ([h, h], [ff // tp, ff // tp]),  # gate_up_proj: column, 2 slices
        ([ff // tp], [h]),  # down_proj: row
    ]
    per_layer = sum(RANK * size for a_inputs, b_outputs in tensors for size in (*a_inputs, *b_outputs))
    return LORAS * per_layer * 48 * 2


def _slots(est: object) -> dict[str, dict[str, int]]:
    return next(entry for entry in est.extras if entry["name"] == "lora_slots")["bill"]  # type: ignore[attr-defined]


def test_each_tensor_parallel_rank_holds_its_shard_of_the_slots(tmp_path: Path) -> None:
    info = _info(tmp_path)
    cards = (48 * GIB, 48 * GIB)
    base = estimate(info, Settings(backend="vllm", context=8192, gpus=cards, tensor_parallel_size=2))
    est = estimate(
        info,
        Settings(
            backend="vllm",
            context=8192,
            gpus=cards,
            tensor_parallel_size=2,
            max_loras=LORAS,
            max_lora_rank=RANK,
        ),
    )
    bill = _slots(est)
    assert set(bill) == {"0", "1"}
    for index, row in enumerate(est.devices):
        assert bill[str(index)]["weights_bytes"] == _slots_per_rank(2)
        assert row.weights_bytes == base.devices[index].weights_bytes + _slots_per_rank(2)
    # the column layers' A and the row layers' B are whole on every rank: more than half of one GPU's slots
    one = estimate(info, Settings(backend="vllm", context=8192, max_loras=LORAS, max_lora_rank=RANK))
    assert _slots(one)["0"]["weights_bytes"] == _slots_per_rank(1)
    assert _slots_per_rank(1) / 2 < _slots_per_rank(2) < _slots_per_rank(1)


def test_pipeline_stages_hold_the_slots_of_their_own_layers(tmp_path: Path) -> None:
    info = _info(tmp_path)
    est = estimate(
        info,
        Settings(
            backend="vllm", context=8192, gpus=(48 * GIB,) * 4, tensor_parallel_size=2,
            pipeline_parallel_size=2, max_loras=LORAS, max_lora_rank=RANK,
        ),
    )  # fmt: skip
    bill = _slots(est)
    assert set(bill) == {"0", "1", "2", "3"}
    # 48 layers over 2 stages: 24 each, so each rank holds half of a TP-2 rank's slots
    assert all(bill[str(i)]["weights_bytes"] * 2 == _slots_per_rank(2) for i in range(4))
    assert [row.layers for row in est.devices] == [24, 24, 24, 24]
