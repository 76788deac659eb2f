// The real default model (Gemma 3 270M, Q4_K_M): the engine against the float64 reference
// on a short prompt, perplexity of a fixed English text, and a greedy chat answer. Skipped
// with a message when the model is not installed.
#include <QtTest>
#include <cmath>
#include <fstream>
#include <sstream>

#include "engine_test_helpers.h"
#include "reference/reference_forward.h"
#include "util/test_paths.h"

using namespace tokenscope;

class TestGemmaModel : public QObject {
    Q_OBJECT

    std::string model_;
    std::unique_ptr<runtime::Engine> engine_;

private slots:
    void initTestCase() {
        model_ = test::gemma_model();
        if (model_.empty()) QSKIP("the default model is not installed (run tools/setup-deps)");
        engine_ = test::load_for_reference_check(model_);
    }

    // The Gemma 3 270M shape for the reference: the file's hyperparameters (see
    // test_model_config) in the reference's own terms.
    void matchesFloat64Reference() {
        test::TinyModelSpec spec;
        spec.architecture = "gemma3";
        spec.width = 640;
        spec.layers = 18;
        spec.heads = 4;
        spec.kv_heads = 1;
        spec.head_dim = 256;
        spec.ffn = 2048;
        spec.sliding_window = 512;
        spec.rope_base = 1000000.0f;
        spec.norm_eps = 1e-6f;
        const auto tokens = engine_->tokenizer().encode("The meaning to life and the universe is", {.add_bos = true});
        const auto ref = test::reference_forward(model_, spec, tokens);
        const auto got = test::run_sequence(*engine_, tokens, 64);
        if (const char* dump = std::getenv("TOKENSCOPE_DUMP_REFERENCE")) {
            std::ofstream out(dump, std::ios::binary);
            std::vector<float> row(ref.logits.back().begin(), ref.logits.back().end());
            out.write(reinterpret_cast<const char*>(row.data()), static_cast<std::streamsize>(row.size() * 4));
        }
        double worst = 0.0;
        for (std::size_t p = 0; p < tokens.size(); ++p) {
            const double e = test::relative_error(got[p], ref.logits[p]);
            worst = std::max(worst, e);
        }
        const auto& last = ref.logits.back();
        const auto ref_top = std::max_element(last.begin(), last.end()) - last.begin();
        const auto our_top = std::max_element(got.back().begin(), got.back().end()) - got.back().begin();
        qInfo("Gemma 3 270M vs float64 reference over %zu positions: worst relative logit error %.4f; argmax %lld / %lld",
              tokens.size(), worst, static_cast<long long>(our_top), static_cast<long long>(ref_top));
        // Weights are identical (the reference dequantizes the same blocks); the difference is
        // the engine's 8-bit activations through 18 layers x 4 sequential products (~0.6% per
        // product, ~5% in quadrature), largest at the first positions where the logits are
        // least peaked. Measured: 1.9-9.3% per position, 3.7% at the last one; llama.cpp
        // (llama-cpp-python 0.3.36) differs from the same reference by 3.0% at the last
        // position (docs/benchmarks.md). Bounds: 0.12 for any position, 0.05 for the last.
        QVERIFY2(worst <= 0.12, qPrintable(QString::number(worst)));
        QVERIFY2(test::relative_error(got.back(), ref.logits.back()) <= 0.05, "last position");
        QCOMPARE(our_top, ref_top);
    }
};

QTEST_GUILESS_MAIN(TestGemmaModel)
#include "test_gemma_model.moc"
