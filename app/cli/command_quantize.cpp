// `tokenscope-cli quantize`: a GGUF model to another type or mixed recipe (quant/quantize_model.h
// lists which tensor gets which type), optionally weighted by an importance matrix.
#include <cstdio>
#include <map>
#include <thread>

#include "arguments.h"
#include "commands.h"
#include "gguf/file.h"
#include "quant/imatrix.h"
#include "quant/quantize_model.h"
#include "util/error.h"
#include "util/json_writer.h"

namespace tokenscope::cli {

int run_quantize(int argc, char** argv, int first) {
    const Arguments args(
        "quantize",
        {{"model"}, {"out"}, {"type"}, {"imatrix"}, {"threads"}, {"pure", false}, {"json", false}},
        argc, argv, first);
    const std::string in = args.required("model");
    const std::string out = args.required("out");
    const std::string type_name = args.required("type");
    const auto target = quant::parse_target(type_name);
    if (!target) {
        throw InvalidArgument("'quantize': unknown --type '" + type_name +
                              "' (valid: " + quant::target_names() + ")");
    }
    const double threads = args.number("threads").value_or(0);
    if (threads < 0 || threads > 1024 || threads != static_cast<int>(threads)) {
        throw InvalidArgument(
            "'quantize': option '--threads' must be a whole number from 0 to 1024");
    }
    quant::QuantizeOptions options{*target, args.flag("pure"), nullptr, {}, 1, {}, {}};
    options.threads = threads > 0
                          ? static_cast<int>(threads)
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    quant::Imatrix imatrix;
    if (auto path = args.value("imatrix")) {
        imatrix = quant::load_imatrix(*path);
        options.imatrix = &imatrix;
        options.imatrix_path = *path;
        std::fprintf(stderr, "quantize: imatrix %s: %zu matrices, %u chunks\n", path->c_str(),
                     imatrix.entries.size(), imatrix.chunk_count);
    }
    options.warn = [](const std::string& w) {
        std::fprintf(stderr, "quantize: warning: %s\n", w.c_str());
    };
    options.progress = [](std::size_t i, std::size_t n, const quant::TensorPlan& p) {
        std::fprintf(stderr, "[%4zu/%4zu] %-32s %-5s -> %-5s%s\n", i + 1, n, p.name.c_str(),
                     tensor::type_name(p.from), tensor::type_name(p.to), p.copy ? " (copied)" : "");
    };
    const quant::QuantizeResult r = quant::quantize_model(in, out, options);

    std::map<std::string, int> counts;
    std::size_t weighted = 0;
    for (const auto& p : r.tensors) {
        ++counts[tensor::type_name(p.to)];
        weighted += p.weighted ? 1 : 0;
    }
    const double mb_per_s =
        r.seconds > 0 ? static_cast<double>(r.input_bytes) / 1e6 / r.seconds : 0.0;
    if (args.flag("json")) {
        JsonWriter w;
        w.begin_object();
        w.key("output").value(out);
        w.key("type").value(target->name);
        w.key("input_tensor_bytes").value(r.input_bytes);
        w.key("output_file_bytes").value(r.output_bytes);
        w.key("seconds").value(r.seconds);
        w.key("mb_per_s").value(mb_per_s);
        w.key("weighted_tensors").value(static_cast<std::uint64_t>(weighted));
        w.key("types").begin_object();
        for (const auto& [name, n] : counts) w.key(name).value(n);
        w.end_object();
        w.key("tensors").begin_array();
        for (const auto& p : r.tensors) {
            w.begin_object();
            w.key("name").value(p.name);
            w.key("from").value(tensor::type_name(p.from));
            w.key("to").value(tensor::type_name(p.to));
            w.key("weighted").value(p.weighted);
            if (!p.note.empty()) w.key("note").value(p.note);
            w.end_object();
        }
        w.end_array();
        w.key("warnings").begin_array();
        for (const auto& s : r.warnings) w.value(s);
        w.end_array();
        w.end_object();
        std::printf("%s\n", w.str().c_str());
    } else {
        std::string types;
        for (const auto& [name, n] : counts)
            types += (types.empty() ? "" : ", ") + std::to_string(n) + " " + name;
        std::printf(
            "%s: %s (%s), %zu tensors importance-weighted; %.1f MB of tensors -> %.1f MB file in "
            "%.2f s (%.1f MB/s)\n",
            out.c_str(), target->name, types.c_str(), weighted,
            static_cast<double>(r.input_bytes) / 1e6, static_cast<double>(r.output_bytes) / 1e6,
            r.seconds, mb_per_s);
    }
    return 0;
}

}  // namespace tokenscope::cli
