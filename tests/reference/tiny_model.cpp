#include "reference/tiny_model.h"

#include <cmath>
#include <map>
#include <random>

#include "gguf/writer.h"
#include "tokenizer/trained_tokenizer.h"
#include "tokenizer/vocabulary.h"
#include "util/test_paths.h"

namespace tokenscope::test {

namespace {

class WeightWriter {
public:
    WeightWriter(gguf::Writer& writer, const TinyModelSpec& spec) : writer_(writer), spec_(spec), rng_(spec.seed) {}

    // rows x cols matrix with N(0, 1/sqrt(cols)) entries so activations stay O(1).
    void matrix(const std::string& name, std::int64_t rows, std::int64_t cols) {
        std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(static_cast<float>(cols)));
        std::vector<float> values(static_cast<std::size_t>(rows * cols));
        for (float& v : values) v = normal(rng_);
        const std::size_t row_bytes = tensor::row_bytes(spec_.weight_type, cols);
        std::vector<std::uint8_t> data(row_bytes * static_cast<std::size_t>(rows));
        for (std::int64_t r = 0; r < rows; ++r) {
            tensor::quantize_row(spec_.weight_type, values.data() + r * cols, data.data() + r * row_bytes, cols);
        }
        writer_.add_tensor(name, spec_.weight_type, {cols, rows}, data);
    }

    // Biases (F32, as the converter stores them), large enough to matter: N(0, 0.5).
    void bias(const std::string& name, std::int64_t n) {
        std::normal_distribution<float> normal(0.0f, 0.5f);
        std::vector<float> values(static_cast<std::size_t>(n));
        for (float& v : values) v = normal(rng_);
        f32(name, values);
    }

    void f32(const std::string& name, const std::vector<float>& values) {
        writer_.add_tensor(name, tensor::Type::F32, {static_cast<std::int64_t>(values.size())},
                           {reinterpret_cast<const std::uint8_t*>(values.data()), values.size() * sizeof(float)});
    }

    // Norm weights around 1 (F32, as GGUF stores them).
    void norm(const std::string& name, std::int64_t n) {
        std::normal_distribution<float> normal(1.0f, 0.1f);
        std::vector<float> values(static_cast<std::size_t>(n));
        for (float& v : values) v = normal(rng_);
        writer_.add_tensor(name, tensor::Type::F32, {n},
                           {reinterpret_cast<const std::uint8_t*>(values.data()), values.size() * sizeof(float)});
    }

private:
    gguf::Writer& writer_;
    const TinyModelSpec& spec_;
    std::mt19937 rng_;
};

// The converter's llama3 factors: pairs whose wavelength 2*pi/inv_freq is shorter than
// original_context / high_freq_factor keep their frequency (factor 1), longer than
// original_context / low_freq_factor are slowed by `factor`, and the band between blends the
// two: the frequency becomes (1 - s) * f / factor + s * f with
// s = (original_context / wavelength - low) / (high - low), stored as f / new frequency.
std::vector<float> llama3_rope_factors(const TinyModelSpec& spec) {
    const auto& r = spec.llama3_rope;
    std::vector<float> factors(static_cast<std::size_t>(spec.head_dim / 2));
    for (std::size_t i = 0; i < factors.size(); ++i) {
        const double freq = std::pow(static_cast<double>(spec.rope_base), -2.0 * static_cast<double>(i) / static_cast<double>(spec.head_dim));
        const double wavelength = 2.0 * M_PI / freq;
        double f = 1.0;
        if (wavelength > r.original_context / r.low_freq_factor) {
            f = r.factor;
        } else if (wavelength >= r.original_context / r.high_freq_factor) {
            const double s = (r.original_context / wavelength - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
            f = 1.0 / ((1.0 - s) / r.factor + s);
        }
        factors[i] = static_cast<float>(f);
    }
    return factors;
}

}  // namespace

std::int64_t write_tiny_model(const std::string& path, const TinyModelSpec& spec) {
    const tokenizer::Vocabulary vocab = trained_vocabulary();
    const auto n_vocab = static_cast<std::int64_t>(vocab.size());
    const bool gemma = spec.architecture == "gemma3";
    const bool qwen2 = spec.architecture == "qwen2";
    const bool qwen3 = spec.architecture == "qwen3";
    const bool phi3 = spec.architecture == "phi3";
    const std::string a = spec.architecture;
    gguf::Writer w;
    w.set("general.architecture", gguf::Value::string(a));
    w.set("general.name", gguf::Value::string("tiny " + a));
    w.set(a + ".context_length", gguf::Value::u32(static_cast<std::uint32_t>(spec.context)));
    w.set(a + ".embedding_length", gguf::Value::u32(static_cast<std::uint32_t>(spec.width)));
    w.set(a + ".block_count", gguf::Value::u32(static_cast<std::uint32_t>(spec.layers)));
    w.set(a + ".feed_forward_length", gguf::Value::u32(static_cast<std::uint32_t>(spec.ffn)));
    w.set(a + ".attention.head_count", gguf::Value::u32(static_cast<std::uint32_t>(spec.heads)));
    w.set(a + ".attention.head_count_kv", gguf::Value::u32(static_cast<std::uint32_t>(spec.kv_heads)));
    // Qwen 2's and Phi-3's converters leave the head size to width / heads; the others write it.
    if (!qwen2 && !phi3) {
        w.set(a + ".attention.key_length", gguf::Value::u32(static_cast<std::uint32_t>(spec.head_dim)));
        w.set(a + ".attention.value_length", gguf::Value::u32(static_cast<std::uint32_t>(spec.head_dim)));
    }
    if (a == "llama" || phi3) w.set(a + ".rope.dimension_count", gguf::Value::u32(static_cast<std::uint32_t>(spec.head_dim)));
    w.set(a + ".attention.layer_norm_rms_epsilon", gguf::Value::f32(spec.norm_eps));
    w.set(a + ".rope.freq_base", gguf::Value::f32(spec.rope_base));
    if (spec.sliding_window > 0) {
        w.set(a + ".attention.sliding_window", gguf::Value::u32(static_cast<std::uint32_t>(spec.sliding_window)));
    }
    tokenizer::write_vocabulary(w, vocab);
    std::string chat_template = spec.chat_template;
    if (chat_template.empty() && gemma)
        chat_template =
            "{{ bos_token }}{% for message in messages %}"
            "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
            "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
            "{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}";
    if (!chat_template.empty()) w.set("tokenizer.chat_template", gguf::Value::string(chat_template));

    WeightWriter weights(w, spec);
    weights.matrix("token_embd.weight", n_vocab, spec.width);
    weights.norm("output_norm.weight", spec.width);
    if (spec.llama3_rope.factor > 0.0) weights.f32("rope_freqs.weight", llama3_rope_factors(spec));
    if (!gemma && !spec.tied_output) weights.matrix("output.weight", n_vocab, spec.width);
    for (std::int64_t l = 0; l < spec.layers; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        weights.norm(p + "attn_norm.weight", spec.width);
        if (phi3) {
            weights.matrix(p + "attn_qkv.weight", (spec.heads + 2 * spec.kv_heads) * spec.head_dim, spec.width);
        } else {
            weights.matrix(p + "attn_q.weight", spec.heads * spec.head_dim, spec.width);
            weights.matrix(p + "attn_k.weight", spec.kv_heads * spec.head_dim, spec.width);
            weights.matrix(p + "attn_v.weight", spec.kv_heads * spec.head_dim, spec.width);
        }
        weights.matrix(p + "attn_output.weight", spec.width, spec.heads * spec.head_dim);
        if (qwen2) {
            weights.bias(p + "attn_q.bias", spec.heads * spec.head_dim);
            weights.bias(p + "attn_k.bias", spec.kv_heads * spec.head_dim);
            weights.bias(p + "attn_v.bias", spec.kv_heads * spec.head_dim);
        }
        if (gemma || qwen3) {
            weights.norm(p + "attn_q_norm.weight", spec.head_dim);
            weights.norm(p + "attn_k_norm.weight", spec.head_dim);
        }
        if (gemma) {
            weights.norm(p + "post_attention_norm.weight", spec.width);
            weights.norm(p + "post_ffw_norm.weight", spec.width);
        }
        weights.norm(p + "ffn_norm.weight", spec.width);
        if (phi3) {
            weights.matrix(p + "ffn_up.weight", 2 * spec.ffn, spec.width);  // gate rows, then up rows
        } else {
            weights.matrix(p + "ffn_gate.weight", spec.ffn, spec.width);
            weights.matrix(p + "ffn_up.weight", spec.ffn, spec.width);
        }
        weights.matrix(p + "ffn_down.weight", spec.width, spec.ffn);
    }
    w.write(path);
    return n_vocab;
}

std::string tiny_model_path(const std::string& name, const TinyModelSpec& spec) {
    static std::map<std::string, std::string> written;
    auto it = written.find(name);
    if (it != written.end()) return it->second;
    const std::string path = scratch_dir() + "/" + name + ".gguf";
    write_tiny_model(path, spec);
    written[name] = path;
    return path;
}

}  // namespace tokenscope::test
