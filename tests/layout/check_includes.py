"""The include rules between the library and its backends (docs/backends.md).

  a. Of lib/ and backends/, only lib/api includes powerinfer.h.
  b. No file in lib/ includes anything under backends/ except backends/interface.
  c. No file in backends/ includes anything under lib/ except lib/quant and lib/platform.

Each #include is resolved as a compiler would: a quoted one against the including file's folder
first, then against the include roots; an angle one against the include roots only, and left
alone when it names no file of the project (a system header). An include that resolves to no
file is left to the compiler. Prints `file:line: includes X (rule ...)` per violation and exits
1 when there is any.

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
                quoted = match.group(1) == '"'
                target = resolve(root, source, match.group(2), quoted, include_roots)
                rule = target and broken_rule(includer, target)
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
        print(f"{len(found)} include(s) break the rules of docs/backends.md", file=sys.stderr)
        return 1
    print("the include rules hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
