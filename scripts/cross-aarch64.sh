#!/usr/bin/env bash
# Cross-builds libpowerinfer for AArch64 Linux (cmake/toolchains/aarch64-linux-gnu.cmake) and runs
# the focused test subset of docs/arm64.md under qemu-aarch64 -cpu max, the NEON kernel levels
# each forced with POWERINFER_CPU_KERNELS. Only the tests' targets and the tools they run are
# built: no CUDA/HIP, no Python binding, no samples.
#
#   scripts/cross-aarch64.sh [build-dir]   (default build-aarch64)
#   JOBS=N (default 2), THREADING=tbb|pool (default tbb)
#
# Needs g++-aarch64-linux-gnu, qemu-user and libtbb-dev:arm64 (docs/arm64.md); the NumPy oracle
# runs on the host with POWERINFER_TEST_PYTHON (default: .venv/bin/python, else python3).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-aarch64}
jobs=${JOBS:-2}
python=${POWERINFER_TEST_PYTHON:-}
if [[ -z $python && -x $root/.venv/bin/python ]]; then python=$root/.venv/bin/python; fi
if [[ -z $python ]]; then python=$(command -v python3 || true); fi

for tool in aarch64-linux-gnu-g++ qemu-aarch64 taskset; do
  command -v "$tool" > /dev/null || { echo "cross-aarch64.sh: $tool not found (docs/arm64.md)" >&2; exit 1; }
done
[[ ${THREADING:-tbb} == pool || -f /usr/lib/aarch64-linux-gnu/cmake/TBB/TBBConfig.cmake ]] ||
  { echo "cross-aarch64.sh: libtbb-dev:arm64 is not installed (docs/arm64.md)" >&2; exit 1; }

cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE=Release -DPOWERINFER_CUDA=OFF -DPOWERINFER_HIP=OFF \
  -DPOWERINFER_THREADING="${THREADING:-tbb}" \
  -DPOWERINFER_BUILD_SAMPLES=OFF ${python:+-DPOWERINFER_TEST_PYTHON="$python"}
cmake --build "$build" -j "$jobs" --target \
  test_backend conformance powerinfer-cli pi-make-model dump_logits

# The kernel tests cover every level the (emulated) CPU runs by themselves; the model-level tests
# run on AUTO's choice, so they run once per forced level.
ctest --test-dir "$build" --output-on-failure -R '^(test_backend|cpu_simd_symbols)$'
for level in neon neon_dotprod neon_fp16; do
  echo "== POWERINFER_CPU_KERNELS=$level"
  POWERINFER_CPU_KERNELS=$level ctest --test-dir "$build" --output-on-failure \
    -R '^(conformance_cpu|tools_greedy_.*|reference_oracle)$'
done
