"""Checks our quantizers against gguf-py's (PyPI `gguf`, gguf.quants), which reproduce ggml's
reference quantizers bit for bit.

usage: check_quants_with_gguf_py.py DIR   (DIR written by quant_write_sample)
For every format: gguf.quants.quantize(input) must equal our bytes exactly, and
gguf.quants.dequantize(our bytes) must equal our dequantization exactly (NaN where NaN).

One known divergence of gguf-py from ggml's C reference is corrected for: in a Q4_0/Q5_0 block
whose elements are all zero, C starts the signed maximum at +0.0 and so stores d = -0.0
(0x8000), while gguf-py takes the block's first element, which may be -0.0, giving d = +0.0.
We follow C.

The K-quants (Q2_K .. Q6_K) have no quantizer here yet, so their dequantization is checked on
blocks of random bytes with finite binary16 scales, made by a splitmix64 generator that
test_quant_formats.cpp ("K-quant dequantization matches gguf-py ...") runs too: gguf-py's
dequantization of those blocks must hash (FNV-1a over the float bits) to the values that test
pins for ours.
"""
import re
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGML_QUANT_SIZES, quants

N_COLS = 256
FORMATS = ["F16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"]


def same_floats(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


# (name, block bytes, offsets of the binary16 scales in the block)
K_FORMATS = [("Q2_K", 84, (80, 82)), ("Q3_K", 110, (108,)), ("Q4_K", 144, (0, 2)),
             ("Q5_K", 176, (0, 2)), ("Q6_K", 210, (208,))]
K_BLOCKS = 64
K_SEED = 1000  # format i uses K_SEED + i
MASK = (1 << 64) - 1


def splitmix64(state: int) -> tuple[int, int]:
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def k_blocks(type_size: int, halves: tuple[int, ...], seed: int) -> np.ndarray:
    """Random bytes, then each binary16 scale replaced by a finite value (any sign, zero and
    subnormals included)."""
    state = seed
    out = np.zeros((K_BLOCKS, type_size), dtype=np.uint8)
    for b in range(K_BLOCKS):
        for i in range(type_size):
            state, r = splitmix64(state)
            out[b, i] = r & 0xFF
        for off in halves:
            state, r = splitmix64(state)
            exp = (r >> 8) % 31
            h = (r & 0x8000) | exp << 10 | (r >> 16) & 0x3FF
            out[b, off], out[b, off + 1] = h & 0xFF, h >> 8
    return out


def fnv1a(words: np.ndarray) -> int:
    h = 0xCBF29CE484222325
    for w in words.ravel().tolist():
        h = ((h ^ w) * 0x100000001B3) & MASK
    return h


def check_k_dequantization() -> int:
    source = (Path(__file__).parent / "test_quant_formats.cpp").read_text()
    pinned = {m[1].upper(): int(m[2], 16)
              for m in re.finditer(r"\{ggml_type::(q\d_k), (0x[0-9a-f]+)ull\}", source)}
    failures = 0
    for i, (name, size, halves) in enumerate(K_FORMATS):
        blocks = k_blocks(size, halves, K_SEED + i)
        y = np.asarray(quants.dequantize(blocks, T[name]), dtype=np.float32)
        got = fnv1a(y.view(np.uint32))
        if name not in pinned:
            failures += 1
            print(f"{name}: no pinned hash found in test_quant_formats.cpp")
        elif got != pinned[name]:
            failures += 1
            print(f"{name}: gguf-py's dequantization hashes to {got:#x}, ours to {pinned[name]:#x}")
        else:
            print(f"{name}: {K_BLOCKS} random blocks dequantize identically to gguf-py")
    return failures


def main() -> int:
    d = Path(sys.argv[1])
    x = np.fromfile(d / "input.f32", dtype=np.float32).reshape(-1, N_COLS)
    failures = 0
    for name in FORMATS:
        qtype = T[name]
        ours = np.fromfile(d / f"{name}.bin", dtype=np.uint8).reshape(x.shape[0], -1)
        our_back = np.fromfile(d / f"{name}.deq.f32", dtype=np.float32).reshape(x.shape)
        with np.errstate(over="ignore", invalid="ignore"):
            theirs = np.asarray(quants.quantize(x, qtype)).view(np.uint8).reshape(ours.shape)
            their_back = np.asarray(quants.dequantize(ours, qtype), dtype=np.float32).reshape(x.shape)
        block_size, type_size = GGML_QUANT_SIZES[qtype]
        qb = ours.reshape(-1, type_size)
        tb = theirs.reshape(-1, type_size).copy()
        if name in ("Q4_0", "Q5_0"):
            all_zero = (x.reshape(-1, block_size) == 0).all(axis=1)
            tb[all_zero, 0:2] = [0x00, 0x80]
        bad = np.nonzero((qb != tb).any(axis=1))[0]
        if bad.size:
            failures += 1
            b = int(bad[0])
            print(f"{name}: {bad.size} of {qb.shape[0]} blocks differ; first is block {b}")
            print("  input:", x.reshape(-1, block_size)[b].tolist())
            print("  ours  :", qb[b].tolist())
            print("  gguf  :", tb[b].tolist())
        eq = same_floats(our_back, their_back)
        if not eq.all():
            failures += 1
            i = int(np.argmin(eq.ravel()))
            print(f"{name}: dequantization differs at {int((~eq).sum())} elements; first at {i}: "
                  f"ours {our_back.ravel()[i]!r}, gguf {their_back.ravel()[i]!r}")
        if not bad.size and eq.all():
            print(f"{name}: {qb.shape[0]} blocks identical to gguf-py")
    failures += check_k_dequantization()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
