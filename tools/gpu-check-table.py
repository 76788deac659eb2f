#!/usr/bin/env python3
"""The short table tools/gpu-check prints last, from the JSON files it left in OUT."""
import json
import pathlib
import sys

out = pathlib.Path(sys.argv[1])


def load(name):
    try:
        return json.loads((out / name).read_text())
    except Exception as e:  # a run that failed leaves no JSON: say so in the row
        return {"error": str(e)}


def pct(x):
    return f"{100 * x:5.1f}%"


first = True
for t in ("f16", "q8_0", "q4_k"):
    b = load(f"bench-{t}.json")
    if "error" in b:
        print(f"llama-1b-{t}: no result ({b['error']})")
        continue
    if first:
        c = b["ceiling"]
        print(f"ceilings: copy {c['gbps']:.0f} GB/s, cuBLAS bf16 {c['gflops'] / 1000:.0f} TFLOP/s at {c.get('gemm_shape', '?')}")
        print(f"{'model':<16}{'test':<16}{'tok/s':>10}{'us/tok':>10}{'GB/s':>9}{'of ceiling':>12}")
        first = False
    for p in b["prefill"]:
        print(f"{'llama-1b-' + t:<16}{'prefill ' + str(p['tokens']):<16}{p['tokens_per_s']:>10.0f}{1e6 / p['tokens_per_s']:>10.1f}"
              f"{p['gflops'] / 1000:>6.0f} TF{pct(p['peak_fraction']):>12}")
    for d in b["decode"]:
        print(f"{'llama-1b-' + t:<16}{'decode @' + str(d['context']):<16}{d['tokens_per_s']:>10.1f}{d['us_per_step']:>10.1f}"
              f"{d['gbps']:>9.0f}{pct(d['bandwidth_fraction']):>12}")
# Ratios against llama.cpp's llama-bench on the same files (issue 13 goal: decode >= 1.5x,
# prefill 2048 >= 1.2x), when gpu-check found a llama-bench to run.
ratio_header = True
for t in ("f16", "q8_0", "q4_k"):
    ours, lb = load(f"bench-{t}.json"), load(f"llama-bench-{t}.json")
    if not isinstance(lb, list) or "error" in ours:
        continue

    def lc(n_prompt, n_gen, depth):
        for r in lb:
            if r.get("n_prompt") == n_prompt and r.get("n_gen") == n_gen and r.get("n_depth", 0) == depth:
                return r.get("avg_ts")
        return None

    if ratio_header:
        print(f"{'vs llama.cpp':<16}{'test':<16}{'ours tok/s':>12}{'llama tok/s':>12}{'ratio':>8}{'goal':>6}")
        ratio_header = False
    for p in ours.get("prefill", []):
        theirs = lc(p["tokens"], 0, 0)
        if theirs:
            print(f"{'llama-1b-' + t:<16}{'prefill ' + str(p['tokens']):<16}{p['tokens_per_s']:>12.0f}{theirs:>12.0f}"
                  f"{p['tokens_per_s'] / theirs:>8.2f}{'1.2':>6}")
    for d in ours.get("decode", []):
        theirs = lc(0, 128, d["context"])
        if theirs:
            print(f"{'llama-1b-' + t:<16}{'decode @' + str(d['context']):<16}{d['tokens_per_s']:>12.1f}{theirs:>12.1f}"
                  f"{d['tokens_per_s'] / theirs:>8.2f}{'1.5':>6}")
b = load("bench-f16-old-kernels.json")
for d in b.get("decode", []):
    print(f"{'llama-1b-f16':<16}{'old k. @' + str(d['context']):<16}{d['tokens_per_s']:>10.1f}{d['us_per_step']:>10.1f}"
          f"{d['gbps']:>9.0f}{pct(d['bandwidth_fraction']):>12}")
for t in ("q8_0", "q4_k"):
    b = load(f"bench-{t}-int8.json")
    for d in b.get("decode", []):
        print(f"{'llama-1b-' + t:<16}{'int8 @' + str(d['context']):<16}{d['tokens_per_s']:>10.1f}{d['us_per_step']:>10.1f}"
              f"{d['gbps']:>9.0f}{pct(d['bandwidth_fraction']):>12}")
b = load("bench-q4_k-kvq8.json")
for d in b.get("decode", []):
    print(f"{'llama-1b-q4_k':<16}{'q8 KV @' + str(d['context']):<16}{d['tokens_per_s']:>10.1f}{d['us_per_step']:>10.1f}"
          f"{d['gbps']:>9.0f}{pct(d['bandwidth_fraction']):>12}")
b = load("bench-q4_k-concurrency.json")
for d in b.get("concurrency", []):
    print(f"{'llama-1b-q4_k':<16}{'x' + str(d['sequences']) + ' seqs':<16}{d['tokens_per_s']:>10.1f}{d['us_per_step']:>10.1f}"
          f"{d['gbps']:>9.0f}{pct(d['bandwidth_fraction']):>12}")
for name in ("gemma-shape", "q4_k"):
    for g in ("on", "off"):
        b = load(f"bench-{name}-graphs-{g}.json")
        for d in b.get("decode", []):
            print(f"{name:<16}{'graphs ' + g:<16}{d['tokens_per_s']:>10.1f}{d['us_per_step']:>10.1f}"
                  f"{d['gbps']:>9.0f}{pct(d['bandwidth_fraction']):>12}")
# Speculative decoding against plain decoding in the same run (issue 15), grounded and open
# prompt groups: acceptance, accepted tokens per verification, both speeds, the speedup and
# whether the greedy output was identical.
spec_header = True
for name in ("lookup", "draft"):
    b = load(f"bench-spec-{name}.json")
    if "error" in b:
        print(f"speculative {name}: no result ({b['error']})")
        continue
    if spec_header:
        print(f"{'speculative':<16}{'prompts':<10}{'accepted':>9}{'per ver.':>9}{'plain':>9}{'spec':>9}{'speedup':>9}  same")
        spec_header = False
    for group in ("grounded", "open"):
        g = b.get(group, {})
        if not g:
            continue
        print(f"{name + ' k<=' + str(b.get('max_k', '?')):<16}{group:<10}{pct(g['acceptance_rate']):>9}"
              f"{g['mean_accepted_per_verification']:>9.2f}{g['plain_tokens_per_s']:>9.1f}"
              f"{g['speculative_tokens_per_s']:>9.1f}{g['speedup']:>8.2f}x  {'yes' if g['identical_output'] else 'NO'}")
lab = load("kernel-lab.json")
if isinstance(lab, list):
    # Every variant the lab times, with its error against the op's first variant (the GQA
    # attention and the fused GEMVs must stay near 1e-6 of the kernels they replace).
    print(f"{'kernel lab':<44}{'variant':<40}{'us':>8}{'GB/s':>7}{'vs first':>10}")
    for k in lab:
        print(f"{k['op']:<44}{k['variant']:<40}{k['us']:>8.1f}{k['gbps']:>7.0f}{k.get('rel_error', 0):>10.1e}")
# compute-sanitizer on the self-test: one line per tool, its summary and the kernels it named.
for tool in ("memcheck", "racecheck", "synccheck", "initcheck"):
    p = out / f"sanitizer-{tool}.txt"
    if not p.exists():
        continue
    text = p.read_text(errors="replace")
    summary = [l for l in text.splitlines() if "ERROR SUMMARY" in l or "RACECHECK SUMMARY" in l]
    # "at 0x150 in void k(args)" (older tools) or "at void k(args)+0x2e8" (newer): the name.
    kernels = set()
    for l in text.splitlines():
        l = l.lstrip("= ")
        if l.startswith("at "):
            where = l[3:].split(" in ", 1)[1] if l[3:].startswith("0x") and " in " in l else l[3:]
            kernels.add(where.split("(")[0].strip()[:90])
    kernels = sorted(kernels)
    state = summary[-1].strip("= ") if summary else "no summary (cut by its time limit?)"
    print(f"sanitizer {tool:<10} {state}")
    for k in kernels[:8]:
        print(f"    {k}")
