#include "server_metrics.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <sstream>

namespace tokenscope::remote {

namespace {

bool name_char(char c, bool first) {
    const auto u = static_cast<unsigned char>(c);
    return std::isalpha(u) || c == '_' || c == ':' || (!first && std::isdigit(u));
}

std::optional<double> number(std::string_view text) {
    if (text == "+Inf" || text == "Inf") return HUGE_VAL;
    if (text == "-Inf") return -HUGE_VAL;
    if (text == "NaN") return std::nan("");
    try {
        std::size_t used = 0;
        const double v = std::stod(std::string(text), &used);
        if (used != text.size()) return std::nullopt;
        return v;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

// {a="x",b="y\"z"} starting at text[i] == '{'; returns false on a malformed set.
bool labels(const std::string& text, std::size_t& i, std::map<std::string, std::string>& out) {
    ++i;
    while (i < text.size()) {
        while (i < text.size() && (text[i] == ' ' || text[i] == ',')) ++i;
        if (i < text.size() && text[i] == '}') {
            ++i;
            return true;
        }
        const std::size_t start = i;
        while (i < text.size() && name_char(text[i], i == start)) ++i;
        const std::string key = text.substr(start, i - start);
        if (key.empty() || i + 1 >= text.size() || text[i] != '=' || text[i + 1] != '"')
            return false;
        i += 2;
        std::string value;
        while (i < text.size() && text[i] != '"') {
            if (text[i] == '\\' && i + 1 < text.size()) {
                ++i;
                value += text[i] == 'n' ? '\n' : text[i];
            } else {
                value += text[i];
            }
            ++i;
        }
        if (i >= text.size()) return false;
        ++i;  // closing quote
        out[key] = std::move(value);
    }
    return false;
}

struct Family {
    double sum = 0.0;
    int count = 0;
    void add(double v) {
        if (std::isnan(v)) return;
        sum += v;
        ++count;
    }
    std::optional<double> total() const { return count ? std::optional(sum) : std::nullopt; }
    std::optional<double> mean() const { return count ? std::optional(sum / count) : std::nullopt; }
};

}  // namespace

std::vector<PrometheusSample> parse_prometheus(const std::string& text) {
    std::vector<PrometheusSample> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        std::size_t i = line.find_first_not_of(" \t");
        if (i == std::string::npos || line[i] == '#') continue;
        PrometheusSample s;
        const std::size_t start = i;
        while (i < line.size() && name_char(line[i], i == start)) ++i;
        s.name = line.substr(start, i - start);
        if (s.name.empty()) continue;
        if (i < line.size() && line[i] == '{' && !labels(line, i, s.labels)) continue;
        const std::size_t value_start = line.find_first_not_of(" \t", i);
        if (value_start == std::string::npos || value_start == i) continue;
        const std::size_t value_end = line.find_first_of(" \t", value_start);  // then a timestamp
        const auto v = number(std::string_view(line).substr(
            value_start,
            value_end == std::string::npos ? std::string::npos : value_end - value_start));
        if (!v) continue;
        s.value = *v;
        out.push_back(std::move(s));
    }
    return out;
}

ServerMetrics read_server_metrics(const std::vector<PrometheusSample>& samples) {
    std::map<std::string, Family> families;
    for (const auto& s : samples) families[s.name].add(s.value);
    auto mean = [&](const char* name) {
        const auto it = families.find(name);
        return it == families.end() ? std::nullopt : it->second.mean();
    };
    auto total = [&](const char* name) {
        const auto it = families.find(name);
        return it == families.end() ? std::nullopt : it->second.total();
    };
    ServerMetrics m;
    // One engine per server; the first whose names are present wins.
    if (families.count("tokenscope_kv_cache_usage_ratio") ||
        families.count("tokenscope_requests_running")) {
        m.engine = "tokenscope";
        m.kv_usage = mean("tokenscope_kv_cache_usage_ratio");
        m.kv_blocks_used = total("tokenscope_kv_cache_blocks_used");
        m.kv_blocks_total = total("tokenscope_kv_cache_blocks_total");
        m.requests_running = total("tokenscope_requests_running");
        m.requests_waiting = total("tokenscope_requests_waiting");
    } else if (families.count("vllm:num_requests_running") ||
               families.count("vllm:kv_cache_usage_perc") ||
               families.count("vllm:gpu_cache_usage_perc")) {
        m.engine = "vllm";
        m.kv_usage = mean("vllm:kv_cache_usage_perc");
        if (!m.kv_usage) m.kv_usage = mean("vllm:gpu_cache_usage_perc");
        m.requests_running = total("vllm:num_requests_running");
        m.requests_waiting = total("vllm:num_requests_waiting");
    } else if (families.count("llamacpp:requests_processing") ||
               families.count("llamacpp:kv_cache_usage_ratio")) {
        m.engine = "llama.cpp";
        m.kv_usage = mean("llamacpp:kv_cache_usage_ratio");
        m.requests_running = total("llamacpp:requests_processing");
        m.requests_waiting = total("llamacpp:requests_deferred");
    } else if (families.count("sglang:num_running_reqs") || families.count("sglang:token_usage")) {
        m.engine = "sglang";
        m.kv_usage = mean("sglang:token_usage");
        m.requests_running = total("sglang:num_running_reqs");
        m.requests_waiting = total("sglang:num_queue_reqs");
    }
    return m;
}

}  // namespace tokenscope::remote
