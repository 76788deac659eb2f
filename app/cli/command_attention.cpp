// `tokenscope-cli attention`: runs a prompt with attention capture on and writes the weights of
// the chosen layers and heads as JSON, CSV, PNG or SVG (by the --out extension), for slides and
// notebooks. The numbers are the engine's own AttentionCapture (f16 rows, as the GUI shows);
// the images are drawn by engine/inspect (no Qt in the CLI), in the GUI heatmap's colours.
#include <cstdio>
#include <string>
#include <vector>

#include "arguments.h"
#include "commands.h"
#include "generation_options.h"
#include "inspect/attention_export.h"
#include "runtime/prompt_builder.h"
#include "util/error.h"

namespace tokenscope::cli {

namespace {

// --layer/--head: one number, or absent for all; --head also takes "mean".
std::vector<int> pick(const Arguments& args, const char* name, int count, bool allow_mean) {
    const auto text = args.value(name);
    std::vector<int> out;
    if (!text) {
        for (int i = 0; i < count; ++i) out.push_back(i);
        return out;
    }
    if (allow_mean && *text == "mean") return {-1};
    const auto v = args.number(name);
    if (!v || *v != static_cast<int>(*v) || *v < 0 || *v >= count) {
        throw InvalidArgument(std::string("'attention': option '--") + name + "' must be 0 to " +
                              std::to_string(count - 1) + (allow_mean ? " or 'mean'" : "") +
                              " (got '" + *text + "')");
    }
    return {static_cast<int>(*v)};
}

}  // namespace

int run_attention(int argc, char** argv, int first) {
    const Arguments args("attention",
                         join(join({{"model"},
                                    {"prompt"},
                                    {"chat", false},
                                    {"template"},
                                    {"layer"},
                                    {"head"},
                                    {"n-predict"},
                                    {"out"},
                                    {"scale"},
                                    {"cell"}},
                                   engine_option_specs()),
                              sampling_option_specs()),
                         argc, argv, first);
    const std::string model = args.required("model");
    const std::string prompt = args.required("prompt");
    const std::string out = args.required("out");
    inspect::GridStyle style;
    if (auto s = args.value("scale")) style.scale = inspect::parse_weight_scale(*s);
    const double cell = args.number("cell").value_or(0);
    if (cell < 0 || cell > 64)
        throw InvalidArgument("'attention': option '--cell' must be 0 (automatic) to 64");
    style.cell = static_cast<int>(cell);
    const double n_predict = args.number("n-predict").value_or(0);
    if (n_predict < 0 || n_predict > 4096)
        throw InvalidArgument("'attention': option '--n-predict' must be 0 to 4096");

    runtime::SamplingParams sampling = sampling_params(args);
    if (!args.value("temp")) sampling.temperature = 0.0f;  // reproducible unless asked otherwise
    auto engine = runtime::Engine::load(model, engine_options(args));
    const int layers = static_cast<int>(engine->config().layers);
    const int heads = static_cast<int>(engine->config().heads);
    const std::vector<int> chosen_layers = pick(args, "layer", layers, false);
    const std::vector<int> chosen_heads = pick(args, "head", heads, true);

    const runtime::PromptBuilder builder(*engine, args.value("template"));
    runtime::Request request =
        args.flag("chat") ? builder.chat({{"user", prompt}}) : builder.raw(prompt);
    request.sampling = sampling;
    // The prompt's rows come from the prefill step, which also samples the first token; each
    // further token adds the row of the token before it. --n-predict 0 stops after that step.
    request.max_tokens = std::max(1, static_cast<int>(n_predict));
    request.speculate = false;
    request.capture.enabled = true;
    request.capture.layers = chosen_layers;
    request.capture.max_context =
        static_cast<std::int64_t>(request.prompt.size()) + request.max_tokens;
    std::vector<std::int32_t> tokens = request.prompt;
    const runtime::RequestId id = engine->submit(request);
    while (engine->has_work()) {
        for (const auto& e : engine->step()) {
            if (e.request == id && e.token >= 0 && n_predict > 0) tokens.push_back(e.token);
        }
    }
    const inspect::AttentionCapture* capture = engine->capture(id);
    if (!capture) throw Error("the engine kept no attention for this prompt");
    const std::int64_t rows = capture->rows();
    tokens.resize(static_cast<std::size_t>(
        std::min<std::int64_t>(rows, static_cast<std::int64_t>(tokens.size()))));

    inspect::AttentionExport data;
    data.model = model;
    data.model_layers = layers;
    data.model_heads = heads;
    data.token_ids = tokens;
    for (auto t : tokens) data.token_texts.push_back(engine->tokenizer().decode(std::span(&t, 1)));
    data.matrices = inspect::extract_matrices(*capture, chosen_layers, chosen_heads, rows);
    inspect::write_attention(out, data, style);
    std::fprintf(stderr, "%s: %lld tokens, %zu matrices (%zu layers x %zu heads)\n", out.c_str(),
                 static_cast<long long>(rows), data.matrices.size(), chosen_layers.size(),
                 chosen_heads.size());
    return 0;
}

}  // namespace tokenscope::cli
