// `tokenscope-cli chat`: an interactive terminal chat. The conversation is re-formatted with
// the model's chat template every turn and submitted under one conversation key, so the
// engine reuses the cache and prefills only the new turn (shown in each turn's timings).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>

#include "arguments.h"
#include "commands.h"
#include "generation_options.h"
#include "remote_commands.h"
#include "runtime/prompt_builder.h"
#include "util/error.h"

namespace tokenscope::cli {

int run_chat(int argc, char** argv, int first) {
    const Arguments args("chat",
                         join(join({{"model"}, {"system"}, {"template"}, {"think"}, {"n-predict"}},
                                   join(engine_option_specs(), speculation_option_specs())),
                              join(sampling_option_specs(), remote_option_specs())),
                         argc, argv, first);
    if (args.value("remote")) {
        if (args.value("model")) throw InvalidArgument("'chat': give --model or --remote, not both");
        return run_remote_chat(args);
    }
    const runtime::SamplingParams sampling = sampling_params(args);
    runtime::EngineOptions options = engine_options(args);
    apply_speculation_options(args, options);
    auto engine = runtime::Engine::load(args.required("model"), options);
    engine->warm_up();  // while the user types the first line
    runtime::PromptBuilder builder(*engine, args.value("template"));
    if (auto think = args.value("think")) {
        if (*think != "on" && *think != "off") throw InvalidArgument("'chat': option '--think' must be on or off");
        builder.set_enable_thinking(*think == "on");
    }
    const auto n_predict = static_cast<int>(args.number("n-predict").value_or(512));
    std::vector<tokenizer::ChatMessage> messages;
    if (auto system = args.value("system")) messages.push_back({"system", *system});

    std::fprintf(stderr, "tokenscope chat: %s (template: %s; %s). Type /quit to leave, /reset to start over.\n",
                 engine->config().name.c_str(), builder.description().c_str(), engine->backend_name().c_str());
    const std::string conversation = "terminal";
    std::string line;
    for (;;) {
        std::fputs("\n> ", stderr);
        if (!std::getline(std::cin, line) || line == "/quit") break;
        if (line == "/reset") {
            messages.erase(std::remove_if(messages.begin(), messages.end(), [](const auto& m) { return m.role != "system"; }),
                           messages.end());
            engine->drop_conversation(conversation);
            std::fputs("(conversation cleared)\n", stderr);
            continue;
        }
        if (line.empty()) continue;
        messages.push_back({"user", line});
        std::string warning;
        runtime::Request request = builder.chat(messages, &warning);
        if (!warning.empty()) std::fprintf(stderr, "warning: %s\n", warning.c_str());
        request.sampling = sampling;
        request.max_tokens = n_predict;
        request.conversation = conversation;
        engine->submit(std::move(request));
        std::string answer;
        runtime::Timings t;
        runtime::FinishReason reason = runtime::FinishReason::None;
        runtime::speculation::Stats spec;
        while (engine->has_work()) {
            for (const auto& e : engine->step()) {
                // Templates end the prompt with "Assistant:" or a newline; the answer's own
                // leading whitespace is not part of what the user reads.
                std::string text = e.text;
                if (answer.empty()) text.erase(0, text.find_first_not_of(" \n"));
                std::fputs(text.c_str(), stdout);
                std::fflush(stdout);
                answer += text;
                t = e.timings;
                if (e.finished) reason = e.reason;
                spec = e.speculation.stats;
            }
        }
        messages.push_back({"assistant", answer});
        const double tps = t.generated_tokens > 1 && t.decode_ms > 0
                               ? static_cast<double>(t.generated_tokens - 1) / (t.decode_ms / 1000.0)
                               : 0.0;
        std::fprintf(stderr,
                     "\n[prompt %lld tokens: %lld reused from the cache, %lld prefilled in %.0f ms; "
                     "%lld generated at %.1f tok/s; %s]\n",
                     static_cast<long long>(t.prompt_tokens), static_cast<long long>(t.reused_tokens),
                     static_cast<long long>(t.prefilled_tokens), t.prefill_ms,
                     static_cast<long long>(t.generated_tokens), tps, runtime::finish_reason_name(reason));
        if (options.speculation.mode != runtime::SpeculationMode::Off) {
            std::fprintf(stderr, "[speculation: %lld of %lld proposed tokens accepted (%.0f%%), %.2f per verification]\n",
                         static_cast<long long>(spec.accepted), static_cast<long long>(spec.proposed),
                         100.0 * spec.acceptance_rate(), spec.mean_accepted());
        }
    }
    return 0;
}

}  // namespace tokenscope::cli
