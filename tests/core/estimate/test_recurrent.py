"""Hybrid and recurrent models: attention KV only for the attention layers, and the recurrent state (llama.cpp's
RS buffer) per sequence, checked against llama.cpp itself on a tiny Mamba-2 GGUF and against real printouts."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from vramtui.core.demo.tinygguf import _vocab
from vramtui.core.estimate import recurrent
from vramtui.core.estimate.estimator import Settings, estimate
from vramtui.core.estimate.modelinfo import info_from_config, load_model_info, tensor_groups
from vramtui.core.memory.parts import HOST
from vramtui.core.units import MIB

PRINTOUTS = Path(__file__).resolve().parents[2] / "data" / "printouts" / "recurrent.jsonl"
CONFIGS = Path(__file__).resolve().parents[2] / "data" / "configs"
RS_SIZE = re.compile(
    r"llama_memory_recurrent: size =\s*[\d.]+ MiB \(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+) seqs.*?"
    r"R \(f32\):\s*([\d.]+) MiB, S \(f32\):\s*([\d.]+) MiB"
)
RS_BUFFER = re.compile(r"RS buffer size =\s*([\d.]+) MiB")
MODEL_BUFFER = re.compile(r"CPU_Mapped model buffer size =\s*([\d.]+) MiB")
KV_SIZE = re.compile(r"llama_kv_cache: size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers")

MAMBA2 = dict(n_layer=3, n_embd=256, d_inner=512, d_state=64, n_group=2, dt_rank=8, d_conv=4)


def write_mamba2(
    path: Path, n_layer: int, n_embd: int, d_inner: int, d_state: int, n_group: int, dt_rank: int, d_conv: int
) -> Path:
    """A random-weight Mamba-2 GGUF with the tensors llama.cpp's mamba2 loader asks for (f32)."""
    import gguf

    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(str(path), "mamba2")
    w.add_name("tiny-mamba2")
    w.add_context_length(4096)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(0)
    w.add_head_count(0)
    w.add_head_count_kv(0)
    w.add_ssm_conv_kernel(d_conv)
    w.add_ssm_inner_size(d_inner)
    w.add_ssm_state_size(d_state)
    w.add_ssm_time_step_rank(dt_rank)
    w.add_ssm_group_count(n_group)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    tokens, scores, types = _vocab()
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)

    def tensor(name: str, shape: tuple[int, ...]) -> None:
        w.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float32))

    conv_dim = d_inner + 2 * n_group * d_state
    tensor("token_embd.weight", (len(tokens), n_embd))
    for i in range(n_layer):
        tensor(f"blk.{i}.attn_norm.weight", (n_embd,))
        tensor(f"blk.{i}.ssm_in.weight", (d_inner + conv_dim + dt_rank, n_embd))
        tensor(f"blk.{i}.ssm_conv1d.weight", (conv_dim, d_conv))
        tensor(f"blk.{i}.ssm_conv1d.bias", (conv_dim,))
        tensor(f"blk.{i}.ssm_dt.bias", (dt_rank,))
        tensor(f"blk.{i}.ssm_a", (dt_rank, 1))
        tensor(f"blk.{i}.ssm_d", (dt_rank, 1))
        tensor(f"blk.{i}.ssm_norm.weight", (n_group, d_inner // n_group))
        tensor(f"blk.{i}.ssm_out.weight", (n_embd, d_inner))
    tensor("output_norm.weight", (n_embd,))
    tensor("output.weight", (len(tokens), n_embd))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def mamba2_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_mamba2(tmp_path_factory.mktemp("mamba2") / "tiny-mamba2.gguf", **MAMBA2)


def test_mamba2_gguf_reads_every_layer_as_recurrent(mamba2_gguf: Path) -> None:
    info = load_model_info(mamba2_gguf)
    assert info.n_recurrent_layers == info.n_layers == 3
    m = MAMBA2
    assert info.rs_conv_elements == (m["d_conv"] - 1) * (m["d_inner"] + 2 * m["n_group"] * m["d_state"])
    assert info.rs_state_elements == m["d_state"] * m["d_inner"]
    est = estimate(info, Settings(context=2048, parallel=2, on_gpu=False))
    assert est.kv_cache_bytes == 0 and est.kv_bytes_per_token == 0
    # the state is per sequence and independent of the context
    longer = estimate(info, Settings(context=4096, parallel=2, on_gpu=False))
    assert est.bill.get("recurrent_state", HOST) == longer.bill.get("recurrent_state", HOST) > 0


LOAD = """
import sys, llama_cpp
llama_cpp.Llama(model_path=sys.argv[1], n_ctx=int(sys.argv[2]), n_threads=2, n_gpu_layers=0, verbose=True)
"""


@pytest.mark.engine
def test_mamba2_rs_buffer_and_weights_match_llama_cpp_python(mamba2_gguf: Path) -> None:
    pytest.importorskip("llama_cpp")
    run = subprocess.run(
        [sys.executable, "-c", LOAD, str(mamba2_gguf), "1024"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    rs_mib = float(RS_BUFFER.search(run.stderr).group(1))
    model_mib = float(MODEL_BUFFER.search(run.stderr).group(1))
    est = estimate(
        load_model_info(mamba2_gguf), Settings(backend="llama-cpp-python", context=1024, on_gpu=False)
    )
    assert est.bill.get("recurrent_state", HOST) / MIB == pytest.approx(rs_mib, rel=0.01, abs=0.006)
    assert est.weights_bytes / MIB == pytest.approx(model_mib, rel=0.03)
    assert est.to_dict()["recurrent_state_bytes"] == est.bill.get("recurrent_state", HOST)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _server_log_until(binary: Path, args: list[str], pattern: re.Pattern[str], timeout: float = 90) -> str:
    proc = subprocess.Popen([str(binary), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + timeout
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if pattern.search(line) or "listening on" in line:  # the server is up: nothing more to print
                break
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return "".join(lines)


@pytest.mark.engine
def test_mamba2_rs_buffer_per_slot_matches_llama_server(mamba2_gguf: Path, llama_server_bin: Path) -> None:
    # -lv 4: llama-server prints the context's buffers only at verbosity 4
    args = [
        "-m",
        str(mamba2_gguf),
        "-c",
        "1536",
        "-np",
        "3",
        "-t",
        "2",
        "-ngl",
        "0",
        "-lv",
        "4",
        "--port",
        str(_free_port()),
        "--host",
        "127.0.0.1",
    ]
    log = _server_log_until(llama_server_bin, args, RS_SIZE)
    found = RS_SIZE.search(log)
    assert found, log[-3000:]
    cells, layers, seqs, r_mib, s_mib = found.groups()
    assert int(seqs) == int(cells) == 3 and int(layers) == 3
    est = estimate(load_model_info(mamba2_gguf), Settings(context=1536, parallel=3, on_gpu=False))
    printed = float(RS_BUFFER.search(log).group(1))
    assert est.bill.get("recurrent_state", HOST) / MIB == pytest.approx(printed, rel=0.01)
    assert (float(r_mib) + float(s_mib)) == pytest.approx(printed, abs=0.011)


# --- real printouts from public issues (tests/data/printouts/recurrent.jsonl, each with its source) ----------


def _printout(name: str) -> str:
    for line in PRINTOUTS.read_text().splitlines():
        record = json.loads(line)
        if record["id"] == name:
            assert record["source"].startswith("https://github.com/")
            return str(record["log"])
    raise AssertionError(name)


def qwen35_config(layers: int, hidden: int, heads: int, v_heads: int) -> dict:
    """Qwen3.5's config.json fields (a Gated DeltaNet hybrid: 3 linear-attention layers, then 1 full)."""
    return {
        "model_type": "qwen3_5_text",
        "num_hidden_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "vocab_size": 248320,
        "intermediate_size": 4 * hidden,
        "max_position_embeddings": 262144,
        "full_attention_interval": 4,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": v_heads,
        "torch_dtype": "bfloat16",
    }


@pytest.mark.parametrize(
    ("name", "config", "context", "slots"),
    [
        # 32 layers, 8 of them attention, 1 slot at 262144 cells (Qwen3.5-9B's shape)
        ("rs-3-gated-deltanet-spec-chain", qwen35_config(32, 4096, 16, 32), 262144, 1),
        # 64 layers, every 4th attention ("skipped" by the recurrent memory), 2 slots (Qwen3.5-27B's shape)
        ("rs-2-tp-meta-backend-hybrid", qwen35_config(64, 5120, 24, 48), 8192, 2),
    ],
)
def test_gated_deltanet_state_matches_real_printouts(
    name: str, config: dict, context: int, slots: int
) -> None:
    log = _printout(name)
    cells, layers, seqs, r_mib, s_mib = RS_SIZE.search(log).groups()
    info = info_from_config(config, "config.json", exact_params=False)
    assert int(layers) == info.n_layers and int(seqs) == int(cells) == slots
    assert info.n_recurrent_layers == info.n_layers * 3 // 4
    r_bytes = recurrent.recurrent_state_bytes(replace_state(info, conv=True), slots)
    s_bytes = recurrent.recurrent_state_bytes(replace_state(info, conv=False), slots)
    assert r_bytes / MIB == pytest.approx(float(r_mib), rel=0.01)
    assert s_bytes / MIB == pytest.approx(float(s_mib), rel=0.01)
    est = estimate(info, Settings(context=context, parallel=slots, device_bytes=141 * 1024 * MIB))
    assert est.bill.get("recurrent_state", 0) / MIB == pytest.approx(float(r_mib) + float(s_mib), rel=0.01)
    kv = KV_SIZE.search(log)
    if kv:  # only the attention layers keep K and V
        assert int(kv.group(3)) == info.n_layers - info.n_recurrent_layers
        assert est.kv_cache_bytes / MIB == pytest.approx(float(kv.group(1)), rel=0.01)


def replace_state(info, conv: bool):
    """The model with only its conv (R) or only its SSM (S) state, as llama.cpp prints them apart."""
    from dataclasses import replace

    if conv:
        return replace(info, rs_state_elements=0)
    return replace(info, rs_conv_elements=0)


def test_granite4_hybrid_config_keeps_kv_only_in_its_attention_layers() -> None:
    # granitemoehybrid: layer_types names each layer; Mamba-2 with mamba_* sizes
    types = ["mamba"] * 5 + ["attention"] + ["mamba"] * 4
    cfg = {
        "model_type": "granitemoehybrid",
        "num_hidden_layers": 10,
        "hidden_size": 1536,
        "num_attention_heads": 12,
        "num_key_value_heads": 4,
        "layer_types": types,
        "mamba_d_conv": 4,
        "mamba_d_state": 128,
        "mamba_n_groups": 1,
        "mamba_n_heads": 48,
        "mamba_d_head": 64,
        "vocab_size": 100352,
    }
    info = info_from_config(cfg, "config.json", exact_params=False)
    assert [info.is_recurrent(i) for i in range(10)] == [t == "mamba" for t in types]
    d_inner = 48 * 64
    assert info.rs_conv_elements == 3 * (d_inner + 2 * 128) and info.rs_state_elements == 128 * d_inner
    est = estimate(info, Settings(context=4096, parallel=1))
    per_token_one_layer = 2 * 4 * (1536 // 12) * 2  # K and V, 4 heads, f16
    assert est.kv_bytes_per_token == per_token_one_layer
    assert est.bill.get("recurrent_state", 0) == 9 * (info.rs_conv_elements + info.rs_state_elements) * 4


def test_nemotron_h_pattern_mlp_layers_keep_neither_kv_nor_state() -> None:
    pattern = "M-M*-M-"
    cfg = {
        "model_type": "nemotron_h",
        "num_hidden_layers": 7,
        "hidden_size": 1024,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "hybrid_override_pattern": pattern,
        "mamba_num_heads": 32,
        "mamba_head_dim": 64,
        "ssm_state_size": 128,
        "n_groups": 8,
        "conv_kernel": 4,
    }
    info = info_from_config(cfg, "config.json", exact_params=False)
    assert info.n_recurrent_layers == pattern.count("M")
    assert [info.kv_heads_at(i) for i in range(7)] == [2 if c == "*" else 0 for c in pattern]
    assert info.rs_conv_elements == 3 * (32 * 64 + 2 * 8 * 128)


def test_lfm2_short_convolution_state_is_hidden_times_cache_minus_one() -> None:
    types = ["conv", "conv", "full_attention", "conv", "conv", "full_attention"]
    cfg = {
        "model_type": "lfm2",
        "num_hidden_layers": 6,
        "hidden_size": 1024,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "layer_types": types,
        "conv_L_cache": 3,
    }
    info = info_from_config(cfg, "config.json", exact_params=False)
    assert info.n_recurrent_layers == 4
    assert (info.rs_conv_elements, info.rs_state_elements) == (1024 * 2, 0)
    one = estimate(info, Settings(context=4096, parallel=1)).bill.get("recurrent_state", 0)
    four = estimate(info, Settings(context=4096, parallel=4)).bill.get("recurrent_state", 0)
    assert four == 4 * one == 4 * 4 * 1024 * 2 * 4


def test_cli_shows_the_recurrent_state_row_and_json_key(mamba2_gguf: Path) -> None:
    args = [sys.executable, "-m", "vramtui", "estimate", str(mamba2_gguf), "--ctx", "8192", "--parallel", "4"]
    text = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True).stdout
    assert "recurrent state" in text and "whatever the context" in text
    out = json.loads(
        subprocess.run([*args, "--json"], capture_output=True, text=True, timeout=120, check=True).stdout
    )
    info = load_model_info(mamba2_gguf)
    expected = 3 * (info.rs_conv_elements + info.rs_state_elements) * 4 * 4  # layers x f32 x 4 sequences
    assert out["recurrent_state_bytes"] == out["bill"]["0"]["recurrent_state_bytes"] == expected
    assert out["kv_cache_bytes"] == 0


@pytest.mark.parametrize("name", ["Qwen--Qwen3-Next-80B-A3B", "Qwen--Qwen3.5-27B", "Qwen--Qwen3.6-35B-A3B"])
def test_gated_deltanet_layers_are_laid_out_whole(name: str) -> None:
    """The DeltaNet layers' q, k, v, z, beta/alpha and output projections and the full-attention layers'
    gated queries: the tensors laid out from config.json add up to the parameters the model itself has
    (built on the meta device), with the vision tower that stays apart. Before, those layers held a plain
    attention's q and output only: 0.59B of Qwen3.6-35B-A3B's parameters were missing."""
    info = load_model_info(str(CONFIGS / f"{name}.config.json"), exact_params=True)
    assert info.delta_net is not None and info.attn_output_gate
    laid_out = sum(group.n_elements for group in tensor_groups(info))
    assert abs(laid_out + info.vision_params - info.n_params) / info.n_params < 2e-5
