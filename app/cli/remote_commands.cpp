#include "remote_commands.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "util/error.h"

#ifdef TOKENSCOPE_HAVE_REMOTE
#include <nlohmann/json.hpp>

#include "remote_engine.h"
#endif

namespace tokenscope::cli {

std::vector<OptionSpec> remote_option_specs() {
    return {{"remote"}, {"api-key"}, {"remote-model"}};
}

#ifndef TOKENSCOPE_HAVE_REMOTE

int run_remote_run(const Arguments&) {
    throw InvalidArgument(
        "--remote: this tokenscope-cli was built without cpp-httplib and nlohmann-json");
}
int run_remote_chat(const Arguments& args) {
    return run_remote_run(args);
}

#else

namespace {

remote::RemoteOptions remote_options(const Arguments& args) {
    remote::RemoteOptions o;
    o.url = *args.value("remote");
    if (auto key = args.value("api-key")) {
        o.api_key = *key;
    } else if (const char* env = std::getenv("TOKENSCOPE_API_KEY")) {
        o.api_key = env;
    }
    o.model = args.value("remote-model").value_or("");
    return o;
}

// Only what the user set: a server's own defaults (generation_config in vLLM, Ollama's
// Modelfile) are the model's intended ones.
void apply_sampling(const Arguments& args, remote::ChatRequest& r) {
    if (auto v = args.number("temp")) r.temperature = *v;
    if (auto v = args.number("top-p")) r.top_p = *v;
    if (auto v = args.number("top-k")) r.top_k = static_cast<int>(*v);
    if (auto v = args.number("min-p")) r.min_p = *v;
    if (auto v = args.number("repeat-penalty")) r.repetition_penalty = *v;
    if (auto v = args.number("seed")) {
        if (*v < 0 || *v != std::floor(*v))
            throw InvalidArgument("option '--seed' must be a whole number >= 0");
        r.seed = static_cast<std::uint64_t>(*v);
    }
}

int n_predict(const Arguments& args, int fallback) {
    const auto n = args.number("n-predict").value_or(fallback);
    if (n < 1 || n > 1e6 || n != std::floor(n))
        throw InvalidArgument("option '--n-predict' must be 1 to 1000000");
    return static_cast<int>(n);
}

void print_notices(const remote::ChatResult& result) {
    for (const auto& n : result.notices) std::fprintf(stderr, "note: %s\n", n.c_str());
}

nlohmann::json token_json(const remote::RemoteToken& t) {
    nlohmann::json j = {{"text", t.text}, {"token", t.token}, {"ms", t.token_ms}};
    if (t.id >= 0) j["id"] = t.id;
    if (t.logprob) j["logprob"] = *t.logprob;
    if (!t.top.empty()) {
        nlohmann::json top = nlohmann::json::array();
        for (const auto& c : t.top) {
            nlohmann::json k = {{"token", c.text}, {"logprob", c.logprob}};
            if (c.id >= 0) k["id"] = c.id;
            top.push_back(std::move(k));
        }
        j["top_logprobs"] = std::move(top);
    }
    return j;
}

}  // namespace

int run_remote_run(const Arguments& args) {
    const bool json = args.flag("json");
    remote::RemoteEngine engine(remote_options(args));
    const auto& model = engine.connect();
    remote::ChatRequest request;
    request.messages = {{"user", args.required("prompt")}};
    request.max_tokens = n_predict(args, 128);
    apply_sampling(args, request);
    nlohmann::json tokens = nlohmann::json::array();
    const auto result = engine.chat(request, [&](const remote::RemoteToken& t) {
        if (json) {
            if (t.has_logprobs) tokens.push_back(token_json(t));
            return;
        }
        std::fputs(t.text.c_str(), stdout);
        std::fflush(stdout);
    });
    if (json) {
        nlohmann::json out = {{"server", engine.url().origin() + engine.url().prefix},
                              {"model", model.id},
                              {"text", result.text},
                              {"finish_reason", result.finish_reason},
                              {"logprobs", result.logprobs},
                              {"timings",
                               {{"ttft_ms", result.ttft_ms},
                                {"total_ms", result.total_ms},
                                {"generated_tokens", result.token_count()},
                                {"tokens_per_s", result.tokens_per_s()}}},
                              {"notices", result.notices}};
        if (result.logprobs) out["tokens"] = std::move(tokens);
        if (result.prompt_tokens) out["timings"]["prompt_tokens"] = *result.prompt_tokens;
        std::printf("%s\n",
                    out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
        std::fprintf(stderr,
                     "\n[%s on %s: first token after %.0f ms; %lld tokens, %.1f tok/s; %s]\n",
                     model.id.c_str(), engine.url().origin().c_str(), result.ttft_ms,
                     static_cast<long long>(result.token_count()), result.tokens_per_s(),
                     result.finish_reason.c_str());
        print_notices(result);
    }
    return 0;
}

int run_remote_chat(const Arguments& args) {
    remote::RemoteEngine engine(remote_options(args));
    const auto& model = engine.connect();
    remote::ChatRequest request;
    request.max_tokens = n_predict(args, 512);
    request.top_logprobs = 0;  // the terminal shows text only
    apply_sampling(args, request);
    if (auto system = args.value("system")) request.messages.push_back({"system", *system});
    std::fprintf(stderr, "tokenscope chat: %s on %s. Type /quit to leave, /reset to start over.\n",
                 model.id.c_str(), (engine.url().origin() + engine.url().prefix).c_str());
    for (std::string line;;) {
        std::fputs("\n> ", stderr);
        if (!std::getline(std::cin, line) || line == "/quit") break;
        if (line == "/reset") {
            std::erase_if(request.messages, [](const auto& m) { return m.role != "system"; });
            std::fputs("(conversation cleared)\n", stderr);
            continue;
        }
        if (line.empty()) continue;
        request.messages.push_back({"user", line});
        remote::ChatResult result;
        try {
            result = engine.chat(request, [](const remote::RemoteToken& t) {
                std::fputs(t.text.c_str(), stdout);
                std::fflush(stdout);
            });
        } catch (const remote::RemoteError& e) {
            // The conversation survives a failed turn: the user may retry.
            request.messages.pop_back();
            std::fprintf(stderr, "\nerror: %s\n", e.what());
            continue;
        }
        request.messages.push_back({"assistant", result.text});
        std::fprintf(stderr, "\n[first token after %.0f ms; %lld tokens at %.1f tok/s; %s]\n",
                     result.ttft_ms, static_cast<long long>(result.token_count()),
                     result.tokens_per_s(), result.finish_reason.c_str());
        print_notices(result);
    }
    return 0;
}

#endif

}  // namespace tokenscope::cli
