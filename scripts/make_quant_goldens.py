#!/usr/bin/env python3
"""Writes the quantizer goldens in tests/quant/data/ with ggml's own C quantizers as the oracle.
Hand-run, never in CI (docs/quantization.md, "The oracle"):

    pip download --no-binary :all: --no-deps llama-cpp-python==0.2.20
    tar xzf llama_cpp_python-0.2.20.tar.gz
    python scripts/make_quant_goldens.py --llama-cpp llama_cpp_python-0.2.20/vendor/llama.cpp

The vendored llama.cpp is ggerganov/llama.cpp@b38a16d (November 2023), whose ggml-quants.c has
the same reference quantizers as PowerInfer's. The script builds its ggml as a shared library
the way ggml's CMake builds it for x86-64 without -march=native (GCC, -O3, AVX2, FMA, F16C,
gnu11: GCC then fuses multiply-adds), calls ggml_quantize_chunk through ctypes row by row, and
writes:

    quant_golden_input.f32   ROWS x 256 little-endian floats
    quant_golden_<TYPE>.bin  ggml's bytes for each row, rows one after the other
    quant_goldens.txt        where they came from (commit, source hash, compiler, flags)

The rows are adversarial (exact .5 ties, near-ties where a fused multiply-add changes a code,
zero, -0.0 and constant rows, negative maxima, tied extremes, tiny and huge magnitudes,
sub-blocks of very different scales, outliers) plus Gaussian and heavy-tailed rows. With --gguf-py
it also prints how often gguf-py's NumPy quantizers (gguf.quants) disagree with the oracle.
"""

import argparse
import ctypes
import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np

ROW = 256
N_ROWS = 128
SEED = 20231115
# name: (ggml type id, elements per block, bytes per block)
FORMATS = {
    "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22), "Q5_1": (7, 32, 24),
    "Q8_0": (8, 32, 34), "Q2_K": (10, 256, 84), "Q3_K": (11, 256, 110), "Q4_K": (12, 256, 144),
    "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210),
}
CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_C_COMPILER=gcc", "-DBUILD_SHARED_LIBS=ON",
    "-DLLAMA_NATIVE=OFF", "-DLLAMA_AVX=ON", "-DLLAMA_AVX2=ON", "-DLLAMA_FMA=ON", "-DLLAMA_F16C=ON",
    "-DLLAMA_CUBLAS=OFF", "-DLLAMA_METAL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
]


class Oracle:
    def __init__(self, lib_path: Path):
        lib = ctypes.CDLL(str(lib_path))

        class InitParams(ctypes.Structure):
            _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p),
                        ("no_alloc", ctypes.c_bool)]

        # ggml_init fills the fp16 -> fp32 table the K-quant quantizers read their scales back
        # through.
        lib.ggml_init.restype = ctypes.c_void_p
        lib.ggml_init.argtypes = [InitParams]
        if not lib.ggml_init(InitParams(1 << 20, None, True)):
            raise SystemExit("ggml_init failed")
        lib.ggml_quantize_chunk.restype = ctypes.c_size_t
        lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                            ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
        self.lib = lib
        self.hist = (ctypes.c_int64 * 16)()

    def quantize(self, name: str, x: np.ndarray) -> np.ndarray:
        """Quantizes each row of x on its own; returns rows of bytes."""
        type_id, block, size = FORMATS[name]
        x = np.ascontiguousarray(x, dtype=np.float32)
        out = np.zeros((x.shape[0], x.shape[1] // block * size), np.uint8)
        for r in range(x.shape[0]):
            n = self.lib.ggml_quantize_chunk(type_id, x[r].ctypes.data, out[r].ctypes.data, 0,
                                             x.shape[1], ctypes.addressof(self.hist))
            assert n == out.shape[1], (name, n)
        return out


def build_ggml(src: Path, build: Path) -> Path:
    subprocess.run(["cmake", "-S", str(src), "-B", str(build), *CMAKE_FLAGS], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(build), "-j", "2", "--target", "ggml_shared"],
                   check=True, stdout=subprocess.DEVNULL)
    return build / "libggml_shared.so"


def provenance(src: Path, build: Path) -> str:
    quants = (src / "ggml-quants.c").read_bytes()
    flags = [ln.split("=", 1)[1].strip() for ln in
             (build / "CMakeFiles/ggml.dir/flags.make").read_text().splitlines()
             if ln.startswith("C_FLAGS")]
    gcc = subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout
    return "\n".join([
        "oracle: ggml's quantize_row_*_reference through ggml_quantize_chunk, row by row",
        "source: ggerganov/llama.cpp@b38a16dfcff88d547f78f52d1bea31b84a05aff7 "
        "(llama-cpp-python 0.2.20 sdist, vendor/llama.cpp)",
        f"ggml-quants.c sha256: {hashlib.sha256(quants).hexdigest()}",
        f"compiler: {gcc.splitlines()[0]}",
        f"C flags: {flags[0] if flags else '?'}",
        f"cmake: {' '.join(CMAKE_FLAGS)}",
        f"rows: {N_ROWS} x {ROW} floats, seed {SEED}",
        "",
    ])


# --- the rows -------------------------------------------------------------------------------


def special_rows(rng: np.random.Generator) -> list:
    g = lambda: rng.standard_normal(ROW).astype(np.float32)  # noqa: E731
    rows = []
    rows.append(np.zeros(ROW, np.float32))
    rows.append(np.full(ROW, -0.0, np.float32))
    rows.append(np.full(ROW, 1.0, np.float32))
    rows.append(np.full(ROW, -3.5, np.float32))
    r = np.zeros(ROW, np.float32); r[37] = 2.5; r[200] = -0.75; rows.append(r)
    r = g(); r[5] = -9.0; r[40] = -9.0; rows.append(r)                     # negative maxima
    r = g(); r[3] = 4.0; r[4] = -4.0; r[100] = -4.0; r[101] = 4.0; rows.append(r)  # tied extremes
    rows.append((1000.0 + 0.01 * g()).astype(np.float32))                  # offset far from 0
    rows.append(rng.uniform(0.0, 1.0, ROW).astype(np.float32))             # all positive
    rows.append(-rng.uniform(0.5, 2.0, ROW).astype(np.float32))            # all negative
    rows.append(np.tile(np.array([1.0, -1.0], np.float32), ROW // 2))
    rows.append((1e-30 * g()).astype(np.float32))                         # tiny
    rows.append((1e-12 * g()).astype(np.float32))
    rows.append((6e4 * np.tanh(g())).astype(np.float32))                  # near the f16 limit
    r = g(); r[:16] *= 1e-3; r[16:48] *= 1e3; r[48:64] = 0.0; rows.append(r.astype(np.float32))
    r = 0.01 * g(); r[77] = 50.0; rows.append(r.astype(np.float32))        # one outlier
    r = g(); r[::16] = 0.0; r[128:160] = 0.0; rows.append(r)
    rows.append((np.abs(g()) + 0.5).astype(np.float32))                    # min > 0: min := 0
    return rows


def tie_rows(rng: np.random.Generator, n: int) -> list:
    """Small integers times powers of two (many codes exactly on .5), and Q8_0's halves."""
    rows = []
    for i in range(n):
        scale = np.float32(2.0 ** int(rng.integers(-16, 8)))
        rows.append((scale * rng.integers(-16, 17, ROW)).astype(np.float32))
    for i in range(2):
        k = rng.integers(-127, 127, ROW).astype(np.float32) + 0.5
        k[::32] = 127.0
        rows.append(k.astype(np.float32))
    return rows


def near_tie_blocks(rng: np.random.Generator, name: str, n_blocks: int) -> np.ndarray:
    """Blocks whose codes sit within a few ulps of a rounding boundary: x = (k + 0.5) * d (plus
    the minimum for Q4_1/Q5_1), nudged. Whether x * id + c is rounded once (fused) or twice
    decides the code."""
    levels = {"Q4_0": 16, "Q5_0": 32, "Q4_1": 16, "Q5_1": 32}[name]
    d = (2.0 ** rng.uniform(-8, 4, (n_blocks, 1))).astype(np.float32)
    nudge = 1.0 + rng.integers(-4, 5, (n_blocks, 32)) * 2.0 ** -23
    if name in ("Q4_0", "Q5_0"):
        k = rng.integers(-levels // 2, levels // 2, (n_blocks, 32)).astype(np.float32)
        x = ((k + 0.5) * d * nudge).astype(np.float32)
        x[:, 0] = -levels // 2 * d[:, 0]  # the signed maximum, so that d is what we chose
        return x
    m = rng.uniform(-4, 0, (n_blocks, 1)).astype(np.float32)
    k = rng.integers(0, levels - 1, (n_blocks, 32)).astype(np.float32)
    x = (m + (k + 0.5) * d * nudge).astype(np.float32)
    x[:, 0] = m[:, 0]
    x[:, 1] = m[:, 0] + (levels - 1) * d[:, 0]
    return x


def random_rows(rng: np.random.Generator, n: int) -> list:
    rows = []
    for i in range(n):
        scale = np.float32(10.0 ** rng.uniform(-6, 4))
        if i % 3 == 2:
            rows.append((scale * rng.standard_t(3, ROW)).astype(np.float32))
        else:
            rows.append((scale * rng.standard_normal(ROW)).astype(np.float32))
    return rows


def strict_disagreements(oracle: Oracle, name: str, blocks: np.ndarray) -> np.ndarray:
    """Which 32-element blocks ggml's fused build quantizes to other codes than gguf-py, whose
    NumPy code rounds every operation."""
    from gguf import GGMLQuantizationType, quants
    rows = blocks.reshape(-1, ROW)
    size = FORMATS[name][2]
    ours = oracle.quantize(name, rows).reshape(-1, size)
    theirs = np.asarray(quants.quantize(rows, GGMLQuantizationType[name]))
    theirs = theirs.view(np.uint8).reshape(-1, size)
    scales = 4 if name in ("Q4_1", "Q5_1") else 2
    return (ours[:, scales:] != theirs[:, scales:]).any(axis=1)


def make_rows(oracle: Oracle) -> np.ndarray:
    rng = np.random.default_rng(SEED)
    rows = special_rows(rng) + tie_rows(rng, 6)
    # For each 32-element format, 6 rows of blocks where the fused multiply-add decides a code,
    # found among near-tie candidates.
    for name in ("Q4_0", "Q4_1", "Q5_0", "Q5_1"):
        cand = near_tie_blocks(rng, name, 1 << 14)
        hit = strict_disagreements(oracle, name, cand)
        print(f"{name}: {int(hit.sum())} of {cand.shape[0]} near-tie blocks decided by the FMA")
        picked = cand[hit][: 8 * 6]
        assert picked.shape[0] == 8 * 6, name
        rows += list(picked.reshape(-1, ROW))
    rows += random_rows(rng, N_ROWS - len(rows))
    return np.stack(rows).astype(np.float32)


def report_gguf_py(oracle: Oracle, x: np.ndarray) -> None:
    from gguf import GGMLQuantizationType, quants
    for name, (_, block, size) in FORMATS.items():
        ours = oracle.quantize(name, x).reshape(-1, size)
        try:
            with np.errstate(all="ignore"):
                theirs = np.asarray(quants.quantize(x, GGMLQuantizationType[name]))
        except NotImplementedError:
            print(f"{name}: gguf-py has no quantizer")
            continue
        theirs = theirs.view(np.uint8).reshape(-1, size)
        bad = int((ours != theirs).any(axis=1).sum())
        print(f"{name}: gguf-py differs from the oracle in {bad} of {ours.shape[0]} blocks")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-cpp", type=Path, required=True,
                    help="llama.cpp source tree (llama-cpp-python 0.2.20's vendor/llama.cpp)")
    ap.add_argument("--build", type=Path, default=Path("/tmp/pi-quant-goldens-ggml"))
    ap.add_argument("--out", type=Path,
                    default=Path(__file__).resolve().parent.parent / "tests/quant/data")
    ap.add_argument("--gguf-py", action="store_true",
                    help="also report how often gguf-py disagrees with the oracle")
    a = ap.parse_args()
    lib = build_ggml(a.llama_cpp.resolve(), a.build)
    oracle = Oracle(lib)
    x = make_rows(oracle)
    assert x.shape == (N_ROWS, ROW)
    a.out.mkdir(parents=True, exist_ok=True)
    x.astype("<f4").tofile(a.out / "quant_golden_input.f32")
    total = x.nbytes
    for name in FORMATS:
        q = oracle.quantize(name, x)
        q.tofile(a.out / f"quant_golden_{name}.bin")
        total += q.nbytes
    (a.out / "quant_goldens.txt").write_text(provenance(a.llama_cpp.resolve(), a.build))
    print(f"wrote {len(FORMATS) + 2} files, {total} bytes, to {a.out}")
    if a.gguf_py:
        report_gguf_py(oracle, x)
    return 0


if __name__ == "__main__":
    sys.exit(main())
