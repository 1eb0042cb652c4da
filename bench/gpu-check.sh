#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU (CUDA at /usr/local/cuda),
#   1. build a Release tree with the CUDA module for this GPU's architecture,
#   2. run the backend conformance suite with the GPU as the backend under test (version 5's
#      transfer stream included), print which GEMM the module chose for prompt products
#      (cuBLAS, or its own tiled kernels and why) and run the dense product cases with that
#      choice and with POWERINFER_GPU_BLAS=0,
#   3. check hybrid inference: the hybrid_* tests, and greedy generation with the dense blocks,
#      KV cache and 0%, 25%, 50% and 100% of the FFN on the GPU against CPU-only generation
#      (the same text is expected) on a synthetic model with 7B-shaped layers,
#   4. run pi-bench CPU-only and at those four budgets (sparse mode, 512-token prompts, CPU
#      threads = physical cores; full offload once more with POWERINFER_GPU_GRAPHS=0, decode
#      kernel by kernel against decode as graphs), and summarise it against the issue's targets: hybrid decode at
#      50% of the FFN >= 3x CPU-only, a 512-token prompt all on the GPU >= 20x CPU-only, full
#      offload decode >= 60% of the GPU's bandwidth for the bytes a sparse token reads (with
#      PI_GPU_BANDWIDTH_GBS), and what crosses the bus per token and who waited (docs/hybrid.md).
# Each step ends with one line "<step>: run, ok", "<step>: run, FAILED" or "<step>: absent
# (<why>)"; a summary repeats them. The script fails when a step that ran failed, or when the
# GPU itself is not usable. The targets are reported, not enforced.
#
#   bench/gpu-check.sh [BUILD_DIR]          (default: build-gpucheck)
#
# Environment:
#   PI_JOBS                         build parallelism (default: nproc)
#   POWERINFER_CUDA_ARCHITECTURES   CUDA architectures to build (default: this GPU's, from
#                                   nvidia-smi; else the project's list)
#   PI_GPU_CHECK_MODEL              model for steps 3 and 4 (default: a synthetic F16 sparse model
#                                   made by pi-make-model with Llama-7B layers, n_embd 4096, n_ff
#                                   11008, 32 heads, over the vocabulary PI_GPU_CHECK_VOCAB names)
#   PI_GPU_CHECK_LAYERS             layers of that model (default 8, about 3.4 GB, so that the
#                                   whole check fits in ten minutes; 32 for the full 7B)
#   PI_GPU_CHECK_VOCAB              vocabulary-only GGUF of that model (default: the fixture's,
#                                   tests/data/relu-llama-kjv.vocab.gguf, 4096 tokens)
#   PI_GPU_CHECK_THREADS            CPU threads (default: physical cores, from lscpu)
#   PI_GPU_BANDWIDTH_GBS            the GPU's memory bandwidth in GB/s, for the bandwidth target
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
targets=(conformance conformance_gpu_math conformance_module_loader conformance_gpu_blas_loader
    powerinfer-cuda)
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
gemm=$(sed -n 's/^conformance: prompt products (more than 16 tokens) take //p' <<<"$out")
echo "prompt GEMM chosen by the module: ${gemm:-not reported}"
for blas in 1 0; do
    if POWERINFER_GPU_BLAS=$blas "$build/tests/conformance/conformance" --backend=cuda --verbose \
        --test-case='mul_mat matches*'; then
        report "prompt conformance (cuda, POWERINFER_GPU_BLAS=$blas)" "run, ok"
    else
        report "prompt conformance (cuda, POWERINFER_GPU_BLAS=$blas)" "run, FAILED"
    fi
done
if ctest --test-dir "$build" \
    -R '^conformance_(cpu|gpusim|gpu_math|module_loader|module_loader_blas_off|gpu_blas_loader)$' \
    --output-on-failure; then
    report "conformance (cpu, gpusim, gpu_math, module_loader, gpu_blas_loader)" "run, ok"
else
    report "conformance (cpu, gpusim, gpu_math, module_loader, gpu_blas_loader)" "run, FAILED"
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

threads=${PI_GPU_CHECK_THREADS:-}
if [[ -z $threads ]] && command -v lscpu >/dev/null; then
    threads=$(lscpu -p=core,socket 2>/dev/null | grep -v '^#' | sort -u | wc -l)
fi
[[ $threads =~ ^[1-9][0-9]*$ ]] || threads=$(nproc)
echo "CPU threads: $threads"

model=${PI_GPU_CHECK_MODEL:-}
if [[ -z $model ]] && [[ -x $build/tools/pi-make-model/pi-make-model ]]; then
    vocab=${PI_GPU_CHECK_VOCAB:-$PWD/tests/data/relu-llama-kjv.vocab.gguf}
    layers=${PI_GPU_CHECK_LAYERS:-8}
    model=$build/gpu-check-7b-${layers}l.gguf
    if [[ ! -f $model ]] && [[ -f $vocab ]]; then
        start=$SECONDS
        "$build/tools/pi-make-model/pi-make-model" -o "$model" --vocab "$vocab" --f16 --sparse \
            --n-embd 4096 --n-layer "$layers" --n-head 32 --n-ff 11008 --seed 1 || rm -f "$model"
        echo "made $model in $((SECONDS - start)) s"
    fi
fi

# VRAM budgets in GiB for 0, 25, 50 and 100% of the FFN: everything but the FFN (the file less
# its F16 up, gate and down_t rows and the token embedding, which stays on the host), the KV
# cache of the runs below and the device's scratch for 512-token batches (the activations of
# lib/engine/arena.cpp with every neuron of a layer hot) with 8 MiB for alignment, plus that
# share of the FFN. The planner reports the share it placed (pi-bench's hot_fraction).
fractions=(0 25 50 100)
budgets=()
n_ctx=600 # a 512-token prompt and the generated tokens
if [[ -n $model && -f $model ]]; then
    info=$("$build/tools/pi-bench/pi-bench" -m "$model" -p 0 -n 1 -r 1 --warmup 0 --modes sparse \
        --no-bandwidth -t "$threads" --offload-device none --json 2>/dev/null |
        python3 -c 'import json,sys; m=json.load(sys.stdin)["runs"][0]["model"]; print(m["n_layer"], m["n_embd"], m["n_ff"], m["n_vocab"], m["n_head"], m["n_head_kv"], m["file_size"])' 2>/dev/null)
    if read -r L d ff V nh nkv size <<<"$info" && [[ -n ${size:-} ]]; then
        for f in "${fractions[@]}"; do
            budgets+=("$(awk -v L="$L" -v d="$d" -v ff="$ff" -v V="$V" -v nh="$nh" -v nkv="$nkv" \
                -v size="$size" -v f="$f" -v ctx="$n_ctx" 'BEGIN {
                    ffn = L * 3 * d * ff * 2; embd = V * d * 2
                    kv = 2 * L * ctx * d / nh * nkv * 2 + L * ctx * 4
                    rank = 2 * ((d / 16 > 8 ? int(d / 16) : 8) + 1)
                    scratch = 4 * 512 * (8 * d + 5 * ff + rank + L) + 4 * 16 * (V + d)
                    rest = size - ffn - embd + kv + scratch + 8 * 1048576
                    printf "%.3f", (rest + ffn * f / 100) / 1073741824 }')")
        done
        echo "model $model (n_layer $L); VRAM budgets ${budgets[*]} GiB for ${fractions[*]}% of the FFN"
    else
        echo "could not read the model's shape with pi-bench and python3"
    fi
fi

cli=$build/tools/powerinfer/powerinfer
if ((${#budgets[@]} == 0)); then
    report "hybrid generation" "absent (no model: set PI_GPU_CHECK_MODEL or provide the vocabulary; python3 reads pi-bench's JSON)"
elif [[ ! -x $cli ]]; then
    report "hybrid generation" "absent (the powerinfer CLI was not built)"
else
    gen() { "$cli" -m "$model" -p "Once upon a time" -n 32 --temp 0 -s 1 -c 256 -t "$threads" "$@"; }
    if ! want=$(gen --offload-device none 2>/dev/null); then
        report "hybrid generation" "run, FAILED"
    else
        for k in "${!budgets[@]}"; do
            budget=${budgets[$k]}
            got=$(gen --offload-device cuda --vram-budget "$budget" --reset-gpu-index 2>"$build/gen.err")
            rc=$?
            cat "$build/gen.err"
            if ((rc == 0)) && grep -q ' on cuda' "$build/gen.err" && [[ $got == "$want" ]]; then
                report "hybrid generation at ${fractions[$k]}% of the FFN ($budget GiB)" "run, ok"
            else
                printf 'CPU only: %s\nwith GPU: %s\n' "$want" "$got"
                report "hybrid generation at ${fractions[$k]}% of the FFN ($budget GiB)" "run, FAILED"
            fi
        done
    fi
fi

# ---------------------------------------------------------------- 4. pi-bench
section "pi-bench CPU-only and at 0, 25, 50 and 100% of the FFN on the GPU"
bench=$build/tools/pi-bench/pi-bench
results=()
if ((${#budgets[@]} == 0)); then
    report "pi-bench" "absent (no model)"
elif [[ ! -x $bench ]]; then
    report "pi-bench" "absent (pi-bench was not built)"
else
    run_bench() { # NAME ARGS...: one JSON document per run, and its markdown on the terminal
        local name=$1
        shift
        local json=$build/gpu-check-$name.json
        if "$bench" -m "$model" -p 512 -n 64 -r 2 -t "$threads" -c "$n_ctx" --modes sparse \
            --no-bandwidth --json "$@" >"$json"; then
            report "pi-bench $name" "run, ok"
            results+=("$name=$json")
        else
            report "pi-bench $name" "run, FAILED"
        fi
    }
    run_bench cpu --offload-device none
    for k in "${!budgets[@]}"; do
        run_bench "gpu${fractions[$k]}" --offload-device cuda --vram-budget "${budgets[$k]}"
    done
    # Decode as graphs against kernel-by-kernel launches, everything on the GPU.
    last=$((${#budgets[@]} - 1))
    export POWERINFER_GPU_GRAPHS=0
    run_bench "gpu${fractions[$last]}-nographs" --offload-device cuda --vram-budget "${budgets[$last]}"
    unset POWERINFER_GPU_GRAPHS
    if ((${#results[@]} > 0)) && command -v python3 >/dev/null; then
        section "Against the targets (docs/hybrid.md)"
        python3 - "${PI_GPU_BANDWIDTH_GBS:-}" "${results[@]}" <<'PY'
import json, sys
bandwidth = float(sys.argv[1]) if sys.argv[1] else None
runs = {}
for arg in sys.argv[2:]:
    name, path = arg.split("=", 1)
    run = json.load(open(path))["runs"][0]
    tests = {t["test"]: t for t in run["tests"]}
    runs[name] = (run, tests)
def tps(name, test):
    return runs[name][1][test]["tokens_per_second"]["median"] if name in runs and test in runs[name][1] else None
print("| run | FFN on GPU | pp512 t/s | tg t/s | bytes/token read | to GPU/token | to host/token | downloads/token | CPU wait/token | GPU wait/token | kernels / submissions per token |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for name, (run, tests) in runs.items():
    off = run.get("offload") or {}
    n = max(run["decode_tokens"], 1)
    per = lambda k: off.get(k, 0) / n if off else 0
    print(f"| {name} | {100 * off.get('hot_fraction', 0):.0f}% | {tps(name, 'pp') or 0:.1f} | "
          f"{tps(name, 'tg') or 0:.2f} | {run['decode_bytes'] / n / 1e6:.1f} MB | "
          f"{per('decode_bytes_to_device') / 1024:.1f} KiB | {per('decode_bytes_to_host') / 1024:.1f} KiB | "
          f"{per('decode_downloads'):.1f} | {1e6 * per('cpu_wait_seconds'):.0f} us | "
          f"{1e6 * per('device_wait_seconds'):.0f} us | "
          f"{per('decode_device_kernels'):.0f} / {per('decode_device_launches'):.1f} |")
def ratio(a, b):
    return a / b if a and b else None
h50 = ratio(tps("gpu50", "tg"), tps("cpu", "tg"))
graphs = ratio(tps("gpu100", "tg"), tps("gpu100-nographs", "tg"))
pp = ratio(tps("gpu100", "pp"), tps("cpu", "pp"))
print()
print(f"hybrid at 50% of the FFN, decode: {h50 and f'{h50:.2f}x' or 'n/a'} CPU-only (target >= 3x)")
print(f"512-token prompt all on the GPU: {pp and f'{pp:.2f}x' or 'n/a'} CPU-only (target >= 20x)")
print(f"full offload decode as graphs: {graphs and f'{graphs:.2f}x' or 'n/a'} kernel-by-kernel launches (POWERINFER_GPU_GRAPHS=0)")
if "gpu100" in runs:
    run = runs["gpu100"][0]
    achieved = run["decode_bytes"] / max(run["decode_tokens"], 1) * (tps("gpu100", "tg") or 0) / 1e9
    share = f", {100 * achieved / bandwidth:.0f}% of {bandwidth:.0f} GB/s (target >= 60%)" if bandwidth else \
        " (set PI_GPU_BANDWIDTH_GBS for the share of the GPU's bandwidth; target >= 60%)"
    print(f"full offload decode reads {achieved:.0f} GB/s{share}")
PY
    fi
fi

finish
