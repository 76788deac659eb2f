// The real default model, SmolLM2-135M-Instruct (Q4_1, byte-level BPE, ChatML): the engine
// against the float64 reference on a short prompt, and a greedy three-turn chat whose answers
// must name facts (Paris, the Eiffel Tower) and whose later turns reuse the KV cache. Skipped
// with a message when the model is not installed.
#include <QtTest>
#include <algorithm>

#include "engine_test_helpers.h"
#include "reference/reference_forward.h"
#include "runtime/prompt_builder.h"
#include "util/test_paths.h"

using namespace tokenscope;

namespace {

struct Reply {
    std::string text;
    std::int64_t reused = 0;
    std::int64_t prompt = 0;
};

Reply generate(runtime::Engine& engine, runtime::Request request) {
    Reply reply;
    engine.submit(std::move(request));
    while (engine.has_work()) {
        for (const auto& e : engine.step()) {
            reply.text += e.text;
            reply.reused = e.timings.reused_tokens;
            reply.prompt = e.timings.prompt_tokens;
        }
    }
    return reply;
}

}  // namespace

class TestSmolLM2Model : public QObject {
    Q_OBJECT

    std::string model_;
    std::unique_ptr<runtime::Engine> engine_;

  private slots:
    void initTestCase() {
        model_ = test::smollm2_model();
        if (model_.empty()) QSKIP("SmolLM2-135M-Instruct is not installed (run tools/setup-deps)");
        engine_ = test::load_for_reference_check(model_);
    }

    // The file's hyperparameters (general.architecture llama: 30 layers, width 576, 9 heads
    // over 3 KV heads of 64, FFN 1536, rope base 100000, eps 1e-5, tied output) in the
    // reference's own terms; the reference dequantizes the same Q4_1 blocks in float64.
    void matchesFloat64Reference() {
        test::TinyModelSpec spec;
        spec.architecture = "llama";
        spec.width = 576;
        spec.layers = 30;
        spec.heads = 9;
        spec.kv_heads = 3;
        spec.head_dim = 64;
        spec.ffn = 1536;
        spec.context = 8192;
        spec.rope_base = 100000.0f;
        spec.norm_eps = 1e-5f;
        spec.tied_output = true;
        const auto tokens =
            engine_->tokenizer().encode("The capital of France is", {.add_bos = false});
        QVERIFY(tokens.size() >= 4);
        const auto ref = test::reference_forward(model_, spec, tokens);
        const auto got = test::run_sequence(*engine_, tokens, 64);
        double worst = 0.0;
        for (std::size_t p = 0; p < tokens.size(); ++p)
            worst = std::max(worst, test::relative_error(got[p], ref.logits[p]));
        const auto& last = ref.logits.back();
        const auto ref_top = std::max_element(last.begin(), last.end()) - last.begin();
        const auto our_top =
            std::max_element(got.back().begin(), got.back().end()) - got.back().begin();
        qInfo(
            "SmolLM2-135M vs float64 reference over %zu positions: worst relative logit error %.4f "
            "(last %.4f); "
            "argmax %lld / %lld",
            tokens.size(), worst, test::relative_error(got.back(), ref.logits.back()),
            static_cast<long long>(our_top), static_cast<long long>(ref_top));
        // The reasoning of the Gemma check (test_gemma_model): the weights are identical, the
        // difference is the engine's 8-bit activations, ~0.6 % per product, adding in
        // quadrature. SmolLM2 has 30 layers x 7 quantized products against Gemma's 18 x 7, so
        // Gemma's bounds (0.12 any position, 0.05 the last) scale by sqrt(210/126) = 1.29:
        // 0.155 (any position). Measured 2026-12-01: worst 0.088, last 0.060, same argmax.
        // Perplexity against llama.cpp on this file: docs/benchmarks.md (within 0.7 %).
        // A separate bound of 0.065 for the last position was dropped on 2026-12-04: it failed
        // at 0.0875 after a change that only reorders float sums (the AVX2 Q4_1 decode kernel
        // with blocks in the integer lanes, which agrees with the scalar kernel to 1e-5 on this
        // file's matrices), and swapping two accumulators in that kernel moved it to 0.057.
        // Over five such rounding variants (scalar, AVX-512, the old and new AVX2 kernels, the
        // swap) the last position read 0.035-0.088 and the worst position 0.052-0.122: the error
        // is the 8-bit activations' noise, and a rounding change redraws it (a value beside a
        // rounding boundary flips, and in a block with an outlier one step is large). The
        // last position is held to the same bound as the others.
        QVERIFY2(worst <= 0.155, qPrintable(QString::number(worst)));
        QCOMPARE(our_top, ref_top);
    }

    void greedyThreeTurnChat() {
        runtime::PromptBuilder prompts(*engine_, std::nullopt);
        QCOMPARE(QString::fromUtf8(prompts.chat_template().name()), QStringLiteral("chatml"));
        // The file's own template renders the chat, with the default system prompt it carries
        // (read from the GGUF's tokenizer.chat_template by hand).
        QVERIFY(prompts.uses_model_template());
        const std::vector<tokenizer::ChatMessage> probe = {{"user", "Hi"}};
        QVERIFY(prompts.render(probe).rfind("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n", 0) == 0);
        // With the template's default system prompt this 135M model, decoded greedily, answers
        // the first question with a French list ("L'Étoile, la Mars...") in llama.cpp too
        // (llama-simple, same file, same prompt tokens; 2026-12-01), so the conversation gives
        // its own short system prompt, with which llama.cpp answers "The capital of France is
        // Paris."
        std::vector<tokenizer::ChatMessage> messages = {{"system", "You are a helpful assistant."},
                                                        {"user", "What is the capital of France?"}};
        auto ask = [&](const std::string& conversation) {
            runtime::Request r = prompts.chat(messages);
            r.sampling.temperature = 0.0f;
            r.max_tokens = 64;
            r.conversation = conversation;
            return generate(*engine_, std::move(r));
        };
        const Reply first = ask("smol");
        qInfo("turn 1: %s", first.text.c_str());
        QVERIFY2(first.text.find("Paris") != std::string::npos, first.text.c_str());
        messages.push_back({"assistant", first.text});
        messages.push_back({"user", "What is a famous landmark there?"});
        const Reply second = ask("smol");
        qInfo("turn 2: %s (%lld of %lld prompt tokens reused)", second.text.c_str(),
              static_cast<long long>(second.reused), static_cast<long long>(second.prompt));
        QVERIFY2(second.text.find("Eiffel") != std::string::npos, second.text.c_str());
        QVERIFY(second.reused > 0);
        messages.push_back({"assistant", second.text});
        messages.push_back({"user", "In which country is it?"});
        const Reply third = ask("smol");
        qInfo("turn 3: %s", third.text.c_str());
        QVERIFY2(third.text.find("France") != std::string::npos, third.text.c_str());
        QVERIFY(third.reused > second.reused);
    }
};

QTEST_GUILESS_MAIN(TestSmolLM2Model)
#include "test_smollm2_model.moc"
