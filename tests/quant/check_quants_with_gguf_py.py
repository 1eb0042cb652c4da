"""Checks our quantizers against gguf-py's (PyPI `gguf`, gguf.quants), which reproduce ggml's
reference quantizers bit for bit.

usage: check_quants_with_gguf_py.py DIR   (DIR written by quant_write_sample)
For every format: gguf.quants.quantize(input) must equal our bytes exactly, and
gguf.quants.dequantize(our bytes) must equal our dequantization exactly (NaN where NaN).

One known divergence of gguf-py from ggml's C reference is corrected for: in a Q4_0/Q5_0 block
whose elements are all zero, C starts the signed maximum at +0.0 and so stores d = -0.0
(0x8000), while gguf-py takes the block's first element, which may be -0.0, giving d = +0.0.
We follow C.
"""
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGML_QUANT_SIZES, quants

N_COLS = 256
FORMATS = ["F16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"]


def same_floats(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


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
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
