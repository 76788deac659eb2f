#!/usr/bin/env python3
"""The quantization lab (tokenscope-cli imatrix / quantize / quant-eval) against an independent
implementation, the `gguf` Python package (numpy quantizers and dequantizers, GGUFReader).

Usage: check_quantization_with_gguf_py.py TOKENSCOPE_CLI
Exit 77 (CTest: skipped) when numpy or gguf is not installed.

Checks, on tiny synthetic Llama models written at test time:
 1. F16, BF16: bit-exact with gguf.quants.quantize.
    Q8_0, Q4_0, Q4_1, Q5_0, Q5_1: the per-block scale (and min) bytes are identical; each
    dequantized element differs from gguf's by 0 or one quantization step (a code differs by at
    most 1: we round against the f16-rounded scale, gguf against the f32 one, and gguf rounds
    ties away from zero); at most 2 % of the codes differ; our RMS error is not larger than
    gguf's (+0.1 %).
 2. Q2_K..Q6_K (gguf has no quantizer for them): gguf's dequantizer agrees with ours (our
    quantize --type F32 of the file) to 1e-6 relative; the float64 RMS error against the
    source is below a per-type bound; requantizing our own dequantized output reproduces it
    closely (RMS change < 25 % of the first rounding's error).
 3. Every output reads with GGUFReader and with our `inspect --json`; metadata is copied and
    general.file_type set; the recipes give the documented types.
 4. imatrix: a model whose norm weights make 8 input columns high-variance; the imatrix finds
    them; importance-weighted Q4_0 / Q4_K error on those columns is lower than unweighted, and
    the KL divergence on the calibration text is not worse.
 5. quant-eval: base against itself KL = 0, dPPL = 0, top-1 100 %; Q4_0 copy KL > 0; --plot
    writes a 960 x 600 PNG (checked by decoding it here with zlib) with the point colour at the
    Q4_0 model's mean KL, and an SVG naming both models; a .jpg plot is refused before any work.
 6. Bad input: unknown type, row lengths that do not fit (fallback named), an imatrix from
    another model, a write that fails midway (file size limit): no file under the output name,
    an existing output untouched, no temporary left.
"""
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType as Q
    from gguf import quants
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e}")
    sys.exit(77)

CLI = sys.argv[1]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXT = os.path.join(ROOT, "resources", "text", "perplexity_english.txt")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", flush=True)


def run(*args, ok=True, **kw):
    p = subprocess.run([CLI, *args], capture_output=True, text=True, **kw)
    if ok and p.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(args)} exited {p.returncode}: {p.stderr[-2000:]}")
    return p


def png_pixels(path):
    """(width, height, rows of RGB bytes) of an 8-bit RGB PNG without filtering (our writer's)."""
    import struct
    import zlib
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"FAIL: {path} is not a PNG")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            if (depth, colour) != (8, 2):
                raise SystemExit(f"FAIL: {path}: depth {depth}, colour type {colour}")
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = 1 + 3 * width
    return width, height, [raw[y * stride + 1:(y + 1) * stride] for y in range(height)]


def check_plot_png(path, ev):
    """The plot of quant-eval's JSON `ev`: its size, and the Q4_0 model's point where the layout
    (engine/quant/eval_plot.h: margins 90/30/50/70, x from 0 in 1-2-5 ticks past 105 % of the
    largest file, y in whole decades of the mean KL up to the p99) puts it."""
    import math
    width, height, rows = png_pixels(path)
    check((width, height) == (960, 600), f"plot size {width} x {height}")
    q4 = ev["models"][1]
    mib = lambda m: m["file_bytes"] / 1048576
    largest = max(mib(ev["base"]), *(mib(m) for m in ev["models"]))
    raw = largest * 1.05 / 6
    decade = 10 ** math.floor(math.log10(raw))
    step = next(m * decade for m in (1, 2, 5, 10) if m * decade >= raw)
    x_max = math.ceil(largest * 1.05 / step) * step
    positive = [m["kl_mean"] for m in ev["models"] if m["kl_mean"] > 0]
    high = max(max(m["kl_mean"], m["kl_p99"]) for m in ev["models"])
    lo = math.floor(math.log10(min(positive))) - (1 if min(positive) == high else 0)
    hi = math.ceil(math.log10(high))
    if lo == hi:
        hi = lo + 1
    x = 90 + round(mib(q4) / x_max * (930 - 90))
    y = 530 - round((math.log10(q4["kl_mean"]) - lo) / (hi - lo) * (530 - 50))
    pixel = tuple(rows[y][3 * x:3 * x + 3])
    check(pixel == (0x1F, 0x6F, 0xB4), f"plot: pixel {pixel} at ({x}, {y}), the Q4_0 model's point")
    ink = sum(1 for r in rows for i in range(0, len(r), 3) if r[i:i + 3] != b"\xff\xff\xff")
    check(ink > 5000, f"plot: only {ink} non-white pixels")


def make_model(path, width=256, ffn=512, layers=2, heads=4, kv_heads=2, vocab=512, seed=1):
    run("make-model", "--out", path, "--type", "f32", "--width", str(width), "--ffn", str(ffn), "--layers", str(layers),
        "--heads", str(heads), "--kv-heads", str(kv_heads), "--vocab", str(vocab), "--seed", str(seed))


def tensors(path):
    r = gguf.GGUFReader(path)
    return r, {t.name: t for t in r.tensors}


def block_bytes(qtype):
    return quants.GGML_QUANT_SIZES[qtype]


def dequant(t):
    return quants.dequantize(np.array(t.data), t.tensor_type).astype(np.float64).reshape(-1)


def main():
    tmp = tempfile.mkdtemp(prefix="ts-quant-")
    base = os.path.join(tmp, "base.gguf")
    make_model(base)
    rb, base_t = tensors(base)
    matrices = [n for n, t in base_t.items() if len(t.shape) == 2]

    # 1. the types gguf can quantize: --pure so that every matrix has the type.
    for name, qt in [("F16", Q.F16), ("BF16", Q.BF16), ("Q8_0", Q.Q8_0), ("Q4_0", Q.Q4_0), ("Q4_1", Q.Q4_1),
                     ("Q5_0", Q.Q5_0), ("Q5_1", Q.Q5_1)]:
        out = os.path.join(tmp, f"pure-{name}.gguf")
        run("quantize", "--model", base, "--out", out, "--type", name, "--pure", "--threads", "2")
        _, ours = tensors(out)
        n_codes = n_diff = 0
        for m in matrices:
            src = np.array(base_t[m].data, dtype=np.float32)
            got = np.array(ours[m].data)
            check(ours[m].tensor_type == qt, f"{name}: {m} has type {ours[m].tensor_type.name}")
            ref = quants.quantize(src, qt)
            if qt in (Q.F16, Q.BF16):
                check(np.array_equal(got.view(np.uint8).reshape(-1), ref.view(np.uint8).reshape(-1)), f"{name}: {m} not bit-exact")
                continue
            bs, nb = block_bytes(qt)
            gb = got.reshape(-1, nb)
            rbk = ref.reshape(-1, nb)
            scale_bytes = 4 if qt in (Q.Q4_1, Q.Q5_1) else 2
            check(np.array_equal(gb[:, :scale_bytes], rbk[:, :scale_bytes]), f"{name}: {m} scale bytes differ")
            d = np.abs(gb[:, :2].copy().view(np.float16).astype(np.float64)).repeat(bs)
            dq_ours = quants.dequantize(got, qt).astype(np.float64).reshape(-1)
            dq_ref = quants.dequantize(ref, qt).astype(np.float64).reshape(-1)
            diff = np.abs(dq_ours - dq_ref)
            check(np.all(diff <= d * (1 + 1e-3) + 1e-12), f"{name}: {m} a code differs by more than 1 (max diff / step {np.max(diff / np.maximum(d, 1e-30)):.3f})")
            n_diff += int(np.count_nonzero(diff > 1e-12))
            n_codes += diff.size
            x = src.astype(np.float64).reshape(-1)
            e_ours = np.sqrt(np.mean((dq_ours - x) ** 2))
            e_ref = np.sqrt(np.mean((dq_ref - x) ** 2))
            check(e_ours <= e_ref * 1.001, f"{name}: {m} RMS error {e_ours:.3e} > gguf's {e_ref:.3e}")
        if n_codes:
            frac = n_diff / n_codes
            print(f"{name}: {100 * frac:.3f} % of codes differ from gguf (by one step)")
            check(frac <= 0.02, f"{name}: {100 * frac:.2f} % of codes differ from gguf")
        else:
            print(f"{name}: bit-exact with gguf")

    # 2. K-quants: gguf dequantizes, we quantize; float64 error bounds; requantize round trip.
    bounds = {"Q2_K": 0.40, "Q3_K": 0.20, "Q4_K": 0.10, "Q5_K": 0.05, "Q6_K": 0.025}
    for name, qt in [("Q2_K", Q.Q2_K), ("Q3_K", Q.Q3_K), ("Q4_K", Q.Q4_K), ("Q5_K", Q.Q5_K), ("Q6_K", Q.Q6_K)]:
        out = os.path.join(tmp, f"pure-{name}.gguf")
        back = os.path.join(tmp, f"pure-{name}-f32.gguf")
        again = os.path.join(tmp, f"pure-{name}-again.gguf")
        run("quantize", "--model", base, "--out", out, "--type", name, "--pure", "--threads", "2")
        p = run("quantize", "--model", out, "--out", back, "--type", "F32", "--pure")
        check(f"re-quantizing" in p.stderr and name in p.stderr, f"{name}: no re-quantization warning naming {name}: {p.stderr[-300:]}")
        run("quantize", "--model", back, "--out", again, "--type", name, "--pure")
        _, ours = tensors(out)
        _, f32 = tensors(back)
        _, ours2 = tensors(again)
        worst = 0.0
        for m in matrices:
            x = np.array(base_t[m].data, dtype=np.float64).reshape(-1)
            dq = dequant(ours[m])
            mine = np.array(f32[m].data, dtype=np.float64).reshape(-1)
            scale = np.max(np.abs(dq)) + 1e-30
            check(np.max(np.abs(dq - mine)) <= 1e-6 * scale, f"{name}: {m} our dequantizer differs from gguf's by {np.max(np.abs(dq - mine)):.3e}")
            rel = np.sqrt(np.mean((dq - x) ** 2)) / np.sqrt(np.mean(x ** 2))
            worst = max(worst, rel)
            check(rel < bounds[name], f"{name}: {m} relative RMS error {rel:.4f} >= {bounds[name]}")
            dq2 = dequant(ours2[m])
            change = np.sqrt(np.mean((dq2 - dq) ** 2))
            first = np.sqrt(np.mean((dq - x) ** 2))
            check(change < 0.25 * first, f"{name}: {m} requantizing our output moved it by {change:.3e} (first rounding {first:.3e})")
        print(f"{name}: worst relative RMS error {worst:.4f} (bound {bounds[name]})")

    # 3. recipes, metadata, both readers.
    expected_ftype = {"Q4_K_M": 15, "Q5_K_M": 17, "Q4_0": 2, "Q2_K": 10, "Q8_0": 7}
    for name, ftype in expected_ftype.items():
        out = os.path.join(tmp, f"{name}.gguf")
        run("quantize", "--model", base, "--out", out, "--type", name, "--threads", "2")
        r, t = tensors(out)
        check(r.fields["general.file_type"].contents() == ftype, f"{name}: general.file_type {r.fields['general.file_type'].contents()} != {ftype}")
        for k in rb.fields:
            if k.startswith("GGUF.") or k in ("general.file_type", "general.quantization_version"):
                continue
            check(k in r.fields, f"{name}: metadata key {k} not copied")
        for n, bt in base_t.items():
            if len(bt.shape) == 1:
                check(t[n].tensor_type == Q.F32 and np.array_equal(np.array(t[n].data), np.array(bt.data)), f"{name}: 1-D {n} not copied as F32")
        check(t["output.weight"].tensor_type == (Q.Q8_0 if name == "Q8_0" else Q.Q6_K), f"{name}: output.weight is {t['output.weight'].tensor_type.name}")
        if name in ("Q4_K_M", "Q5_K_M"):
            # 2 layers: use_more_bits(i, 2) is true for layer 1 only (i >= 7*2/8 = 1).
            hi = Q.Q6_K
            lo = Q.Q4_K if name == "Q4_K_M" else Q.Q5_K
            check(t["blk.0.attn_v.weight"].tensor_type == lo and t["blk.1.attn_v.weight"].tensor_type == hi, f"{name}: attn_v types")
            check(t["blk.0.ffn_down.weight"].tensor_type == lo and t["blk.1.ffn_down.weight"].tensor_type == hi, f"{name}: ffn_down types")
            check(t["blk.0.attn_q.weight"].tensor_type == lo, f"{name}: attn_q type")
        if name == "Q2_K":
            check(t["blk.0.ffn_down.weight"].tensor_type == Q.Q3_K and t["blk.0.attn_v.weight"].tensor_type == Q.Q3_K, "Q2_K: bumps")
        p = run("inspect", "--model", out, "--json")
        info = json.loads(p.stdout)
        check(len(info.get("tensors", [])) == len(t), f"{name}: our reader lists {len(info.get('tensors', []))} tensors, gguf {len(t)}")

    # 4. imatrix on a model with 8 high-variance input columns.
    hv = os.path.join(tmp, "hv.gguf")
    make_model(hv, seed=7)
    r = gguf.GGUFReader(hv, "r+")
    for t in r.tensors:
        if t.name.endswith("attn_norm.weight") or t.name.endswith("ffn_norm.weight"):
            t.data[:] = 1.0
            t.data[:8] = 8.0
    r.data.flush()
    del r
    imat = os.path.join(tmp, "hv.imatrix")
    run("imatrix", "--model", hv, "--file", TEXT, "--out", imat, "--ctx", "128", "--threads", "2")
    ir = gguf.GGUFReader(imat)
    check(ir.fields["general.type"].contents() == "imatrix", "imatrix: general.type")
    it = {t.name: t for t in ir.tensors}
    sums = np.array(it["blk.0.attn_q.weight.in_sum2"].data, dtype=np.float64).reshape(-1)
    count = float(np.array(it["blk.0.attn_q.weight.counts"].data).reshape(-1)[0])
    check(count > 1000, f"imatrix: counts {count}")
    check(np.min(sums[:8]) > 10 * np.max(sums[8:]), "imatrix: the high-variance columns do not stand out")
    for name, qt in [("Q4_0", Q.Q4_0), ("Q4_K", Q.Q4_K)]:
        plain = os.path.join(tmp, f"hv-{name}.gguf")
        weighted = os.path.join(tmp, f"hv-{name}-imatrix.gguf")
        run("quantize", "--model", hv, "--out", plain, "--type", name, "--pure", "--threads", "2")
        p = run("quantize", "--model", hv, "--out", weighted, "--type", name, "--pure", "--imatrix", imat, "--threads", "2", "--json")
        check(json.loads(p.stdout)["weighted_tensors"] > 0, f"{name}: no tensor was importance-weighted")
        _, tp = tensors(plain)
        _, tw = tensors(weighted)
        e_plain = e_weighted = 0.0
        for m in matrices:
            if not any(s in m for s in ("attn_q", "attn_k", "attn_v", "ffn_gate", "ffn_up")):
                continue
            x = np.array(base_t[m].data, dtype=np.float64)  # same shapes; values from hv below
            x = np.array(tensors(hv)[1][m].data, dtype=np.float64)
            cols = x.shape[1]
            dp = dequant(tp[m]).reshape(-1, cols)
            dw = dequant(tw[m]).reshape(-1, cols)
            e_plain += np.sum((dp[:, :8] - x[:, :8]) ** 2)
            e_weighted += np.sum((dw[:, :8] - x[:, :8]) ** 2)
        print(f"{name}: squared error on the 8 important columns: unweighted {e_plain:.4e}, weighted {e_weighted:.4e}")
        check(e_weighted < e_plain, f"{name}: weighted error on the important columns {e_weighted:.4e} not below unweighted {e_plain:.4e}")
        p = run("quant-eval", "--base", hv, "--models", f"{plain},{weighted}", "--file", TEXT, "--ctx", "128", "--threads", "2",
                "--decode-tokens", "4", "--json")
        ev = json.loads(p.stdout)
        kl_plain, kl_weighted = ev["models"][0]["kl_mean"], ev["models"][1]["kl_mean"]
        print(f"{name}: KL mean on the calibration text: unweighted {kl_plain:.6f}, weighted {kl_weighted:.6f}")
        check(kl_weighted <= kl_plain, f"{name}: KL with imatrix {kl_weighted} > without {kl_plain}")

    # 5. quant-eval: the base against itself and a Q4_0 copy.
    plot_png, plot_svg = os.path.join(tmp, "kl.png"), os.path.join(tmp, "kl.svg")
    p = run("quant-eval", "--base", base, "--models", f"{base},{os.path.join(tmp, 'pure-Q4_0.gguf')}", "--file", TEXT,
            "--ctx", "128", "--threads", "2", "--decode-tokens", "4", "--json", "--plot", plot_png)
    ev = json.loads(p.stdout)
    check_plot_png(plot_png, ev)
    run("quant-eval", "--base", base, "--models", os.path.join(tmp, "pure-Q4_0.gguf"), "--file", TEXT,
        "--ctx", "64", "--threads", "2", "--decode-tokens", "0", "--plot", plot_svg)
    svg = open(plot_svg).read()
    check(svg.startswith("<svg") and "pure-Q4_0" in svg and svg.count("<circle") == 1, f"quant-eval SVG plot: {svg[:300]}")
    # Refused before any work: no progress line (they name each window) was printed.
    p = run("quant-eval", "--base", base, "--models", base, "--file", TEXT, "--plot", os.path.join(tmp, "kl.jpg"), ok=False)
    check(p.returncode == 1 and "kl.jpg" in p.stderr and ".png or .svg" in p.stderr and "window" not in p.stderr,
          f"quant-eval --plot kl.jpg: {p.stderr}")
    same, q4 = ev["models"]
    check(same["kl_mean"] == 0 and same["kl_p99"] == 0 and same["delta_perplexity"] == 0 and same["top1_agreement"] == 1,
          f"quant-eval: base against itself {same}")
    check(q4["kl_mean"] > 0 and q4["kl_p99"] >= q4["kl_mean"] and q4["top1_agreement"] < 1, f"quant-eval: Q4_0 {q4}")
    check(abs(q4["bits_per_weight"] - 4.5) < 0.5 and abs(ev["base"]["bits_per_weight"] - 32) < 0.01, "quant-eval: bits per weight")

    # 6. bad input.
    out = os.path.join(tmp, "bad.gguf")
    p = run("quantize", "--model", base, "--out", out, "--type", "Q7_K", ok=False)
    check(p.returncode == 1 and "Q4_K_M" in p.stderr and "Q8_0" in p.stderr and not os.path.exists(out), f"unknown type: {p.stderr}")
    odd = os.path.join(tmp, "odd.gguf")  # rows of 96 (K-quants need 256) and 80 (even Q4_0's 32 does not fit)
    make_model(odd, width=96, ffn=80, heads=4, kv_heads=2, vocab=300)
    p = run("quantize", "--model", odd, "--out", out, "--type", "Q4_K", "--pure")
    check("blk.0.attn_q.weight" in p.stderr and "do not fit Q4_K" in p.stderr and "Q5_0" in p.stderr, f"row-length fallback warning: {p.stderr[-500:]}")
    _, t = tensors(out)
    check(t["blk.0.attn_q.weight"].tensor_type == Q.Q5_0 and t["blk.0.ffn_down.weight"].tensor_type == Q.F16, "row-length fallback types")
    os.remove(out)
    p = run("quantize", "--model", odd, "--out", out, "--type", "Q4_0", "--imatrix", imat, ok=False)
    check(p.returncode == 1 and "another model" in p.stderr and not os.path.exists(out), f"foreign imatrix: {p.stderr}")
    # A write that fails midway: the file size limit makes write() fail with EFBIG.
    with open(out, "wb") as f:
        f.write(b"previous contents")

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200000, 200000))

    p = run("quantize", "--model", base, "--out", out, "--type", "Q8_0", ok=False, preexec_fn=limit)
    check(p.returncode == 1 and "write failed" in p.stderr, f"failed write: exit {p.returncode}: {p.stderr[-300:]}")
    check(open(out, "rb").read() == b"previous contents", "failed write: the existing output was changed")
    check(not any(n.startswith("bad.gguf.") for n in os.listdir(tmp)), f"failed write: a temporary file was left: {os.listdir(tmp)}")
    p = run("quantize", "--model", base, "--out", os.path.join(tmp, "no-such-dir", "x.gguf"), "--type", "Q8_0", ok=False)
    check(p.returncode == 1 and "cannot create" in p.stderr, f"unwritable output: {p.stderr}")

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all quantization checks passed")
    subprocess.run(["rm", "-rf", tmp])
    return 0


if __name__ == "__main__":
    sys.exit(main())
