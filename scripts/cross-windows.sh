#!/usr/bin/env bash
# Cross-builds libpowerinfer for 64-bit Windows with mingw-w64 and runs it under Wine: the unit
# tests that need neither Python nor a Unix shell, then samples/hello, the CLI and pi-server on
# the tiny fixture model, whose greedy tokens must equal those of the Linux build when one is
# given (docs/platform.md).
#
#   scripts/cross-windows.sh [BUILD_DIR] [LINUX_BUILD_DIR]
#
# Needs: apt-get install mingw-w64 g++-mingw-w64-x86-64-posix wine (wine64) curl, plus the
# header-only nlohmann-json3-dev and doctest-dev of the Linux build. JOBS (default 2) sets the
# parallel jobs; INSTALL_CHECK=0 skips the install-tree check.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${1:-$root/build-mingw}")
linux_build=${2:-}
jobs=${JOBS:-2}
model=$root/tests/data/relu-llama-kjv.q4_0.powerinfer.gguf
prompt="In the beginning God created"

# The header-only packages come from the build machine, but /usr/include must not reach the
# Windows compiler (glibc's headers would shadow mingw's): stage them in a folder of their own.
stage=$build/host-headers
mkdir -p "$stage/include" "$stage/nlohmann_json" "$stage/doctest"
ln -sfn /usr/include/nlohmann "$stage/include/nlohmann"
ln -sfn /usr/include/doctest "$stage/include/doctest"
cp /usr/share/cmake/nlohmann_json/*.cmake "$stage/nlohmann_json/"
sed -i 's|get_filename_component(_IMPORT_PREFIX "${_IMPORT_PREFIX}" PATH)||; s|get_filename_component(_IMPORT_PREFIX "${CMAKE_CURRENT_LIST_FILE}" PATH)|set(_IMPORT_PREFIX "'"$stage"'")|' \
  "$stage/nlohmann_json/nlohmann_jsonTargets.cmake"
cp /usr/lib/cmake/doctest/*.cmake "$stage/doctest/"
sed -i 's|set(_IMPORT_PREFIX "/usr")|set(_IMPORT_PREFIX "'"$stage"'")|' "$stage/doctest/doctestTargets.cmake"

# pi-server's httplib: Debian's libcpp-httplib is a Linux shared library, so the Windows build
# takes the header-only httplib.h of the same package's source from the Debian archive, checked
# against its SHA-256 (tools/pi-server/CMakeLists.txt).
httplib_version=0.11.4+ds
httplib_sha256=8b1a5df569003b6a4f24c68489bbda5c64aec94697bdc9ebba5d79408b2ae7eb
httplib_tarball=$build/cpp-httplib_$httplib_version.orig.tar.xz
if [[ ! -f $stage/httplib/httplib.h ]]; then
  if [[ ! -f $httplib_tarball ]]; then
    curl -fsSL --retry 3 -o "$httplib_tarball.part" \
      "https://deb.debian.org/debian/pool/main/c/cpp-httplib/cpp-httplib_$httplib_version.orig.tar.xz"
    mv "$httplib_tarball.part" "$httplib_tarball"
  fi
  if ! sha256sum -c --status <<<"$httplib_sha256  $httplib_tarball"; then
    echo "cross-windows.sh: $httplib_tarball does not have the expected SHA-256" >&2
    rm -f "$httplib_tarball"
    exit 1
  fi
  mkdir -p "$stage/httplib"
  tar -xJf "$httplib_tarball" -C "$stage/httplib" --wildcards --strip-components=1 '*/httplib.h'
fi
cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/mingw-w64-x86_64.cmake" \
  -DCMAKE_BUILD_TYPE=Release -DPOWERINFER_CUDA=OFF -DPOWERINFER_HIP=OFF \
  -Dnlohmann_json_DIR="$stage/nlohmann_json" -Ddoctest_DIR="$stage/doctest" \
  -DPI_HTTPLIB_HEADER_DIR="$stage/httplib" -DCMAKE_INSTALL_PREFIX="$build/install"
cmake --build "$build" -j "$jobs"

export WINEDEBUG=-all WINEPREFIX=${WINEPREFIX:-$build/wineprefix}
bin=$build/bin
# The doctest programs that run on Windows; excluded (docs/platform.md): the server's tests with
# Python clients (pi-server itself is run below), the Python-oracle tests (reference, layout, gguf-py checks), the GPU
# simulation and module-loader tests (ucontext fibers, ELF modules), and the tests that drive
# tools through CMake scripts. The CPU conformance run is below (it takes an argument).
tests=(test_platform test_quant test_quant_goldens test_quantize_model test_quantize_api formats_unit test_gguf
       test_backend test_tokenizer test_chat test_model test_grammar test_sampling
       test_sampler_api test_engine test_synthetic test_synthetic_families test_api
       test_tools_common planner_unit gpuidx_unit hybrid_cpu_as_device conformance_gpu_math
       test_threads test_server_core)
failed=()
for t in "${tests[@]}"; do
  [[ -x $bin/$t.exe ]] || { echo "missing: $t.exe"; failed+=("$t"); continue; }
  start=$SECONDS
  if (cd "$build" && wine "$bin/$t.exe" --no-intro=true --minimal=true >"$build/$t.log" 2>&1); then
    echo "ok    $t ($((SECONDS - start)) s)"
  else
    echo "FAIL  $t ($((SECONDS - start)) s): $build/$t.log"; tail -20 "$build/$t.log"; failed+=("$t")
  fi
done

start=$SECONDS
if (cd "$build" && wine "$bin/conformance.exe" --backend=cpu >"$build/conformance_cpu.log" 2>&1); then
  echo "ok    conformance --backend=cpu ($((SECONDS - start)) s)"
else
  echo "FAIL  conformance --backend=cpu: $build/conformance_cpu.log"; failed+=(conformance_cpu)
fi

wine "$bin/hello.exe" "$model" "$prompt" >"$build/hello.txt" 2>"$build/hello.err" || failed+=(hello)
wine "$bin/powerinfer.exe" -m "$model" -p "$prompt" -n 64 --temp 0 \
  >"$build/greedy.txt" 2>"$build/greedy.err" || failed+=(powerinfer.exe)
echo "greedy (Windows): $(tr -d '\r' <"$build/greedy.txt" | head -c 200)"
if [[ -n $linux_build ]]; then
  "$linux_build/tools/powerinfer/powerinfer" -m "$model" -p "$prompt" -n 64 --temp 0 \
    >"$build/greedy-linux.txt" 2>/dev/null
  if cmp -s <(tr -d '\r' <"$build/greedy.txt") "$build/greedy-linux.txt"; then
    echo "greedy tokens: identical to $linux_build"
  else
    echo "greedy tokens differ from $linux_build"; failed+=(greedy-vs-linux)
  fi
fi

# pi-server under Wine, asked over HTTP by the host's curl: health, then a greedy completion,
# which must equal the Linux server's when a Linux build is given.
completion='{"prompt": "In the beginning God created", "max_tokens": 24, "temperature": 0}'
server_reply() { # PROGRAM... -> the completion's reply, or nothing when the server did not answer
  local log=$build/server-$$.log port="" reply=""
  "$@" -m "$model" --host 127.0.0.1 --port 0 -c 512 >"$log" 2>&1 &
  local pid=$!
  for _ in $(seq 600); do
    port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$log" | head -n 1)
    [[ -n $port ]] && curl -fs "http://127.0.0.1:$port/health" >/dev/null && break
    port=""
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [[ -n $port ]]; then
    reply=$(curl -fs -H 'Content-Type: application/json' -d "$completion" \
      "http://127.0.0.1:$port/v1/completions" |
      python3 -c 'import json, sys; print(json.load(sys.stdin)["choices"][0]["text"])') || reply=""
  fi
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null || true
  [[ -n $reply ]] || cat "$log" >&2
  rm -f "$log"
  printf '%s' "$reply"
}
windows_reply=$(server_reply wine "$bin/pi-server.exe")
if [[ -n $windows_reply ]]; then
  echo "ok    pi-server.exe answered a completion over HTTP: $windows_reply"
  if [[ -n $linux_build && -x $linux_build/tools/pi-server/pi-server ]]; then
    if [[ $(server_reply "$linux_build/tools/pi-server/pi-server") == "$windows_reply" ]]; then
      echo "ok    pi-server.exe's greedy completion is the Linux pi-server's"
    else
      echo "FAIL  pi-server.exe's greedy completion differs from the Linux pi-server's"
      failed+=(pi-server-vs-linux)
    fi
  fi
else
  echo "FAIL  pi-server.exe did not answer"; failed+=(pi-server)
fi

if [[ ${INSTALL_CHECK:-1} != 0 ]]; then
  rm -rf "$build/install"
  cmake --install "$build" >/dev/null
  for f in bin/powerinfer.dll lib/libpowerinfer.dll.a include/powerinfer.h \
           lib/cmake/powerinfer/powerinfer-config.cmake lib/pkgconfig/powerinfer.pc \
           bin/powerinfer.exe bin/pi-server.exe; do
    [[ -e $build/install/$f ]] || { echo "install tree lacks $f"; failed+=("install:$f"); }
  done
  # A consumer of the install tree, as on Linux: find_package(powerinfer), then the sample runs
  # with the installed powerinfer.dll on Wine's PATH.
  consumer=$build/consumer
  rm -rf "$consumer"
  if cmake -S "$root/samples" -B "$consumer" -G Ninja \
       -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/mingw-w64-x86_64.cmake" \
       -DCMAKE_BUILD_TYPE=Release -Dpowerinfer_DIR="$build/install/lib/cmake/powerinfer" \
       >"$build/consumer.log" 2>&1 &&
     cmake --build "$consumer" -j "$jobs" >>"$build/consumer.log" 2>&1 &&
     WINEPATH="$(winepath -w "$build/install/bin")" wine "$consumer/hello.exe" "$model" "$prompt" \
       >"$build/consumer-hello.txt" 2>>"$build/consumer.log"; then
    echo "ok    install tree: find_package(powerinfer) consumer runs hello.exe"
  else
    echo "FAIL  install tree consumer: $build/consumer.log"; failed+=(install-consumer)
  fi
  PKG_CONFIG_LIBDIR=$build/install/lib/pkgconfig pkg-config --libs --cflags powerinfer \
    >"$build/pkg-config.txt" || failed+=(install-pkg-config)
  echo "pkg-config: $(cat "$build/pkg-config.txt")"
fi

if ((${#failed[@]})); then
  echo "cross-windows: FAILED: ${failed[*]}"
  exit 1
fi
echo "cross-windows: all passed"
