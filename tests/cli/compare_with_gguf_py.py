#!/usr/bin/env python3
"""Cross-checks `tokenscope-cli inspect --json` against a second GGUF implementation.

The `gguf` Python package (PyPI) reads the same files independently; every metadata key,
type and value (arrays: length and first items) and every tensor's name, type, shape, byte
size and offset must agree. Files: the default Gemma 3 270M model and the llama-spm
vocabulary from ../shared/testdata, whichever are present.

Exit status: 0 all agree, 1 a mismatch, 77 nothing to compare (CTest reports a skip).
"""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

try:
    from gguf import GGUFReader, GGUFValueType
except ImportError:
    print("SKIP: the gguf Python package is not installed (tools/setup-deps installs it)")
    sys.exit(77)

HERE = Path(__file__).resolve()
SHARED = HERE.parents[3] / "shared" / "testdata" / "llama-spm" / "ggml-vocab-llama-spm.gguf"


def default_model() -> Path:
    models = os.environ.get("TOKENSCOPE_MODELS")
    if not models:
        data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        models = str(Path(data) / "tokenscope" / "models")
    return Path(models) / "gemma-3-270m-q4_k_m.gguf"


TYPE_NAMES = {
    GGUFValueType.UINT8: "uint8", GGUFValueType.INT8: "int8", GGUFValueType.UINT16: "uint16",
    GGUFValueType.INT16: "int16", GGUFValueType.UINT32: "uint32", GGUFValueType.INT32: "int32",
    GGUFValueType.FLOAT32: "float32", GGUFValueType.BOOL: "bool", GGUFValueType.STRING: "string",
    GGUFValueType.ARRAY: "array", GGUFValueType.UINT64: "uint64", GGUFValueType.INT64: "int64",
    GGUFValueType.FLOAT64: "float64",
}


def same_scalar(ours, theirs) -> bool:
    if isinstance(theirs, float):
        if math.isnan(theirs):
            return ours is None
        return ours is not None and math.isclose(float(ours), theirs, rel_tol=1e-6, abs_tol=1e-30)
    if isinstance(theirs, bytes):
        theirs = theirs.decode("utf-8", errors="replace")
    return ours == theirs


def compare(cli: str, path: Path) -> list[str]:
    problems = []
    ours = json.loads(subprocess.run([cli, "inspect", "--model", str(path), "--json"],
                                     check=True, capture_output=True, text=True).stdout)
    reader = GGUFReader(str(path))
    # The python reader also lists the header fields as GGUF.* pseudo-keys; skip them.
    theirs = {k: f for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    ours_by_key = {m["key"]: m for m in ours["metadata"]}
    if list(ours_by_key) != list(theirs):
        problems.append(f"{path.name}: key lists differ: {sorted(set(ours_by_key) ^ set(theirs))}")
    for key, field in theirs.items():
        mine = ours_by_key.get(key)
        if mine is None:
            continue
        main_type = field.types[0]
        if mine["type"] != TYPE_NAMES[main_type]:
            problems.append(f"{path.name}: {key}: type {mine['type']} vs {TYPE_NAMES[main_type]}")
            continue
        if main_type == GGUFValueType.ARRAY:
            items = field.contents()
            if mine["value"]["length"] != len(items):
                problems.append(f"{path.name}: {key}: length {mine['value']['length']} vs {len(items)}")
            for i, (a, b) in enumerate(zip(mine["value"]["head"], items)):
                if not same_scalar(a, b):
                    problems.append(f"{path.name}: {key}[{i}]: {a!r} vs {b!r}")
        elif not same_scalar(mine["value"], field.contents()):
            problems.append(f"{path.name}: {key}: {mine['value']!r} vs {field.contents()!r}")
    if len(ours["tensors"]) != len(reader.tensors):
        problems.append(f"{path.name}: {len(ours['tensors'])} tensors vs {len(reader.tensors)}")
    for mine, t in zip(ours["tensors"], reader.tensors):
        expected = (t.name, t.tensor_type.name, [int(d) for d in t.shape], int(t.n_bytes),
                    int(t.data_offset) - ours["data_offset"])
        got = (mine["name"], mine["type"], mine["shape"], mine["bytes"], mine["offset"])
        if got != expected:
            problems.append(f"{path.name}: tensor {got} vs {expected}")
    print(f"{path.name}: {len(theirs)} keys and {len(reader.tensors)} tensors compared, "
          f"{len(problems)} differences")
    return problems


def main() -> int:
    cli = sys.argv[1]
    files = [p for p in (default_model(), SHARED) if p.exists()]
    if not files:
        print("SKIP: neither the default model nor ../shared/testdata is present")
        return 77
    problems = [p for f in files for p in compare(cli, f)]
    for p in problems[:50]:
        print("MISMATCH:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
