#include "quant/quantize_model.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "quant/imatrix.h"
#include "util/error.h"

namespace tokenscope::quant {

namespace {

using tensor::Type;

// llama_ftype numbers.
constexpr QuantTarget kTargets[] = {
    {"F32", Type::F32, 0},    {"F16", Type::F16, 1},      {"BF16", Type::BF16, 32},
    {"Q8_0", Type::Q8_0, 7},  {"Q4_0", Type::Q4_0, 2},    {"Q4_1", Type::Q4_1, 3},
    {"Q5_0", Type::Q5_0, 8},  {"Q5_1", Type::Q5_1, 9},    {"Q2_K", Type::Q2_K, 10},
    {"Q3_K", Type::Q3_K, 11}, {"Q4_K", Type::Q4_K, 14},   {"Q5_K", Type::Q5_K, 16},
    {"Q6_K", Type::Q6_K, 18}, {"Q4_K_M", Type::Q4_K, 15}, {"Q5_K_M", Type::Q5_K, 17},
};

bool is_float(Type t) {
    return t == Type::F32 || t == Type::F16 || t == Type::BF16;
}

bool ends_with(const std::string& s, std::string_view suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "blk.12.attn_v.weight" -> 12; -1 otherwise.
int layer_of(const std::string& name) {
    if (name.rfind("blk.", 0) != 0) return -1;
    const std::size_t dot = name.find('.', 4);
    if (dot == std::string::npos) return -1;
    try {
        return std::stoi(name.substr(4, dot - 4));
    } catch (...) {
        return -1;
    }
}

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third between.
bool more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

bool fits(Type t, std::int64_t cols) {
    return cols % tensor::traits(t).block_size == 0;
}

Type fallback_of(Type t) {
    switch (t) {
        case Type::Q2_K:
        case Type::Q3_K:
            return Type::Q4_0;
        case Type::Q4_K:
            return Type::Q5_0;
        case Type::Q5_K:
            return Type::Q5_1;
        case Type::Q6_K:
            return Type::Q8_0;
        default:
            return Type::F16;
    }
}

std::string upper(std::string_view s) {
    std::string u(s);
    for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return u;
}

}  // namespace

std::optional<QuantTarget> parse_target(std::string_view name) {
    const std::string u = upper(name);
    for (const QuantTarget& t : kTargets) {
        if (u == t.name) return t;
    }
    return std::nullopt;
}

std::string target_names() {
    std::string s;
    for (const QuantTarget& t : kTargets) s += (s.empty() ? "" : ", ") + std::string(t.name);
    return s;
}

std::vector<TensorPlan> plan_types(const gguf::File& model, const QuantTarget& target, bool pure,
                                   std::vector<std::string>& warnings) {
    const std::string arch = model.optional_string("general.architecture", "");
    const int n_layers = static_cast<int>(model.optional_uint(arch + ".block_count", 0));
    const std::uint64_t heads = model.optional_uint(arch + ".attention.head_count", 1);
    const std::uint64_t kv_heads =
        std::max<std::uint64_t>(1, model.optional_uint(arch + ".attention.head_count_kv", heads));
    const std::uint64_t gqa = heads / kv_heads;
    const bool has_output = model.find_tensor("output.weight") != nullptr;
    const std::string recipe = target.name;
    const bool mixed_m = recipe == "Q4_K_M" || recipe == "Q5_K_M";

    std::vector<TensorPlan> plans;
    for (const gguf::TensorInfo& t : model.tensors()) {
        TensorPlan p{t.name, t.type, t.type, true, false, {}};
        if (t.dims.size() < 2 || !ends_with(t.name, ".weight")) {
            plans.push_back(p);
            continue;
        }
        const std::int64_t cols = t.dims[0];
        Type to = target.base;
        if (!pure) {
            const int layer = layer_of(t.name);
            const bool is_output =
                t.name == "output.weight" || (!has_output && t.name == "token_embd.weight");
            if (is_output) {
                if (!is_float(target.base) && target.base != Type::Q8_0) {
                    to = cols % 256 == 0 ? Type::Q6_K : Type::Q8_0;
                    p.note = "output projection";
                }
            } else if (ends_with(t.name, ".attn_v.weight")) {
                if (recipe == "Q2_K") {
                    to = gqa >= 4 ? Type::Q4_K : Type::Q3_K;
                    p.note = "Q2_K: attn_v";
                } else if (mixed_m && layer >= 0 && more_bits(layer, n_layers)) {
                    to = Type::Q6_K;
                    p.note = "_M: attn_v in a more-bits layer";
                }
            } else if (ends_with(t.name, ".ffn_down.weight")) {
                if (recipe == "Q2_K") {
                    to = Type::Q3_K;
                    p.note = "Q2_K: ffn_down";
                } else if (mixed_m && layer >= 0 && more_bits(layer, n_layers)) {
                    to = Type::Q6_K;
                    p.note = "_M: ffn_down in a more-bits layer";
                }
            } else if (ends_with(t.name, ".attn_output.weight")) {
                if (recipe == "Q2_K") {
                    to = Type::Q3_K;
                    p.note = "Q2_K: attn_output";
                }
            } else if (ends_with(t.name, ".attn_qkv.weight")) {
                if (recipe == "Q4_K_M") {
                    to = Type::Q5_K;
                    p.note = "Q4_K_M: fused attn_qkv";
                } else if (recipe == "Q5_K_M") {
                    to = Type::Q6_K;
                    p.note = "Q5_K_M: fused attn_qkv";
                }
            }
        }
        if (!fits(to, cols)) {
            Type fallback = fallback_of(to);
            if (!fits(fallback, cols)) fallback = Type::F16;
            warnings.push_back("tensor '" + t.name + "': rows of " + std::to_string(cols) +
                               " elements do not fit " + tensor::type_name(to) + "'s block of " +
                               std::to_string(tensor::traits(to).block_size) + "; using " +
                               tensor::type_name(fallback));
            p.note = std::string("row length: fallback from ") + tensor::type_name(to);
            to = fallback;
        }
        p.to = to;
        p.copy = to == t.type;
        plans.push_back(p);
    }
    return plans;
}

QuantizeResult quantize_model(const std::string& input, const std::string& output,
                              const QuantizeOptions& options) {
    const auto start = std::chrono::steady_clock::now();
    {
        std::error_code ec;
        if (std::filesystem::exists(output, ec) && std::filesystem::equivalent(input, output, ec)) {
            throw InvalidArgument("quantize: the output " + output + " is the input file");
        }
    }
    const gguf::File model = gguf::File::open(input);
    QuantizeResult result;
    auto warn = [&](const std::string& w) {
        result.warnings.push_back(w);
        if (options.warn) options.warn(w);
    };
    std::vector<std::string> plan_warnings;
    result.tensors = plan_types(model, options.target, options.pure, plan_warnings);
    for (const auto& w : plan_warnings) warn(w);
    if (options.imatrix) check_imatrix_fits(*options.imatrix, options.imatrix_path, model);

    // Re-quantization: name the source types that are already quantized.
    std::set<std::string> requantized;
    for (const TensorPlan& p : result.tensors) {
        if (!p.copy && !is_float(p.from)) requantized.insert(tensor::type_name(p.from));
    }
    if (!requantized.empty()) {
        std::string names;
        for (const auto& n : requantized) names += (names.empty() ? "" : ", ") + n;
        warn("re-quantizing " + input + ", whose matrices are already quantized (" + names +
             "): the errors of both roundings add up; quantize from an F32/F16/BF16 file when you "
             "have one");
    }

    gguf::Writer writer;
    for (const auto& [key, value] : model.metadata()) {
        if (key == "general.file_type" || key == "general.quantization_version" ||
            key.rfind("quantize.imatrix.", 0) == 0)
            continue;
        writer.set(key, value);
    }
    writer.set("general.quantization_version", gguf::Value::u32(2));
    writer.set("general.file_type", gguf::Value::u32(options.target.file_type));
    if (options.imatrix) {
        writer.set("quantize.imatrix.file", gguf::Value::string(options.imatrix_path));
        if (!options.imatrix->datasets.empty()) {
            writer.set("quantize.imatrix.dataset",
                       gguf::Value::string(options.imatrix->datasets.front()));
        }
        writer.set("quantize.imatrix.entries_count",
                   gguf::Value::i32(static_cast<std::int32_t>(options.imatrix->entries.size())));
        writer.set("quantize.imatrix.chunks_count",
                   gguf::Value::i32(static_cast<std::int32_t>(options.imatrix->chunk_count)));
    }
    for (std::size_t i = 0; i < result.tensors.size(); ++i) {
        const gguf::TensorInfo& t = model.tensors()[i];
        writer.add_tensor_info(t.name, result.tensors[i].to, t.dims);
    }

    const int threads = std::max(1, options.threads);
    writer.write_streamed(output, [&](std::size_t index, std::vector<std::uint8_t>& data) {
        TensorPlan& plan = result.tensors[index];
        const gguf::TensorInfo& t = model.tensors()[index];
        if (options.progress) options.progress(index, result.tensors.size(), plan);
        result.input_bytes += t.byte_size;
        if (plan.copy) {
            data.assign(t.data, t.data + t.byte_size);
            return;
        }
        const std::int64_t cols = t.dims[0];
        const std::int64_t rows = t.rows();
        std::vector<float> importance;
        if (options.imatrix && tensor::uses_importance(plan.to))
            importance = options.imatrix->mean(t.name);
        plan.weighted = !importance.empty();
        const std::size_t in_row = tensor::row_bytes(t.type, cols);
        const std::size_t out_row = tensor::row_bytes(plan.to, cols);
        data.resize(out_row * static_cast<std::size_t>(rows));
        std::atomic<std::int64_t> next{0};
        std::exception_ptr failure;
        std::mutex failure_mutex;
        auto work = [&] {
            try {
                std::vector<float> row(static_cast<std::size_t>(cols));
                constexpr std::int64_t kChunk = 16;
                for (std::int64_t r0 = next.fetch_add(kChunk); r0 < rows;
                     r0 = next.fetch_add(kChunk)) {
                    for (std::int64_t r = r0; r < std::min(rows, r0 + kChunk); ++r) {
                        tensor::dequantize_row(t.type,
                                               t.data + static_cast<std::size_t>(r) * in_row,
                                               row.data(), cols);
                        tensor::quantize_row_weighted(
                            plan.to, row.data(),
                            data.data() + static_cast<std::size_t>(r) * out_row, cols,
                            importance.empty() ? nullptr : importance.data());
                    }
                }
            } catch (...) {
                std::lock_guard lock(failure_mutex);
                if (!failure) failure = std::current_exception();
                next.store(rows);
            }
        };
        std::vector<std::thread> pool;
        for (int k = 1; k < threads; ++k) pool.emplace_back(work);
        work();
        for (auto& th : pool) th.join();
        if (failure) std::rethrow_exception(failure);
    });
    result.output_bytes = static_cast<std::uint64_t>(std::filesystem::file_size(output));
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
}

}  // namespace tokenscope::quant
