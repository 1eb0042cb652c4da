#!/usr/bin/env bash
# From a fresh Debian 12 checkout to generated text: installs the build dependencies, builds
# (Release) and generates text with the repository's own really-trained model, a small ReLU-Llama
# trained on the King James Bible (tests/data/relu-llama-kjv, docs/fixture.md), as a Q4_0
# PowerInfer file with its trained predictor. Nothing outside the repository is needed.
#
#   scripts/quickstart.sh [PROMPT]
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
prompt=${1:-In the beginning God created}
model=tests/data/relu-llama-kjv.q4_0.powerinfer.gguf

scripts/bootstrap-debian.sh
cmake --preset default
cmake --build --preset default -j "${PI_JOBS:-$(nproc)}"
build/tools/powerinfer/powerinfer -m "$model" -p "$prompt" -n 64 --temp 0.7 -s 42
