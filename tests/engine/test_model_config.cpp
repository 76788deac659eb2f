// ModelConfig and weight binding: the Gemma 3 270M hyperparameters as the architecture
// defines them, and precise errors for unsupported architectures, missing tensors and wrong
// shapes.
#include <QtTest>
#include <cmath>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "reference/tiny_model.h"
#include "util/error.h"
#include "util/test_paths.h"

using namespace tokenscope;

namespace {
QString error_of(const std::string& path) {
    try {
        gguf::File f = gguf::File::open(path);
        model::ModelConfig c = model::load_model_config(f);
        model::bind_weights(f, c);
    } catch (const FormatError& e) {
        return QString::fromUtf8(e.what());
    }
    return {};
}

// Copies a tiny model's metadata and tensors, letting `edit` change the writer first.
std::string variant(const std::string& name, const std::function<void(const gguf::File&, gguf::Writer&)>& edit,
                    const std::function<bool(const std::string&)>& keep_tensor) {
    const std::string source = test::tiny_model_path("llama", test::TinyModelSpec{});
    const gguf::File f = gguf::File::open(source);
    gguf::Writer w;
    for (const auto& [key, value] : f.metadata()) w.set(key, value);
    for (const auto& t : f.tensors()) {
        if (keep_tensor(t.name)) w.add_tensor(t.name, t.type, t.dims, {t.data, t.byte_size});
    }
    edit(f, w);
    const std::string path = test::scratch_dir() + "/" + name + ".gguf";
    w.write(path);
    return path;
}
}  // namespace

class TestModelConfig : public QObject {
    Q_OBJECT

private slots:
    void gemma3Hyperparameters() {
        const std::string path = test::default_model();
        if (path.empty()) QSKIP("the default model is not installed (run tools/setup-deps)");
        gguf::File f = gguf::File::open(path);
        model::ModelConfig c = model::load_model_config(f);
        const model::ModelWeights w = model::bind_weights(f, c);
        // From the file's keys (see `tokenscope-cli inspect`) and the Gemma 3 design.
        QCOMPARE(c.layers, std::int64_t{18});
        QCOMPARE(c.embedding_length, std::int64_t{640});
        QCOMPARE(c.heads, std::int64_t{4});
        QCOMPARE(c.kv_heads, std::int64_t{1});
        QCOMPARE(c.head_dim, std::int64_t{256});
        QCOMPARE(c.ffn_length, std::int64_t{2048});
        QCOMPARE(c.vocab_size, std::int64_t{262144});
        QCOMPARE(c.sliding_window, std::int64_t{512});
        QCOMPARE(c.rope_style, model::RopeStyle::NeoX);
        QCOMPARE(c.activation, model::FfnActivation::GeluTanh);
        QVERIFY(c.qk_norm && c.post_norms && c.tied_output);
        // Layers 5, 11 and 17 are global; the others local with RoPE base 10 000.
        for (int l = 0; l < 18; ++l) QCOMPARE(c.uses_window(l), (l + 1) % 6 != 0);
        QCOMPARE(c.rope_base(5), 1000000.0f);
        QCOMPARE(c.rope_base(0), 10000.0f);
        QCOMPARE(c.attention_scale, 1.0f / 16.0f);                 // 1/sqrt(256)
        QCOMPARE(c.embedding_scale, std::sqrt(640.0f));
        QCOMPARE(w.layers.size(), std::size_t{18});
        QCOMPARE(w.output.data, w.token_embedding.data);            // tied
        QCOMPARE(w.layers[0].wq.type, tensor::Type::Q5_0);
    }

    void unsupportedArchitectureListsSupported() {
        const std::string path = variant("arch_gpt2", [](const gguf::File&, gguf::Writer& w) {
            w.set("general.architecture", gguf::Value::string("gpt2"));
        }, [](const std::string&) { return true; });
        const QString e = error_of(path);
        QVERIFY2(e.contains("architecture 'gpt2' is not supported (supported: llama, gemma3)"), qPrintable(e));
        QVERIFY(e.startsWith(QString::fromStdString(path)));
    }

    void missingTensorsAreAllListed() {
        const std::string path = variant("missing", [](const gguf::File&, gguf::Writer&) {}, [](const std::string& n) {
            return n != "blk.1.ffn_up.weight" && n != "output_norm.weight";
        });
        const QString e = error_of(path);
        QVERIFY2(e.contains("missing tensors: output_norm.weight, blk.1.ffn_up.weight"), qPrintable(e));
    }

    void wrongShapeIsNamed() {
        const std::string path = variant("shape", [](const gguf::File&, gguf::Writer& w) {
            std::vector<std::uint8_t> data(64 * 4 * 4);
            w.add_tensor("blk.0.attn_q.weight", tensor::Type::F32, {64, 4}, data);
        }, [](const std::string& n) { return n != "blk.0.attn_q.weight"; });
        const QString e = error_of(path);
        QVERIFY2(e.contains("tensor 'blk.0.attn_q.weight': shape 64 x 4, expected 64 x 64"), qPrintable(e));
    }

    void inconsistentHeadsAreRejected() {
        const std::string path = variant("heads", [](const gguf::File&, gguf::Writer& w) {
            w.set("llama.attention.head_count_kv", gguf::Value::u32(3));
        }, [](const std::string&) { return true; });
        const QString e = error_of(path);
        QVERIFY2(e.contains("head_count 4 is not a multiple of head_count_kv 3"), qPrintable(e));
    }
};

QTEST_GUILESS_MAIN(TestModelConfig)
#include "test_model_config.moc"
