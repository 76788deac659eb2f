#!/usr/bin/env python3
"""The official `openai` Python client against `tokenscope-cli serve` (loopback, a tiny
synthetic model made by `tokenscope-cli make-model`): a second, independent client of the
server's wire format. Plain and streamed chat, completions, logprobs, stop strings, usage, and
errors surfacing as the client's own exception types.

usage: test_openai_client.py PATH/TO/tokenscope-cli
Exits 77 (CTest: skipped) when the `openai` package is not installed (tools/setup-deps).
"""
import math
import os
import subprocess
import sys
import tempfile

try:
    import openai
except ImportError:
    print("SKIP: the openai Python package is not installed (tools/setup-deps installs it)")
    sys.exit(77)

cli = sys.argv[1]
KEY = "test-key"


def check(condition, message):
    if not condition:
        raise AssertionError(message)


with tempfile.TemporaryDirectory() as scratch:
    model = os.path.join(scratch, "tiny.gguf")
    subprocess.run([cli, "make-model", "--out", model, "--type", "f32", "--width", "64", "--layers", "2",
                    "--heads", "4", "--kv-heads", "2", "--ffn", "128", "--vocab", "512"],
                   check=True, stdout=subprocess.DEVNULL)
    server = subprocess.Popen([cli, "serve", "--model", model, "--port", "0", "--api-key", KEY,
                               "--threads", "2", "--ctx", "1024"],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        check(line.startswith("listening on http://127.0.0.1:"), f"unexpected first line: {line!r}")
        base = line.split()[-1] + "/v1"
        client = openai.OpenAI(base_url=base, api_key=KEY, max_retries=0, timeout=60)

        models = client.models.list()
        check([m.id for m in models.data] == ["tiny"], f"models: {models}")

        chat = client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hello there"}], max_tokens=8, temperature=0,
            logprobs=True, top_logprobs=3)
        choice = chat.choices[0]
        check(chat.object == "chat.completion", chat.object)
        check(choice.message.role == "assistant", choice.message.role)
        check(choice.finish_reason in ("stop", "length"), choice.finish_reason)
        check(chat.usage.completion_tokens <= 8 and chat.usage.prompt_tokens > 0, chat.usage)
        check(chat.usage.total_tokens == chat.usage.prompt_tokens + chat.usage.completion_tokens, chat.usage)
        check(len(choice.logprobs.content) >= 1, "no logprobs")
        for entry in choice.logprobs.content:
            tops = [t.logprob for t in entry.top_logprobs]
            check(len(tops) == 3 and tops == sorted(tops, reverse=True), f"top_logprobs not sorted: {tops}")
            check(sum(math.exp(t) for t in tops) <= 1 + 1e-6, "top_logprobs hold more than all the mass")
            check(abs(entry.logprob - tops[0]) < 1e-4, "greedy did not pick the most likely token")

        # Streaming gives the same text, then a usage chunk.
        stream = client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hello there"}], max_tokens=8, temperature=0,
            stream=True, stream_options={"include_usage": True})
        text, finish, usage = "", None, None
        for chunk in stream:
            if chunk.usage:
                usage = chunk.usage
            for c in chunk.choices:
                text += c.delta.content or ""
                finish = c.finish_reason or finish
        check(text == choice.message.content, f"stream {text!r} != plain {choice.message.content!r}")
        check(finish == choice.finish_reason, finish)
        check(usage is not None and usage.completion_tokens == chat.usage.completion_tokens, usage)

        # Completions and a stop string taken from the greedy answer.
        plain = client.completions.create(model="tiny", prompt="once upon", max_tokens=16, temperature=0)
        full = plain.choices[0].text
        check(len(full) > 4, f"answer too short to cut: {full!r}")
        stop = full[len(full) // 2:len(full) // 2 + 2]
        cut = client.completions.create(model="tiny", prompt="once upon", max_tokens=16, temperature=0, stop=[stop])
        check(cut.choices[0].text == full[:full.find(stop)], f"{cut.choices[0].text!r} vs {full!r} cut at {stop!r}")
        check(cut.choices[0].finish_reason == "stop", cut.choices[0].finish_reason)

        # Errors arrive as the client's exception types, with our message.
        try:
            client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "x"}], n=2)
            check(False, "n=2 was accepted")
        except openai.BadRequestError as e:
            check("'n' must be 1" in str(e), str(e))
        try:
            client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "x"}],
                                           temperature="hot")
            check(False, "temperature 'hot' was accepted")
        except openai.BadRequestError as e:
            check("temperature" in str(e), str(e))
        try:
            client.chat.completions.create(model="gpt-4", messages=[{"role": "user", "content": "x"}])
            check(False, "an unknown model was accepted")
        except openai.NotFoundError as e:
            check("gpt-4" in str(e), str(e))
        try:
            openai.OpenAI(base_url=base, api_key="wrong", max_retries=0).models.list()
            check(False, "a wrong key was accepted")
        except openai.AuthenticationError:
            pass
        print("openai client against tokenscope-cli serve: all checks passed")
    finally:
        server.terminate()
        code = server.wait(timeout=30)
    check(code == 0, f"serve exited with {code} on SIGTERM")
