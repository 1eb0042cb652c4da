#!/usr/bin/env bash
# Cross-builds the Python wheel for Linux aarch64 on an x86-64 Debian machine, installs it for an
# arm64 CPython and runs the binding's test suite with that CPython under qemu-user
# (docs/arm64.md, "The Python wheel").
#
#   scripts/wheel-aarch64.sh [work-dir]   (default build-wheel-aarch64)
#   JOBS=N (default 2)
#   WHEEL_TESTS="test_model test_generate ...": the test files to run (default: all of them)
#   HOST_PYTHON=python with the x86-64 wheel installed: its greedy text on a synthetic model is
#   compared with the aarch64 wheel's (optional)
#
# The wheel is built by the same scikit-build-core and pybind11 as the x86-64 one, with the host's
# Debian CPython told that it builds for aarch64: _PYTHON_HOST_PLATFORM gives the wheel its
# linux_aarch64 tag and the arm64 _sysconfigdata its extension suffix; CMake uses the cross
# toolchain and the arm64 Python headers. Those headers, the arm64 CPython that runs the tests,
# and its shared libraries come from Debian's arm64 packages unpacked into the work folder
# (apt-get download, dpkg -x), so nothing is installed into the system. NumPy and pytest for
# aarch64 come from PyPI.
#
# Needs what scripts/cross-aarch64.sh needs (g++-aarch64-linux-gnu, qemu-user, libtbb-dev:arm64),
# plus python3-venv for /usr/bin/python3 and access to the Debian and PyPI archives.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
work=$(realpath -m "${1:-$root/build-wheel-aarch64}")
jobs=${JOBS:-2}
tests=${WHEEL_TESTS:-}
build_python=/usr/bin/python3

for tool in aarch64-linux-gnu-g++ aarch64-linux-gnu-readelf qemu-aarch64 taskset apt-get dpkg; do
  command -v "$tool" > /dev/null || { echo "wheel-aarch64.sh: $tool not found (docs/arm64.md)" >&2; exit 1; }
done
[[ -x $build_python ]] || { echo "wheel-aarch64.sh: $build_python (Debian's CPython) not found" >&2; exit 1; }
[[ -f /usr/lib/aarch64-linux-gnu/libtbb.so.12 ]] ||
  { echo "wheel-aarch64.sh: libtbb-dev:arm64 is not installed (docs/arm64.md)" >&2; exit 1; }

py=$("$build_python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
cp_tag=cp${py/./}
sysroot=$work/sysroot
mkdir -p "$work/debs"

echo "== arm64 CPython $py from Debian, unpacked into $sysroot"
(cd "$work/debs" && apt-get download -q -o APT::Sandbox::User=root \
  "python$py-minimal:arm64" "libpython$py-minimal:arm64" "libpython$py-stdlib:arm64" \
  "libpython$py-dev:arm64" libexpat1:arm64 zlib1g:arm64 libssl3:arm64 libbz2-1.0:arm64 \
  libffi8:arm64 liblzma5:arm64 libuuid1:arm64 libcrypt1:arm64)
rm -rf "$sysroot"
for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$sysroot"; done
sysconfig_name=_sysconfigdata__aarch64-linux-gnu
mkdir -p "$work/sysconfig"
cp "$sysroot/usr/lib/python$py/$sysconfig_name.py" "$work/sysconfig/"

# The arm64 CPython as a program: sys.executable is this script, so the tests' subprocesses
# (sys.executable -m powerinfer.convert, ...) run under qemu too. One CPU: qemu-aarch64 7.2 hangs
# when a guest starts a second thread (docs/arm64.md).
mkdir -p "$work/bin"
cat > "$work/bin/python3" << EOF
#!/bin/sh
export PYTHONHOME="$sysroot/usr" OPENBLAS_NUM_THREADS=1
exec taskset -c 0 qemu-aarch64 -cpu max -L "$sysroot" -0 "\$0" "$sysroot/usr/bin/python$py" "\$@"
EOF
chmod +x "$work/bin/python3"
arm_python=$work/bin/python3

echo "== build tools in a host venv"
"$build_python" -m venv --clear "$work/host-venv"
"$work/host-venv/bin/pip" install -q -U pip scikit-build-core pybind11

echo "== cross-building the wheel"
rm -rf "$work/wheels"
# No build isolation: the isolated environment's own installs would see the aarch64 platform too.
env _PYTHON_HOST_PLATFORM=linux-aarch64 _PYTHON_SYSCONFIGDATA_NAME=$sysconfig_name \
    PYTHONPATH="$work/sysconfig" CMAKE_BUILD_PARALLEL_LEVEL="$jobs" \
  "$work/host-venv/bin/pip" wheel -q --no-deps --no-build-isolation "$root/bindings/python" \
    -w "$work/wheels" \
    -Ccmake.define.CMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/aarch64-linux-gnu.cmake" \
    -Ccmake.define.Python_INCLUDE_DIR="$sysroot/usr/include/python$py" \
    "-Ccmake.define.CMAKE_CXX_FLAGS=-isystem $sysroot/usr/include" \
    -Cbuild-dir="$work/cmake-build"
wheels=("$work"/wheels/powerinfer-*-"$cp_tag"-"$cp_tag"-linux_aarch64.whl)
if ((${#wheels[@]} != 1)) || [[ ! -f ${wheels[0]} ]]; then
  echo "wheel-aarch64.sh: expected one linux_aarch64 wheel, got: $(ls "$work/wheels")" >&2
  exit 1
fi
wheel=${wheels[0]}
echo "built $wheel"

echo "== installing it, NumPy and pytest for aarch64"
site=$work/site-packages
rm -rf "$site"
"$work/host-venv/bin/pip" install -q --target "$site" --only-binary=:all: \
  --platform manylinux2014_aarch64 --platform linux_aarch64 --python-version "$py" \
  --implementation cp --abi "$cp_tag" "$wheel" numpy gguf pytest
for lib in "$site"/powerinfer/_powerinfer.*.so "$site"/powerinfer/libpowerinfer.so.*; do
  if ! aarch64-linux-gnu-readelf -h "$lib" | grep -q 'Machine:.*AArch64'; then
    echo "wheel-aarch64.sh: $lib is not an AArch64 ELF file" >&2
    exit 1
  fi
done

# The package's console scripts next to the interpreter, as a venv has them, run by it.
for script in "$site"/bin/powerinfer-*; do
  { echo "#!$arm_python"; tail -n +2 "$script"; } > "$work/bin/${script##*/}"
  chmod +x "$work/bin/${script##*/}"
done

echo "== the binding's tests, arm64 CPython under qemu: ${tests:-all}"
# From outside the source tree, so that only the installed package can be imported.
test_paths=()
if [[ -n $tests ]]; then
  for t in $tests; do test_paths+=("$root/bindings/python/tests/$t.py"); done
else
  test_paths=("$root/bindings/python/tests")
fi
(cd "$work" && PYTHONPATH="$site" "$arm_python" -s -m pytest -p no:cacheprovider -q \
  "${test_paths[@]}")

if [[ -n ${HOST_PYTHON:-} ]]; then
  echo "== greedy tokens of the Q4_0 fixture: aarch64 wheel under qemu against the x86-64 wheel"
  # 20 tokens, as tests/tools/greedy_tokens.cmake: the kernel levels part after about 24 (avx2
  # from scalar and NEON), and which x86-64 level runs is the runner's CPU.
  greedy='import sys, powerinfer
with powerinfer.Model(sys.argv[1]) as m, m.create_context(n_ctx=256) as c:
    print(" ".join(str(e.token) for e in c.stream_tokens(sys.argv[2], max_tokens=20, temperature=0)))'
  model=$root/tests/data/relu-llama-kjv.q4_0.powerinfer.gguf
  prompt="In the beginning God created"
  x86_tokens=$("$HOST_PYTHON" -c "$greedy" "$model" "$prompt")
  arm_tokens=$(cd "$work" && PYTHONPATH="$site" "$arm_python" -s -c "$greedy" "$model" "$prompt")
  if [[ -z $x86_tokens || $x86_tokens != "$arm_tokens" ]]; then
    printf 'wheel-aarch64.sh: greedy tokens differ\n  x86-64:  %s\n  aarch64: %s\n' \
      "$x86_tokens" "$arm_tokens" >&2
    exit 1
  fi
  printf 'identical greedy tokens (%s): %s\n' "$(wc -w <<< "$arm_tokens")" "$arm_tokens"
fi
