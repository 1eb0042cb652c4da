# Cross-building for 64-bit Windows with Debian's mingw-w64 (apt-get install mingw-w64
# g++-mingw-w64-x86-64-posix): the posix-threads compilers, because GCC 12's win32 flavour has no
# std::thread. scripts/cross-windows.sh builds with this file and runs the tests under Wine.
#
#   cmake -S . -B build-mingw -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/mingw-w64-x86_64.cmake
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(_pi_triplet x86_64-w64-mingw32)

find_program(CMAKE_C_COMPILER NAMES ${_pi_triplet}-gcc-posix ${_pi_triplet}-gcc REQUIRED)
find_program(CMAKE_CXX_COMPILER NAMES ${_pi_triplet}-g++-posix ${_pi_triplet}-g++ REQUIRED)
find_program(CMAKE_RC_COMPILER NAMES ${_pi_triplet}-windres)

set(CMAKE_FIND_ROOT_PATH /usr/${_pi_triplet})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config must not hand the build machine's libraries (cpp-httplib, ...) to a Windows build.
set(ENV{PKG_CONFIG_LIBDIR} /usr/${_pi_triplet}/lib/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# The GCC runtime (libgcc, libstdc++, winpthread) linked into each binary: powerinfer.dll and the
# programs then need no DLL but the system's, and the C API is the only thing crossing them.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-static")

# ctest and try_run run Windows programs through Wine when it is installed.
find_program(PI_WINE NAMES wine wine64)
if(PI_WINE)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${PI_WINE})
endif()
