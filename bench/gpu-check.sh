#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU (CUDA at /usr/local/cuda),
#   1. build a Release tree with the CUDA module for this GPU's architecture,
#   2. run the backend conformance suite with the GPU as the backend under test,
#   3. check hybrid inference: the hybrid_* tests, and greedy generation with the dense blocks,
#      KV cache and hot FFN neurons on the GPU at VRAM budgets of 100% and 40% of the model
#      against CPU-only generation (the same text is expected),
#   4. run pi-bench CPU-only and at those two budgets (sparse mode), in one run.
# Each step ends with one line "<step>: run, ok", "<step>: run, FAILED" or "<step>: absent
# (<why>)"; a summary repeats them. The script fails when a step that ran failed, or when the
# GPU itself is not usable.
#
#   bench/gpu-check.sh [BUILD_DIR]          (default: build-gpucheck)
#
# Environment:
#   PI_JOBS                         build parallelism (default: nproc)
#   POWERINFER_CUDA_ARCHITECTURES   CUDA architectures to build (default: this GPU's, from
#                                   nvidia-smi; else the project's list)
#   PI_GPU_CHECK_MODEL              model for steps 3 and 4 (default: a synthetic F16 model made
#                                   by pi-make-model with the layers of a 1.1B Llama, over
#                                   the vocabulary PI_GPU_CHECK_VOCAB names)
#   PI_GPU_CHECK_VOCAB              vocabulary-only GGUF of that model (default: the fixture's,
#                                   tests/data/relu-llama-kjv.vocab.gguf, 4096 tokens)
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
build=$(realpath -m "${1:-build-gpucheck}")
jobs=${PI_JOBS:-$(nproc)}
summary=()
failed=0

section() { printf '\n======== %s ========\n' "$*"; }
# report STEP STATUS: record a step's outcome; STATUS is "run, ok", "run, FAILED" or "absent (...)".
report() {
    printf '%s: %s\n' "$1" "$2"
    summary+=("$1: $2")
    [[ $2 == "run, FAILED" ]] && failed=1
    return 0
}
finish() {
    section "Summary"
    printf '%s\n' "${summary[@]}"
    exit "$failed"
}
has_target() { ninja -C "$build" -t query "$1" >/dev/null 2>&1; }

# ---------------------------------------------------------------- 1. build
section "Build ($build)"
archs=${POWERINFER_CUDA_ARCHITECTURES:-}
if [[ -z $archs ]] && command -v nvidia-smi >/dev/null; then
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
    [[ $cap =~ ^[0-9]+$ ]] && archs="${cap}-real"
fi
arch_args=()
[[ -n $archs ]] && arch_args=("-DPOWERINFER_CUDA_ARCHITECTURES=$archs")
start=$SECONDS
if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPOWERINFER_CUDA=ON \
    -DPOWERINFER_HIP=OFF "${arch_args[@]}"; then
    report build "run, FAILED"
    finish
fi
targets=(conformance conformance_gpu_math conformance_module_loader powerinfer-cuda)
for t in powerinfer-cli pi-make-model pi-bench; do
    has_target "$t" && targets+=("$t")
done
mapfile -t hybrid_tests < <(ctest --test-dir "$build" -N -R '^hybrid_' | sed -n 's/^ *Test *#[0-9]*: //p')
for t in "${hybrid_tests[@]}"; do
    has_target "$t" && targets+=("$t")
done
if cmake --build "$build" -j "$jobs" --target "${targets[@]}"; then
    echo "built ${targets[*]} in $((SECONDS - start)) s"
    report build "run, ok"
else
    report build "run, FAILED"
    finish
fi
export POWERINFER_BACKEND_PATH=$build/lib

# ---------------------------------------------------------------- 2. conformance
section "Conformance: every vtable op on the GPU against the CPU scalar reference"
out=$("$build/tests/conformance/conformance" --backend=cuda --verbose 2>&1)
rc=$?
printf '%s\n' "$out"
if grep -q '^SKIPPED:' <<<"$out"; then
    echo "the CUDA backend is not usable on this machine"
    report "conformance (cuda)" "run, FAILED"
    finish
fi
if ((rc == 0)); then
    report "conformance (cuda)" "run, ok"
else
    report "conformance (cuda)" "run, FAILED"
fi
if ctest --test-dir "$build" -R '^conformance_(cpu|gpusim|gpu_math|module_loader)$' \
    --output-on-failure; then
    report "conformance (cpu, gpusim, gpu_math, module_loader)" "run, ok"
else
    report "conformance (cpu, gpusim, gpu_math, module_loader)" "run, FAILED"
fi

# ---------------------------------------------------------------- 3. hybrid equality
section "Hybrid inference"
if ((${#hybrid_tests[@]} > 0)); then
    if ctest --test-dir "$build" -R '^hybrid_' --output-on-failure; then
        report "hybrid tests (${hybrid_tests[*]})" "run, ok"
    else
        report "hybrid tests (${hybrid_tests[*]})" "run, FAILED"
    fi
else
    report "hybrid tests" "absent (no CTest test named hybrid_*)"
fi

model=${PI_GPU_CHECK_MODEL:-}
if [[ -z $model ]] && [[ -x $build/tools/pi-make-model/pi-make-model ]]; then
    vocab=${PI_GPU_CHECK_VOCAB:-$PWD/tests/data/relu-llama-kjv.vocab.gguf}
    model=$build/gpu-check-model.gguf
    if [[ ! -f $model ]] && [[ -f $vocab ]]; then
        "$build/tools/pi-make-model/pi-make-model" -o "$model" --vocab "$vocab" --f16 \
            --n-embd 2048 --n-layer 22 --n-head 32 --n-head-kv 4 --n-ff 5632 --seed 1 || rm -f "$model"
    fi
fi
budget_full=""
budget_part=""
if [[ -n $model && -f $model ]]; then
    # GiB: the whole file (every hot neuron fits) and 40% of it.
    read -r budget_full budget_part < <(awk -v b="$(stat -c %s "$model")" \
        'BEGIN { g = b / 1073741824; printf "%.3f %.3f\n", g * 1.05, g * 0.4 }')
    echo "model $model; VRAM budgets ${budget_full} GiB (100%) and ${budget_part} GiB (40%)"
fi

cli=$build/tools/powerinfer/powerinfer
if [[ -z $budget_full ]]; then
    report "hybrid generation" "absent (no model: set PI_GPU_CHECK_MODEL or provide the vocabulary)"
elif [[ ! -x $cli ]]; then
    report "hybrid generation" "absent (the powerinfer CLI was not built)"
else
    gen() { "$cli" -m "$model" -p "Once upon a time" -n 32 --temp 0 -s 1 -c 256 "$@"; }
    if ! want=$(gen --offload-device none 2>/dev/null); then
        report "hybrid generation" "run, FAILED"
    else
        for budget in "$budget_full" "$budget_part"; do
            got=$(gen --offload-device cuda --vram-budget "$budget" --reset-gpu-index 2>"$build/gen.err")
            rc=$?
            cat "$build/gen.err"
            if ((rc == 0)) && grep -q ' on cuda' "$build/gen.err" && [[ $got == "$want" ]]; then
                report "hybrid generation at $budget GiB" "run, ok"
            else
                printf 'CPU only: %s\nwith GPU: %s\n' "$want" "$got"
                report "hybrid generation at $budget GiB" "run, FAILED"
            fi
        done
    fi
fi

# ---------------------------------------------------------------- 4. pi-bench
section "pi-bench at VRAM budgets of 100% and 40%"
bench=$build/tools/pi-bench/pi-bench
if [[ -z $budget_full ]]; then
    report "pi-bench" "absent (no model)"
elif [[ ! -x $bench ]]; then
    report "pi-bench" "absent (pi-bench was not built)"
elif ! "$bench" --help 2>&1 | grep -q -- '--vram-budget'; then
    report "pi-bench" "absent (pi-bench has no --vram-budget option)"
else
    if "$bench" -m "$model" -p 64 -n 32 -r 3 -t "$(nproc)" --modes sparse --offload-device none; then
        report "pi-bench CPU only" "run, ok"
    else
        report "pi-bench CPU only" "run, FAILED"
    fi
    for budget in "$budget_full" "$budget_part"; do
        if "$bench" -m "$model" -p 64 -n 32 -r 3 -t "$(nproc)" --modes sparse --offload-device cuda \
            --vram-budget "$budget"; then
            report "pi-bench at $budget GiB" "run, ok"
        else
            report "pi-bench at $budget GiB" "run, FAILED"
        fi
    done
fi

finish
