"""check_includes.py on a small tree with a known set of violations: it must report exactly the
lines marked `violates rule X` below and fail, so that its pass on the real tree means something.

  test_check_includes.py CHECKER
"""

import re
import subprocess
import sys
import tempfile
from pathlib import Path

TREE = {
    "include/powerinfer.h": "",
    "lib/api/api.cpp": '#include "powerinfer.h"\n',
    "lib/support/error.hpp": "#pragma once\n",
    "lib/quant/types.hpp": "#pragma once\n",
    "lib/platform/system.hpp": "#pragma once\n",
    "lib/engine/engine.cpp": (
        '#include "support/error.hpp"\n'
        '#include "pib_backend.h"\n'
        "#include <vector>\n"
        '#include "generated_elsewhere.hpp"\n'
        "#include <powerinfer.h> // violates rule a\n"
        '#include "../../include/powerinfer.h" // violates rule a\n'
        '#include "cpu/cpu_backend.h" // violates rule b\n'
        '  #  include "../../backends/cpu/cpu_backend.h" // violates rule b\n'
    ),
    "backends/interface/pib_backend.h": "#pragma once\n",
    "backends/cpu/cpu_backend.h": '#include "pib_backend.h"\n',
    "backends/cpu/kernels.cpp": (
        '#include "cpu_backend.h"\n'
        '#include "quant/types.hpp"\n'
        '#include "../../lib/quant/types.hpp"\n'
        '#include "platform/system.hpp"\n'
        '#include "support/error.hpp" // violates rule c\n'
        '#include "../../lib/engine/engine.cpp" // violates rule c\n'
        '#include "powerinfer.h" // violates rule a\n'
    ),
    "backends/README.md": '#include "support/error.hpp"\n',
    # Rule d: OS headers only in lib/platform; the GPU modules and tools/ are not checked.
    "lib/platform/system_posix.cpp": "#include <unistd.h>\n#include <sys/auxv.h>\n",
    "lib/platform/system_win32.cpp": "#include <windows.h>\n",
    "lib/support/sched.h": "#pragma once\n",
    "lib/api/system_api.cpp": (
        "#include <mutex>\n"
        "#include <cpuid.h>\n"
        "#include <csignal>\n"
        '#include "support/sched.h"\n'
        "#include <sys/auxv.h> // violates rule d\n"
        "#include <asm/hwcap.h> // violates rule d\n"
        "#include <Windows.h> // violates rule d\n"
        '#include "dlfcn.h" // violates rule d\n'
    ),
    "lib/engine/worker.cpp": "#include <pthread.h> // violates rule d\n",
    "backends/cpu/arm_features.cpp": (
        '#include "platform/system.hpp"\n'
        "#include <arm_neon.h>\n"
        "#include <sys/sysctl.h> // violates rule d\n"
    ),
    "backends/gpu_common/gpu_sim.cpp": "#include <ucontext.h>\n",
    "tools/pi-soak/main.c": "#include <unistd.h>\n",
}

REPORTED = re.compile(r"^(\S+):(\d+): includes \S+ \(rule (\w):")
MARKED = re.compile(r"violates rule (\w)")


def main():
    checker = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        expected = set()
        for name, text in TREE.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
            for number, line in enumerate(text.splitlines(), start=1):
                marked = MARKED.search(line)
                if marked:
                    expected.add((name, number, marked.group(1)))
        run = subprocess.run([sys.executable, checker, "--root", str(root)],
                             capture_output=True, text=True)
    print(run.stdout, end="")
    reported = set()
    for line in run.stdout.splitlines():
        found = REPORTED.match(line)
        if found:
            reported.add((found.group(1), int(found.group(2)), found.group(3)))
    ok = True
    for name, number, rule in sorted(expected - reported):
        print(f"FAIL: not reported: {name}:{number} (rule {rule})")
        ok = False
    for name, number, rule in sorted(reported - expected):
        print(f"FAIL: reported wrongly: {name}:{number} (rule {rule})")
        ok = False
    if run.returncode != 1:
        print(f"FAIL: the checker exited {run.returncode}, not 1")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
