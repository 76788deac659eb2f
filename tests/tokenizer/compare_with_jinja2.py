#!/usr/bin/env python3
"""Differential test of the chat-template interpreter against Python's `jinja2` (PyPI).

Every template of tests/tokenizer/chat_templates/*.jinja, plus the `tokenizer.chat_template`
carried by real GGUF files (../shared/testdata/bpe/*.gguf and the SmolLM2 model under the
models directory, read at test time; absent files are skipped with a message), is rendered with
every named context of chat_templates/conversations.json twice:

  - here, by jinja2 configured as Hugging Face transformers' apply_chat_template configures it:
    ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
    extensions=[jinja2.ext.loopcontrols]), a `raise_exception(msg)` global that raises
    TemplateError, a `tojson` filter replaced by json.dumps(x, ensure_ascii=False, indent=...,
    separators=..., sort_keys=False), and a `strftime_now(fmt)` global, here formatting the
    fixed date 2026-12-01 (00:00:00);
  - by `tokenscope-cli render-template --template F --context C --date 2026-12-01`, which
    prints the rendered text to stdout exactly (exit 0), or one line starting with
    `tokenscope-cli: error:` to stderr (exit 1) when the template fails.

The bytes must be identical, or both sides must fail. A context's `expect_error` lists the
templates on which jinja2 itself is expected to fail (a check of the test data: a template that
fails everywhere would otherwise "agree" vacuously).

usage: compare_with_jinja2.py TOKENSCOPE_CLI [--only SUBSTRING] [--verbose]
Exit status: 0 all agree, 1 a mismatch (or a test-data problem), 77 skipped (no jinja2, or no
CLI at the given path).
"""
import argparse
import difflib
import json
import os
import struct
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

try:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("SKIP: jinja2 is not installed (python3 -m pip install jinja2)")
    sys.exit(77)

HERE = Path(__file__).resolve()
ROOT = HERE.parents[2]
TEMPLATE_DIR = HERE.parent / "chat_templates"
CONVERSATIONS = TEMPLATE_DIR / "conversations.json"
# Small templates that each exercise one part of the language (filters, tests, loops, scoping,
# whitespace control, errors), rendered by both sides like the chat templates.
FEATURES = TEMPLATE_DIR / "features.json"
BPE_DIR = ROOT.parent / "shared" / "testdata" / "bpe"
MODELS_DIR = Path(os.environ.get("TOKENSCOPE_MODELS") or
                  Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
                  / "tokenscope" / "models")
# GGUF files whose own tokenizer.chat_template is tested (those without one are reported).
GGUF_FILES = [
    *(BPE_DIR / f"ggml-vocab-{n}.gguf" for n in
      ("command-r", "deepseek-llm", "falcon", "gpt-2", "llama-bpe", "qwen2", "qwen35", "starcoder")),
    MODELS_DIR / "SmolLM2-135M-Instruct.Q4_1.gguf",
]

DATE = "2026-12-01"
FIXED_NOW = datetime(2026, 12, 1)


# --- jinja2, configured as transformers' _compile_jinja_template -----------------------------

def make_environment() -> ImmutableSandboxedEnvironment:
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        # transformers replaces jinja2's tojson (which HTML-escapes and sorts keys) with this.
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return FIXED_NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render_reference(env, source: str, context: dict):
    """('ok', bytes) or ('error', message)."""
    try:
        text = env.from_string(source).render(**json.loads(json.dumps(context)))
    except Exception as e:  # TemplateError, UndefinedError, TypeError, ...: all are failures
        return ("error", f"{type(e).__name__}: {e}")
    return ("ok", text.encode("utf-8"))


# --- the CLI -----------------------------------------------------------------------------------

def render_cli(cli: str, template: Path, context_file: Path):
    """('ok', bytes), ('error', message) or ('broken', description)."""
    try:
        p = subprocess.run([cli, "render-template", "--template", str(template),
                            "--context", str(context_file), "--date", DATE],
                           capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        return ("broken", "timed out after 60 s")
    stderr = p.stderr.decode("utf-8", "replace")
    if p.returncode == 0:
        return ("ok", p.stdout)
    if p.returncode == 1 and stderr.startswith("tokenscope-cli: error:") and stderr.count("\n") == 1:
        return ("error", stderr.strip())
    return ("broken", f"exit {p.returncode}, stderr {stderr[-300:]!r}")


# --- GGUF: just the metadata, to find tokenizer.chat_template -----------------------------------
# gguf.GGUFReader would do, but it parses every array element and tensor (15-30 s per vocabulary
# file); this reads the key/value section only, skipping values it does not need.

_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9


def gguf_chat_template(path: Path):
    with open(path, "rb") as f:
        data = f.read(64 << 20)  # the metadata of the files used here fits (vocabularies ~10 MiB)
    if data[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    version, = struct.unpack_from("<I", data, 4)
    if version < 2:
        raise ValueError(f"{path}: GGUF version {version} is not supported here")
    _, kv_count = struct.unpack_from("<QQ", data, 8)
    pos = 24

    def string():
        nonlocal pos
        n, = struct.unpack_from("<Q", data, pos)
        s = data[pos + 8:pos + 8 + n]
        pos += 8 + n
        return s

    def skip(vtype):
        nonlocal pos
        if vtype in _SCALAR:
            pos += _SCALAR[vtype]
        elif vtype == _STRING:
            string()
        elif vtype == _ARRAY:
            etype, count = struct.unpack_from("<IQ", data, pos)
            pos += 12
            if etype in _SCALAR:
                pos += _SCALAR[etype] * count
            else:
                for _ in range(count):
                    skip(etype)
        else:
            raise ValueError(f"{path}: unknown GGUF value type {vtype}")

    for _ in range(kv_count):
        key = string()
        vtype, = struct.unpack_from("<I", data, pos)
        pos += 4
        if key == b"tokenizer.chat_template" and vtype == _STRING:
            return string().decode("utf-8")
        skip(vtype)
    return None


# --- comparison ---------------------------------------------------------------------------------

def describe_difference(expected: bytes, actual: bytes) -> str:
    i = 0
    n = min(len(expected), len(actual))
    while i < n and expected[i] == actual[i]:
        i += 1
    lo = max(0, i - 40)
    lines = [f"    first difference at byte {i} (jinja2 {len(expected)} bytes, cli {len(actual)} bytes)",
             f"    jinja2: {expected[lo:i + 60]!r}",
             f"    cli:    {actual[lo:i + 60]!r}"]
    diff = list(difflib.unified_diff(
        expected.decode("utf-8", "replace").splitlines(keepends=True),
        actual.decode("utf-8", "replace").splitlines(keepends=True),
        "jinja2", "cli", n=1))
    if diff:
        shown = diff[:24]
        for d in shown:  # body lines as prefix + repr, so that whitespace differences show
            header = d.startswith(("---", "+++", "@@"))
            lines.append("    " + (d.rstrip("\n") if header else d[0] + " " + repr(d[1:])))
        if len(diff) > len(shown):
            lines.append(f"    ... {len(diff) - len(shown)} more diff lines")
    return "\n".join(lines)


def agree(ref, got) -> bool:
    """Identical bytes, or both sides failing."""
    return (ref[0] == "ok" and got[0] == "ok" and ref[1] == got[1]) or (ref[0] == got[0] == "error")


def report_mismatch(label: str, ref, got) -> None:
    print(f"MISMATCH {label}")
    if got[0] == "broken":
        print(f"    cli broke: {got[1]}")
    elif ref[0] == "error":
        print(f"    jinja2 fails ({ref[1]}), cli rendered {len(got[1])} bytes: {got[1][:120]!r}")
    elif got[0] == "error":
        print(f"    cli fails ({got[1]}), jinja2 rendered {len(ref[1])} bytes: {ref[1][:120]!r}")
    else:
        print(describe_difference(ref[1], got[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cli", help="path of tokenscope-cli")
    ap.add_argument("--only", help="test only templates whose name contains this")
    ap.add_argument("--verbose", action="store_true", help="list every pair")
    args = ap.parse_args()

    if not (os.path.isfile(args.cli) and os.access(args.cli, os.X_OK)):
        print(f"SKIP: no tokenscope-cli at {args.cli}")
        return 77

    conversations = json.loads(CONVERSATIONS.read_text(encoding="utf-8"))
    env = make_environment()
    problems = 0

    with tempfile.TemporaryDirectory(prefix="compare_with_jinja2.") as tmp:
        tmp = Path(tmp)
        templates = [(p.stem, p) for p in sorted(TEMPLATE_DIR.glob("*.jinja"))]
        for gguf in GGUF_FILES:
            if not gguf.is_file():
                print(f"skipping {gguf}: not present")
                continue
            source = gguf_chat_template(gguf)
            if source is None:
                print(f"skipping {gguf.name}: it carries no tokenizer.chat_template")
                continue
            path = tmp / f"gguf-{gguf.stem}.jinja"
            path.write_bytes(source.encode("utf-8"))
            templates.append((f"gguf:{gguf.stem}", path))
        if args.only:
            templates = [t for t in templates if args.only in t[0]]

        context_files = []
        for i, conv in enumerate(conversations):
            path = tmp / f"context-{i}-{conv['name']}.json"
            path.write_text(json.dumps(conv["context"], ensure_ascii=False, indent=1), encoding="utf-8")
            context_files.append(path)

        total = matched = 0
        for name, path in templates:
            source = path.read_bytes().decode("utf-8")
            t_matched = t_errors = 0
            for conv, context_file in zip(conversations, context_files):
                total += 1
                ref = render_reference(env, source, conv["context"])
                got = render_cli(args.cli, path, context_file)
                label = f"{name} x {conv['name']}"

                expected_error = name in conv.get("expect_error", [])
                if (ref[0] == "error") != expected_error:
                    problems += 1
                    what = f"fails ({ref[1]})" if ref[0] == "error" else "renders"
                    print(f"TEST DATA: {label}: jinja2 {what}, but expect_error "
                          f"{'lists' if expected_error else 'does not list'} this template")

                if agree(ref, got):
                    matched += 1
                    t_matched += 1
                    t_errors += ref[0] == "error"
                    if args.verbose:
                        print(f"  ok   {label}" + (" (both fail)" if ref[0] == "error" else ""))
                    continue
                problems += 1
                report_mismatch(label, ref, got)
            print(f"{name}: {t_matched}/{len(conversations)} match"
                  + (f" ({t_errors} of them both fail)" if t_errors else ""))

        features = json.loads(FEATURES.read_text(encoding="utf-8"))
        if args.only:
            features = [f for f in features if args.only in f["name"]]
        f_matched = f_errors = 0
        for i, feature in enumerate(features):
            path = tmp / f"feature-{i}.jinja"
            path.write_bytes(feature["template"].encode("utf-8"))
            context_file = tmp / f"feature-{i}.json"
            context_file.write_text(json.dumps(feature["context"], ensure_ascii=False), encoding="utf-8")
            ref = render_reference(env, feature["template"], feature["context"])
            got = render_cli(args.cli, path, context_file)
            expected_error = feature["name"].startswith("error_")
            if (ref[0] == "error") != expected_error:
                problems += 1
                print(f"TEST DATA: feature {feature['name']}: jinja2 gives {ref[0]}, "
                      f"the name says {'error' if expected_error else 'ok'}")
            if agree(ref, got):
                f_matched += 1
                f_errors += ref[0] == "error"
                if args.verbose:
                    print(f"  ok   feature {feature['name']}")
                continue
            problems += 1
            report_mismatch(f"feature {feature['name']}", ref, got)

    print(f"{matched}/{total} template x conversation pairs match "
          f"({len(templates)} templates, {len(conversations)} conversations)")
    print(f"{f_matched}/{len(features)} feature templates match ({f_errors} of them fail on both sides)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
