"""Reads files written by our GGUF writer with gguf-py's GGUFReader, an independent reader.

Usage: check_with_gguf_py.py DENSE.gguf SPARSE.gguf (written by gguf_write_sample).
"""
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader, GGUFValueType

EXPECTED_FIELDS = {
    "general.architecture": (GGUFValueType.STRING, "llama"),
    "general.name": (GGUFValueType.STRING, "sample \u2581 model"),
    "test.u8": (GGUFValueType.UINT8, 200),
    "test.i8": (GGUFValueType.INT8, -100),
    "test.u16": (GGUFValueType.UINT16, 60000),
    "test.i16": (GGUFValueType.INT16, -30000),
    "llama.block_count": (GGUFValueType.UINT32, 2),
    "test.i32": (GGUFValueType.INT32, -123456),
    "llama.attention.layer_norm_rms_epsilon": (GGUFValueType.FLOAT32, float(np.float32(1e-5))),
    "test.bool": (GGUFValueType.BOOL, True),
    "test.u64": (GGUFValueType.UINT64, 1 << 40),
    "test.i64": (GGUFValueType.INT64, -(1 << 40)),
    "test.f64": (GGUFValueType.FLOAT64, 0.125),
    "tokenizer.ggml.tokens": (GGUFValueType.STRING, ["<unk>", "<s>", "</s>", "\u2581hi"]),
    "tokenizer.ggml.scores": (GGUFValueType.FLOAT32, [0.0, -1.0, -2.0, -3.5]),
    "tokenizer.ggml.token_type": (GGUFValueType.INT32, [2, 3, 3, 1]),
}
ARRAYS = {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"}


# (block size, bytes per block) of the ggml type ids 0..15 (docs/quantization.md, the type table).
# Ids 16..18 (I8/I16/I32 in PowerInfer's ggml) are IQ quants in current gguf-py, so the samples
# hold no tensor of those types.
TYPE_SIZES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
              8: (32, 34), 9: (32, 40), 10: (256, 84), 11: (256, 110), 12: (256, 144),
              13: (256, 176), 14: (256, 210), 15: (256, 292)}


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def check_fields(reader, sparse, alignment):
    expected = dict(EXPECTED_FIELDS)
    if sparse:
        expected["powerinfer.sparse_threshold"] = (GGUFValueType.FLOAT32, 0.5)
    if alignment != 32:
        expected["general.alignment"] = (GGUFValueType.UINT32, alignment)
    names = [name for name in reader.fields if not name.startswith("GGUF.")]
    if sorted(names) != sorted(expected):
        fail(f"keys differ: {sorted(names)} != {sorted(expected)}")
    for key, (vtype, want) in expected.items():
        field = reader.fields[key]
        types = [GGUFValueType.ARRAY, vtype] if key in ARRAYS else [vtype]
        if field.types != types:
            fail(f"{key}: types {field.types} != {types}")
        got = field.contents()
        if got != want:
            fail(f"{key}: {got!r} != {want!r}")
    if reader.alignment != alignment:
        fail(f"alignment {reader.alignment} != {alignment}")


def check_tensors(reader, alignment):
    tensors = {t.name: t for t in reader.tensors}
    if list(tensors) != ["token_embd.weight", "output_norm.weight", "blk.0.ffn_up.weight",
                         "blk.0.ffn_gate.weight"]:
        fail(f"tensor names {list(tensors)}")
    embd = tensors["token_embd.weight"]
    if embd.tensor_type != GGMLQuantizationType.F32 or embd.shape.tolist() != [4, 3]:
        fail(f"token_embd: {embd.tensor_type} {embd.shape.tolist()}")
    want = (0.5 * np.arange(12, dtype=np.float32) - 1.0).reshape(3, 4)
    if not np.array_equal(embd.data, want):
        fail(f"token_embd data {embd.data}")
    norm = tensors["output_norm.weight"]
    if norm.tensor_type != GGMLQuantizationType.F16 or norm.shape.tolist() != [8]:
        fail(f"output_norm: {norm.tensor_type} {norm.shape.tolist()}")
    if not np.array_equal(norm.data.astype(np.float32), 0.25 * np.arange(8, dtype=np.float32)):
        fail(f"output_norm data {norm.data}")
    up = tensors["blk.0.ffn_up.weight"]
    if up.tensor_type != GGMLQuantizationType.Q8_0 or up.shape.tolist() != [32, 2]:
        fail(f"ffn_up: {up.tensor_type} {up.shape.tolist()}")
    if up.n_bytes != 68 or up.data.tobytes() != bytes((i * 3) & 0xFF for i in range(68)):
        fail("ffn_up bytes differ")
    gate = tensors["blk.0.ffn_gate.weight"]
    if gate.tensor_type != GGMLQuantizationType.Q4_K or gate.shape.tolist() != [256, 1]:
        fail(f"ffn_gate: {gate.tensor_type} {gate.shape.tolist()}")
    if gate.n_bytes != 144 or gate.data.tobytes() != bytes(255 - i for i in range(144)):
        fail("ffn_gate bytes differ")
    for t in reader.tensors:
        if t.data_offset % alignment != 0:
            fail(f"{t.name}: data offset {t.data_offset} not aligned to {alignment}")


def main():
    dense, sparse = Path(sys.argv[1]), Path(sys.argv[2])
    for type_id, sizes in TYPE_SIZES.items():
        if GGML_QUANT_SIZES[GGMLQuantizationType(type_id)] != sizes:
            fail(f"gguf-py type {type_id} sizes {GGML_QUANT_SIZES[GGMLQuantizationType(type_id)]}"
                 f" differ from ours, {sizes}")
    if dense.read_bytes()[:4] != b"GGUF" or sparse.read_bytes()[:4] != b"PWRI":
        fail("magics are not GGUF / PWRI")
    reader = GGUFReader(dense)
    check_fields(reader, sparse=False, alignment=32)
    check_tensors(reader, alignment=32)
    # gguf-py rejects the PWRI magic ("GGUF magic invalid"), so the sparse file is read from a
    # copy whose bytes 0..3 are patched to GGUF; the C++ tests cover the reader accepting PWRI.
    with tempfile.TemporaryDirectory() as tmp:
        patched = Path(tmp) / "sparse-as-gguf.gguf"
        shutil.copyfile(sparse, patched)
        with open(patched, "r+b") as f:
            f.write(b"GGUF")
        reader = GGUFReader(patched)
        check_fields(reader, sparse=True, alignment=64)
        check_tensors(reader, alignment=64)
        del reader  # release the memory map before the folder is removed
    print("gguf-py read both files: OK")


if __name__ == "__main__":
    main()
