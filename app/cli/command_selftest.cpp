// `tokenscope-cli selftest --device cuda`: every CUDA op and tensor type against the CPU on
// fresh random inputs, then whole-model logits (prefill, decode, a batch of 4, with and
// without attention capture) on synthetic models and the default model. Prints a table;
// exit status 1 on any failure, 77 when there is no usable GPU (CTest: skipped).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>

#include "arguments.h"
#include "commands.h"
#include "inspect/attention_capture.h"
#include "runtime/engine.h"
#include "selftest_speculation.h"
#include "synthetic_model.h"
#include "table.h"
#include "util/error.h"
#include "util/paths.h"
#include "runtime/gpu_plugin_loader.h"

namespace tokenscope::cli {

namespace {

using Row = SelftestResult;

int print_results(const std::vector<Row>& rows);

// The synthetic model the whole-model checks use: two layers, GQA (4 heads, 2 KV heads).
SyntheticShape tiny_shape() {
    SyntheticShape tiny;
    tiny.width = 256;
    tiny.layers = 2;
    tiny.heads = 4;
    tiny.kv_heads = 2;
    tiny.ffn = 512;
    tiny.vocab = 1000;
    return tiny;
}
int run_cpu_checks(const std::optional<std::string>& model);

double relative_error(std::span<const float> a, std::span<const float> b) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < b.size(); ++i) {
        num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
        den += static_cast<double>(b[i]) * b[i];
    }
    return std::sqrt(num / std::max(den, 1e-300));
}

// Sets (value non-null) or removes an environment variable of this process.
void set_env(const char* name, const char* value) {
#ifdef _WIN32
    _putenv_s(name, value ? value : "");
#else
    if (value) {
        setenv(name, value, 1);
    } else {
        unsetenv(name);
    }
#endif
}

// Runs the same batches on two engines and compares logits (and captured attention).
void compare_models(const std::string& path, const std::string& label, double tolerance, std::vector<Row>& rows,
                    kv::ElementType kv_type = kv::ElementType::F16, runtime::GpuOptions gpu_options = {}) {
    runtime::EngineOptions o;
    o.kv_capacity_tokens = 512;
    o.threads = 0;
    o.kv_type = kv_type;
    o.gpu = gpu_options;
    o.device = runtime::Device::Cpu;
    auto cpu = runtime::Engine::load(path, o);
    o.device = runtime::Device::Cuda;
    auto gpu = runtime::Engine::load(path, o);
    const std::int64_t vocab = cpu->config().vocab_size;
    std::mt19937 rng(7);
    auto tokens = [&](int n) {
        std::vector<std::int32_t> t(static_cast<std::size_t>(n));
        for (auto& x : t) x = static_cast<std::int32_t>(3 + rng() % static_cast<std::uint32_t>(vocab - 3));
        return t;
    };
    struct Case {
        const char* name;
        std::vector<std::vector<std::int32_t>> seqs;
        int decode_steps;
        bool capture;
    };
    const std::vector<Case> cases = {
        {"prefill 24, batch 1", {tokens(24)}, 0, false},
        // 100 queries of one sequence: the tensor-core attention path (>= 64), then decode
        // steps on top of it (eager, recorded as a graph, replayed).
        {"prefill 100 + decode 4, batch 1", {tokens(100)}, 4, false},
        {"prefill 24 + decode 4, batch 1", {tokens(24)}, 4, false},
        {"prefill + decode, batch 4", {tokens(5), tokens(17), tokens(9), tokens(30)}, 3, false},
        {"prefill 24, attention capture", {tokens(24)}, 2, true},
    };
    const int layers = static_cast<int>(cpu->config().layers), heads = static_cast<int>(cpu->config().heads);
    for (const Case& k : cases) {
        double worst = 0, worst_attention = 0;
        std::vector<std::unique_ptr<inspect::AttentionCapture>> captures;
        runtime::ForwardOutputs out_cpu, out_gpu;
        std::vector<kv::SeqId> ids_cpu, ids_gpu;
        std::vector<std::vector<std::int32_t>> seqs = k.seqs;
        inspect::CaptureSpec spec;
        spec.enabled = true;
        for (std::size_t s = 0; s < seqs.size(); ++s) {
            ids_cpu.push_back(cpu->new_sequence_id());
            ids_gpu.push_back(gpu->new_sequence_id());
            if (k.capture) {
                captures.push_back(std::make_unique<inspect::AttentionCapture>(spec, layers, heads));
                captures.push_back(std::make_unique<inspect::AttentionCapture>(spec, layers, heads));
            }
        }
        std::vector<std::int64_t> done(seqs.size(), 0);
        for (int step = 0; step <= k.decode_steps; ++step) {
            runtime::Batch b_cpu, b_gpu;
            for (std::size_t s = 0; s < seqs.size(); ++s) {
                const auto n = static_cast<int>(seqs[s].size() - static_cast<std::size_t>(done[s]));
                if (!cpu->kv().allocate_slots(ids_cpu[s], n) || !gpu->kv().allocate_slots(ids_gpu[s], n)) {
                    throw Error("selftest: KV cache too small");
                }
                const std::span<const std::int32_t> chunk(seqs[s].data() + done[s], static_cast<std::size_t>(n));
                b_cpu.chunks.push_back({ids_cpu[s], chunk, done[s], runtime::LogitsWanted::All,
                                        k.capture ? captures[2 * s].get() : nullptr});
                b_gpu.chunks.push_back({ids_gpu[s], chunk, done[s], runtime::LogitsWanted::All,
                                        k.capture ? captures[2 * s + 1].get() : nullptr});
            }
            cpu->forward(b_cpu, out_cpu);
            gpu->forward(b_gpu, out_gpu);
            for (std::size_t r = 0; r < out_cpu.logits.size() / static_cast<std::size_t>(vocab); ++r) {
                worst = std::max(worst, relative_error(out_gpu.row(static_cast<std::int64_t>(r)), out_cpu.row(static_cast<std::int64_t>(r))));
            }
            for (std::size_t s = 0; s < seqs.size(); ++s) {
                done[s] = static_cast<std::int64_t>(seqs[s].size());
                // Greedy next token from the CPU's last row, fed to both.
                const auto last = out_cpu.row(out_cpu.first_row[s] + static_cast<std::int64_t>(b_cpu.chunks[s].tokens.size()) - 1);
                seqs[s].push_back(static_cast<std::int32_t>(std::max_element(last.begin(), last.end()) - last.begin()));
            }
        }
        if (k.capture) {
            for (int l = 0; l < layers; ++l) {
                for (int h = 0; h < heads; ++h) {
                    for (std::int64_t q = 0; q < captures[0]->rows(); ++q) {
                        const auto a = captures[0]->row(l, h, q), b = captures[1]->row(l, h, q);
                        for (std::size_t i = 0; i < a.size(); ++i) worst_attention = std::max(worst_attention, static_cast<double>(std::abs(a[i] - b[i])));
                    }
                }
            }
            rows.push_back({label + ": " + k.name + " (attention rows)", "max |a-b|", worst_attention, 2e-2, worst_attention <= 2e-2});
        }
        for (std::size_t s = 0; s < ids_cpu.size(); ++s) {
            cpu->kv().free_sequence(ids_cpu[s]);
            gpu->kv().free_sequence(ids_gpu[s]);
        }
        rows.push_back({label + ": " + k.name, "logits", worst, tolerance, worst <= tolerance});
    }
}

}  // namespace

int run_selftest(int argc, char** argv, int first) {
    const Arguments args("selftest", {{"device"}, {"model"}, {"seed"}}, argc, argv, first);
    const std::string device = args.value("device").value_or("cuda");
    if (device == "cpu") return run_cpu_checks(args.value("model"));
    if (device != "cuda") throw InvalidArgument("'selftest': --device must be cuda or cpu, got '" + device + "'");
    const runtime::GpuPluginStatus& status = runtime::gpu_plugin();
    if (!status.plugin) {
        std::printf("SKIP: selftest --device cuda: %s\n", status.problem.c_str());
        return 77;
    }
    const runtime::GpuPlugin& plugin = *status.plugin;
    const std::string reason = plugin.backend.unavailable_reason();
    if (!reason.empty()) {
        std::printf("SKIP: selftest --device cuda: %s\n", reason.c_str());
        return 77;
    }
    const auto seed = static_cast<std::uint64_t>(args.number("seed").value_or(1234));
    std::vector<Row> rows;
    for (const auto& c : plugin.kernel_checks(seed)) rows.push_back({c.name, c.precision, c.error, c.tolerance, c.passed});

    // Whole models. The CPU quantizes activations to 8 bits for quantized weights (about 2-5 %
    // relative logit error against float64, measured in tests/engine), the CUDA path keeps
    // them f32 or rounds them to bf16 for cuBLAS: the two differ by about that much, hence 0.1
    // for quantized models. For F16 weights the CPU keeps f32 activations; the GPU's prefill
    // rounds products' inputs and (from 64 queries) Q, K, V and the softmax weights to bf16,
    // 2^-9 relative each, compounding over two layers: 2e-2.
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "tokenscope-selftest";
    std::filesystem::create_directories(dir);
    const SyntheticShape tiny = tiny_shape();
    for (const auto& [type, tolerance] : {std::pair{tensor::Type::F16, 2e-2}, std::pair{tensor::Type::Q8_0, 0.1}, std::pair{tensor::Type::Q4_K, 0.1}}) {
        const std::string path = (dir / (std::string("tiny-") + tensor::type_name(type) + ".gguf")).string();
        write_synthetic_model(path, type, tiny);
        compare_models(path, std::string("tiny llama ") + tensor::type_name(type), tolerance, rows);
    }
    // One model per architecture feature beyond Llama 2, same tolerances: Qwen 2's q/k/v
    // biases, Qwen 3's per-head q/k RMSNorm with heads wider than width / heads (4 x 128 on
    // 256, as Qwen3-0.6B's 16 x 128 on 1024), Phi-3's fused qkv and gate+up (bound as row
    // ranges, uploaded as separate matrices), Llama 3.x rope_freqs factors.
    struct Variant {
        const char* name;
        const char* architecture;
        std::int64_t head_dim;
        bool rope_freqs;
    };
    for (const Variant& v : {Variant{"qwen2", "qwen2", 0, false}, Variant{"qwen3", "qwen3", 128, false}, Variant{"phi3", "phi3", 0, false},
                             Variant{"llama3-rope-freqs", "llama", 0, true}}) {
        for (const auto& [type, tolerance] : {std::pair{tensor::Type::F16, 2e-2}, std::pair{tensor::Type::Q8_0, 0.1}}) {
            SyntheticShape shape = tiny;
            shape.architecture = v.architecture;
            shape.head_dim = v.head_dim;
            shape.rope_freqs = v.rope_freqs;
            const std::string path = (dir / (std::string("tiny-") + v.name + "-" + tensor::type_name(type) + ".gguf")).string();
            write_synthetic_model(path, type, shape);
            compare_models(path, std::string("tiny ") + v.name + " " + tensor::type_name(type), tolerance, rows);
        }
    }
    // A Q8 KV cache on both sides, and the decode graph with the one-block-per-head attention
    // kernel instead of split-K (CPU and GPU quantize the cache rows the same way).
    {
        runtime::GpuOptions no_split;
        no_split.split_k_attention = false;
        compare_models((dir / "tiny-Q8_0.gguf").string(), "tiny llama Q8_0, q8 KV cache, split-K off", 0.1, rows,
                       kv::ElementType::Q8, no_split);
        // The default options with a Q8 cache: decode through the GQA split-K attention reading
        // Q8 rows (the F16-cache runs above take it with F16 rows), and the fused GEMVs.
        compare_models((dir / "tiny-Q8_0.gguf").string(), "tiny llama Q8_0, q8 KV cache, GQA attention", 0.1, rows,
                       kv::ElementType::Q8);
    }
    // The int8 GEMVs (opt-in in the backend, read when a backend is made): Q8_0 and Q4_K models
    // with TOKENSCOPE_CUDA_INT8_GEMV=on. The CPU also multiplies quantized weights with 8-bit
    // activations, so the tolerance stays that of quantized models.
    {
        set_env("TOKENSCOPE_CUDA_INT8_GEMV", "on");
        for (const char* t : {"Q8_0", "Q4_K"}) {
            compare_models((dir / (std::string("tiny-") + t + ".gguf")).string(), std::string("tiny llama ") + t + ", int8 GEMVs",
                           0.1, rows);
        }
        set_env("TOKENSCOPE_CUDA_INT8_GEMV", nullptr);
    }
    // Speculative decoding on the GPU: verification chunks, KV rollback, a draft on the device.
    for (const auto& r : check_speculation((dir / "tiny-Q8_0.gguf").string(), "tiny llama Q8_0", runtime::Device::Cuda)) rows.push_back(r);
    std::vector<std::string> models;
    if (auto m = args.value("model")) models.push_back(*m);
    else if (std::filesystem::exists(paths::default_model())) models.push_back(paths::default_model().string());
    for (const auto& m : models) {
        compare_models(m, std::filesystem::path(m).filename().string(), 0.1, rows);
        for (const auto& r : check_speculation(m, std::filesystem::path(m).filename().string(), runtime::Device::Cuda)) rows.push_back(r);
    }
    return print_results(rows);
}

namespace {

int print_results(const std::vector<Row>& rows) {
    Table table({"check", "precision", "error", "tolerance", "result"}, {false, false, true, true, false});
    int failed = 0;
    for (const auto& r : rows) {
        char e[32], t[32];
        std::snprintf(e, sizeof e, "%.3g", r.error);
        std::snprintf(t, sizeof t, "%.3g", r.tolerance);
        table.add_row({r.name, r.precision, e, t, r.passed ? "pass" : "FAIL"});
        failed += r.passed ? 0 : 1;
    }
    std::printf("%s\n%zu passed, %d failed\n", table.render().c_str(), rows.size() - static_cast<std::size_t>(failed), failed);
    return failed == 0 ? 0 : 1;
}

// --device cpu: the device-independent checks (speculative decoding) on the CPU backend, on a
// tiny synthetic model and the given or default model, so they are known to work before a GPU
// runs them.
int run_cpu_checks(const std::optional<std::string>& model) {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "tokenscope-selftest";
    std::filesystem::create_directories(dir);
    const SyntheticShape tiny = tiny_shape();
    const std::string path = (dir / "tiny-cpu-Q8_0.gguf").string();
    write_synthetic_model(path, tensor::Type::Q8_0, tiny);
    std::vector<Row> rows = check_speculation(path, "tiny llama Q8_0", runtime::Device::Cpu);
    std::string m = model.value_or(std::filesystem::exists(paths::default_model()) ? paths::default_model().string() : "");
    if (!m.empty()) {
        for (const auto& r : check_speculation(m, std::filesystem::path(m).filename().string(), runtime::Device::Cpu)) rows.push_back(r);
    }
    return print_results(rows);
}

}  // namespace

}  // namespace tokenscope::cli
