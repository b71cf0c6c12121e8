"""One read of a GGUF file: its key-value metadata and tensor index, with the tensor data memory-mapped.

Layout (llama.cpp's docs/gguf.md, versions 2 and 3, little-endian): magic `GGUF`, u32 version, u64 tensor count,
u64 key-value count; the key-value pairs (string key, u32 value type, value); per tensor its name, u32 number of
dimensions, u64 dimensions (innermost first), u32 ggml type and u64 offset; then padding to `general.alignment`
(32 by default), after which each tensor's data sits at its offset.

`gguf.GGUFReader` reads the same layout but builds a numpy view for every item of every array (slow for a 49k-token
vocabulary and its merges); this reads the metadata with `struct` and the tensors as numpy views of one memory map,
which the weights and the tokenizer share. Tensor views have `GGUFReader`'s dtype and shape, so
`gguf.quants.dequantize` takes them unchanged.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import struct
from typing import Any

import gguf
import numpy as np

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_SCALAR_DTYPES = {kind: np.dtype(fmt) for kind, fmt in _SCALARS.items()}
_STRING, _ARRAY = 8, 9
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")
_DEFAULT_ALIGNMENT = 32
# ggml types GGUFReader views with their own dtype; every other type is viewed as raw bytes (quantised blocks).
_PLAIN_DTYPES = {
    gguf.GGMLQuantizationType.F16: np.float16, gguf.GGMLQuantizationType.F32: np.float32,
    gguf.GGMLQuantizationType.F64: np.float64, gguf.GGMLQuantizationType.I8: np.int8,
    gguf.GGMLQuantizationType.I16: np.int16, gguf.GGMLQuantizationType.I32: np.int32,
    gguf.GGMLQuantizationType.I64: np.int64,
}


@dataclasses.dataclass(frozen=True)
class GGUFTensor:
    """One tensor of a GGUF file: `shape` as GGUF stores it (innermost first), `data` a read-only view of the
    memory map (as `GGUFReader.tensors[i].data`: typed for plain types, uint8 blocks for quantised ones)."""

    name: str
    tensor_type: gguf.GGMLQuantizationType
    shape: tuple[int, ...]
    data: np.ndarray = dataclasses.field(repr=False)

    def dequantize(self) -> np.ndarray:
        """float32 values in numpy order (outermost first), dequantised by the gguf package."""
        shape = tuple(reversed(self.shape))
        if self.tensor_type in _PLAIN_DTYPES:
            return np.asarray(gguf.quants.dequantize(self.data, self.tensor_type), np.float32).reshape(shape)
        # gguf.quants works through the rows 16 at a time (one numpy pass each); every block dequantises on its own,
        # so a few large single-row slices give the same values with far fewer passes.
        blocks = self.data.reshape(-1)
        step = -(-(1 << 22) // self.data.shape[-1]) * self.data.shape[-1]  # ~4 MB of whole rows per pass
        out = np.empty(int(np.prod(shape)), np.float32)
        done = 0
        for start in range(0, blocks.size, step):
            part = gguf.quants.dequantize(blocks[start:start + step].reshape(1, -1), self.tensor_type).reshape(-1)
            out[done:done + part.size] = part
            done += part.size
        return out.reshape(shape)


@dataclasses.dataclass(frozen=True)
class GGUFFile:
    """A GGUF file's metadata (key -> value: str, int, float, bool or a list of them) and tensors by name."""

    path: str
    metadata: dict[str, Any] = dataclasses.field(repr=False)  # the vocabulary alone is 49k strings
    tensors: dict[str, GGUFTensor] = dataclasses.field(repr=False)

    def get(self, key: str, default: Any = None) -> Any:
        """One metadata value, or `default` when absent."""
        return self.metadata.get(key, default)


def read_gguf(path: str | os.PathLike) -> GGUFFile:
    """Metadata and tensor index of the GGUF file at `path`; a missing file is a FileNotFoundError and anything
    that is not a readable GGUF file a ValueError, each naming the file."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"GGUF model file not found: {path}")
    try:
        with open(path, "rb") as f:
            # An empty file cannot be mapped; it is not GGUF either.
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if os.fstat(f.fileno()).st_size else b""
        return _parse(path, buf)
    except (ValueError, KeyError, struct.error, OverflowError, MemoryError) as e:
        raise ValueError(f"{path}: not a readable GGUF file ({e})") from e


def _parse(path: str, buf) -> GGUFFile:
    if buf[:4] != b"GGUF":
        raise ValueError(f"bad magic {bytes(buf[:4])!r}, expected b'GGUF'")
    version = _U32.unpack_from(buf, 4)[0]
    if version not in (2, 3):
        kind = "a big-endian file" if version & 0xFFFF == 0 else f"version {version}"
        raise ValueError(f"{kind}; only little-endian GGUF versions 2 and 3 are supported")
    num_tensors, num_kv = struct.unpack_from("<QQ", buf, 8)
    pos = 24

    def value(kind):
        nonlocal pos
        if kind == _STRING:
            (size,) = _U64.unpack_from(buf, pos)
            pos += 8 + size
            if pos > len(buf):
                raise ValueError("a string runs past the end of the file")
            return str(buf[pos - size:pos], "utf-8")
        if kind == _ARRAY:
            item_kind, count = _U32.unpack_from(buf, pos)[0], _U64.unpack_from(buf, pos + 4)[0]
            pos += 12
            if item_kind in _SCALAR_DTYPES:  # one numpy read for the whole array; .tolist() gives Python values
                items = np.frombuffer(buf, _SCALAR_DTYPES[item_kind], count, pos)
                pos += items.nbytes
                return items.tolist()
            if item_kind == _STRING:  # the vocabulary and the merges: the bulk of the metadata
                out, unpack = [], _U64.unpack_from
                for _ in range(count):
                    (size,) = unpack(buf, pos)
                    pos += 8 + size
                    out.append(str(buf[pos - size:pos], "utf-8"))
                if pos > len(buf):
                    raise ValueError("a string array runs past the end of the file")
                return out
            return [value(item_kind) for _ in range(count)]
        if kind not in _SCALARS:
            raise ValueError(f"unknown metadata value type {kind} at byte {pos}")
        (result,) = struct.unpack_from(_SCALARS[kind], buf, pos)
        pos += _SCALAR_DTYPES[kind].itemsize
        return result

    metadata: dict[str, Any] = {}
    for _ in range(num_kv):
        key = value(_STRING)
        if key in metadata:
            raise ValueError(f"duplicate metadata key '{key}'")
        (kind,) = _U32.unpack_from(buf, pos)
        pos += 4
        metadata[key] = value(kind)

    infos = []
    for _ in range(num_tensors):
        name = value(_STRING)
        (n_dims,) = _U32.unpack_from(buf, pos)
        shape = struct.unpack_from(f"<{n_dims}Q", buf, pos + 4)
        raw_type, offset = struct.unpack_from("<IQ", buf, pos + 4 + 8 * n_dims)
        pos += 4 + 8 * n_dims + 12
        infos.append((name, shape, gguf.GGMLQuantizationType(raw_type), offset))

    alignment = metadata.get("general.alignment", _DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"general.alignment is {alignment!r}, not a power of two")
    data_start = -(-pos // alignment) * alignment
    tensors: dict[str, GGUFTensor] = {}
    for name, shape, tensor_type, offset in infos:
        if name in tensors:
            raise ValueError(f"duplicate tensor '{name}'")
        np_shape = tuple(reversed(shape))
        n_elems = int(np.prod(shape, dtype=np.int64))
        if tensor_type in _PLAIN_DTYPES:
            dtype, count = np.dtype(_PLAIN_DTYPES[tensor_type]), n_elems
        else:
            block_size, type_size = gguf.GGML_QUANT_SIZES[tensor_type]
            dtype, count = np.dtype(np.uint8), n_elems * type_size // block_size
            np_shape = gguf.quants.quant_shape_to_byte_shape(np_shape, tensor_type)
        start = data_start + offset
        if start + count * dtype.itemsize > len(buf):
            raise ValueError(f"tensor '{name}' runs past the end of the file")
        data = np.frombuffer(buf, dtype, count, start).reshape(np_shape)
        tensors[name] = GGUFTensor(name, tensor_type, tuple(int(d) for d in shape), data)
    return GGUFFile(path, metadata, tensors)
