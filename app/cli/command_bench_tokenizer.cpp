// `tokenscope-cli bench-tokenizer`: how fast the model's tokenizer encodes (and decodes) a text
// file, in MB/s (10^6 bytes of input text per second), on one thread. The whole file is
// encoded as one text, without special-token parsing, as `ppl` and the chat do with user text.
//
// The BPE encoder remembers the tokens of short words per thread, so encoding the same text
// again is faster than encoding it the first time. "cold" empties the cache before each run
// (the speed for text never seen, the number to quote); "warm" keeps it (every word cached:
// the upper bound).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "arguments.h"
#include "commands.h"
#include "gguf/file.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/json_writer.h"

namespace tokenscope::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// Repeats `work` until at least `min_seconds` have passed and `min_runs` were made; returns
// every run's time, so the report can give the best (least disturbed) and the median.
// With `cold`, the tokenizer's word cache is emptied (untimed) before each run.
template <typename Work>
std::vector<double> time_runs(double min_seconds, int min_runs, bool cold, Work&& work) {
    std::vector<double> times;
    const auto start = Clock::now();
    while (static_cast<int>(times.size()) < min_runs || seconds_since(start) < min_seconds) {
        if (cold) tokenizer::Tokenizer::clear_thread_caches();
        const auto t0 = Clock::now();
        work();
        times.push_back(seconds_since(t0));
    }
    std::sort(times.begin(), times.end());
    return times;
}

}  // namespace

int run_bench_tokenizer(int argc, char** argv, int first) {
    const Arguments args("bench-tokenizer", {{"model"}, {"file"}, {"seconds"}, {"json", false}},
                         argc, argv, first);
    const std::string model_path = args.required("model");
    const std::string text_path = args.required("file");
    const double min_seconds = args.number("seconds").value_or(3.0);
    if (!(min_seconds > 0.0) || min_seconds > 3600.0)
        throw InvalidArgument(
            fmt::format("bench-tokenizer: --seconds {} is not in (0, 3600]", min_seconds));

    std::ifstream in(text_path, std::ios::binary);
    if (!in) throw IoError(fmt::format("{}: cannot open: {}", text_path, system_error_text(errno)));
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string text = buffer.str();
    if (text.empty()) throw InvalidArgument(fmt::format("bench-tokenizer: {} is empty", text_path));

    const auto load_start = Clock::now();
    const gguf::File file = gguf::File::open(model_path);
    const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);
    const double load_s = seconds_since(load_start);

    std::vector<std::int32_t> ids = tok.encode(text);  // warm-up; also the token count
    const auto encode_times = time_runs(min_seconds, 3, true, [&] { ids = tok.encode(text); });
    const auto warm_times = time_runs(min_seconds / 3, 3, false, [&] { ids = tok.encode(text); });
    std::string decoded;
    const auto decode_times =
        time_runs(min_seconds / 3, 3, false, [&] { decoded = tok.decode(ids); });

    const double mb = static_cast<double>(text.size()) / 1e6;
    const double encode_best = mb / encode_times.front();
    const double encode_median = mb / encode_times[encode_times.size() / 2];
    const double warm_best = mb / warm_times.front();
    const double decode_best = mb / decode_times.front();
    const std::string model_name = tokenizer::tokenizer_model_name(tok.vocabulary().model);

    if (args.flag("json")) {
        JsonWriter json;
        json.begin_object();
        json.key("model").value(model_path);
        json.key("file").value(text_path);
        json.key("tokenizer").value(model_name);
        json.key("pre").value(tok.pre_tokenizer());
        json.key("bytes").value(static_cast<std::uint64_t>(text.size()));
        json.key("tokens").value(static_cast<std::uint64_t>(ids.size()));
        json.key("load_ms").value(load_s * 1e3);
        json.key("encode_runs").value(static_cast<std::uint64_t>(encode_times.size()));
        json.key("encode_mb_per_s").value(encode_best);
        json.key("encode_mb_per_s_median").value(encode_median);
        json.key("encode_tokens_per_s")
            .value(static_cast<double>(ids.size()) / encode_times.front());
        json.key("encode_warm_mb_per_s").value(warm_best);
        json.key("decode_mb_per_s").value(decode_best);
        json.key("round_trip").value(decoded == text);
        json.end_object();
        std::printf("%s\n", json.str().c_str());
        return 0;
    }
    std::printf("tokenizer   %s%s%s (loaded in %.0f ms)\n", model_name.c_str(),
                tok.pre_tokenizer().empty() ? "" : ", pre ", tok.pre_tokenizer().c_str(),
                load_s * 1e3);
    std::printf("text        %s: %zu bytes -> %zu tokens (%.2f bytes/token)\n", text_path.c_str(),
                text.size(), ids.size(),
                static_cast<double>(text.size()) / static_cast<double>(ids.size()));
    std::printf("encode      %.2f MB/s best, %.2f MB/s median of %zu cold runs (%.0f tokens/s)\n",
                encode_best, encode_median, encode_times.size(),
                static_cast<double>(ids.size()) / encode_times.front());
    std::printf("            %.2f MB/s best of %zu warm runs (every word cached)\n", warm_best,
                warm_times.size());
    std::printf("decode      %.2f MB/s best of %zu runs; round trip %s\n", decode_best,
                decode_times.size(), decoded == text ? "exact" : "DIFFERS");
    return 0;
}

}  // namespace tokenscope::cli
