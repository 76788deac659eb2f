// Speculative decoding on the real models (Gemma 3 270M Q4_K_M, SmolLM2-135M Q4_1; each
// skipped with a message when not installed): greedy output with prompt lookup and with a draft
// model (the model itself as its own draft: the same vocabulary by construction) must equal
// plain greedy decoding token for token. It can, because a verification chunk of up to 15
// tokens runs the matmuls with the decode kernels' arithmetic per token (test_matmul
// smallBatchesMatchDecodeBitForBit), attention and the element-wise ops are the same for a
// token alone or in a chunk, so every verified position sees the decode step's exact logits.
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
    "the east bank, paid for by a tax on the market. Since the wall was finished, the water has "
    "never reached the market square, and the lower town has grown into the busiest part of the "
    "city.",
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
        for (const char* text : kPrompts) {
            runtime::Request r = builder.chat({{"user", text}});
            r.sampling.temperature = 0.0f;
            r.max_tokens = 32;  // enough for several verifications, quick in a Debug build
            const auto a = generate(*plain, r);
            const auto b = generate(*spec, r);
            std::size_t i = 0;
            while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
            const std::string where = path + ", " + mode + ": first difference at token " +
                                      std::to_string(i) + " of " + std::to_string(a.size()) +
                                      " (plain) / " + std::to_string(b.size()) + " (speculative)";
            QVERIFY2(a == b, where.c_str());
            QVERIFY2(!a.empty(), "the plain run generated nothing");
        }
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
