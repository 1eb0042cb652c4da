# Cross-compiling for 64-bit ARM Linux with Debian's GNU cross toolchain
# (g++-aarch64-linux-gnu) and multiarch arm64 libraries (libtbb-dev:arm64). ctest runs every test
# binary through qemu-aarch64 with the cross sysroot; -cpu max emulates the dot-product and
# half-precision extensions, so every NEON kernel level runs (see docs/arm64.md).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Multiarch: the arm64 libraries live beside the host's under /usr, in their own triplet folders.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# The arm64 TBB package config (its imported targets point at /usr/lib/aarch64-linux-gnu).
set(TBB_DIR /usr/lib/aarch64-linux-gnu/cmake/TBB CACHE PATH "arm64 oneTBB package config")

# On one CPU (taskset): Debian 12's qemu-aarch64 (7.2) never returns from starting a second guest
# thread (a three-line std::thread program hangs too; docs/arm64.md), and on one CPU neither
# oneTBB nor the library's pool starts one.
set(CMAKE_CROSSCOMPILING_EMULATOR taskset;-c;0;qemu-aarch64;-cpu;max;-L;/usr/aarch64-linux-gnu)

# pkg-config sees only arm64 .pc files: a host-only package (cpp-httplib for pi-server) is then
# missing, and its tool is left out with a warning, instead of compiled against x86 headers.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
