#!/usr/bin/env bash
# Configures, builds and tests one CMake preset: the one command for local runs and CI.
#
#   scripts/test.sh [PRESET [CMAKE_ARGS...]]
#
# PRESET is a preset of CMakePresets.json (default, debug, asan; default: default). CMAKE_ARGS go
# to the configure step. When the project's .venv exists, its Python runs the Python tests.
# PI_JOBS sets the parallelism (default: the number of CPUs).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
preset=${1:-default}
shift $(($# > 0 ? 1 : 0))
jobs=${PI_JOBS:-$(nproc)}

configure_args=()
if [[ -x .venv/bin/python ]]; then
    configure_args+=("-DPOWERINFER_TEST_PYTHON=$PWD/.venv/bin/python")
fi

cmake --preset "$preset" "${configure_args[@]}" "$@"
cmake --build --preset "$preset" -j "$jobs"
ctest --preset "$preset" -j "$jobs"
