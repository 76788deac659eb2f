#!/usr/bin/env python3
"""Differential test of the byte-level BPE tokenizer against Hugging Face `tokenizers` (PyPI).

For each vocabulary GGUF of ../shared/testdata/bpe, an equivalent `tokenizers.Tokenizer` is
built from the GGUF's tokens, merges and token types (BPE model; the pre-tokenizer's split
expressions as isolated Splits, then ByteLevel; user-defined tokens as added tokens) and a few
hundred generated strings (ASCII words and contractions, numbers, whitespace and newline runs,
punctuation, Latin with combining marks, Greek, Cyrillic, Arabic, CJK, Hangul, emoji) are
encoded by both: by `tokenscope-cli tokenize --inp` in one run, and by `tokenizers` here. The
ids must be identical.

The split expressions are read from engine/tokenizer/pretokenizer_patterns.h, so this checks
the regex engine (PCRE2 there, Oniguruma here), the byte mapping and the merging, not the
transcription of the expressions (the shared test vectors check that). No normalizer is used
on either side (llama.cpp has none either).

usage: compare_with_hf_tokenizers.py TOKENSCOPE_CLI [COUNT]
Exit status: 0 all agree, 1 a mismatch, 77 skipped (no `tokenizers`/`gguf`, or no ../shared).
"""
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    from gguf import GGUFReader
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
except ImportError as e:
    print(f"SKIP: {e.name} is not installed (pip install tokenizers gguf)")
    sys.exit(77)

HERE = Path(__file__).resolve()
ROOT = HERE.parents[2]
BPE_DIR = ROOT.parent / "shared" / "testdata" / "bpe"
PATTERNS = ROOT / "engine" / "tokenizer" / "pretokenizer_patterns.h"

# tokenizer.ggml.pre -> the expressions applied in order (names in pretokenizer_patterns.h)
# and whether a whole word found in the vocabulary is taken as is (ignore_merges).
PRE = {
    "llama-bpe": (["kLlama3"], True),
    "qwen2": (["kQwen2"], False),
    "qwen35": (["kQwen35"], False),
    "gpt-2": (["kGpt2"], False),
    "starcoder": (["kSingleDigit", "kGpt2"], False),
    "command-r": (["kSingleDigit", "kGpt2"], False),
    "falcon": (["kFalconPunctuation", "kGpt2", "kFalconDigits"], False),
    "deepseek-llm": (["kDeepseekNewline", "kDeepseekLetters", "kDeepseekPunctuation",
                      "kDeepseekTrailingSpace", "kDeepseekCjk", "kDeepseekNumbers"], False),
}


def read_patterns() -> dict:
    text = PATTERNS.read_text(encoding="utf-8")
    found = re.findall(r'(k\w+)\s*=\s*R"\((.*?)\)";', text, flags=re.S)
    return {name: "".join(body.split("\n")) for name, body in found}


def field(reader: GGUFReader, key: str):
    f = reader.fields.get(key)
    if f is None:
        return None
    if len(f.data) == 1 and f.types and f.types[0].name == "STRING":
        return bytes(f.parts[f.data[0]]).decode("utf-8")
    return [f.parts[i] for i in f.data]


def hf_tokenizer(path: Path, patterns: dict):
    reader = GGUFReader(str(path))
    pre = field(reader, "tokenizer.ggml.pre")
    tokens = [bytes(p).decode("utf-8") for p in field(reader, "tokenizer.ggml.tokens")]
    merges = [bytes(p).decode("utf-8") for p in field(reader, "tokenizer.ggml.merges")]
    types = [int(p[0]) for p in field(reader, "tokenizer.ggml.token_type")]
    vocab = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)
    names, ignore_merges = PRE[pre]
    bpe = models.BPE(vocab=vocab, merges=[tuple(m.split(" ")) for m in merges],
                     ignore_merges=ignore_merges)
    tok = Tokenizer(bpe)
    splits = [pre_tokenizers.Split(Regex(patterns[n]), behavior="isolated") for n in names]
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        splits + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    added = [AddedToken(tokens[i], special=False, normalized=False)
             for i, t in enumerate(types) if t == 4 and tokens[i]]
    special = [AddedToken(tokens[i], special=True, normalized=False)
               for i, t in enumerate(types) if t == 3 and tokens[i]]
    tok.add_tokens(added)
    tok.add_special_tokens(special)
    return pre, tok, [tokens[i] for i, t in enumerate(types) if t == 3 and tokens[i]]


PIECES = [
    "hello", "world", "The", "don't", "I'M", "we'Ve", "you'll", "it's", "'d", "12", "2026",
    "1234567", "3.14159", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "...", "!?",
    "$+<=>^~|`", "(x)", "[a]", "{b}", "--", "__init__", "#include", "e\u0301", "Vie\u0323\u0302t",
    "caf\u00e9", "na\u00efve", "\u00c5ngstr\u00f6m", "\u03b1\u03b2\u03b3", "\u041f\u0440\u0438\u0432\u0435\u0442",
    "\u0645\u0631\u062d\u0628\u0627", "\u4f60\u597d", "\u4e16\u754c\uff01", "\u3053\u3093\u306b\u3061\u306f",
    "\ud55c\uad6d\uc5b4", "\U0001f999", "\U0001f44d\U0001f3fd", "\u2026", "\u00a0", "\u3000",
    "\uff11\uff12", "\u0661\u0662", "\u2163", "ǅ", "K", "\u200b", "x" * 40, "\u00e0" * 30,
]


def make_texts(count: int, seed: int = 12) -> list:
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        parts = [rng.choice(PIECES) for _ in range(rng.randint(1, 12))]
        joiners = ["", " ", " ", "\n"]
        text = ""
        for p in parts:
            text += rng.choice(joiners) + p
        if "__ggml_vocab_test__" not in text and text:
            texts.append(text)
    return texts


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    cli = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    if not BPE_DIR.is_dir():
        print(f"SKIP: {BPE_DIR} is absent")
        return 77
    patterns = read_patterns()
    texts = make_texts(count)
    failures = 0
    for path in sorted(BPE_DIR.glob("ggml-vocab-*.gguf")):
        pre, tok, controls = hf_tokenizer(path, patterns)
        # Control-token text is matched by tokenizers but (rightly) not by plain encoding.
        cases = [t for t in texts if not any(c in t for c in controls)]
        with tempfile.NamedTemporaryFile("w", suffix=".inp", encoding="utf-8", delete=False) as f:
            for t in cases:
                f.write(t + "\n__ggml_vocab_test__\n")
            inp = f.name
        ours = subprocess.run([cli, "tokenize", "--model", str(path), "--inp", inp],
                              capture_output=True, text=True, check=True).stdout.split("\n")
        Path(inp).unlink()
        bad = 0
        for i, t in enumerate(cases):
            theirs = tok.encode(t, add_special_tokens=False).ids
            mine = [int(x) for x in ours[i].split()]
            if mine != theirs:
                bad += 1
                if bad <= 3:
                    print(f"{path.name} ({pre}) {t!r}:\n  tokenscope {mine}\n  tokenizers {theirs}")
        print(f"{path.name} ({pre}): {len(cases) - bad} of {len(cases)} strings identical")
        failures += bad
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
