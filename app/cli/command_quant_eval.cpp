// `tokenscope-cli quant-eval`: one table comparing quantizations of a model with their base on
// a text (quant/quant_eval.h): file size, bits per weight, perplexity and its change, mean and
// 99th-percentile KL divergence of the next-token distributions, top-1 agreement, decode speed.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include "arguments.h"
#include "commands.h"
#include "quant/eval_plot.h"
#include "quant/quant_eval.h"
#include "table.h"
#include "util/error.h"
#include "util/json_writer.h"

namespace tokenscope::cli {

namespace {

std::vector<std::string> split_commas(const std::string& s) {
    std::vector<std::string> parts;
    std::size_t at = 0;
    while (at <= s.size()) {
        const std::size_t comma = std::min(s.find(',', at), s.size());
        if (comma > at) parts.push_back(s.substr(at, comma - at));
        at = comma + 1;
    }
    return parts;
}

std::string fmt(const char* f, double v) {
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return b;
}

std::string base_name(const std::string& path) {
    const std::size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::vector<std::string> cells(const quant::ModelEval& m, bool is_base) {
    return {base_name(m.path),
            fmt("%.1f MB", static_cast<double>(m.file_bytes) / 1e6),
            fmt("%.3f", m.bits_per_weight),
            fmt("%.4f", m.perplexity),
            is_base ? "-" : fmt("%+.4f", m.delta_perplexity),
            is_base ? "-" : fmt("%.6f", m.kl_mean),
            is_base ? "-" : fmt("%.6f", m.kl_p99),
            is_base ? "-" : fmt("%.2f %%", 100.0 * m.top1_agreement),
            fmt("%.1f", m.decode_tokens_per_second)};
}

}  // namespace

int run_quant_eval(int argc, char** argv, int first) {
    const Arguments args("quant-eval",
                         {{"base"},
                          {"models"},
                          {"file"},
                          {"ctx"},
                          {"threads"},
                          {"decode-tokens"},
                          {"json", false},
                          {"markdown", false},
                          {"plot"}},
                         argc, argv, first);
    // Checked before the evaluation, which can take minutes, rather than after it.
    const std::optional<std::string> plot = args.value("plot");
    if (plot) quant::check_eval_plot_path(*plot);
    quant::EvalOptions o;
    o.base = args.required("base");
    o.models = split_commas(args.required("models"));
    if (o.models.empty()) throw InvalidArgument("'quant-eval': --models needs at least one file");
    const std::string text_path = args.required("file");
    std::ifstream in(text_path, std::ios::binary);
    if (!in) throw IoError(text_path + ": cannot open");
    std::stringstream buffer;
    buffer << in.rdbuf();
    o.text = buffer.str();
    auto whole = [&](const char* name, double fallback, double lo, double hi) {
        const double v = args.number(name).value_or(fallback);
        if (v < lo || v > hi || v != std::floor(v)) {
            throw InvalidArgument(std::string("'quant-eval': option '--") + name +
                                  "' must be a whole number from " +
                                  std::to_string(static_cast<long long>(lo)) + " to " +
                                  std::to_string(static_cast<long long>(hi)));
        }
        return static_cast<std::int64_t>(v);
    };
    o.ctx = whole("ctx", 512, 16, 1 << 20);
    o.threads = static_cast<int>(whole("threads", 0, 0, 1024));
    o.decode_tokens = static_cast<int>(whole("decode-tokens", 32, 0, 4096));
    o.progress = [](const std::string& line) {
        std::fprintf(stderr, "quant-eval: %s\n", line.c_str());
    };
    const quant::EvalResult r = quant::evaluate_quantizations(o);
    if (plot) {
        quant::write_eval_plot(*plot, r);
        std::fprintf(stderr, "quant-eval: plot written to %s\n", plot->c_str());
    }

    if (args.flag("json")) {
        JsonWriter w;
        w.begin_object();
        w.key("text").value(text_path);
        w.key("tokens").value(r.tokens);
        w.key("ctx").value(r.ctx);
        w.key("windows").value(r.windows);
        auto model = [&](const quant::ModelEval& m, bool is_base) {
            w.begin_object();
            w.key("path").value(m.path);
            w.key("file_bytes").value(m.file_bytes);
            w.key("bits_per_weight").value(m.bits_per_weight);
            w.key("perplexity").value(m.perplexity);
            w.key("scored_tokens").value(m.scored);
            if (!is_base) {
                w.key("delta_perplexity").value(m.delta_perplexity);
                w.key("kl_mean").value(m.kl_mean);
                w.key("kl_p99").value(m.kl_p99);
                w.key("kl_max").value(m.kl_max);
                w.key("top1_agreement").value(m.top1_agreement);
            }
            w.key("decode_tokens_per_second").value(m.decode_tokens_per_second);
            w.end_object();
        };
        w.key("base");
        model(r.base, true);
        w.key("models").begin_array();
        for (const auto& m : r.models) model(m, false);
        w.end_array();
        w.end_object();
        std::printf("%s\n", w.str().c_str());
        return 0;
    }
    const std::vector<std::string> headers = {
        "model", "size", "bpw", "PPL", "ΔPPL", "KL mean", "KL p99", "top-1 agree", "decode tok/s"};
    if (args.flag("markdown")) {
        std::string line = "|", rule = "|";
        for (const auto& h : headers) {
            line += " " + h + " |";
            rule += h == "model" ? " --- |" : " ---: |";
        }
        std::printf("%s\n%s\n", line.c_str(), rule.c_str());
        auto row = [](const std::vector<std::string>& c) {
            std::string s = "|";
            for (const auto& x : c) s += " " + x + " |";
            std::printf("%s\n", s.c_str());
        };
        row(cells(r.base, true));
        for (const auto& m : r.models) row(cells(m, false));
    } else {
        Table t(headers, {false, true, true, true, true, true, true, true, true});
        t.add_row(cells(r.base, true));
        for (const auto& m : r.models) t.add_row(cells(m, false));
        std::printf("%s", t.render().c_str());
    }
    std::printf(
        "%lld tokens of %s in %lld windows of up to %lld; KL divergence KL(base || model) in nats "
        "per position\n",
        static_cast<long long>(r.tokens), text_path.c_str(), static_cast<long long>(r.windows),
        static_cast<long long>(r.ctx));
    return 0;
}

}  // namespace tokenscope::cli
