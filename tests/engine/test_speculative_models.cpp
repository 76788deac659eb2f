// Speculative decoding on the real models (Gemma 3 270M Q4_K_M, SmolLM2-135M Q4_1; each
// skipped with a message when not installed): greedy output with prompt lookup and with a draft
// model (the model itself as its own draft: the same vocabulary by construction) against plain
// greedy decoding.
//
// Identity here is token for token up to float rounding: a verification chunk of several
// tokens runs the quantized matmuls through the packed multi-token path of engine/tensor, a
// plain decode step through the one-token path, and the two round differently (docs: "the
// quantized paths agree to float rounding"; on Gemma 3 270M the logits of the two paths differ
// by up to ~0.7 at a position, on logits up to ~25). Where the plain argmax and another token
// are closer than that, the verification may pick the other. So at the first difference the
// test measures, at that very position, the largest logit difference D between the one-token
// path and a multi-token chunk, and wants the speculative token's plain logit within 2 D of the
// plain argmax's (a flip needs |delta(a)| + |delta(b)| >= gap). Identical runs are counted and
// reported (measured: SmolLM2 6 of 6; Gemma 3 of 6, each difference at a gap of 0.09-0.15).
#include <QtTest>

#include "engine_test_helpers.h"
#include "runtime/engine.h"
#include "runtime/prompt_builder.h"
#include "util/test_paths.h"

using namespace tokenscope;

namespace {

const char* kPrompts[] = {
    "Summarise this paragraph in two sentences, quoting its most important sentence word for "
    "word:\n\n"
    "The river flooded the lower town every spring. In 1852 the council built a stone wall along "
    "the east "
    "bank, paid for by a tax on the market. Since the wall was finished, the water has never "
    "reached the "
    "market square, and the lower town has grown into the busiest part of the city.",
    "Rename the variable `total` to `sum` in this Python function:\n\ndef average(values):\n    "
    "total = 0\n"
    "    for value in values:\n        total = total + value\n    return total / len(values)\n",
    "Write a short poem about autumn leaves.",
};

std::vector<std::int32_t> generate(runtime::Engine& e, runtime::Request r) {
    const auto id = e.submit(std::move(r));
    std::vector<std::int32_t> out;
    while (e.has_work()) {
        for (const auto& ev : e.step()) {
            if (ev.request == id && ev.token >= 0) out.push_back(ev.token);
        }
    }
    return out;
}

// The plain decode's logits at the position after prompt + generated[0, i): the prompt as one
// chunk, then one token at a time, as Engine::step runs them.
std::vector<float> plain_logits(runtime::Engine& e, const std::vector<std::int32_t>& prompt,
                                const std::vector<std::int32_t>& generated, std::size_t i) {
    std::vector<std::int32_t> seq = prompt;
    seq.insert(seq.end(), generated.begin(), generated.begin() + static_cast<std::ptrdiff_t>(i));
    const kv::SeqId s = e.new_sequence_id();
    runtime::ForwardOutputs out;
    for (std::size_t pos = 0; pos < seq.size();) {
        const std::size_t n = pos == 0 ? prompt.size() : 1;
        if (!e.kv().allocate_slots(s, static_cast<int>(n))) throw std::runtime_error("kv full");
        runtime::Batch b;
        b.chunks.push_back({s, std::span(seq).subspan(pos, n), static_cast<std::int64_t>(pos),
                            runtime::LogitsWanted::Last, nullptr});
        e.forward(b, out);
        pos += n;
    }
    e.kv().free_sequence(s);
    const auto row = out.row(0);
    return {row.begin(), row.end()};
}

void check_model(const std::string& path) {
    runtime::EngineOptions o;
    o.threads = 2;
    o.kv_capacity_tokens = 2048;
    auto plain = runtime::Engine::load(path, o);
    for (const char* mode : {"lookup", "draft"}) {
        runtime::EngineOptions so = o;
        so.speculation =
            runtime::parse_speculation(std::string(mode) == "lookup" ? "lookup" : "draft:" + path);
        so.speculation.max_k = 6;
        auto spec = runtime::Engine::load(path, so);
        const runtime::PromptBuilder builder(*plain, std::nullopt);
        int identical = 0, tied = 0;
        for (const char* text : kPrompts) {
            runtime::Request r = builder.chat({{"user", text}});
            r.sampling.temperature = 0.0f;
            r.max_tokens = 64;
            const auto a = generate(*plain, r);
            const auto b = generate(*spec, r);
            std::size_t i = 0;
            while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
            if (i == a.size() && i == b.size()) {
                ++identical;
                continue;
            }
            QVERIFY2(i < a.size() && i < b.size(), "one run stopped early without a difference");
            const auto logits = plain_logits(*plain, r.prompt, a, i);
            const float gap =
                logits[static_cast<std::size_t>(a[i])] - logits[static_cast<std::size_t>(b[i])];
            float worst = 0.0f;
            {
                // The same position's logits through a multi-token chunk (the verification path).
                std::vector<std::int32_t> seq = r.prompt;
                seq.insert(seq.end(), a.begin(), a.begin() + static_cast<std::ptrdiff_t>(i));
                const auto rows = test::run_sequence(*plain, seq, 4);
                float largest = 0.0f;
                for (std::size_t v = 0; v < logits.size(); ++v) {
                    worst = std::max(worst, std::abs(rows.back()[v] - logits[v]));
                    largest = std::max(largest, std::abs(logits[v]));
                }
                qInfo(
                    "decode-path vs 4-token-chunk logits at that position: max |difference| %.4f "
                    "(largest |logit| %.1f)",
                    static_cast<double>(worst), static_cast<double>(largest));
            }
            qInfo(
                "%s, %s: first difference at token %zu of %zu: plain %d, speculative %d, logit gap "
                "%.5f",
                path.c_str(), mode, i, a.size(), a[i], b[i], static_cast<double>(gap));
            // The plain token is the argmax of these logits, the speculative one within kTie of it.
            QVERIFY(gap >= 0.0f);
            QVERIFY2(gap <= 2.0f * worst, qPrintable(QString::number(static_cast<double>(gap))));
            ++tied;
        }
        qInfo("%s, %s: %d of %zu prompts identical, %d differ at a near-tie", path.c_str(), mode,
              identical, std::size(kPrompts), tied);
    }
}

}  // namespace

class TestSpeculativeModels : public QObject {
    Q_OBJECT

  private slots:
    void gemma() {
        const std::string model = test::gemma_model();
        if (model.empty()) QSKIP("Gemma 3 270M is not installed (run tools/setup-deps)");
        check_model(model);
    }
    void smollm2() {
        const std::string model = test::smollm2_model();
        if (model.empty()) QSKIP("SmolLM2-135M-Instruct is not installed (run tools/setup-deps)");
        check_model(model);
    }
};

QTEST_GUILESS_MAIN(TestSpeculativeModels)
#include "test_speculative_models.moc"
