#!/usr/bin/env bash
# Build (once) and install llama-cpp-python for the test machines, cached by version and build flags.
#
# Why not the plain `pip install` the README shows users: llama.cpp built with -march=native uses the AMX
# tile instructions wherever the CPU reports them, and on the virtual machines we test on (CPUID says
# amx_tile/amx_int8 but the hypervisor does not enable AMX state) every quantized matmul dies of SIGILL
# ("trap invalid opcode ... tileloadd" in libggml-cpu). A portable build (AVX2/FMA/F16C, no AMX) runs
# everywhere. pip's own wheel cache ignores CMAKE_ARGS, so the wheel is cached here, keyed by the flags.
set -euo pipefail
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
KEY="$(printf '%s %s' "$VERSION" "$FLAGS" | sha256sum | cut -c1-12)"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/vramtui/wheels/llama-cpp-python-$VERSION-$KEY"
if ! ls "$CACHE"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  echo "building llama-cpp-python $VERSION ($FLAGS) into $CACHE: about 10 minutes on 2 cores" >&2
  tmp="$(mktemp -d)"
  CMAKE_ARGS="$FLAGS" pip wheel --no-deps --no-cache-dir --no-binary llama-cpp-python \
    "llama-cpp-python==$VERSION" -w "$tmp"
  mkdir -p "$CACHE"
  mv "$tmp"/llama_cpp_python-*.whl "$CACHE"/
  rm -rf "$tmp"
fi
wheel="$(ls "$CACHE"/llama_cpp_python-*.whl | head -n 1)"
# --force-reinstall --no-deps: replace a native build pip may have installed from its own cache.
pip install --no-deps --force-reinstall "$wheel"
pip install "llama-cpp-python[server]==$VERSION"  # its dependencies (the build above satisfies the package)
echo "$wheel"
