"""A small GGUF reader, independent of the library and of gguf-py, for the NumPy oracle.

Reads versions 2 and 3, both magics ("GGUF" dense, "PWRI" PowerInfer sparse), either byte
order (a version whose low 16 bits are zero marks a byte-swapped file), every metadata value
type, and F32/F16/F64/I8/I16/I32/I64 tensors; quantized tensors (Q4_0..Q8_0, Q2_K..Q6_K) are
dequantized to float32 by the gguf package, when it is installed. Tensors come back as NumPy arrays whose shape is
the ggml shape reversed, so a weight with ne=[in, out] is an (out, in) array and y = W @ x.
"""

import struct
import sys

import numpy as np

MAGICS = {b"GGUF": False, b"PWRI": True}  # magic -> sparse

# value type id -> (struct format, size) for scalars
SCALARS = {
    0: ("B", 1), 1: ("b", 1), 2: ("H", 2), 3: ("h", 2), 4: ("I", 4), 5: ("i", 4),
    6: ("f", 4), 7: ("?", 1), 10: ("Q", 8), 11: ("q", 8), 12: ("d", 8),
}
NUMPY_SCALARS = {
    0: "u1", 1: "i1", 2: "u2", 3: "i2", 4: "u4", 5: "i4", 6: "f4", 7: "u1", 10: "u8",
    11: "i8", 12: "f8",
}
STRING, ARRAY = 8, 9

# ggml type id -> (name, NumPy dtype) for the plain types this reader converts
TENSOR_TYPES = {
    0: ("F32", "f4"), 1: ("F16", "f2"), 16: ("I8", "i1"), 17: ("I16", "i2"),
    18: ("I32", "i4"), 27: ("I64", "i8"), 28: ("F64", "f8"),
}


# ggml type id -> (name, elements per block, bytes per block) of the quantized types read through
# the gguf package
QUANTIZED_TYPES = {
    2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34), 10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210),
}


class FormatError(ValueError):
    pass


class TensorInfo:
    def __init__(self, name, ne, type_id, offset):
        self.name = name
        self.ne = ne            # ggml order, ne[0] contiguous
        self.type_id = type_id
        self.offset = offset    # relative to the data section

    @property
    def shape(self):
        return tuple(reversed(self.ne))


class _Cursor:
    def __init__(self, buf, endian):
        self.buf = buf
        self.pos = 0
        self.endian = endian

    def take(self, n):
        if n < 0 or self.pos + n > len(self.buf):
            raise FormatError(f"truncated file: need {n} bytes at offset {self.pos}")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def scalar(self, type_id):
        fmt, size = SCALARS[type_id]
        return struct.unpack(self.endian + fmt, self.take(size))[0]

    def u32(self):
        return self.scalar(4)

    def u64(self):
        return self.scalar(10)

    def string(self):
        return bytes(self.take(self.u64())).decode("utf-8", errors="surrogateescape")

    def value(self, type_id, depth=0):
        if type_id in SCALARS:
            return self.scalar(type_id)
        if type_id == STRING:
            return self.string()
        if type_id == ARRAY:
            if depth > 0:
                raise FormatError("nested arrays are not allowed")
            elem = self.u32()
            count = self.u64()
            if elem in NUMPY_SCALARS:
                size = SCALARS[elem][1]
                raw = self.take(count * size)
                arr = np.frombuffer(raw, dtype=np.dtype(NUMPY_SCALARS[elem]).newbyteorder(
                    self.endian)).astype(NUMPY_SCALARS[elem])
                return arr.astype(bool) if elem == 7 else arr
            if elem == STRING:
                return [self.string() for _ in range(count)]
            raise FormatError(f"bad array element type {elem}")
        raise FormatError(f"unknown value type {type_id}")


class GGUFFile:
    """A parsed GGUF file: metadata (dict in file order), value types, tensor infos."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            self.buf = memoryview(f.read())
        magic = bytes(self.buf[:4])
        if magic not in MAGICS:
            raise FormatError(f"{path}: bad magic {magic!r}")
        self.sparse = MAGICS[magic]
        (version,) = struct.unpack("<I", self.buf[4:8])
        endian = "<"
        if version & 0xFFFF == 0:
            endian = ">"
            (version,) = struct.unpack(">I", self.buf[4:8])
        if version not in (2, 3):
            raise FormatError(f"{path}: unsupported GGUF version {version}")
        self.version = version
        self.endian = endian
        cur = _Cursor(self.buf, endian)
        cur.pos = 8
        n_tensors = cur.u64()
        n_kv = cur.u64()
        self.metadata = {}
        self.types = {}
        for _ in range(n_kv):
            key = cur.string()
            type_id = cur.u32()
            self.metadata[key] = cur.value(type_id)
            self.types[key] = type_id
        self.tensors = {}
        for _ in range(n_tensors):
            name = cur.string()
            n_dims = cur.u32()
            if n_dims > 4:
                raise FormatError(f"{path}: tensor {name} has {n_dims} dims")
            ne = [cur.u64() for _ in range(n_dims)]
            type_id = cur.u32()
            offset = cur.u64()
            self.tensors[name] = TensorInfo(name, ne, type_id, offset)
        self.alignment = int(self.metadata.get("general.alignment", 32))
        if self.alignment <= 0 or self.alignment & (self.alignment - 1):
            raise FormatError(f"{path}: bad alignment {self.alignment}")
        a = self.alignment
        self.data_offset = (cur.pos + a - 1) // a * a

    def get(self, key, default=None):
        return self.metadata.get(key, default)

    def tensor(self, name):
        """The tensor as a NumPy array (ggml shape reversed), in its stored dtype."""
        info = self.tensors.get(name)
        if info is None:
            raise KeyError(f"{self.path}: no tensor {name}")
        if info.type_id in QUANTIZED_TYPES:
            return self._dequantized(name, info)
        if info.type_id not in TENSOR_TYPES:
            raise FormatError(f"{self.path}: tensor {name} has unsupported type {info.type_id}")
        dtype = np.dtype(TENSOR_TYPES[info.type_id][1]).newbyteorder(self.endian)
        count = int(np.prod(info.ne, dtype=np.int64)) if info.ne else 1
        start = self.data_offset + info.offset
        end = start + count * dtype.itemsize
        if end > len(self.buf):
            raise FormatError(f"{self.path}: tensor {name} runs past the end of the file")
        arr = np.frombuffer(self.buf[start:end], dtype=dtype)
        return arr.astype(dtype.newbyteorder("=")).reshape(info.shape)

    def _dequantized(self, name, info):
        """A quantized tensor as float32, by gguf-py's dequantization (an implementation
        independent of the library's; little-endian files only, as ggml's blocks are)."""
        if self.endian != "<":
            raise FormatError(f"{self.path}: tensor {name}: quantized blocks of a byte-swapped file")
        try:
            from gguf import GGMLQuantizationType
            from gguf.quants import dequantize
        except ImportError as e:
            raise FormatError(f"{self.path}: tensor {name} is quantized and the gguf package, "
                              f"which dequantizes it here, is missing ({e})") from e
        block, size = QUANTIZED_TYPES[info.type_id][1:]
        count = int(np.prod(info.ne, dtype=np.int64))
        if info.ne[0] % block:
            raise FormatError(f"{self.path}: tensor {name}: rows of {info.ne[0]} are not blocks of "
                              f"{block}")
        start = self.data_offset + info.offset
        end = start + count // block * size
        if end > len(self.buf):
            raise FormatError(f"{self.path}: tensor {name} runs past the end of the file")
        raw = np.frombuffer(self.buf[start:end], dtype=np.uint8).reshape(-1, info.ne[0] // block
                                                                         * size)
        return dequantize(raw, GGMLQuantizationType(info.type_id)).astype(np.float32).reshape(
            info.shape)

    def type_name(self, name):
        t = self.tensors[name].type_id
        return TENSOR_TYPES.get(t, QUANTIZED_TYPES.get(t, (f"type{t}",)))[0]


def main(argv):
    for path in argv[1:]:
        f = GGUFFile(path)
        print(f"{path}: v{f.version} {'PWRI' if f.sparse else 'GGUF'} "
              f"{len(f.metadata)} keys {len(f.tensors)} tensors")
        for k, v in f.metadata.items():
            if isinstance(v, (list, np.ndarray)) and len(v) > 8:
                v = f"[{len(v)} values]"
            print(f"  {k} = {v}")
        for t in f.tensors.values():
            print(f"  {t.name} ne={t.ne} {f.type_name(t.name)}")


if __name__ == "__main__":
    main(sys.argv)
