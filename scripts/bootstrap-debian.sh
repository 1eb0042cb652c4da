#!/usr/bin/env bash
# Installs what building and testing libpowerinfer needs on Debian 12, as root or through sudo.
# Safe to run again: packages already present are left alone, and nothing is fetched when all
# of them are.
#
#   scripts/bootstrap-debian.sh [--hip] [--server-tests] [--fuzz] [--windows] [--aarch64]
#
#   --hip            also install hipcc, for the optional HIP backend
#   --server-tests   also install what pi-server's tests drive it with: curl, ss (iproute2),
#                    chromium and chromium-driver (the chat page in a headless browser)
#   --fuzz           also install clang and its libFuzzer and sanitizer runtimes (scripts/fuzz.sh)
#   --windows        also install mingw-w64 and Wine, for the Windows cross-build and its tests,
#                    and curl and xz, which fetch and unpack httplib's source for pi-server.exe
#                    and ask it over HTTP (scripts/cross-windows.sh)
#   --aarch64        also install the AArch64 cross compiler, qemu-user and oneTBB for arm64 (the
#                    arm64 architecture is added to dpkg), for scripts/cross-aarch64.sh
set -euo pipefail

packages=(build-essential cmake ninja-build pkg-config libtbb-dev doctest-dev python3-venv
          python3-pip python3-dev nlohmann-json3-dev libcpp-httplib-dev)
foreign_arch=
for arg in "$@"; do
    case "$arg" in
    --hip) packages+=(hipcc) ;;
    --server-tests) packages+=(curl iproute2 chromium chromium-driver) ;;
    --fuzz) packages+=(clang libclang-rt-14-dev) ;;
    --windows) packages+=(mingw-w64 g++-mingw-w64-x86-64-posix wine wine64 curl xz-utils) ;;
    --aarch64)
        packages+=(g++-aarch64-linux-gnu qemu-user libtbb-dev:arm64)
        foreign_arch=arm64
        ;;
    -h | --help)
        sed -n '2,15s/^# \{0,1\}//p' "$0"
        exit 0
        ;;
    *)
        echo "bootstrap-debian.sh: unknown argument '$arg' (try --help)" >&2
        exit 2
        ;;
    esac
done

missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$package")
    fi
done
if ((${#missing[@]} == 0)); then
    echo "bootstrap-debian.sh: all build dependencies are installed"
    exit 0
fi

sudo=()
if ((EUID != 0)); then
    if ! command -v sudo >/dev/null; then
        echo "bootstrap-debian.sh: run as root or install sudo (missing: ${missing[*]})" >&2
        exit 1
    fi
    sudo=(sudo)
fi
echo "bootstrap-debian.sh: installing ${missing[*]}"
if [[ -n $foreign_arch ]] && ! dpkg --print-foreign-architectures | grep -qx "$foreign_arch"; then
    "${sudo[@]}" dpkg --add-architecture "$foreign_arch"
fi
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${missing[@]}"
