"""vLLM's printouts in the corpus (tests/core/estimate/printouts.py lists them), read and scored.

A vLLM log prints no model shape, so each printout's model is sized from its published config.json
(tests/data/configs, sources in its README), loaded by the path `vramtui estimate --backend vllm MODEL` takes
(`load_model_info`). What the log printed is read in GiB as vLLM means it (its "GB" too):

- weights per GPU: `Model loading took X GiB` (V1), `Loading model weights took X GB` (V0), the V0 profile's
  `model weights take X GiB`;
- KV per GPU: `Available KV cache memory: X GiB` (V1), V0's `available_kv_cache_memory` / `kv_cache_size` /
  `the rest of the memory reserved for KV Cache`, and the refusal's `available KV cache memory (X GiB)`;
- compute per GPU: the profile run's activation peak (`PyTorch activation peak memory`, `X GiB for peak
  activation`, or V0's `peak_torch_memory` less the weights).

The run's settings come from its log (`non-default args`, the profile lines), its `command` and `settings`
fields: tensor parallel size, max_model_len (also read back from `Maximum concurrency for N tokens per
request`), gpu_memory_utilization, kv_cache_dtype, max_num_seqs, max_num_batched_tokens, kv_cache_memory_bytes.
The card's memory is the exact figure the log or the `gpus` field prints (`total_gpu_memory`, `Free memory on
device (free/total GiB)`, `(23.99 GiB)`, `46068 MiB`); a card named only by its class is not sized, and the
KV term (which is what the budget leaves) is then left out.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vramtui.core.errors import VramtuiError
from vramtui.core.estimate.estimator import Estimate, Settings, estimate
from vramtui.core.estimate.modelinfo import ModelInfo, load_model_info
from vramtui.core.estimate.quant import normalize_quant
from vramtui.core.units import GIB, MIB

CONFIGS = Path(__file__).resolve().parents[2] / "data" / "configs"
# The model each printout names (its `model` field starts with it) -> its published config.json.
MODEL_CONFIGS: tuple[tuple[str, str], ...] = (
    ("meta-llama/Meta-Llama-3-8B-Instruct", "meta-llama--Meta-Llama-3-8B-Instruct.config.json"),
    ("meta-llama/Meta-Llama-3-8B", "meta-llama--Meta-Llama-3-8B.config.json"),
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama--Llama-3.1-8B-Instruct.config.json"),
    # the release's first name for the same model (a local copy named after it)
    ("Meta-Llama-3.1-8B-Instruct", "meta-llama--Llama-3.1-8B-Instruct.config.json"),
    ("Qwen2.5-0.5B", "Qwen--Qwen2.5-0.5B-Instruct.config.json"),
    ("Qwen2.5-Math-1.5B", "Qwen--Qwen2.5-Math-1.5B.config.json"),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "deepseek-ai--DeepSeek-R1-Distill-Qwen-14B.config.json"),
    ("Qwen3-235B-A22B-FP8", "Qwen--Qwen3-235B-A22B-FP8.config.json"),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "Qwen--Qwen3-235B-A22B-Instruct-2507-FP8.config.json"),
    ("Phi-4 (", "microsoft--phi-4.config.json"),
    ("Qwen/Qwen3-1.7B", "Qwen--Qwen3-1.7B.config.json"),
    ("Qwen/Qwen3-0.6B", "Qwen--Qwen3-0.6B.config.json"),
    ("Qwen/Qwen3-8B", "Qwen--Qwen3-8B.config.json"),
    # built on Qwen3-8B-Base (its model card), the shapes unchanged (the vocabulary 267 rows shorter: 4 MiB)
    ("Qwen/Qwen3-Reranker-8B", "Qwen--Qwen3-8B.config.json"),
    # the base and the instruct model share their shapes
    ("Qwen/Qwen2.5-0.5B", "Qwen--Qwen2.5-0.5B-Instruct.config.json"),
    ("Qwen/Qwen3-Next-80B-A3B", "Qwen--Qwen3-Next-80B-A3B.config.json"),
    ("Qwen/Qwen3.6-35B-A3B", "Qwen--Qwen3.6-35B-A3B.config.json"),
    ("openai/gpt-oss-20b", "openai--gpt-oss-20b.config.json"),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "deepseek-ai--DeepSeek-R1-Distill-Qwen-7B.config.json"),
    ("meta-llama/Llama-3.2-1B-Instruct", "meta-llama--Llama-3.2-1B-Instruct.config.json"),
    ("Qwen2-7B-Instruct", "Qwen--Qwen2-7B-Instruct.config.json"),
    ("Qwen/Qwen2-7B-Instruct", "Qwen--Qwen2-7B-Instruct.config.json"),
    ("Qwen/Qwen2.5-7B-Instruct", "Qwen--Qwen2.5-7B-Instruct.config.json"),
    # round 56: a local ModelScope copy (Qwen2___5-7B-Instruct) of the same model
    ("Qwen2.5-7B-Instruct (local ModelScope copy", "Qwen--Qwen2.5-7B-Instruct.config.json"),
    ("openai gpt-oss-120b", "openai--gpt-oss-120b.config.json"),
    ("gpt-oss-120b", "openai--gpt-oss-120b.config.json"),  # a local copy named after it (round 38)
    ("microsoft/Phi-3-mini-4k-instruct", "microsoft--Phi-3-mini-4k-instruct.config.json"),
    ("mistralai/Mistral-7B-Instruct-v0.3", "mistralai--Mistral-7B-Instruct-v0.3.config.json"),
    # the base model's file: the instruct model shares its shapes (no copy of the -it file was found)
    ("google/gemma-4-26B-A4B-it", "google--gemma-4-26B-A4B.config.json"),
    # a fine-tune of Qwen/Qwen3.5-27B, its shapes unchanged
    ("Jackrong/Qwen3.5-27B", "Qwen--Qwen3.5-27B.config.json"),
    ("deepseek-ai/DeepSeek-V4-Flash", "deepseek-ai--DeepSeek-V4-Flash.config.json"),
    # the first release's files: the 2507 one differs in max_position_embeddings and rope_theta only (the
    # runs' logs print their max_model_len), as for the 235B model above
    ("Qwen/Qwen3-30B-A3B-Instruct-2507-FP8", "Qwen--Qwen3-30B-A3B-FP8.config.json"),
    ("Qwen/Qwen3-30B-A3B-FP8", "Qwen--Qwen3-30B-A3B-FP8.config.json"),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", "Qwen--Qwen3-30B-A3B.config.json"),
    ("Qwen/Qwen3-VL-30B-A3B-Instruct", "Qwen--Qwen3-VL-30B-A3B-Instruct.config.json"),
    ("Qwen/Qwen2.5-14B-Instruct", "Qwen--Qwen2.5-14B-Instruct.config.json"),
    ("Qwen/Qwen3-14B", "Qwen--Qwen3-14B.config.json"),
    ("Qwen/Qwen3-32B", "Qwen--Qwen3-32B.config.json"),
    ("Qwen/Qwen2.5-1.5B-Instruct", "Qwen--Qwen2.5-1.5B-Instruct.config.json"),
    ("Qwen/Qwen3-4B-Instruct-2507", "Qwen--Qwen3-4B-Instruct-2507.config.json"),
    # the first release shares the 2507 one's shapes (36 layers, 2560 wide, 32/8 heads, 9728, tied); its
    # max_position_embeddings (40960) and rope_theta differ, and the run prints its max_model_len
    ("Qwen/Qwen3-4B", "Qwen--Qwen3-4B-Instruct-2507.config.json"),
    # a local copy of Qwen/Qwen3.5-27B (round 53: "Qwen3.5-27B from the local directory ..."); the 9B run of
    # the same round has only its text_config here (no vision tower), so it is left out
    ("Qwen3.5-27B from the local directory", "Qwen--Qwen3.5-27B.config.json"),
    # round 59: a local copy of DeepSeek-R1; Neural Magic's FP8 checkpoint and a GPTQ int4 copy of the 7B
    # distill, their shapes the base models' (the log names the method: fp8, gptq_marlin); a local copy of
    # Qwen2.5-7B-Instruct
    ("DeepSeek-R1 (local path", "deepseek-ai--DeepSeek-R1.config.json"),
    ("neuralmagic/Meta-Llama-3-8B-Instruct-FP8", "meta-llama--Meta-Llama-3-8B-Instruct.config.json"),
    ("jakiAJK/DeepSeek-R1-Distill-Qwen-7B_GPTQ-int4", "deepseek-ai--DeepSeek-R1-Distill-Qwen-7B.config.json"),
    ("Qwen2.5-7B-Instruct (local path", "Qwen--Qwen2.5-7B-Instruct.config.json"),
    ("google/gemma-4-31B-it", "google--gemma-4-31B-it.config.json"),
    ("zai-org/GLM-5.1-FP8", "zai-org--GLM-5.1-FP8.config.json"),
    ("nvidia/Gemma-4-26B-A4B-NVFP4", "nvidia--Gemma-4-26B-A4B-NVFP4.config.json"),
    ("intfloat/e5-mistral-7b-instruct", "intfloat--e5-mistral-7b-instruct.config.json"),
)

_N = r"([\d.]+)"
_WEIGHTS = (
    re.compile(rf"Model loading took {_N} ?GiB"),
    re.compile(rf"Loading model weights took {_N} ?GB"),
    re.compile(rf"model weights take\s+{_N} ?GiB"),
)
_KV = (
    re.compile(rf"Available KV cache memory: {_N} ?GiB"),
    re.compile(rf"available_kv_cache_memory\s+{_N} ?GiB"),
    re.compile(rf"kv_cache_size={_N} ?GiB"),
    re.compile(rf"reserved for KV Cache is {_N} ?GiB"),
    re.compile(rf"available KV cache memory \({_N} GiB\)"),
)
_ACTIVATION = (
    re.compile(rf"PyTorch activation peak memory\s+(?:takes )?{_N} ?GiB"),
    re.compile(rf"{_N} GiB for peak activation"),
)
_PEAK_TORCH = re.compile(rf"peak_torch_memory={_N}GiB")
_TOKENS = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
_CARD = (
    re.compile(rf"total_gpu_memory\s*(?:=|\()?\s*{_N} ?GiB"),
    # newer releases name the device: "Free memory on device cuda:0 (9.02/11.63 GiB)" (round 45)
    re.compile(rf"Free memory on device(?: \S+)? \({_N}/{_N} GiB\)"),
)
_GPUS_FIELD = (re.compile(rf"\({_N} GiB"), re.compile(r"\b(\d{4,6}) ?MiB\b"))  # nvidia-smi writes "40960MiB"
_UTIL = (
    re.compile(rf"gpu_memory_utilization[\s=:'(]*{_N}"),
    re.compile(rf"gpu[-_]memory[-_]utilization[= ]+{_N}"),
    re.compile(rf"Desired GPU memory utilization is \({_N}"),
    re.compile(rf"\butil {_N}"),
)
_MAX_LEN = (
    re.compile(r"max_model_len'?[:=]?\s*(\d+)"),
    re.compile(r"--max-model-len[= ]+(\d+)(K?)"),
    re.compile(r"Maximum concurrency for ([\d,]+) tokens per request"),
    re.compile(r"max_seq_len (\d+)"),
)
_TP = (
    re.compile(r"tensor_parallel_size'?[:= ]+\s*(\d+)"),
    re.compile(r"(?:--tensor-parallel-size|-tp)[= ]+(\d+)"),
    re.compile(r"\btensor parallel (\d+)\b"),  # a record's own words
    re.compile(r"(?<![.\w])TP ?=? ?(\d+)"),  # "TP 4", "TP=8" (not a worker's name: Worker_TP0..TP7)
)
# a value vLLM takes (a record's settings may say "kv_cache_dtype not printed": no value)
_KV_DTYPE = re.compile(r"kv_cache_dtype'?[:= ]+\s*'?(auto|fp8\w*|float16|bfloat16|half|int8)\b")
_MAX_SEQS = re.compile(r"max_num_seqs'?[:= ]+\s*(\d+)|--max-num-seqs[= ]+(\d+)")
_BATCHED = re.compile(r"max_num_batched_tokens'?[:= ]+\s*(\d+)|--max-num-batched-tokens[= ]+(\d+)")
_KV_BYTES = re.compile(r"kv_cache_memory_bytes'?[:= ]+\s*(\d+)")
# weights kept in host RAM (`--cpu-offload-gb 8`, the non-default args' 'cpu_offload_gb': 8.0)
_OFFLOAD = re.compile(r"cpu_offload_gb'?[:= ]+\s*([\d.]+)|--cpu-offload-gb[= ]+([\d.]+)")
# the quantization the run asked for (`--quantization bitsandbytes`, its config line's quantization=fp8)
_QUANT = re.compile(r"(?:--quantization[= ]+|\bquantization'?[=:]\s*'?)([a-z][\w-]*)", re.I)
# V0's own lines (its worker and model runner). V0 profiles max_num_batched_tokens, which it sets to
# max(max_model_len, 2048) unless prefill is chunked, with max_num_seqs 256 whatever the card
V0_MAX_SEQS, V0_MIN_BATCHED = 256, 2048
V0_BUILD = 7  # the last minor version whose default engine was V0 (the estimator's `engine_build`)
_V0 = re.compile(r"Loading model weights took|Memory profiling results|GPU blocks:|# GPU blocks")
# "0.10.2 (V1 engine)", "v0.11.0", "vLLM 0.26.0" in the build field; "vLLM API server version 0.9.1" in a log
_VERSION = re.compile(r"(?:^|[\sv(])0\.(\d+)\.\d+")


@dataclass
class VllmRun:
    """One vLLM printout read: what it printed (bytes per GPU) and the settings it ran with."""

    printed: dict[str, int] = field(default_factory=dict)  # term -> bytes on one GPU
    tokens: int | None = None  # GPU KV cache size, tokens
    card: int | None = None  # one card's total memory, bytes
    settings: dict[str, Any] = field(default_factory=dict)
    v0: bool = False
    minor: int | None = None  # the vLLM version's minor number, where the printout names one


def _gib(pattern_list: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in pattern_list:
        if found := pattern.search(text):
            return round(float(found.group(1)) * GIB)
    return None


def _first_int(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        if found := pattern.search(text):
            value = int(found.group(1).replace(",", ""))
            return value * 1024 if found.lastindex == 2 and found.group(2) == "K" else value
    return None


def _either(pattern: re.Pattern[str], text: str) -> int | None:
    found = pattern.search(text)
    return int(next(group for group in found.groups() if group)) if found else None


def _card(case: dict[str, Any], log: str) -> int | None:
    """One card's exact memory: the log's, else an exact figure in the `gpus` field."""
    gpus = [str(gpu) for gpu in case.get("gpus") or []]
    for text in (log, *gpus):  # a field may quote the log's own line (round 45: from the same user's start)
        for pattern in _CARD:
            if found := pattern.search(text):
                return round(float(found.group(found.lastindex or 1)) * GIB)
    for gpu in gpus:
        if found := _GPUS_FIELD[0].search(gpu):
            return round(float(found.group(1)) * GIB)
        if sizes := _GPUS_FIELD[1].findall(gpu):
            # nvidia-smi's free, used and total in one line: the card is the largest (round 41)
            return max(int(size) for size in sizes) * MIB
    return None


def _run_text(case: dict[str, Any]) -> str:
    """The log, the command and the settings field: every place a run's settings are written."""
    hparams = " ".join(f"{key}={value}" for key, value in (case.get("hparams") or {}).items())
    return "\n".join(str(case.get(key) or "") for key in ("log", "command", "settings")) + "\n" + hparams


def read_run(case: dict[str, Any]) -> VllmRun:
    """What one vLLM printout printed and ran with."""
    log, text = case["log"], _run_text(case)
    run = VllmRun(v0=bool(_V0.search(log)), card=_card(case, log))
    if version := _VERSION.search(f"{case.get('build') or ''}\n{log}"):
        run.minor = int(version.group(1))
    for term, patterns in (("weights", _WEIGHTS), ("kv", _KV), ("compute", _ACTIVATION)):
        value = _gib(patterns, log)
        if value is not None:
            run.printed[term] = value
    if "compute" not in run.printed and (peak := _PEAK_TORCH.search(log)) and "weights" in run.printed:
        run.printed["compute"] = round(float(peak.group(1)) * GIB) - run.printed["weights"]
    if found := _TOKENS.search(log):
        run.tokens = int(found.group(1).replace(",", ""))
    util = next((float(m.group(1)) for p in _UTIL if (m := p.search(text))), None)
    kv_dtype = _KV_DTYPE.search(text)
    run.settings = {
        "context": _first_int(_MAX_LEN, text),
        "tp": _first_int(_TP, text) or 1,
        "share": util,
        "kv_dtype": kv_dtype.group(1) if kv_dtype else None,
        "max_seqs": _either(_MAX_SEQS, text),
        "batched": _either(_BATCHED, text),
        "kv_bytes": _either(_KV_BYTES, text),
        "offload_gb": float(found.group(1) or found.group(2)) if (found := _OFFLOAD.search(text)) else 0.0,
        "quant": _in_flight(text),
    }
    return run


def _in_flight(text: str) -> str | None:
    """The quantization the run names, as `estimate --quant` takes it (None for one it does not know)."""
    # the first that names one: vLLM's args print `quantization=None` before its engine line names the
    # method it chose from the checkpoint (round 55: "awq_marlin")
    named = next((m for m in _QUANT.findall(text) if m.lower() != "none"), None)
    if named is None:
        return None
    try:
        return normalize_quant(named)
    except VramtuiError:
        return None


def config_for(case: dict[str, Any]) -> Path:
    """The published config.json of the printout's model."""
    model = case.get("model") or ""
    for name, filename in MODEL_CONFIGS:
        if model.startswith(name):
            return CONFIGS / filename
    raise VramtuiError(f"no config.json found for {model.split(' (')[0] or 'an unnamed model'}")


@functools.cache
def _info(path: Path) -> ModelInfo:
    return load_model_info(path)


def settings_of(run: VllmRun, info: ModelInfo) -> Settings:
    """The estimator's settings for the run, as `vramtui estimate --backend vllm` takes them."""
    given = run.settings
    context = given["context"]
    batched, max_seqs = given["batched"], given["max_seqs"]
    if run.v0:  # V0's own defaults (its EngineArgs), not today's V1 ones the estimator takes
        batched = batched or max(context or info.max_context or 0, V0_MIN_BATCHED)
        max_seqs = max_seqs or V0_MAX_SEQS
    tp = given["tp"]
    card = run.card or 24 * GIB
    # a method named on a checkpoint that carries none is quantization in flight (`--quant` to estimate)
    quant = given["quant"] if info.quant is None and info.unknown_quant is None else None
    return Settings(
        backend="vllm",
        context=context,
        parallel=max_seqs,
        batch=batched,
        kv_dtype=given["kv_dtype"],
        device_bytes=card,
        gpus=(card,) * tp if tp > 1 else (),
        safety=given["share"],
        tensor_parallel_size=tp,
        kv_cache_memory=given["kv_bytes"],
        cpu_offload_gb=given["offload_gb"],
        quant=quant,
        engine_build=V0_BUILD if run.v0 else run.minor,
    )


def estimated(est: Estimate, term: str) -> int:
    """The estimate's figure for one GPU (the first rank under tensor parallelism)."""
    part = {"weights": "weights", "kv": "kv_cache", "compute": "compute"}[term]
    return est.bill.get(part, 0)  # type: ignore[arg-type]


def score(case: dict[str, Any], scored: Any, term_type: Any, terms: tuple[str, ...]) -> Any:
    """Each printed term of a vLLM printout beside the estimate for its model and settings."""
    run = read_run(case)
    try:
        info = _info(config_for(case))
    except VramtuiError as error:
        scored.left_out = dict.fromkeys(terms, str(error))
        return scored
    est = estimate(info, settings_of(run, info))
    for term in terms:
        if term not in run.printed:
            scored.left_out[term] = f"no {term} figure printed"
        elif term == "kv" and run.card is None and not run.settings["kv_bytes"]:
            scored.left_out[term] = "the card's memory is not printed"
        else:
            scored.terms.append(term_type(case["id"], term, "GPU0", estimated(est, term), run.printed[term]))
    return scored
