// `tokenscope-cli bench`: prefill and decode speed on this machine, each next to the machine's
// ceiling measured by the bench itself. CPU: read bandwidth (decode), and for prefill the f32
// FMA peak and the int8 dot-product peak, each for the products that run on it. CUDA: the
// device-to-device copy bandwidth (decode) and the rate of the cuBLAS bf16 GEMM the prefill path
// calls, at the prefill's own shape (prefill). Decode is measured at each requested context length
// and, with --concurrency, for several sequences decoding together.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <sstream>
#include <thread>

#include "arguments.h"
#include "bench_speculation.h"
#include "bench_step_overhead.h"
#include "commands.h"
#include "generation_options.h"
#include "inspect/compute_peak.h"
#include "inspect/model_cost.h"
#include "runtime/gpu_plugin_loader.h"
#include "table.h"
#include "tensor/matmul_bench.h"
#include "util/error.h"
#include "util/json_writer.h"

namespace tokenscope::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

std::vector<std::int64_t> parse_list(const std::string& option, const std::string& text,
                                     std::int64_t max) {
    std::vector<std::int64_t> out;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        char* end = nullptr;
        const long long v = std::strtoll(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || v < 1 || v > max) {
            throw InvalidArgument("'bench': option '--" + option + "' expects numbers 1-" +
                                  std::to_string(max) + " separated by commas, got '" + text + "'");
        }
        out.push_back(v);
    }
    return out;
}

std::int32_t argmax(std::span<const float> row) {
    return static_cast<std::int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// The ceilings the percentages are taken of.
struct Ceiling {
    std::string device;  // "cpu (2 threads, AVX-512)" or the GPU's name
    double gbps = 0;     // decode: memory the machine can stream per second
    const char* gbps_what = "";
    double gflops = 0;  // prefill: f32 products on the CPU, every product on a GPU
    const char* gflops_what = "";
    double int8_gops = 0;  // prefill, CPU: the products of quantized weights (0 on a GPU)
    std::string int8_what;
};

struct DecodeResult {
    std::int64_t context = 0;    // tokens in the cache when decoding starts
    std::int64_t sequences = 1;  // decoding together
    std::int64_t steps = 0;
    double seconds = 0;
    double bytes_per_step = 0;  // weights once + every sequence's KV cache reads (average context)
    // CPU: the read bandwidth measured just before and just after the timed steps, the better
    // of the two. On a shared VM the bandwidth moves by 1.5-2x within minutes, so a ceiling
    // from other minutes put decode anywhere from 45 to 115 % of it.
    double local_gbps = 0;
};

}  // namespace

int run_bench(int argc, char** argv, int first) {
    const Arguments args("bench",
                         join({{"model"},
                               {"prompt-lengths"},
                               {"n-decode"},
                               {"decode-contexts"},
                               {"concurrency"},
                               {"json", false},
                               {"repeats"}},
                              join(engine_option_specs(), speculation_option_specs())),
                         argc, argv, first);
    if (args.value("speculative")) {
        // Speculative decoding against plain decoding on fixed prompts; nothing else.
        runtime::EngineOptions options = engine_options(args);
        apply_speculation_options(args, options);
        const auto n = static_cast<int>(args.number("n-decode").value_or(128));
        const auto repeats = static_cast<int>(args.number("repeats").value_or(1));
        if (n < 2 || n > 4096)
            throw InvalidArgument(
                "'bench': option '--n-decode' must be 2 to 4096 with --speculative");
        if (repeats < 1 || repeats > 100)
            throw InvalidArgument("'bench': option '--repeats' must be 1 to 100");
        auto engine = runtime::Engine::load(args.required("model"), options);
        bench_speculation(*engine, n, repeats, args.flag("json"));
        return 0;
    }
    const std::vector<std::int64_t> lengths =
        parse_list("prompt-lengths", args.value("prompt-lengths").value_or("128,512"), 65536);
    const std::vector<std::int64_t> contexts =
        parse_list("decode-contexts", args.value("decode-contexts").value_or("16"), 65536);
    const std::vector<std::int64_t> concurrency =
        args.value("concurrency") ? parse_list("concurrency", *args.value("concurrency"), 256)
                                  : std::vector<std::int64_t>{};
    const auto n_decode = static_cast<std::int64_t>(args.number("n-decode").value_or(64));
    if (n_decode < 1 || n_decode > 100000)
        throw InvalidArgument("'bench': option '--n-decode' must be 1 to 100000");
    const auto prefill_repeats = static_cast<int>(args.number("repeats").value_or(3));
    if (prefill_repeats < 1 || prefill_repeats > 100)
        throw InvalidArgument("'bench': option '--repeats' must be 1 to 100");
    runtime::EngineOptions options = engine_options(args);
    const std::int64_t longest = *std::max_element(lengths.begin(), lengths.end());
    const std::int64_t longest_context = *std::max_element(contexts.begin(), contexts.end());
    // Concurrent sequences start from a 64-token prompt each.
    constexpr std::int64_t kConcurrentPrompt = 64;
    const std::int64_t most_sequences =
        concurrency.empty() ? 0 : *std::max_element(concurrency.begin(), concurrency.end());
    // Whole blocks per sequence (the cache hands out blocks, not tokens).
    const auto blocks_of = [&](std::int64_t tokens) {
        return (tokens + options.kv_block_size - 1) / options.kv_block_size * options.kv_block_size;
    };
    const std::int64_t capacity =
        std::max({blocks_of(longest), blocks_of(longest_context + n_decode),
                  most_sequences * blocks_of(kConcurrentPrompt + n_decode)});
    if (!args.value("ctx"))
        options.kv_capacity_tokens = capacity + 16;
    else if (options.kv_capacity_tokens < capacity) {
        throw InvalidArgument("'bench': --ctx " + std::to_string(options.kv_capacity_tokens) +
                              " is smaller than the " + std::to_string(capacity) +
                              " tokens these measurements need");
    }
    if (!args.value("batch")) options.token_budget = longest;
    auto engine = runtime::Engine::load(args.required("model"), options);
    const bool on_gpu = engine->backend_name().rfind("cuda", 0) == 0;
    const int threads = options.threads > 0 ? options.threads
                                            : static_cast<int>(std::thread::hardware_concurrency());
    const inspect::ModelCost cost = inspect::model_cost(engine->file());
    const model::ModelConfig& config = engine->config();
    const std::int64_t vocab = config.vocab_size;
    std::mt19937 rng(1234);
    auto random_tokens = [&](std::int64_t n) {
        std::vector<std::int32_t> t(static_cast<std::size_t>(n));
        for (auto& x : t)
            x = static_cast<std::int32_t>(3 + rng() % static_cast<std::uint32_t>(vocab - 3));
        return t;
    };
    // KV bytes one decode step reads for one sequence at `context` tokens: every layer's K and V
    // rows up to the context (or the sliding window).
    const kv::CacheShape one_layer{1,
                                   static_cast<int>(config.kv_heads),
                                   static_cast<int>(config.head_dim),
                                   1,
                                   1,
                                   options.kv_type};
    auto kv_read_bytes = [&](double context) {
        double bytes = 0;
        for (int l = 0; l < static_cast<int>(config.layers); ++l) {
            const double seen =
                config.uses_window(l)
                    ? std::min<double>(context, static_cast<double>(config.sliding_window))
                    : context;
            bytes += seen * static_cast<double>(kv::bytes_per_token(one_layer));
        }
        return bytes;
    };

    runtime::ForwardOutputs out;
    // Runs `tokens` through a fresh sequence in budget-sized chunks; returns seconds.
    auto prefill = [&](const std::vector<std::int32_t>& tokens, kv::SeqId seq) {
        const auto start = Clock::now();
        for (std::size_t pos = 0; pos < tokens.size();) {
            const std::size_t n = std::min<std::size_t>(
                tokens.size() - pos, static_cast<std::size_t>(options.token_budget));
            if (!engine->kv().allocate_slots(seq, static_cast<int>(n)))
                throw Error("bench: KV cache too small");
            runtime::Batch batch;
            batch.chunks.push_back({seq, std::span(tokens).subspan(pos, n),
                                    static_cast<std::int64_t>(pos),
                                    pos + n == tokens.size() ? runtime::LogitsWanted::Last
                                                             : runtime::LogitsWanted::None,
                                    nullptr});
            engine->forward(batch, out);
            pos += n;
        }
        return seconds_since(start);
    };
    // The CPU's read-bandwidth probe (1 GiB in large pages, its threads kept), made with the
    // ceilings below.
    std::unique_ptr<tensor::ReadBandwidthProbe> probe;
    constexpr double kLocalProbeSeconds = 0.3;
    // `sequences` sequences, each prefilled with `context` tokens, then `steps` greedy decode
    // steps in which every sequence adds one token (one batch per step).
    // measure_bandwidth: false for the warm-up, whose row is not reported.
    auto decode = [&](std::int64_t context, std::int64_t sequences, std::int64_t steps,
                      bool measure_bandwidth = true) {
        std::vector<kv::SeqId> ids;
        std::vector<std::vector<std::int32_t>> history;
        std::vector<std::int32_t> next;
        for (std::int64_t s = 0; s < sequences; ++s) {
            ids.push_back(engine->new_sequence_id());
            history.push_back(random_tokens(context));
            prefill(history.back(), ids.back());
            next.push_back(argmax(out.row(0)));
        }
        const bool local = probe && measure_bandwidth;
        const double gbps_before = local ? probe->measure(kLocalProbeSeconds) : 0.0;
        const auto start = Clock::now();
        for (std::int64_t i = 0; i < steps; ++i) {
            runtime::Batch batch;
            for (std::size_t s = 0; s < ids.size(); ++s) {
                if (!engine->kv().allocate_slots(ids[s], 1))
                    throw Error("bench: KV cache too small");
                history[s].push_back(next[s]);
                batch.chunks.push_back({ids[s], std::span(history[s]).last(1),
                                        static_cast<std::int64_t>(history[s].size() - 1),
                                        runtime::LogitsWanted::Last, nullptr});
            }
            engine->forward(batch, out);
            for (std::size_t s = 0; s < ids.size(); ++s)
                next[s] = argmax(out.row(out.first_row[s]));
        }
        DecodeResult r;
        r.seconds = seconds_since(start);
        r.local_gbps = local ? std::max(gbps_before, probe->measure(kLocalProbeSeconds)) : 0.0;
        r.context = context;
        r.sequences = sequences;
        r.steps = steps;
        r.bytes_per_step =
            static_cast<double>(cost.decode_bytes_per_token) +
            static_cast<double>(sequences) *
                kv_read_bytes(static_cast<double>(context) + static_cast<double>(steps) / 2);
        for (const kv::SeqId id : ids) engine->kv().free_sequence(id);
        return r;
    };

    // Machine ceilings first, while nothing else is warm.
    Ceiling ceiling;
    runtime::GpuPeaks gpu_peaks;
    if (on_gpu) {
        const runtime::GpuPluginStatus& plugin = runtime::gpu_plugin();
        if (!plugin.plugin)
            throw Error("bench: the CUDA backend is running but its plugin is gone: " +
                        plugin.problem);
        // The prefill's largest product: FFN rows x prompt tokens x width.
        gpu_peaks = plugin.plugin->measure_peaks(static_cast<int>(config.ffn_length),
                                                 static_cast<int>(longest),
                                                 static_cast<int>(config.embedding_length));
        ceiling.device = gpu_peaks.device_name;
        ceiling.gbps = gpu_peaks.copy_gbps;
        ceiling.gbps_what = "device-to-device copy";
        ceiling.gflops = gpu_peaks.bf16_gemm_tflops * 1000.0;
        ceiling.gflops_what = "cuBLAS bf16 GEMM";
    } else {
        probe = std::make_unique<tensor::ReadBandwidthProbe>(std::size_t{1} << 30, threads);
        const double read_gbps = probe->measure(1.0);
        const inspect::ComputePeak peak = inspect::measure_f32_peak(threads);
        const inspect::ComputePeak int8 = inspect::measure_int8_peak(threads);
        ceiling.device = "cpu (" + std::to_string(threads) + " threads, " + peak.isa + ")";
        ceiling.gbps = read_gbps;
        ceiling.gbps_what = "read bandwidth";
        ceiling.gflops = peak.gflops;
        ceiling.gflops_what = "f32 FMA peak";
        ceiling.int8_gops = int8.gflops;
        ceiling.int8_what = std::string("int8 dot-product peak (") + int8.isa + ")";
    }

    // Warm-up: one short prompt pulls every weight page in from the file (and, on a GPU,
    // records the decode graph).
    {
        const kv::SeqId seq = engine->new_sequence_id();
        prefill(random_tokens(8), seq);
        engine->kv().free_sequence(seq);
        decode(8, 1, 2, false);
    }
    struct PrefillResult {
        std::int64_t tokens = 0;
        std::vector<double> round_seconds;  // each timed run, in order

        double seconds() const {  // mean of the timed runs
            double total = 0;
            for (const double s : round_seconds) total += s;
            return total / static_cast<double>(round_seconds.size());
        }
        double best_seconds() const {
            return *std::min_element(round_seconds.begin(), round_seconds.end());
        }
    };
    // Each length: one untimed run (the engine's buffers grow to the length's size there, as
    // llama-bench's warm-up run lets llama.cpp's), then `prefill_repeats` rounds of fresh random
    // prompts, each round running every length once, in order; the mean is reported (llama-bench
    // reports its repetitions' mean), the best and every round too. One cold run per length put
    // a 512-token prefill anywhere from 602 to 934 tok/s on the shared 2-core VM (SmolLM2, the
    // same minute). Rounds rather than all repeats of one length and then the next: on a VM
    // whose speed drifts within minutes, the per-token comparison of two lengths (issue 14 asks
    // that 512 tokens be no slower per token than 128) is then taken from runs seconds apart.
    std::vector<PrefillResult> prefills;
    const auto prefill_once = [&](std::int64_t n) {
        const kv::SeqId seq = engine->new_sequence_id();
        const double seconds = prefill(random_tokens(n), seq);
        engine->kv().free_sequence(seq);
        return seconds;
    };
    for (std::int64_t n : lengths) {
        prefill_once(n);
        prefills.push_back({n, {}});
    }
    for (int r = 0; r < prefill_repeats; ++r) {
        for (PrefillResult& p : prefills) p.round_seconds.push_back(prefill_once(p.tokens));
    }
    std::vector<DecodeResult> decodes;
    std::vector<float> decode_logits;  // a real decode row, for timing the sampler on
    for (const std::int64_t c : contexts) {
        decodes.push_back(decode(c, 1, n_decode));
        if (decode_logits.empty()) {
            const auto row = out.row(out.first_row[0]);
            decode_logits.assign(row.begin(), row.end());
        }
    }
    std::vector<DecodeResult> batched;
    for (const std::int64_t n : concurrency)
        batched.push_back(decode(kConcurrentPrompt, n, n_decode));
    // The rest of a decode step, at the first decode context.
    const StepOverhead overhead =
        measure_step_overhead(*engine, decode_logits, random_tokens(contexts.front()), n_decode);
    // The machine's best read bandwidth: of the probe before the runs and those beside each
    // decode row (there is at least one; each probed after its steps too). On a shared VM it
    // moves by 1.5-2x from one minute to the next.
    if (!on_gpu) {
        for (const auto* runs : {&decodes, &batched})
            for (const DecodeResult& d : *runs) ceiling.gbps = std::max(ceiling.gbps, d.local_gbps);
        // The arithmetic peaks too: a neighbour on the host's other hyperthread halved one
        // f32 measurement here (105 against 219-221 GFLOP/s in the same minutes).
        ceiling.gflops = std::max(ceiling.gflops, inspect::measure_f32_peak(threads).gflops);
        ceiling.int8_gops = std::max(ceiling.int8_gops, inspect::measure_int8_peak(threads).gflops);
    }

    auto tokens_per_s = [](const DecodeResult& d) {
        return static_cast<double>(d.steps * d.sequences) / d.seconds;
    };
    auto achieved_gbps = [](const DecodeResult& d) {
        return d.bytes_per_step * static_cast<double>(d.steps) / d.seconds / 1e9;
    };
    // A decode's share of the bandwidth: on the CPU against the probe run next to it.
    auto bandwidth_fraction = [&](const DecodeResult& d) {
        return achieved_gbps(d) / (d.local_gbps > 0 ? d.local_gbps : ceiling.gbps);
    };
    // The matrix products' FLOPs of a prefill (the output rows for its last token only).
    auto matrix_flops = [&](const PrefillResult& p) {
        return cost.layer_flops_per_token * static_cast<double>(p.tokens) + cost.output_flops;
    };
    // The matrix products' FLOPs per second (attention's are reported as a share beside them).
    auto prefill_gflops = [&](const PrefillResult& p) {
        return matrix_flops(p) / p.seconds() / 1e9;
    };
    // The part of those FLOPs that multiplies int8 (quantized weights, CPU): they run at the
    // int8 dot-product peak, not the f32 one (with an f32 ceiling alone, a quantized model's
    // prefill read 100-250 % "of ceiling"). A GPU's products all count against its GEMM rate.
    auto int8_flops = [&](const PrefillResult& p) {
        if (on_gpu) return 0.0;
        return cost.layer_int8_flops_per_token * static_cast<double>(p.tokens) +
               cost.output_int8_flops;
    };
    // The prefill's fraction of its ceiling: the seconds its matrix products would take at the
    // peaks (each product at the peak of the arithmetic it runs) over the seconds they took.
    auto peak_fraction = [&](const PrefillResult& p) {
        const double int8 = int8_flops(p);
        const double at_peaks = (matrix_flops(p) - int8) / (ceiling.gflops * 1e9) +
                                (int8 > 0 ? int8 / (ceiling.int8_gops * 1e9) : 0.0);
        return at_peaks / p.seconds();
    };
    // Causal attention of the prompt (model_cost.h): it grows with the prompt, the matrices' per
    // token does not.
    auto attention_flops = [&](const PrefillResult& p) {
        return inspect::attention_flops(config, 0, p.tokens);
    };
    // Attention's share of the prefill's arithmetic: it grows with the prompt while the
    // matrices' stays per token, and on the CPU it runs in f32 where the quantized matrices run
    // int8 products, so it is what makes a long prompt slower per token.
    auto attention_share = [&](const PrefillResult& p) {
        return attention_flops(p) / (matrix_flops(p) + attention_flops(p));
    };
    const DecodeResult& first_decode = decodes.front();
    const double ttft_ms = prefills.front().seconds() * 1000.0;

    if (args.flag("json")) {
        JsonWriter w;
        w.begin_object();
        w.key("model").value(engine->file().path());
        w.key("threads").value(threads);
        w.key("backend").value(engine->backend_name());
        w.key("kv_type").value(kv::element_type_name(options.kv_type));
        w.key("cuda_graphs").value(options.gpu.decode_graphs);
        w.key("split_k").value(options.gpu.split_k_attention);
        w.key("ceiling").begin_object();
        w.key("device").value(ceiling.device);
        w.key("gbps").value(ceiling.gbps);
        w.key("gbps_source").value(ceiling.gbps_what);
        w.key("gflops").value(ceiling.gflops);
        w.key("gflops_source").value(ceiling.gflops_what);
        if (!on_gpu) {
            w.key("int8_gops").value(ceiling.int8_gops);
            w.key("int8_source").value(ceiling.int8_what);
        } else {
            w.key("gemm_shape")
                .value(std::to_string(gpu_peaks.gemm_m) + "x" + std::to_string(gpu_peaks.gemm_n) +
                       "x" + std::to_string(gpu_peaks.gemm_k));
        }
        w.end_object();
        w.key("prefill").begin_array();
        for (const auto& p : prefills) {
            w.begin_object();
            w.key("tokens").value(p.tokens);
            w.key("seconds").value(p.seconds());
            w.key("best_seconds").value(p.best_seconds());
            w.key("repeats").value(prefill_repeats);
            w.key("tokens_per_s").value(static_cast<double>(p.tokens) / p.seconds());
            w.key("gflops").value(prefill_gflops(p));
            w.key("peak_fraction").value(peak_fraction(p));
            w.key("int8_share").value(int8_flops(p) / matrix_flops(p));
            w.key("attention_flops").value(attention_flops(p));
            w.key("attention_share").value(attention_share(p));
            w.key("round_seconds").begin_array();
            for (const double seconds : p.round_seconds) w.value(seconds);
            w.end_array();
            w.end_object();
        }
        w.end_array();
        auto write_decode = [&](const DecodeResult& d) {
            w.begin_object();
            w.key("context").value(d.context);
            w.key("sequences").value(d.sequences);
            w.key("steps").value(d.steps);
            w.key("tokens_per_s").value(tokens_per_s(d));
            w.key("us_per_step").value(d.seconds / static_cast<double>(d.steps) * 1e6);
            w.key("bytes_per_step").value(d.bytes_per_step);
            w.key("gbps").value(achieved_gbps(d));
            if (d.local_gbps > 0) w.key("ceiling_gbps").value(d.local_gbps);
            w.key("bandwidth_fraction").value(bandwidth_fraction(d));
            w.end_object();
        };
        w.key("decode").begin_array();
        for (const auto& d : decodes) write_decode(d);
        w.end_array();
        w.key("concurrency").begin_array();
        for (const auto& d : batched) write_decode(d);
        w.end_array();
        w.key("step_overhead").begin_object();
        w.key("vocab").value(overhead.vocab);
        w.key("context").value(overhead.context);
        w.key("steps").value(overhead.steps);
        w.key("temperature").value(static_cast<double>(overhead.sampling.temperature));
        w.key("top_k").value(overhead.sampling.top_k);
        w.key("top_p").value(static_cast<double>(overhead.sampling.top_p));
        w.key("min_p").value(static_cast<double>(overhead.sampling.min_p));
        w.key("n_candidates").value(overhead.sampling.n_candidates);
        w.key("sampling_us").value(overhead.sampling_us);
        w.key("greedy_sampling_us").value(overhead.greedy_sampling_us);
        w.key("engine_step_us").value(overhead.engine_step_us);
        w.key("forward_us").value(overhead.forward_us);
        w.key("after_forward_us").value(overhead.after_forward_us);
        w.key("share").value(overhead.share());
        w.end_object();
        // The first decode row under the names earlier versions used.
        w.key("decode_tokens").value(n_decode);
        w.key("decode_tokens_per_s").value(tokens_per_s(first_decode));
        w.key("ttft_ms").value(ttft_ms);
        w.key("weight_bytes").value(engine->file().tensor_bytes());
        w.key("interleaved_matrices").value(static_cast<std::int64_t>(engine->interleaved().matrices));
        w.key("interleaved_bytes").value(static_cast<std::int64_t>(engine->interleaved().bytes));
        w.key("decode_bytes_per_token").value(cost.decode_bytes_per_token);
        w.key("effective_gbps").value(achieved_gbps(first_decode));
        w.key("machine_read_gbps").value(ceiling.gbps);
        w.key("bandwidth_fraction").value(bandwidth_fraction(first_decode));
        w.key("machine_f32_gflops").value(ceiling.gflops);
        if (!on_gpu) w.key("machine_int8_gops").value(ceiling.int8_gops);
        w.end_object();
        std::printf("%s\n", w.str().c_str());
        return 0;
    }
    std::printf(
        "%s on %s (KV cache %s%s)\n", engine->file().path().c_str(), engine->backend_name().c_str(),
        kv::element_type_name(options.kv_type),
        on_gpu ? (options.gpu.decode_graphs ? ", decode graphs on" : ", decode graphs off") : "");
    if (engine->interleaved().matrices > 0) {
        std::printf("%d matrices (%.0f MiB) stored interleaved for the CPU kernels\n",
                    engine->interleaved().matrices,
                    static_cast<double>(engine->interleaved().bytes) / (1 << 20));
    }
    std::printf("ceilings, measured now on %s%s: %s %.1f GB/s, %s %.0f GFLOP/s",
                ceiling.device.c_str(), on_gpu ? "" : ", each the best measured in this run",
                ceiling.gbps_what, ceiling.gbps, ceiling.gflops_what, ceiling.gflops);
    if (!on_gpu) std::printf(", %s %.0f GOP/s", ceiling.int8_what.c_str(), ceiling.int8_gops);
    std::printf("\n");
    if (!on_gpu) {
        std::printf(
            "decode against the read bandwidth measured just before and just after each "
            "row (the better of the two)\n");
    }
    // Which ceiling a prefill is measured against, where it is not the f32 one alone.
    const double int8_share = int8_flops(prefills.front()) / matrix_flops(prefills.front());
    if (int8_share > 0) {
        std::printf(
            "prefill ceiling: %.1f %% of the matrix arithmetic multiplies int8 (quantized "
            "weights) at the int8 peak, the rest f32 at the FMA peak\n",
            100.0 * int8_share);
    }
    std::printf("\n");
    Table table(
        {"test", "tokens", "time", "tok/s", "us/token", "achieved", "of ceiling", "attention"},
        {false, true, true, true, true, true, true, true});
    char a[64], b[64], c[64], d[64], e[64];
    for (const auto& p : prefills) {
        std::snprintf(a, sizeof a, "%.0f ms", p.seconds() * 1000);
        std::snprintf(b, sizeof b, "%.1f", static_cast<double>(p.tokens) / p.seconds());
        std::snprintf(e, sizeof e, "%.1f", p.seconds() * 1e6 / static_cast<double>(p.tokens));
        std::snprintf(c, sizeof c, "%.1f GFLOP/s", prefill_gflops(p));
        std::snprintf(d, sizeof d, "%.1f%%", 100.0 * peak_fraction(p));
        char f[64];
        std::snprintf(f, sizeof f, "%.1f%% of FLOPs", 100.0 * attention_share(p));
        table.add_row({"prefill", std::to_string(p.tokens), a, b, e, c, d, f});
    }
    auto add_decode = [&](const DecodeResult& r, const std::string& name) {
        std::snprintf(a, sizeof a, "%.0f ms", r.seconds * 1000);
        std::snprintf(b, sizeof b, "%.1f", tokens_per_s(r));
        std::snprintf(e, sizeof e, "%.1f", r.seconds * 1e6 / static_cast<double>(r.steps));
        std::snprintf(c, sizeof c, "%.2f GB/s", achieved_gbps(r));
        std::snprintf(d, sizeof d, "%.1f%%", 100.0 * bandwidth_fraction(r));
        table.add_row({name, std::to_string(r.steps * r.sequences), a, b, e, c, d, ""});
    };
    for (const auto& r : decodes) add_decode(r, "decode @" + std::to_string(r.context));
    for (const auto& r : batched) add_decode(r, "decode x" + std::to_string(r.sequences));
    std::printf(
        "%s\nTTFT (%lld-token prompt): %.0f ms; a decode step streams %s of weights plus the KV "
        "cache\n",
        table.render().c_str(), static_cast<long long>(prefills.front().tokens), ttft_ms,
        human_bytes(cost.decode_bytes_per_token).c_str());
    std::printf(
        "\noutside the forward pass (%lld-token vocabulary; temp %.2g, top-k %d, top-p %.2g, min-p "
        "%.2g, "
        "%d candidates):\n  sampling %.0f us (greedy %.0f us); Engine::step @%lld %.0f us, of "
        "which %.0f us "
        "after the forward pass (%.1f%% of the step)\n",
        static_cast<long long>(overhead.vocab), static_cast<double>(overhead.sampling.temperature),
        overhead.sampling.top_k, static_cast<double>(overhead.sampling.top_p),
        static_cast<double>(overhead.sampling.min_p), overhead.sampling.n_candidates,
        overhead.sampling_us, overhead.greedy_sampling_us, static_cast<long long>(overhead.context),
        overhead.engine_step_us, overhead.after_forward_us, 100.0 * overhead.share());
    return 0;
}

}  // namespace tokenscope::cli
