#include "generation_options.h"

#include <cmath>
#include <random>

#include "util/error.h"

namespace tokenscope::cli {

namespace {
std::int64_t whole(const Arguments& args, const std::string& name, std::int64_t fallback, std::int64_t min,
                   std::int64_t max) {
    const auto v = args.number(name);
    if (!v) return fallback;
    if (*v != std::floor(*v) || *v < static_cast<double>(min) || *v > static_cast<double>(max)) {
        throw InvalidArgument("option '--" + name + "' must be a whole number from " + std::to_string(min) + " to " +
                              std::to_string(max) + ", got '" + *args.value(name) + "'");
    }
    return static_cast<std::int64_t>(*v);
}
}  // namespace

std::vector<OptionSpec> join(std::vector<OptionSpec> specs, const std::vector<OptionSpec>& extra) {
    specs.insert(specs.end(), extra.begin(), extra.end());
    return specs;
}

std::vector<OptionSpec> engine_option_specs() {
    return {{"threads"}, {"ctx"}, {"kv-type"}, {"batch"}, {"device"}, {"cuda-graphs"}, {"split-k"},
            {"large-pages"}};
}

namespace {
bool on_off(const Arguments& args, const char* name, bool fallback) {
    const auto v = args.value(name);
    if (!v) return fallback;
    if (*v == "on") return true;
    if (*v == "off") return false;
    throw InvalidArgument(std::string("option '--") + name + "' must be on or off, got '" + *v + "'");
}
}  // namespace

runtime::EngineOptions engine_options(const Arguments& args) {
    runtime::EngineOptions o;
    o.threads = static_cast<int>(whole(args, "threads", 0, 0, 1024));
    o.kv_capacity_tokens = whole(args, "ctx", 4096, 16, 1 << 20);
    o.token_budget = whole(args, "batch", 512, 1, 1 << 16);
    if (auto device = args.value("device")) {
        try {
            o.device = runtime::parse_device(*device);
        } catch (const InvalidArgument& e) {
            throw InvalidArgument(std::string("option '--device': ") + e.what());
        }
    }
    o.gpu.decode_graphs = on_off(args, "cuda-graphs", true);
    o.gpu.split_k_attention = on_off(args, "split-k", true);
    o.large_pages = on_off(args, "large-pages", true);
    if (auto type = args.value("kv-type")) {
        auto parsed = kv::parse_element_type(*type);
        if (!parsed) throw InvalidArgument("option '--kv-type' must be f32, f16 or q8, got '" + *type + "'");
        o.kv_type = *parsed;
    }
    return o;
}

std::vector<OptionSpec> speculation_option_specs() {
    return {{"speculative"}, {"draft-k"}};
}

void apply_speculation_options(const Arguments& args, runtime::EngineOptions& options) {
    if (auto v = args.value("speculative")) {
        try {
            options.speculation = runtime::parse_speculation(*v);
        } catch (const InvalidArgument& e) {
            throw InvalidArgument(std::string("option '--speculative': ") + e.what());
        }
    }
    options.speculation.max_k = static_cast<int>(
        whole(args, "draft-k", options.speculation.max_k, 1, runtime::kMaxSpeculationK));
}

std::vector<OptionSpec> sampling_option_specs() {
    return {{"temp"}, {"top-k"}, {"top-p"}, {"min-p"}, {"repeat-penalty"}, {"repeat-window"}, {"seed"}};
}

runtime::SamplingParams sampling_params(const Arguments& args) {
    runtime::SamplingParams p;
    if (auto v = args.number("temp")) p.temperature = static_cast<float>(*v);
    p.top_k = static_cast<int>(whole(args, "top-k", p.top_k, 0, 1 << 30));
    if (auto v = args.number("top-p")) p.top_p = static_cast<float>(*v);
    if (auto v = args.number("min-p")) p.min_p = static_cast<float>(*v);
    if (auto v = args.number("repeat-penalty")) p.repeat_penalty = static_cast<float>(*v);
    p.penalty_window = static_cast<int>(whole(args, "repeat-window", p.penalty_window, 0, 1 << 20));
    if (args.value("seed")) {
        p.seed = static_cast<std::uint64_t>(whole(args, "seed", 0, 0, INT64_MAX));
    } else {
        p.seed = std::random_device{}();
    }
    try {
        p.validate();
    } catch (const InvalidArgument& e) {
        throw InvalidArgument(std::string("sampling options: ") + e.what());
    }
    return p;
}

}  // namespace tokenscope::cli
