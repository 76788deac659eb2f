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
                    const std::function<bool(const std::string&)>& keep_tensor,
                    const std::string& source_name = "llama", const test::TinyModelSpec& source_spec = {}) {
    const std::string source = test::tiny_model_path(source_name, source_spec);
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
test::TinyModelSpec spec_of(const char* architecture) {
    test::TinyModelSpec s;
    s.architecture = architecture;
    return s;
}

struct Loaded {
    model::ModelConfig config;
    model::ModelWeights weights;
};

Loaded load(const std::string& path) {
    gguf::File f = gguf::File::open(path);
    Loaded l{model::load_model_config(f), {}};
    l.weights = model::bind_weights(f, l.config);
    return l;
}
}  // namespace

class TestModelConfig : public QObject {
    Q_OBJECT

private slots:
    void gemma3Hyperparameters() {
        const std::string path = test::gemma_model();
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
        QVERIFY2(e.contains("architecture 'gpt2' is not supported (supported: llama, gemma3, qwen2, qwen3, phi3)"), qPrintable(e));
        QVERIFY(e.startsWith(QString::fromStdString(path)));
        QVERIFY(!e.contains('\n'));  // one line
    }

    // Qwen 2: biases bound with their lengths, RoPE on halves; head size from width / heads
    // (its converter writes no key_length).
    void qwen2Configuration() {
        const Loaded l = load(test::tiny_model_path("cfg_qwen2", spec_of("qwen2")));
        QCOMPARE(l.config.rope_style, model::RopeStyle::NeoX);
        QVERIFY(l.config.attention_bias && !l.config.qk_norm && !l.config.post_norms);
        QCOMPARE(l.config.head_dim, std::int64_t{16});
        QCOMPARE(l.weights.layers[1].bq.size(), std::size_t{64});
        QCOMPARE(l.weights.layers[1].bk.size(), std::size_t{32});
        QCOMPARE(l.weights.layers[1].bv.size(), std::size_t{32});
        QVERIFY(l.weights.rope_freq_factors.empty());
    }

    void qwen2MissingBiasIsNamed() {
        const std::string path = variant("qwen2_nobias", [](const gguf::File&, gguf::Writer&) {}, [](const std::string& n) {
            return n != "blk.1.attn_k.bias";
        }, "cfg_qwen2", spec_of("qwen2"));
        const QString e = error_of(path);
        QVERIFY2(e.contains("missing tensors: blk.1.attn_k.bias"), qPrintable(e));
    }

    void qwen3Configuration() {
        test::TinyModelSpec spec = spec_of("qwen3");
        spec.head_dim = 32;
        const Loaded l = load(test::tiny_model_path("cfg_qwen3", spec));
        QCOMPARE(l.config.rope_style, model::RopeStyle::NeoX);
        QVERIFY(l.config.qk_norm && !l.config.attention_bias && !l.config.post_norms);
        QCOMPARE(l.config.head_dim, std::int64_t{32});
        QCOMPARE(l.config.q_dim(), std::int64_t{128});
        QCOMPARE(l.config.attention_scale, 1.0f / std::sqrt(32.0f));
        QCOMPARE(l.weights.layers[0].q_norm.size(), std::size_t{32});
        QCOMPARE(l.weights.layers[0].k_norm.size(), std::size_t{32});
    }

    void qwen3MissingQkNormIsNamed() {
        const std::string path = variant("qwen3_nonorm", [](const gguf::File&, gguf::Writer&) {}, [](const std::string& n) {
            return n != "blk.0.attn_q_norm.weight" && n != "blk.1.attn_k_norm.weight";
        }, "cfg_qwen3_plain", spec_of("qwen3"));
        const QString e = error_of(path);
        QVERIFY2(e.contains("missing tensors: blk.0.attn_q_norm.weight, blk.1.attn_k_norm.weight"), qPrintable(e));
    }

    // Phi-3: the fused matrices are bound as row ranges (no copy); LongRoPE files are refused
    // by name; a missing fused tensor is named.
    void phi3Configuration() {
        const std::string path = test::tiny_model_path("cfg_phi3", spec_of("phi3"));
        const Loaded l = load(path);
        QCOMPARE(l.config.rope_style, model::RopeStyle::NeoX);
        QVERIFY(l.config.fused_gate_up);
        const auto& L = l.weights.layers[0];
        QCOMPARE(L.wq.rows, std::int64_t{64});
        QCOMPARE(L.wk.rows, std::int64_t{32});
        QCOMPARE(L.wv.rows, std::int64_t{32});
        QCOMPARE(static_cast<const std::uint8_t*>(L.wk.data), static_cast<const std::uint8_t*>(L.wq.data) + 64 * 64 * 4);
        QCOMPARE(static_cast<const std::uint8_t*>(L.wv.data), static_cast<const std::uint8_t*>(L.wk.data) + 32 * 64 * 4);
        QCOMPARE(L.w_gate.rows, std::int64_t{128});
        QCOMPARE(static_cast<const std::uint8_t*>(L.w_up.data), static_cast<const std::uint8_t*>(L.w_gate.data) + 128 * 64 * 4);
        const std::string longrope = variant("phi3_longrope", [](const gguf::File&, gguf::Writer& w) {
            std::vector<float> ones(8, 1.0f);
            w.add_tensor("rope_factors_long.weight", tensor::Type::F32, {8}, {reinterpret_cast<const std::uint8_t*>(ones.data()), 32});
        }, [](const std::string&) { return true; }, "cfg_phi3", spec_of("phi3"));
        QString e = error_of(longrope);
        QVERIFY2(e.contains("tensor 'rope_factors_long.weight': Phi-3 LongRoPE scaling is not supported"), qPrintable(e));
        const std::string missing = variant("phi3_noqkv", [](const gguf::File&, gguf::Writer&) {}, [](const std::string& n) {
            return n != "blk.0.attn_qkv.weight";
        }, "cfg_phi3", spec_of("phi3"));
        e = error_of(missing);
        QVERIFY2(e.contains("missing tensors: blk.0.attn_q.weight, blk.0.attn_k.weight, blk.0.attn_v.weight"), qPrintable(e));
    }

    // Llama 3.x: rope_freqs.weight is read (rope_dims / 2 factors); a wrong length is named.
    void llama3RopeFreqs() {
        test::TinyModelSpec spec;
        spec.llama3_rope = {8.0, 1.0, 4.0, 64.0};
        const std::string path = test::tiny_model_path("cfg_llama3", spec);
        const Loaded l = load(path);
        QCOMPARE(l.weights.rope_freq_factors.size(), std::size_t{8});
        QCOMPARE(l.weights.rope_freq_factors.front(), 1.0f);  // shortest wavelength: unchanged
        QCOMPARE(l.weights.rope_freq_factors.back(), 8.0f);   // longest: slowed by the factor
        const std::string bad = variant("llama3_bad", [](const gguf::File&, gguf::Writer& w) {
            std::vector<float> four(4, 1.0f);
            w.add_tensor("rope_freqs.weight", tensor::Type::F32, {4}, {reinterpret_cast<const std::uint8_t*>(four.data()), 16});
        }, [](const std::string&) { return true; });
        const QString e = error_of(bad);
        QVERIFY2(e.contains("tensor 'rope_freqs.weight': 4 elements, expected 8"), qPrintable(e));
    }

    // Mistral and SmolLM2 GGUFs are `llama`: Mistral v0.1 with a window on every layer,
    // SmolLM2 with a tied output.
    void mistralAndSmolLM2AreLlama() {
        test::TinyModelSpec mistral;
        mistral.sliding_window = 4096;
        const Loaded m = load(test::tiny_model_path("cfg_mistral", mistral));
        QCOMPARE(m.config.sliding_window, std::int64_t{4096});
        for (int layer = 0; layer < 2; ++layer) QVERIFY(m.config.uses_window(layer));
        QCOMPARE(m.config.rope_style, model::RopeStyle::Normal);
        test::TinyModelSpec smol;
        smol.width = 72;
        smol.heads = 9;
        smol.kv_heads = 3;
        smol.head_dim = 8;
        smol.tied_output = true;
        const Loaded s = load(test::tiny_model_path("cfg_smollm2", smol));
        QVERIFY(s.config.tied_output && s.config.sliding_window == 0);
        QCOMPARE(s.weights.output.data, s.weights.token_embedding.data);
        QCOMPARE(s.config.kv_heads, std::int64_t{3});
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
