#!/usr/bin/env bash
# Configures, builds and tests one CMake preset: the one command for local runs and CI.
#
#   scripts/test.sh [PRESET [CMAKE_ARGS...]]
#
# PRESET is a preset of CMakePresets.json (default, debug, asan, tsan; default: default; tsan
# builds and runs only the `threads` tests, docs/sanitizers.md). CMAKE_ARGS go
# to the configure step. The Python tests (NumPy oracle, gguf cross-check) run in the project's
# .venv, created here with numpy, gguf, pytest, openai and selenium from PyPI when it is absent.
# PI_JOBS sets the parallelism (default: the number of CPUs).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
preset=${1:-default}
shift $(($# > 0 ? 1 : 0))
jobs=${PI_JOBS:-$(nproc)}

if [[ ! -x .venv/bin/python ]]; then
    python3 -m venv .venv
    .venv/bin/pip install -q numpy gguf pytest openai selenium
fi
configure_args=("-DPOWERINFER_TEST_PYTHON=$PWD/.venv/bin/python")

cmake --preset "$preset" "${configure_args[@]}" "$@"
cmake --build --preset "$preset" -j "$jobs"
ctest --preset "$preset" -j "$jobs"
