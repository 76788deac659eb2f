// `tokenscope-cli run`: one prompt in, the model's continuation streamed out.
#include <cstdio>

#include "arguments.h"
#include "commands.h"
#include "generation_options.h"
#include "remote_commands.h"
#include "runtime/prompt_builder.h"
#include "util/error.h"
#include "util/json_writer.h"

namespace tokenscope::cli {

int run_run(int argc, char** argv, int first) {
    const Arguments args("run",
                         join(join({{"model"}, {"prompt"}, {"chat", false}, {"template"}, {"n-predict"}, {"json", false}, {"dump-logits"}},
                                   join(engine_option_specs(), speculation_option_specs())),
                              join(sampling_option_specs(), remote_option_specs())),
                         argc, argv, first);
    if (args.value("remote")) {
        if (args.value("model")) throw InvalidArgument("'run': give --model or --remote, not both");
        return run_remote_run(args);
    }
    const std::string model = args.required("model");
    const std::string prompt = args.required("prompt");
    const runtime::SamplingParams sampling = sampling_params(args);
    runtime::EngineOptions options = engine_options(args);
    apply_speculation_options(args, options);
    const auto n_predict = args.number("n-predict").value_or(128);
    if (n_predict < 0 || n_predict > 1e6) throw InvalidArgument("'run': option '--n-predict' must be 0 to 1000000");
    const bool json = args.flag("json");
    const bool chat = args.flag("chat");

    auto engine = runtime::Engine::load(model, options);
    const runtime::PromptBuilder builder(*engine, args.value("template"));
    runtime::Request request = chat ? builder.chat({{"user", prompt}}) : builder.raw(prompt);
    request.sampling = sampling;
    request.max_tokens = static_cast<int>(n_predict);
    if (auto dump = args.value("dump-logits")) {
        // The logits at the prompt's last position, raw float32, for comparing engines.
        runtime::ForwardOutputs out;
        const kv::SeqId seq = engine->new_sequence_id();
        if (!engine->kv().allocate_slots(seq, static_cast<int>(request.prompt.size()))) throw Error("prompt too long");
        runtime::Batch batch;
        batch.chunks.push_back({seq, request.prompt, 0, runtime::LogitsWanted::Last, nullptr});
        engine->forward(batch, out);
        engine->kv().free_sequence(seq);
        std::FILE* f = std::fopen(dump->c_str(), "wb");
        if (!f) throw IoError(*dump + ": cannot open for writing");
        std::fwrite(out.logits.data(), sizeof(float), out.logits.size(), f);
        std::fclose(f);
    }
    engine->submit(std::move(request));

    std::vector<std::int32_t> tokens;
    std::string text;
    runtime::Timings timings;
    runtime::FinishReason reason = runtime::FinishReason::None;
    runtime::speculation::Stats spec;
    while (engine->has_work()) {
        for (const auto& e : engine->step()) {
            if (e.token >= 0 && e.reason != runtime::FinishReason::Eos && e.reason != runtime::FinishReason::StopToken) {
                tokens.push_back(e.token);
            }
            std::string delta = e.text;
            if (chat && text.empty()) delta.erase(0, delta.find_first_not_of(" \n"));  // see chat
            text += delta;
            timings = e.timings;
            if (!json) {
                std::fputs(delta.c_str(), stdout);
                std::fflush(stdout);
            }
            if (e.finished) reason = e.reason;
            spec = e.speculation.stats;
        }
    }
    const bool speculating = options.speculation.mode != runtime::SpeculationMode::Off;
    const double decode_tps = timings.generated_tokens > 1 && timings.decode_ms > 0
                                  ? static_cast<double>(timings.generated_tokens - 1) / (timings.decode_ms / 1000.0)
                                  : 0.0;
    if (json) {
        JsonWriter w;
        w.begin_object();
        w.key("tokens").begin_array();
        for (auto t : tokens) w.value(static_cast<std::int64_t>(t));
        w.end_array();
        w.key("text").value(text);
        w.key("finish_reason").value(runtime::finish_reason_name(reason));
        w.key("timings").begin_object();
        w.key("prompt_tokens").value(timings.prompt_tokens);
        w.key("prefill_ms").value(timings.prefill_ms);
        w.key("decode_ms").value(timings.decode_ms);
        w.key("generated_tokens").value(timings.generated_tokens);
        w.key("tokens_per_s").value(decode_tps);
        w.end_object();
        if (speculating) {
            w.key("speculation").begin_object();
            w.key("mode").value(runtime::speculation_mode_name(options.speculation.mode));
            w.key("max_k").value(options.speculation.max_k);
            w.key("verifications").value(spec.verifications);
            w.key("proposed").value(spec.proposed);
            w.key("accepted").value(spec.accepted);
            w.key("acceptance_rate").value(spec.acceptance_rate());
            w.key("mean_accepted").value(spec.mean_accepted());
            w.end_object();
        }
        w.end_object();
        std::printf("%s\n", w.str().c_str());
    } else {
        std::fprintf(stderr, "\n[%lld prompt tokens, prefill %.0f ms; %lld tokens, %.1f tok/s; %s]\n",
                     static_cast<long long>(timings.prompt_tokens), timings.prefill_ms,
                     static_cast<long long>(timings.generated_tokens), decode_tps,
                     runtime::finish_reason_name(reason));
        if (speculating) {
            std::fprintf(stderr, "[speculation %s: %lld verifications, %lld of %lld proposed tokens accepted (%.0f%%)]\n",
                         runtime::speculation_mode_name(options.speculation.mode),
                         static_cast<long long>(spec.verifications), static_cast<long long>(spec.accepted),
                         static_cast<long long>(spec.proposed), 100.0 * spec.acceptance_rate());
        }
    }
    return 0;
}

}  // namespace tokenscope::cli
