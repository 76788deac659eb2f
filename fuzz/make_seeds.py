#!/usr/bin/env python3
"""Writes a few small, valid GGUF files as the fuzzer's starting corpus.

Written with struct from the GGUF layout (not with our writer), so the seeds are an
independent description of the format: header, metadata of every value type, tensor infos,
aligned data.
"""
import struct
import sys
from pathlib import Path


def gguf_string(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def kv(key: str, type_id: int, payload: bytes) -> bytes:
    return gguf_string(key.encode()) + struct.pack("<I", type_id) + payload


def build(version: int, tensors, alignment: int = 32, extra_kv=()) -> bytes:
    kvs = [
        kv("general.architecture", 8, gguf_string(b"llama")),
        kv("general.alignment", 4, struct.pack("<I", alignment)),
        kv("llama.block_count", 4, struct.pack("<I", 2)),
        kv("llama.attention.head_count", 4, struct.pack("<I", 4)),
        kv("llama.embedding_length", 4, struct.pack("<I", 64)),
        kv("tokenizer.ggml.tokens", 9,
           struct.pack("<IQ", 8, 3) + gguf_string(b"<s>") + gguf_string(b"\xe2\x96\x81a") + gguf_string(b"b")),
        kv("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, 3) + struct.pack("<3f", 0, -1, -2)),
        kv("x.u8", 0, b"\x07"), kv("x.i8", 1, b"\xf9"), kv("x.u16", 2, b"\x01\x02"),
        kv("x.i16", 3, b"\xff\xff"), kv("x.i32", 5, struct.pack("<i", -5)),
        kv("x.bool", 7, b"\x01"), kv("x.u64", 10, struct.pack("<Q", 1 << 40)),
        kv("x.i64", 11, struct.pack("<q", -1)), kv("x.f64", 12, struct.pack("<d", 0.5)),
        kv("x.nested", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 4, 2) + struct.pack("<2I", 1, 2)),
        *extra_kv,
    ]
    header = struct.pack("<IIQQ", 0x46554747, version, len(tensors), len(kvs)) + b"".join(kvs)
    infos, data, offset = b"", b"", 0
    for name, dims, type_id, nbytes in tensors:
        infos += gguf_string(name.encode()) + struct.pack("<I", len(dims))
        infos += b"".join(struct.pack("<q", d) for d in dims)
        infos += struct.pack("<IQ", type_id, offset)
        blob = bytes((i * 31 + 7) & 0xFF for i in range(nbytes))
        blob += b"\0" * ((-len(blob)) % alignment)
        data += blob
        offset += len(blob)
    out = header + infos
    out += b"\0" * ((-len(out)) % alignment)
    return out + data


def main() -> None:
    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    f32 = ("a.weight", [8, 2], 0, 64)
    q8 = ("b.weight", [32, 2], 8, 68)
    q4k = ("c.weight", [256], 12, 144)
    q6k = ("d.weight", [256], 14, 210)
    (target / "v3_tensors.gguf").write_bytes(build(3, [f32, q8, q4k, q6k]))
    (target / "v2_tensors.gguf").write_bytes(build(2, [f32, q8]))
    (target / "v3_vocab_only.gguf").write_bytes(build(3, []))
    (target / "v3_align64.gguf").write_bytes(build(3, [q4k, f32], alignment=64))


if __name__ == "__main__":
    main()
