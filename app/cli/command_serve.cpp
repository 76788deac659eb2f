// `tokenscope-cli serve`: the model over the OpenAI API (app/server). The main thread only
// waits for Ctrl+C or a termination request (shutdown_signal.h: on POSIX the signals are blocked
// before any thread starts and sigwait()ed here, so shutdown runs as ordinary code, not in a
// signal handler; on Windows a console control handler wakes this thread).
#include <cstdio>
#include <filesystem>

#include "api_server.h"
#include "arguments.h"
#include "commands.h"
#include "generation_options.h"
#include "shutdown_signal.h"
#include "util/error.h"

namespace tokenscope::cli {

namespace {
int whole_option(const Arguments& args, const char* name, int fallback, int lo, int hi) {
    const auto v = args.number(name);
    if (!v) return fallback;
    if (*v != static_cast<double>(static_cast<long long>(*v)) || *v < lo || *v > hi) {
        throw InvalidArgument(std::string("'serve': option '--") + name +
                              "' must be a whole number from " + std::to_string(lo) + " to " +
                              std::to_string(hi) + ", got '" + *args.value(name) + "'");
    }
    return static_cast<int>(*v);
}
}  // namespace

int run_serve(int argc, char** argv, int first) {
    const Arguments args("serve",
                         join(join({{"model"},
                                    {"host"},
                                    {"port"},
                                    {"api-key"},
                                    {"parallel"},
                                    {"queue"},
                                    {"cors"},
                                    {"alias"},
                                    {"template"},
                                    {"max-body"}},
                                   join(engine_option_specs(), speculation_option_specs())),
                              sampling_option_specs()),
                         argc, argv, first);
    const std::string model = args.required("model");
    server::ServerOptions o;
    o.host = args.value("host").value_or("127.0.0.1");
    o.port = whole_option(args, "port", 8080, 0, 65535);
    o.api_key = args.value("api-key").value_or("");
    if (const char* env = std::getenv("TOKENSCOPE_API_KEY"); o.api_key.empty() && env)
        o.api_key = env;
    o.cors_origin = args.value("cors").value_or("");
    o.loop.parallel = whole_option(args, "parallel", 4, 1, 256);
    o.loop.queue = whole_option(args, "queue", 64, 0, 4096);
    o.max_body_bytes =
        static_cast<std::size_t>(whole_option(args, "max-body", 1 << 20, 1024, 1 << 30));
    o.model_id = args.value("alias").value_or(std::filesystem::path(model).stem().string());
    o.template_name = args.value("template");
    o.sampling = sampling_params(args);
    runtime::EngineOptions engine_opts = engine_options(args);
    apply_speculation_options(args, engine_opts);
    server::require_safe_bind(o);  // before spending seconds loading the model

    block_shutdown_signals();

    auto engine = runtime::Engine::load(model, engine_opts);
    engine->warm_up();  // the first client's first token then costs what later ones cost
    std::fprintf(stderr, "tokenscope serve: %s (%s), context %lld tokens, %d parallel, queue %d\n",
                 o.model_id.c_str(), engine->backend_name().c_str(),
                 static_cast<long long>(engine_opts.kv_capacity_tokens), o.loop.parallel,
                 o.loop.queue);
    server::ApiServer server(std::move(engine), o);
    const int port = server.start();
    const std::string shown_host =
        o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
    std::printf("listening on http://%s:%d\n", shown_host.c_str(), port);
    std::fflush(stdout);

    const char* why = wait_for_shutdown_signal();
    std::fprintf(stderr, "tokenscope serve: %s, shutting down\n", why);
    server.stop();
    return 0;
}

}  // namespace tokenscope::cli
