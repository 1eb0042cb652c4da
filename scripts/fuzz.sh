#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with Clang, ASan and UBSan, writes their seed
# corpora and runs each target for a time budget (docs/fuzzing.md). Fails when a target crashes,
# hangs, leaks or trips a sanitizer; the input that did it is left in build-fuzz/fuzz-artifacts/.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET [TARGET...]]
#
# SECONDS_PER_TARGET defaults to 20 (a CI smoke run); TARGET defaults to every target. The corpus
# each run grows is kept in build-fuzz/fuzz-corpus/<target>, so later runs start from it.
# PI_JOBS sets the build's parallelism (default 2); PI_FUZZ_ARGS adds libFuzzer flags to every
# run (e.g. "-jobs=4 -workers=4", or "-runs=1000000" for a run of a million executions a target);
# PI_FUZZ_BUILD names the build folder (default build-fuzz); PI_FUZZ_CMAKE_ARGS adds configure
# arguments after the defaults (CI: "-DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS=-O1", which
# compiles faster than RelWithDebInfo).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${1:-20}
shift $(($# > 0 ? 1 : 0))
all_targets=(gguf_fuzz model_load_fuzz tokenizer_fuzz gpu_index_fuzz activation_stats_fuzz
    state_fuzz grammar_fuzz json_schema_fuzz chat_template_fuzz server_request_fuzz)
if (($# > 0)); then targets=("$@"); else targets=("${all_targets[@]}"); fi
jobs=${PI_JOBS:-2}
build=${PI_FUZZ_BUILD:-build-fuzz}
read -r -a extra_args <<<"${PI_FUZZ_ARGS:-}"
read -r -a cmake_args <<<"${PI_FUZZ_CMAKE_ARGS:-}"

declare -A dict=(
    [gguf_fuzz]=gguf.dict [model_load_fuzz]=gguf.dict [gpu_index_fuzz]=gguf.dict
    [activation_stats_fuzz]=torch.dict [tokenizer_fuzz]=tokenizer.dict [state_fuzz]=state.dict
    [grammar_fuzz]=gbnf.dict [json_schema_fuzz]=json_schema.dict [chat_template_fuzz]=chat.dict
    [server_request_fuzz]=server_request.dict
)
for target in "${targets[@]}"; do
    if [[ -z ${dict[$target]:-} ]]; then
        echo "fuzz.sh: unknown target '$target' (targets: ${all_targets[*]})" >&2
        exit 2
    fi
done

launcher=()
if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# Tests, tools and samples are not needed for fuzzing; CUDA and HIP code is not fuzzed.
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPOWERINFER_FUZZ=ON -DPOWERINFER_SANITIZE=address,undefined \
    -DPOWERINFER_CUDA=OFF -DPOWERINFER_HIP=OFF -DPOWERINFER_BUILD_TESTS=OFF \
    -DPOWERINFER_BUILD_TOOLS=OFF -DPOWERINFER_BUILD_SAMPLES=OFF "${launcher[@]}" "${cmake_args[@]}"
cmake --build "$build" -j "$jobs" --target "${targets[@]}" pi-make-fuzz-seeds

rm -rf "$build/fuzz-seeds"
"$build/tests/fuzz/pi-make-fuzz-seeds" "$build/fuzz-seeds"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
summary=()
for target in "${targets[@]}"; do
    corpus=$build/fuzz-corpus/$target
    artifacts=$build/fuzz-artifacts/$target
    log=$build/fuzz-logs/$target.log
    mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
    echo "fuzz.sh: $target for ${seconds}s"
    # New inputs go to the first folder (the kept corpus); the seeds and the committed
    # regressions (tests/fuzz/regressions/<target>/, where there are any) are read only.
    regressions=()
    if [[ -d tests/fuzz/regressions/$target ]]; then regressions=("tests/fuzz/regressions/$target"); fi
    started=$SECONDS
    if "$build/tests/fuzz/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -dict="tests/fuzz/${dict[$target]}" -artifact_prefix="$artifacts/" -print_final_stats=1 \
        "${extra_args[@]}" "$corpus" "$build/fuzz-seeds/$target" "${regressions[@]}" \
        >"$log" 2>&1; then
        result=ok
    else
        result="FAILED (log: $log, inputs: $artifacts/)"
        failed+=("$target")
        tail -n 40 "$log" >&2
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d ' ' -f 2)
    summary+=("$(printf '%-22s %10s runs %7s exec/s %6s edges %6ss  %s' "$target" "${runs:-?}" \
        "${speed:-?}" "${cov:-?}" $((SECONDS - started)) "$result")")
    echo "fuzz.sh: ${summary[-1]}"
done

printf '%s\n' "${summary[@]}"
if ((${#failed[@]} > 0)); then
    echo "fuzz.sh: ${failed[*]} failed" >&2
    exit 1
fi
