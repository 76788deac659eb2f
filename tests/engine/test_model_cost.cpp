// inspect::attention_flops (the bench's attention share of a prefill) against a count of every
// (layer, query, key) pair the CPU attention visits, written here as plain loops over the
// positions with the window rule of runtime/cpu_attention.cpp (a query at p sees keys j with
// p - window < j <= p), and against hand-counted small cases. The function itself uses closed
// forms of those sums.
//
// Also model_cost's split of the matrix FLOPs into int8 products (quantized weights, counted
// against the bench's int8 ceiling) and f32 ones, on a file written here with a hand-counted
// answer, at each SIMD level; and which instruction each measured ceiling runs at each level.
#include <QtTest>

#include <cstdint>
#include <cstring>
#include <vector>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "inspect/compute_peak.h"
#include "inspect/model_cost.h"
#include "model/model_config.h"
#include "tensor/matmul.h"
#include "tensor/type.h"
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

// Runs fn at every SIMD level this CPU has, forced (scalar first), then restores the detected
// one, also when fn fails a check and returns early.
template <class Fn>
void for_each_simd_level(Fn fn) {
    struct LevelGuard {
        ~LevelGuard() { tensor::set_simd_level(tensor::detected_simd_level()); }
    } guard;
    for (int l = 0; l <= static_cast<int>(tensor::detected_simd_level()); ++l) {
        const auto level = static_cast<tensor::SimdLevel>(l);
        tensor::set_simd_level(level);
        fn(level);
        if (QTest::currentTestFailed()) return;
    }
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

    // A file with a Q8_0 and a Q4_K matrix (int8 products), an F16 one and a BF16 one (f32),
    // a 1-D norm (no matrix) and a separate F16 output matrix; counted by hand:
    //   layer FLOPs 2 x (64x32 + 256x16 + 64x48 + 64x8) = 2 x 9728, of which int8 2 x 6144;
    //   output 2 x 64 x 100, f32 (F16 weights).
    // At the AVX2 level with TOKENSCOPE_INT8_GEMM=0 the quantized types would run f32 panels;
    // that setting is read once per process, so it is checked through the tensor function.
    void int8ShareOfTheMatrices() {
        gguf::Writer w;
        w.set("general.architecture", gguf::Value::string("llama"));
        auto add = [&](const std::string& name, tensor::Type type, std::vector<std::int64_t> dims) {
            std::int64_t rows = 1;
            for (std::size_t i = 1; i < dims.size(); ++i) rows *= dims[i];
            std::vector<std::uint8_t> zeros(tensor::row_bytes(type, dims[0]) *
                                            static_cast<std::size_t>(rows));
            w.add_tensor(name, type, dims, zeros);
        };
        add("token_embd.weight", tensor::Type::F16, {64, 100});
        add("output.weight", tensor::Type::F16, {64, 100});
        add("blk.0.attn_q.weight", tensor::Type::Q8_0, {64, 32});
        add("blk.0.ffn_up.weight", tensor::Type::Q4_K, {256, 16});
        add("blk.0.ffn_down.weight", tensor::Type::F16, {64, 48});
        add("blk.0.attn_k.weight", tensor::Type::BF16, {64, 8});
        add("blk.0.attn_norm.weight", tensor::Type::F32, {64});
        const std::string path = test::scratch_dir() + "/model_cost_types.gguf";
        w.write(path);
        const gguf::File file = gguf::File::open(path);

        for_each_simd_level([&](tensor::SimdLevel level) {
            const inspect::ModelCost cost = inspect::model_cost(file);
            QCOMPARE(cost.layer_flops_per_token, 2.0 * 9728);
            QCOMPARE(cost.output_flops, 2.0 * 6400);
            QCOMPARE(cost.output_int8_flops, 0.0);
            const bool int8 = tensor::prefill_uses_int8_products(tensor::Type::Q8_0);
            QCOMPARE(tensor::prefill_uses_int8_products(tensor::Type::Q4_K), int8);
            QCOMPARE(cost.layer_int8_flops_per_token, int8 ? 2.0 * 6144 : 0.0);
            // Quantized products are int8 everywhere but the AVX2 panels' f32 fallback.
            QCOMPARE(int8, level != tensor::SimdLevel::Avx2 ||
                               std::getenv("TOKENSCOPE_INT8_GEMM") == nullptr ||
                               std::strcmp(std::getenv("TOKENSCOPE_INT8_GEMM"), "0") != 0);
            for (tensor::Type t : {tensor::Type::F32, tensor::Type::F16, tensor::Type::BF16})
                QVERIFY(!tensor::prefill_uses_int8_products(t));
        });
    }

    // The ceilings follow the forced level, not the widest the CPU has (a machine with two
    // 512-bit FMA units has twice the AVX2 kernels' ceiling at AVX-512). Their values depend
    // on the machine and its load, so only that one was measured is checked, not how fast.
    void ceilingsFollowTheActiveLevel() {
        for_each_simd_level([&](tensor::SimdLevel level) {
            const inspect::ComputePeak f32 = inspect::measure_f32_peak(1, 0.02);
            const inspect::ComputePeak int8 = inspect::measure_int8_peak(1, 0.02);
            QVERIFY(f32.gflops > 0 && int8.gflops > 0);
            QCOMPARE(std::string(f32.isa), std::string(tensor::simd_level_name(level)));
            const char* want = level == tensor::SimdLevel::Avx512   ? "avx512-vnni vpdpbusd"
                               : level == tensor::SimdLevel::Scalar ? "scalar"
                               : tensor::avx_vnni_in_use()          ? "avx-vnni vpdpbusd"
                                                                    : "avx2 vpmaddubsw";
            QCOMPARE(std::string(int8.isa), std::string(want));
        });
    }
};

QTEST_GUILESS_MAIN(TestModelCost)
#include "test_model_cost.moc"
