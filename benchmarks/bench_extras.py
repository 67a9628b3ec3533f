"""The extras' estimate (core/estimate/extras.py) against what a real llama-server prints, per piece.

A tiny Gemma 3 style vision projector in three shapes (flash attention on and off) and a draft model,
CPU only, through the llama-server that scripts/build_llama_server.sh builds (or $VRAMTUI_LLAMA_SERVER).
Goals (issue 15): KV <= 1%, weights <= 3%. Run: python benchmarks/bench_extras.py
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vramtui.core.demo.tinygguf import TinyModelSpec, write_tiny_gguf  # noqa: E402
from vramtui.core.demo.tinymmproj import TinyProjectorSpec, write_tiny_mmproj  # noqa: E402
from vramtui.core.estimate.estimator import Settings, estimate  # noqa: E402
from vramtui.core.estimate.modelinfo import load_model_info  # noqa: E402
from vramtui.core.launch.procs import free_port  # noqa: E402

MIB = 1 << 20
PROJECTORS = {
    "224px 128w": TinyProjectorSpec(),
    "448px 256w": TinyProjectorSpec(image_size=448, n_embd=256, n_ff=1024, n_head=4),
    "336px 192w 3L": TinyProjectorSpec(image_size=336, n_embd=192, n_ff=768, n_head=6, n_layer=3),
}
DRAFT = TinyModelSpec(n_layer=2, n_embd=256, n_head=4, n_head_kv=4, n_ff=512, seed=3)


def _binary() -> str:
    named = os.environ.get("VRAMTUI_LLAMA_SERVER")
    if named:
        return named
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build_llama_server.sh"), "--path"], capture_output=True, text=True
    )
    return done.stdout.strip()


def _log(binary: str, args: list[str]) -> str:
    cmd = [binary, "--host", "127.0.0.1", "--port", str(free_port()), "-lv", "4", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, deadline = [], time.monotonic() + 120
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if "listening on http://" in line or time.monotonic() > deadline:
            break
    proc.terminate()
    try:  # keep reading: a server blocked on a full pipe never gets to exit
        proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
    return "".join(lines)


def _row(label: str, piece: str, estimated: int, printed_mib: float) -> None:
    miss = (estimated / MIB - printed_mib) / printed_mib if printed_mib else 0.0
    print(f"{label:<31}{piece:<10}{estimated / MIB:>10.2f}{printed_mib:>10.2f}{miss:>+9.1%}")


def main() -> int:
    binary = _binary()
    folder = Path(tempfile.mkdtemp(prefix="bench-extras-"))
    model = write_tiny_gguf(folder / "model.gguf")
    info = load_model_info(model)
    print(f"{'case':<31}{'piece':<10}{'est MiB':>10}{'printed':>10}{'miss':>9}")
    for name, spec in PROJECTORS.items():
        mmproj = write_tiny_mmproj(folder / f"mm-{len(name)}.gguf", spec)
        for flash in ("on", "off"):
            log = _log(binary, ["-m", str(model), "--mmproj", str(mmproj), "-c", "2048", "-fa", flash])
            weights = float(re.search(r"load_hparams: model size:\s+([\d.]+) MiB", log).group(1))
            compute = float(
                re.search(r"reserve_compute_meta:\s+CPU compute buffer size =\s+([\d.]+)", log).group(1)
            )
            est = estimate(
                info, Settings(context=2048, on_gpu=False, flash_attn=flash == "on", mmproj=str(mmproj))
            )
            bill = est.extras[0]["bill"]["host"]
            _row(f"mmproj {name} -fa {flash}", "weights", bill["weights_bytes"], weights)
            _row(f"mmproj {name} -fa {flash}", "compute", bill["compute_buffer_bytes"], compute)
    draft = write_tiny_gguf(folder / "draft.gguf", DRAFT)
    log = _log(binary, ["-m", str(model), "--model-draft", str(draft), "-c", "2048"]).split(
        "loading draft model", 1
    )[1]
    est = estimate(info, Settings(context=2048, on_gpu=False, model_draft=str(draft)))
    bill = est.extras[0]["bill"]["host"]
    figures = {
        "weights": float(re.search(r"CPU_Mapped model buffer size =\s+([\d.]+)", log).group(1)),
        "kv_cache": float(re.search(r"CPU KV buffer size =\s+([\d.]+)", log).group(1)),
        "compute": float(re.search(r"CPU compute buffer size =\s+([\d.]+)", log).group(1)),
    }
    keys = {"weights": "weights_bytes", "kv_cache": "kv_cache_bytes", "compute": "compute_buffer_bytes"}
    for piece, printed in figures.items():
        _row("draft 2L 256w -c 2048", piece, bill[keys[piece]], printed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
