#!/usr/bin/env bash
# From a fresh Debian 12 checkout to generated text: installs the build dependencies, builds
# (Release), writes a tiny synthetic PowerInfer model and generates text from it.
#
#   scripts/quickstart.sh [PROMPT]
#
# PI_TEST_DATA names the folder holding ggml-vocab-llama-spm.gguf (default: ../shared/data).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
prompt=${1:-Once upon a time}
vocab=${PI_TEST_DATA:-$PWD/../shared/data}/ggml-vocab-llama-spm.gguf

scripts/bootstrap-debian.sh
cmake --preset default
cmake --build --preset default -j "${PI_JOBS:-$(nproc)}"
build/tools/pi-make-model/pi-make-model -o build/tiny.powerinfer.gguf --vocab "$vocab" \
    --n-embd 256 --n-layer 4 --n-head 8 --n-ff 688 --seed 1
build/tools/powerinfer/powerinfer -m build/tiny.powerinfer.gguf -p "$prompt" -n 48 --temp 0.7 -s 42
