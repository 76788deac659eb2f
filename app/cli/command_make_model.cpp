// `tokenscope-cli make-model`: writes a Llama-architecture GGUF (or, with --arch, a Qwen 2 / Qwen 3 /
// Phi-3 one; --rope-freqs adds Llama 3.x rope factors) with seeded random weights in
// a chosen format, for benchmarks at realistic sizes (the default shape is ~250M parameters:
// width 1024, 16 layers, 16 heads, 4 KV heads, FFN 2816, 32000 tokens). Its vocabulary is
// synthetic: BOS/EOS/UNK, the 256 byte pieces and made-up words, enough for the tokenizer to
// load and round-trip text through byte fallback.
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>

#include "arguments.h"
#include "commands.h"
#include "synthetic_model.h"
#include "gguf/writer.h"
#include "tokenizer/vocabulary.h"
#include "util/error.h"

namespace tokenscope::cli {

namespace {

tokenizer::Vocabulary synthetic_vocabulary(std::int64_t size) {
    tokenizer::Vocabulary v;
    auto add = [&](std::string piece, float score, tokenizer::TokenType type) {
        v.tokens.push_back(std::move(piece));
        v.scores.push_back(score);
        v.types.push_back(type);
    };
    add("<unk>", 0.0f, tokenizer::TokenType::Unknown);
    add("<s>", 0.0f, tokenizer::TokenType::Control);
    add("</s>", 0.0f, tokenizer::TokenType::Control);
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        add(name, 0.0f, tokenizer::TokenType::Byte);
    }
    // Words "▁a", "▁b", ..., "▁aa", ...: unique pieces with descending scores.
    for (std::int64_t i = 0; static_cast<std::int64_t>(v.tokens.size()) < size; ++i) {
        std::string word;
        for (std::int64_t k = i; ; k = k / 26 - 1) {
            word.insert(word.begin(), static_cast<char>('a' + k % 26));
            if (k < 26) break;
        }
        add("\xE2\x96\x81" + word, -static_cast<float>(i), tokenizer::TokenType::Normal);
    }
    v.unk_id = 0;
    v.bos_id = 1;
    v.eos_id = 2;
    v.add_bos = true;
    v.add_space_prefix = true;
    return v;
}

}  // namespace

void write_synthetic_model(const std::string& out, tensor::Type type, const SyntheticShape& shape) {
    const std::string type_name = tensor::type_name(type);
    const std::int64_t width = shape.width, layers = shape.layers, heads = shape.heads;
    const std::int64_t kv_heads = shape.kv_heads, ffn = shape.ffn, vocab = shape.vocab;
    const std::uint64_t seed = shape.seed;
    const std::string& a = shape.architecture;
    if (a != "llama" && a != "qwen2" && a != "qwen3" && a != "phi3") throw InvalidArgument("synthetic model: architecture '" + a + "' cannot be written");
    if (heads % kv_heads || (shape.head_dim == 0 && width % heads)) {
        throw InvalidArgument("synthetic model: width must divide by heads and heads by kv-heads");
    }
    const std::int64_t head_dim = shape.head_dim > 0 ? shape.head_dim : width / heads;
    gguf::Writer w;
    w.set("general.architecture", gguf::Value::string(a));
    w.set("general.name", gguf::Value::string("synthetic " + a + " " + type_name));
    w.set(a + ".context_length", gguf::Value::u32(4096));
    w.set(a + ".embedding_length", gguf::Value::u32(static_cast<std::uint32_t>(width)));
    w.set(a + ".block_count", gguf::Value::u32(static_cast<std::uint32_t>(layers)));
    w.set(a + ".feed_forward_length", gguf::Value::u32(static_cast<std::uint32_t>(ffn)));
    w.set(a + ".attention.head_count", gguf::Value::u32(static_cast<std::uint32_t>(heads)));
    w.set(a + ".attention.head_count_kv", gguf::Value::u32(static_cast<std::uint32_t>(kv_heads)));
    if (shape.head_dim > 0) {
        w.set(a + ".attention.key_length", gguf::Value::u32(static_cast<std::uint32_t>(head_dim)));
        w.set(a + ".attention.value_length", gguf::Value::u32(static_cast<std::uint32_t>(head_dim)));
    }
    w.set(a + ".attention.layer_norm_rms_epsilon", gguf::Value::f32(1e-5f));
    w.set(a + ".rope.freq_base", gguf::Value::f32(10000.0f));
    tokenizer::write_vocabulary(w, synthetic_vocabulary(vocab));

    std::mt19937_64 rng(seed);
    auto matrix = [&](const std::string& name, std::int64_t rows, std::int64_t cols) {
        // Rows are quantized in parallel (the quantizers are the slow part at this size).
        std::vector<std::uint8_t> data(tensor::row_bytes(type, cols) * static_cast<std::size_t>(rows));
        const std::uint64_t base_seed = rng();
        const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
        std::vector<std::thread> pool;
        for (unsigned t = 0; t < threads; ++t) {
            pool.emplace_back([&, t] {
                std::vector<float> row(static_cast<std::size_t>(cols));
                for (std::int64_t r = t; r < rows; r += threads) {
                    std::mt19937 row_rng(static_cast<std::uint32_t>(base_seed + static_cast<std::uint64_t>(r)));
                    std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(static_cast<float>(cols)));
                    for (float& x : row) x = normal(row_rng);
                    tensor::quantize_row(type, row.data(), data.data() + static_cast<std::size_t>(r) * tensor::row_bytes(type, cols), cols);
                }
            });
        }
        for (auto& th : pool) th.join();
        w.add_tensor(name, type, {cols, rows}, data);
    };
    auto f32 = [&](const std::string& name, const std::vector<float>& values) {
        w.add_tensor(name, tensor::Type::F32, {static_cast<std::int64_t>(values.size())},
                     {reinterpret_cast<const std::uint8_t*>(values.data()), values.size() * 4});
    };
    auto norm = [&](const std::string& name, std::int64_t n) { f32(name, std::vector<float>(static_cast<std::size_t>(n), 1.0f)); };
    // Random vectors for the biases (N(0, 0.5)) and the q/k norms (N(1, 0.1)): a bias or norm
    // applied to the wrong rows must change the result.
    auto random_vector = [&](const std::string& name, std::int64_t n, float mean, float sigma) {
        std::mt19937 vrng(static_cast<std::uint32_t>(rng()));
        std::normal_distribution<float> normal(mean, sigma);
        std::vector<float> v(static_cast<std::size_t>(n));
        for (float& x : v) x = normal(vrng);
        f32(name, v);
    };
    matrix("token_embd.weight", vocab, width);
    norm("output_norm.weight", width);
    matrix("output.weight", vocab, width);
    if (shape.rope_freqs) {
        // Factors rising from 1 (fast pairs) to 8 (slow pairs), the shape of Llama 3.1's.
        std::vector<float> factors(static_cast<std::size_t>(head_dim / 2));
        for (std::size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 7.0f * static_cast<float>(i) / static_cast<float>(factors.size() - 1);
        f32("rope_freqs.weight", factors);
    }
    for (std::int64_t l = 0; l < layers; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        norm(p + "attn_norm.weight", width);
        if (a == "phi3") {
            matrix(p + "attn_qkv.weight", (heads + 2 * kv_heads) * head_dim, width);  // q, k, v rows
        } else {
            matrix(p + "attn_q.weight", heads * head_dim, width);
            matrix(p + "attn_k.weight", kv_heads * head_dim, width);
            matrix(p + "attn_v.weight", kv_heads * head_dim, width);
        }
        matrix(p + "attn_output.weight", width, heads * head_dim);
        if (a == "qwen2") {
            random_vector(p + "attn_q.bias", heads * head_dim, 0.0f, 0.5f);
            random_vector(p + "attn_k.bias", kv_heads * head_dim, 0.0f, 0.5f);
            random_vector(p + "attn_v.bias", kv_heads * head_dim, 0.0f, 0.5f);
        }
        if (a == "qwen3") {
            random_vector(p + "attn_q_norm.weight", head_dim, 1.0f, 0.1f);
            random_vector(p + "attn_k_norm.weight", head_dim, 1.0f, 0.1f);
        }
        norm(p + "ffn_norm.weight", width);
        if (a == "phi3") {
            matrix(p + "ffn_up.weight", 2 * ffn, width);  // gate rows, then up rows
        } else {
            matrix(p + "ffn_gate.weight", ffn, width);
            matrix(p + "ffn_up.weight", ffn, width);
        }
        matrix(p + "ffn_down.weight", width, ffn);
    }
    w.write(out);
}

int run_make_model(int argc, char** argv, int first) {
    const Arguments args("make-model",
                         {{"out"}, {"type"}, {"arch"}, {"head-dim"}, {"rope-freqs", false}, {"width"}, {"layers"}, {"heads"}, {"kv-heads"}, {"ffn"}, {"vocab"}, {"seed"}},
                         argc, argv, first);
    const std::string out = args.required("out");
    const std::string type_name = args.value("type").value_or("q8_0");
    const auto type = tensor::parse_type_name(type_name);
    if (!type || !tensor::traits(*type).quantize_row) {
        throw InvalidArgument("'make-model': option '--type' must name a format we can write (f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, ...), got '" + type_name + "'");
    }
    auto number = [&](const char* name, double fallback) {
        const double v = args.number(name).value_or(fallback);
        if (v < 1 || v > 1e6 || v != std::floor(v)) throw InvalidArgument(std::string("'make-model': option '--") + name + "' must be a positive whole number");
        return static_cast<std::int64_t>(v);
    };
    SyntheticShape shape;
    shape.width = number("width", 1024);
    shape.layers = number("layers", 16);
    shape.heads = number("heads", 16);
    shape.kv_heads = number("kv-heads", 4);
    shape.ffn = number("ffn", 2816);
    shape.vocab = number("vocab", 32000);
    shape.seed = static_cast<std::uint64_t>(number("seed", 1));
    shape.architecture = args.value("arch").value_or("llama");
    if (args.value("head-dim")) shape.head_dim = number("head-dim", 0);
    shape.rope_freqs = args.flag("rope-freqs");
    if ((shape.head_dim == 0 && shape.width % shape.heads) || shape.heads % shape.kv_heads) {
        throw InvalidArgument("'make-model': width must divide by heads (or give --head-dim) and heads by kv-heads");
    }
    if (shape.architecture != "llama" && shape.architecture != "qwen2" && shape.architecture != "qwen3" &&
        shape.architecture != "phi3") {
        throw InvalidArgument("'make-model': option '--arch' must be llama, qwen2, qwen3 or phi3, got '" + shape.architecture + "'");
    }
    write_synthetic_model(out, *type, shape);
    const double params = static_cast<double>(shape.vocab * shape.width * 2 +
                                              shape.layers * (2 * shape.width * shape.width +
                                                              2 * shape.kv_heads * (shape.width / shape.heads) * shape.width +
                                                              3 * shape.ffn * shape.width));
    std::printf("%s: %s, %.0fM parameters, %s weights\n", out.c_str(), shape.architecture.c_str(), params / 1e6, tensor::type_name(*type));
    return 0;
}

}  // namespace tokenscope::cli
