// `tokenscope-cli bench`: prefill and decode speed on this machine, each next to the
// machine's ceiling measured by the bench itself (read bandwidth for decode, f32 FMA peak for
// prefill).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <thread>

#include "arguments.h"
#include "commands.h"
#include "generation_options.h"
#include "inspect/compute_peak.h"
#include "inspect/model_cost.h"
#include "table.h"
#include "tensor/matmul_bench.h"
#include "util/error.h"
#include "util/json_writer.h"

namespace tokenscope::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::vector<std::int64_t> parse_lengths(const std::string& text) {
    std::vector<std::int64_t> out;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        char* end = nullptr;
        const long long v = std::strtoll(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || v < 1 || v > 65536) {
            throw InvalidArgument("'bench': option '--prompt-lengths' expects numbers 1-65536 separated by commas, got '" +
                                  text + "'");
        }
        out.push_back(v);
    }
    return out;
}

std::int32_t argmax(std::span<const float> row) {
    return static_cast<std::int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

}  // namespace

int run_bench(int argc, char** argv, int first) {
    const Arguments args("bench",
                         join({{"model"}, {"prompt-lengths"}, {"n-decode"}, {"json", false}}, engine_option_specs()),
                         argc, argv, first);
    const std::vector<std::int64_t> lengths = parse_lengths(args.value("prompt-lengths").value_or("128,512"));
    const auto n_decode = static_cast<std::int64_t>(args.number("n-decode").value_or(64));
    if (n_decode < 1 || n_decode > 100000) throw InvalidArgument("'bench': option '--n-decode' must be 1 to 100000");
    runtime::EngineOptions options = engine_options(args);
    const std::int64_t longest = *std::max_element(lengths.begin(), lengths.end());
    options.kv_capacity_tokens = std::max<std::int64_t>(longest, 16 + n_decode) + 16;
    if (!args.value("batch")) options.token_budget = longest;
    auto engine = runtime::Engine::load(args.required("model"), options);
    const int threads = options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
    const inspect::ModelCost cost = inspect::model_cost(engine->file());
    const std::int64_t vocab = engine->config().vocab_size;
    std::mt19937 rng(1234);
    auto random_tokens = [&](std::int64_t n) {
        std::vector<std::int32_t> t(static_cast<std::size_t>(n));
        for (auto& x : t) x = static_cast<std::int32_t>(3 + rng() % static_cast<std::uint32_t>(vocab - 3));
        return t;
    };
    runtime::ForwardOutputs out;
    // Runs `tokens` through a fresh sequence in budget-sized chunks; returns seconds.
    auto prefill = [&](const std::vector<std::int32_t>& tokens, kv::SeqId seq) {
        const auto start = Clock::now();
        for (std::size_t pos = 0; pos < tokens.size();) {
            const std::size_t n = std::min<std::size_t>(tokens.size() - pos, static_cast<std::size_t>(options.token_budget));
            if (!engine->kv().allocate_slots(seq, static_cast<int>(n))) throw Error("bench: KV cache too small");
            runtime::Batch batch;
            batch.chunks.push_back({seq, std::span(tokens).subspan(pos, n), static_cast<std::int64_t>(pos),
                                    pos + n == tokens.size() ? runtime::LogitsWanted::Last : runtime::LogitsWanted::None,
                                    nullptr});
            engine->forward(batch, out);
            pos += n;
        }
        return seconds_since(start);
    };

    // Machine ceilings first, while nothing else is warm.
    const double read_gbps = tensor::measure_read_bandwidth(std::size_t{1} << 30, threads, 1.0);
    const inspect::ComputePeak peak = inspect::measure_f32_peak(threads);

    // Warm-up: one short prompt pulls every weight page in from the file.
    {
        const kv::SeqId seq = engine->new_sequence_id();
        prefill(random_tokens(8), seq);
        engine->kv().free_sequence(seq);
    }
    struct PrefillResult {
        std::int64_t tokens;
        double seconds;
    };
    std::vector<PrefillResult> prefills;
    for (std::int64_t n : lengths) {
        const kv::SeqId seq = engine->new_sequence_id();
        prefills.push_back({n, prefill(random_tokens(n), seq)});
        engine->kv().free_sequence(seq);
    }
    // Decode: a 16-token prompt, then n_decode greedy steps of one token each.
    const kv::SeqId seq = engine->new_sequence_id();
    std::vector<std::int32_t> history = random_tokens(16);
    prefill(history, seq);
    std::int32_t next = argmax(out.row(0));
    const auto decode_start = Clock::now();
    for (std::int64_t i = 0; i < n_decode; ++i) {
        if (!engine->kv().allocate_slots(seq, 1)) throw Error("bench: KV cache too small");
        history.push_back(next);
        runtime::Batch batch;
        batch.chunks.push_back({seq, std::span(history).last(1), static_cast<std::int64_t>(history.size() - 1),
                                runtime::LogitsWanted::Last, nullptr});
        engine->forward(batch, out);
        next = argmax(out.row(0));
    }
    const double decode_s = seconds_since(decode_start);
    engine->kv().free_sequence(seq);

    const double decode_tps = static_cast<double>(n_decode) / decode_s;
    const double effective_gbps = static_cast<double>(cost.decode_bytes_per_token) * decode_tps / 1e9;
    const double ttft_ms = prefills.front().seconds * 1000.0;
    auto prefill_gflops = [&](const PrefillResult& p) {
        return (cost.layer_flops_per_token * static_cast<double>(p.tokens) + cost.output_flops) / p.seconds / 1e9;
    };

    if (args.flag("json")) {
        JsonWriter w;
        w.begin_object();
        w.key("model").value(engine->file().path());
        w.key("threads").value(threads);
        w.key("backend").value(engine->backend_name());
        w.key("prefill").begin_array();
        for (const auto& p : prefills) {
            w.begin_object();
            w.key("tokens").value(p.tokens);
            w.key("seconds").value(p.seconds);
            w.key("tokens_per_s").value(static_cast<double>(p.tokens) / p.seconds);
            w.key("gflops").value(prefill_gflops(p));
            w.key("peak_fraction").value(prefill_gflops(p) / peak.gflops);
            w.end_object();
        }
        w.end_array();
        w.key("decode_tokens").value(n_decode);
        w.key("decode_tokens_per_s").value(decode_tps);
        w.key("ttft_ms").value(ttft_ms);
        w.key("weight_bytes").value(engine->file().tensor_bytes());
        w.key("decode_bytes_per_token").value(cost.decode_bytes_per_token);
        w.key("effective_gbps").value(effective_gbps);
        w.key("machine_read_gbps").value(read_gbps);
        w.key("bandwidth_fraction").value(effective_gbps / read_gbps);
        w.key("machine_f32_gflops").value(peak.gflops);
        w.key("machine_f32_isa").value(peak.isa);
        w.end_object();
        std::printf("%s\n", w.str().c_str());
        return 0;
    }
    std::printf("%s on %s\n", engine->file().path().c_str(), engine->backend_name().c_str());
    std::printf("machine: read bandwidth %.1f GB/s, f32 FMA peak %.0f GFLOP/s (%s, %d threads)\n\n", read_gbps,
                peak.gflops, peak.isa, threads);
    Table table({"test", "tokens", "time", "tok/s", "achieved", "of ceiling"}, {false, true, true, true, true, true});
    char a[64], b[64], c[64], d[64];
    for (const auto& p : prefills) {
        std::snprintf(a, sizeof a, "%.0f ms", p.seconds * 1000);
        std::snprintf(b, sizeof b, "%.1f", static_cast<double>(p.tokens) / p.seconds);
        std::snprintf(c, sizeof c, "%.1f GFLOP/s", prefill_gflops(p));
        std::snprintf(d, sizeof d, "%.1f%%", 100.0 * prefill_gflops(p) / peak.gflops);
        table.add_row({"prefill", std::to_string(p.tokens), a, b, c, d});
    }
    std::snprintf(a, sizeof a, "%.0f ms", decode_s * 1000);
    std::snprintf(b, sizeof b, "%.1f", decode_tps);
    std::snprintf(c, sizeof c, "%.2f GB/s", effective_gbps);
    std::snprintf(d, sizeof d, "%.1f%%", 100.0 * effective_gbps / read_gbps);
    table.add_row({"decode", std::to_string(n_decode), a, b, c, d});
    std::printf("%s\nTTFT (%lld-token prompt): %.0f ms; decode streams %s per token\n", table.render().c_str(),
                static_cast<long long>(prefills.front().tokens), ttft_ms, human_bytes(cost.decode_bytes_per_token).c_str());
    return 0;
}

}  // namespace tokenscope::cli
