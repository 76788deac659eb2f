// inspect::attention_flops (the bench's attention share of a prefill) against a count of every
// (layer, query, key) pair the CPU attention visits, written here as plain loops over the
// positions with the window rule of runtime/cpu_attention.cpp (a query at p sees keys j with
// p - window < j <= p), and against hand-counted small cases. The function itself uses closed
// forms of those sums.
#include <QtTest>

#include <cstdint>

#include "gguf/file.h"
#include "inspect/model_cost.h"
#include "model/model_config.h"
#include "util/test_paths.h"

using namespace tokenscope;

namespace {

model::ModelConfig config_of(std::int64_t layers, std::int64_t heads, std::int64_t head_dim,
                             std::int64_t window, std::vector<bool> uses_window) {
    model::ModelConfig c;
    c.layers = layers;
    c.heads = heads;
    c.kv_heads = 1;
    c.head_dim = head_dim;
    c.value_dim = head_dim;
    c.sliding_window = window;
    c.layer_uses_window = std::move(uses_window);
    return c;
}

// Every (layer, query, key) pair, counted one by one; 2 flops per multiply-add, head_dim for
// the score and value_dim for the weighted sum, per query head.
double counted_flops(const model::ModelConfig& c, std::int64_t cached, std::int64_t tokens) {
    std::int64_t pairs = 0;
    for (std::int64_t layer = 0; layer < c.layers; ++layer) {
        for (std::int64_t p = cached; p < cached + tokens; ++p) {
            for (std::int64_t j = 0; j <= p; ++j) {
                if (c.uses_window(layer) && p - j >= c.sliding_window) continue;
                ++pairs;
            }
        }
    }
    return static_cast<double>(pairs) * static_cast<double>(c.heads) * 2.0 *
           static_cast<double>(c.head_dim + c.value_dim);
}

}  // namespace

class TestModelCost : public QObject {
    Q_OBJECT

  private slots:
    // By hand: one layer, one head, head_dim = value_dim = 2, so 8 flops per key visit.
    void handCountedCases() {
        const model::ModelConfig full = config_of(1, 1, 2, 0, {false});
        QCOMPARE(inspect::attention_flops(full, 0, 3), 8.0 * (1 + 2 + 3));
        QCOMPARE(inspect::attention_flops(full, 4, 2), 8.0 * (5 + 6));
        QCOMPARE(inspect::attention_flops(full, 7, 0), 0.0);
        const model::ModelConfig window2 = config_of(1, 1, 2, 2, {true});
        QCOMPARE(inspect::attention_flops(window2, 0, 3), 8.0 * (1 + 2 + 2));
        QCOMPARE(inspect::attention_flops(window2, 5, 1), 8.0 * 2);
        // Two layers, the second local with a window of 4, three heads of 8.
        const model::ModelConfig mixed = config_of(2, 3, 8, 4, {false, true});
        QCOMPARE(inspect::attention_flops(mixed, 2, 4),
                 3.0 * 32.0 * ((3 + 4 + 5 + 6) + (3 + 4 + 4 + 4)));
    }

    // Prompts of 1 to 40 tokens after 0 to 20 cached ones, windows below, inside and above
    // them, against the loops.
    void matchesTheCountedPairs() {
        const model::ModelConfig c = config_of(3, 5, 16, 7, {true, false, true});
        for (std::int64_t cached : {0, 1, 6, 7, 20}) {
            for (std::int64_t tokens = 1; tokens <= 40; ++tokens) {
                QCOMPARE(inspect::attention_flops(c, cached, tokens),
                         counted_flops(c, cached, tokens));
            }
        }
    }

    // The bench's prompt lengths on the installed Gemma 3 270M (local layers with a 512-token
    // window and global ones): the closed form and the loops agree, and 512 tokens do more
    // attention per token than 128.
    void gemmaPromptLengths() {
        const std::string path = test::gemma_model();
        if (path.empty()) QSKIP("the default model is not installed (run tools/setup-deps)");
        const gguf::File file = gguf::File::open(path);
        const model::ModelConfig c = model::load_model_config(file);
        QVERIFY(c.sliding_window > 0);
        for (std::int64_t tokens : {128, 512, 700}) {
            QCOMPARE(inspect::attention_flops(c, 0, tokens), counted_flops(c, 0, tokens));
        }
        QVERIFY(inspect::attention_flops(c, 0, 512) / 512 >
                inspect::attention_flops(c, 0, 128) / 128);
    }
};

QTEST_GUILESS_MAIN(TestModelCost)
#include "test_model_cost.moc"
