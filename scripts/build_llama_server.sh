#!/usr/bin/env bash
# Build llama-server (and llama-fit-params) from the llama.cpp that llama-cpp-python vendors, once per
# version and build flags, into the user cache dir. Prints the binary's path last; does nothing when the cached
# binary is there and runs.
#   scripts/build_llama_server.sh [--path] [LLAMA_CPP_PYTHON_VERSION]
# --path only prints where the binary of this version and CPU lives (or would), and builds nothing.
set -euo pipefail

path_only=0
if [[ "${1:-}" == "--path" ]]; then
    path_only=1
    shift
fi
version="${1:-${LLAMA_CPP_PYTHON_VERSION:-0.3.36}}"
say() { echo "build_llama_server: $*" >&2; }

# A portable build (AVX2/FMA/F16C, no AMX, no -march=native), as scripts/install_llama_cpp_python.sh does:
# a native build on a VM that reports AMX but traps its instructions dies of SIGILL on every quantized
# matmul, and a native binary restored from a cache on another CPU could too. The cache is keyed by
# these flags, so a change of flags builds afresh.
FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON)
sha() { if command -v sha256sum >/dev/null; then sha256sum; else shasum -a 256; fi | cut -c1-12; }

root="${XDG_CACHE_HOME:-$HOME/.cache}/vramtui/llama-server"
key="${version}-portable-$(printf '%s ' "${FLAGS[@]}" "$(uname -m)" | sha)"
dest="$root/$key"
bin="$dest/bin/llama-server"
if ((path_only)); then
    echo "$bin"
    exit 0
fi

runs() { [[ -x "$1" ]] && timeout 60 "$1" --version >/dev/null 2>&1; }

if runs "$bin"; then
    say "cached: $("$bin" --version 2>&1 | grep -m1 -i version || true)"
    echo "$bin"
    exit 0
fi

python="${PYTHON:-python3}"
command -v "$python" >/dev/null || python=python
# cmake and ninja come from PyPI when the machine lacks them (pip is the one registry we can reach).
if ! command -v cmake >/dev/null || ! command -v ninja >/dev/null; then
    tools="$root/tools"
    say "installing cmake and ninja from PyPI into $tools"
    "$python" -m pip install --quiet --target "$tools" cmake ninja >&2
    export PATH="$tools/bin:$PATH" PYTHONPATH="$tools${PYTHONPATH:+:$PYTHONPATH}"
fi

# The sdist is kept: a rebuild for another CPU does not download it again.
sdist_dir="$root/sdist"
sdist="$sdist_dir/llama_cpp_python-$version.tar.gz"
mkdir -p "$sdist_dir"
if [[ ! -s "$sdist" ]]; then
    say "downloading the llama-cpp-python $version sdist"
    "$python" -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$sdist_dir" >&2
fi
[[ -s "$sdist" ]] || { say "pip did not leave $sdist"; exit 1; }

# The build folder survives a failed or interrupted run, so the next run resumes where Ninja stopped.
work="$root/build-$key"
src="$work/llama_cpp_python-$version/vendor/llama.cpp"
if [[ ! -f "$src/CMakeLists.txt" ]]; then
    mkdir -p "$work"
    tar -xzf "$sdist" -C "$work"
fi
[[ -f "$src/CMakeLists.txt" ]] || { say "no vendor/llama.cpp in $sdist"; exit 1; }

jobs="$(nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2)"
start=$SECONDS
# Static libraries make the binary self-contained, so it can be copied out of the build folder.
# Without the two UI flags the build tries to download the web UI (there is no network but PyPI).
cmake -S "$src" -B "$work/build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF "${FLAGS[@]}" \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DBUILD_SHARED_LIBS=OFF >&2
cmake --build "$work/build" --target llama-server llama-fit-params -j"$jobs" >&2
say "built in $((SECONDS - start)) s with -j$jobs"

# Install into a staging folder and rename it into place, so a half-copied binary is never "cached".
stage="$dest.tmp.$$"
rm -rf "$stage"
mkdir -p "$stage/bin"
cp "$work/build/bin/llama-server" "$work/build/bin/llama-fit-params" "$stage/bin/"
runs "$stage/bin/llama-server" || { say "the built llama-server does not run --version"; exit 1; }
rm -rf "$dest"
mv "$stage" "$dest"
rm -rf "$work"
echo "$bin"
