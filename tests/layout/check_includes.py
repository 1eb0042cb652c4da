"""The include rules between the library and its backends (docs/backends.md), and the one room
that talks to the operating system (docs/platform.md).

  a. Of lib/ and backends/, only lib/api includes powerinfer.h.
  b. No file in lib/ includes anything under backends/ except backends/interface.
  c. No file in backends/ includes anything under lib/ except lib/quant and lib/platform.
  d. No file in lib/ outside lib/platform, nor in backends/cpu, includes an OS header (POSIX,
     Linux, macOS or Win32: OS_HEADERS below); the GPU modules keep their runtimes' own calls.

Each #include is resolved as a compiler would: a quoted one against the including file's folder
first, then against the include roots; an angle one against the include roots only. One that
names no file of the project is a system header, checked against rule d alone: the C and C++
standard headers and the compiler's intrinsics (cpuid.h, immintrin.h, arm_neon.h) are not OS
headers. Prints `file:line: includes X (rule ...)` per violation and exits 1 when there is any.

  check_includes.py --root REPO [--include-root DIR ...]
"""

import argparse
import re
import sys
from pathlib import Path

SOURCE_SUFFIXES = {".h", ".hpp", ".c", ".cpp", ".cu", ".cuh", ".inc"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
# The folders every target of the project may have on its include path, relative to the root.
DEFAULT_INCLUDE_ROOTS = ["lib", "include", "backends", "backends/interface"]

RULE_A = "rule a: only lib/api includes powerinfer.h"
RULE_B = "rule b: lib/ includes nothing under backends/ except backends/interface"
RULE_C = "rule c: backends/ includes nothing under lib/ except lib/quant and lib/platform"
RULE_D = "rule d: only lib/platform includes OS headers"

# The operating systems' own headers, compared in lower case (<Windows.h> is <windows.h>): the
# names, and the folders whose every header is one.
OS_HEADERS = {
    # POSIX, glibc and macOS
    "unistd.h", "dlfcn.h", "pthread.h", "ucontext.h", "fcntl.h", "sched.h", "semaphore.h",
    "dirent.h", "termios.h", "poll.h", "spawn.h", "execinfo.h", "link.h", "elf.h", "malloc.h",
    "pwd.h", "grp.h", "netdb.h", "syslog.h", "libproc.h", "crt_externs.h",
    # Win32 and the Microsoft C runtime's POSIX-like calls
    "windows.h", "winbase.h", "winsock2.h", "ws2tcpip.h", "psapi.h", "processthreadsapi.h",
    "synchapi.h", "memoryapi.h", "libloaderapi.h", "sysinfoapi.h", "fileapi.h", "handleapi.h",
    "dbghelp.h", "tlhelp32.h", "shlobj.h", "shellapi.h", "io.h", "direct.h", "process.h",
}
OS_HEADER_FOLDERS = ("sys/", "asm/", "linux/", "bits/", "mach/", "mach-o/", "netinet/", "arpa/",
                     "net/")
# Files outside lib/platform that may include an OS header, each with the reason: none today.
# An entry is "file relative to the root": {"header", ...}, with a comment saying why the call
# cannot live in lib/platform.
OS_HEADER_EXCEPTIONS = {}


def is_under(path, folder):
    return path == folder or path.startswith(folder + "/")


def broken_rule(includer, target):
    """The rule `includer` breaks by including `target` (both relative to the root), or None."""
    in_lib, in_backends = is_under(includer, "lib"), is_under(includer, "backends")
    if target == "include/powerinfer.h" and (in_lib or in_backends):
        return None if is_under(includer, "lib/api") else RULE_A
    if in_lib and is_under(target, "backends") and not is_under(target, "backends/interface"):
        return RULE_B
    if (in_backends and is_under(target, "lib") and not is_under(target, "lib/quant")
            and not is_under(target, "lib/platform")):
        return RULE_C
    return None


def is_os_header(spelled):
    name = spelled.strip().lower()
    return name in OS_HEADERS or name.startswith(OS_HEADER_FOLDERS)


def must_not_include_os_headers(includer):
    return ((is_under(includer, "lib") and not is_under(includer, "lib/platform"))
            or is_under(includer, "backends/cpu"))


def resolve(root, includer, spelled, quoted, include_roots):
    folders = ([includer.parent] if quoted else []) + include_roots
    for folder in folders:
        candidate = (folder / spelled).resolve()
        if candidate.is_file() and candidate.is_relative_to(root):
            return candidate.relative_to(root).as_posix()
    return None


def violations(root, include_roots):
    for top in ("lib", "backends"):
        for source in sorted((root / top).rglob("*")):
            if source.suffix not in SOURCE_SUFFIXES or not source.is_file():
                continue
            includer = source.relative_to(root).as_posix()
            lines = source.read_text(encoding="utf-8", errors="replace").splitlines()
            for number, line in enumerate(lines, start=1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                quoted, spelled = match.group(1) == '"', match.group(2)
                target = resolve(root, source, spelled, quoted, include_roots)
                rule = target and broken_rule(includer, target)
                if (not target and is_os_header(spelled) and must_not_include_os_headers(includer)
                        and spelled.lower() not in OS_HEADER_EXCEPTIONS.get(includer, ())):
                    target, rule = spelled, RULE_D
                if rule:
                    yield f"{includer}:{number}: includes {target} ({rule})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, type=Path, help="the repository")
    parser.add_argument("--include-root", action="append", default=None,
                        help="an include folder relative to the root (repeatable); default: "
                        + ", ".join(DEFAULT_INCLUDE_ROOTS))
    args = parser.parse_args()
    root = args.root.resolve()
    include_roots = [root / d for d in (args.include_root or DEFAULT_INCLUDE_ROOTS)]

    found = list(violations(root, include_roots))
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} include(s) break the rules of docs/backends.md and docs/platform.md",
              file=sys.stderr)
        return 1
    print("the include rules hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
