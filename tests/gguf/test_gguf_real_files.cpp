// Real GGUF files written by other tools: the llama-spm vocabulary from ../shared/testdata and
// the default Gemma 3 270M model. Expected values are facts of those files that a second
// implementation reports too (tests/cli/compare_with_gguf_py.py cross-checks every key and
// tensor against the `gguf` Python package).
#include <QtTest>

#include "gguf/file.h"
#include "inspect/memory_budget.h"
#include "util/test_paths.h"

using namespace tokenscope;

class TestGgufRealFiles : public QObject {
    Q_OBJECT

  private slots:
    void llamaVocabulary() {
        const std::string path = test::shared_testdata("llama-spm/ggml-vocab-llama-spm.gguf");
        if (path.empty()) QSKIP("../shared/testdata/llama-spm is absent: nothing to read");
        const gguf::File file = gguf::File::open(path);
        QVERIFY(file.tensors().empty());  // vocabulary only
        QCOMPARE(file.require_string("tokenizer.ggml.model"), std::string("llama"));
        // The README of the test data: 32000 tokens, BOS=1, EOS=2, UNK=0.
        QCOMPARE(file.require_array("tokenizer.ggml.tokens").items.size(), std::size_t{32000});
        QCOMPARE(file.require_array("tokenizer.ggml.scores").items.size(), std::size_t{32000});
        QCOMPARE(file.require_uint("tokenizer.ggml.bos_token_id"), std::uint64_t{1});
        QCOMPARE(file.require_uint("tokenizer.ggml.eos_token_id"), std::uint64_t{2});
        QCOMPARE(file.require_uint("tokenizer.ggml.unknown_token_id"), std::uint64_t{0});
        const auto budget = inspect::memory_budget(file);
        QCOMPARE(budget.weight_bytes, std::uint64_t{0});
    }

    void gemmaModel() {
        const std::string path = test::gemma_model();
        if (path.empty()) QSKIP("the default model is not installed (run tools/setup-deps)");
        const gguf::File file = gguf::File::open(path);
        QCOMPARE(file.version(), 3u);
        QCOMPARE(file.require_string("general.architecture"), std::string("gemma3"));
        // Tensor data fills the file from data_offset to the end, up to alignment padding.
        QVERIFY(file.data_offset() + file.tensor_bytes() <= file.file_size());
        QVERIFY(file.file_size() - (file.data_offset() + file.tensor_bytes()) <
                file.tensors().size() * file.alignment());
        const gguf::TensorInfo* embedding = file.find_tensor("token_embd.weight");
        QVERIFY(embedding);
        QCOMPARE(embedding->dims, (std::vector<std::int64_t>{640, 262144}));

        // KV bytes per token by hand from the file's hyperparameters: 18 layers, 1 KV head,
        // key and value length 256, F16 (2 bytes): 2 * 18 * 1 * 256 * 2 = 18432.
        const auto budget = inspect::memory_budget(file);
        QVERIFY(budget.kv.has_value());
        QCOMPARE(budget.kv->layers, std::uint64_t{18});
        QCOMPARE(budget.kv->kv_heads, std::uint64_t{1});
        QCOMPARE(budget.kv->key_length, std::uint64_t{256});
        QCOMPARE(budget.kv_bytes_per_token(), std::uint64_t{18432});
        // 1 GiB: (2^30 - weights) / 18432 tokens, under the 32768-token context.
        const std::uint64_t gib = 1ull << 30;
        QCOMPARE(budget.max_context_for(gib),
                 std::min<std::uint64_t>(32768, (gib - budget.weight_bytes) / 18432));
        QCOMPARE(budget.max_context_for(budget.weight_bytes), std::uint64_t{0});
    }
};

QTEST_APPLESS_MAIN(TestGgufRealFiles)
#include "test_gguf_real_files.moc"
