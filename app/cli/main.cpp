// tokenscope-cli: the headless entry point. Output goes to stdout; logs and errors to stderr.
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <sstream>
#include <string>

#include "commands.h"
#include "util/error.h"
#include "util/log.h"
#include "version.h"

namespace {

// The commands dispatch() knows, for its errors.
const char* const kCommands =
    "inspect, tokenize, run, chat, serve, bench, bench-tokenizer, render-template, ppl, imatrix, "
    "quantize, quant-eval, make-model, selftest, kernel-lab, attention, devices";

// One source line per line of the text, as it prints:
// clang-format off
const char* const kUsage =
    "usage: tokenscope-cli [--log-level LEVEL] COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  inspect   --model FILE [--ram-gib N] [--json]\n"
    "            metadata, tensors and the memory budget of a GGUF file\n"
    "  tokenize  --model FILE --text TEXT [--bos] [--parse-special] [--json]\n"
    "            token ids of TEXT (space separated), or ids and pieces as JSON\n"
    "  tokenize  --model FILE --inp FILE.inp   ids of each llama.cpp test string, one line each\n"
    "  run       --model FILE --prompt TEXT [--chat [--template NAME]] [--n-predict N] [--json]\n"
    "            [--temp T --top-k K --top-p P --min-p M --repeat-penalty R --repeat-window N --seed S]\n"
    "            [--threads N --ctx N --kv-type f16|f32|q8 --batch N --device cpu|cuda|auto]\n"
    "            [--cuda-graphs on|off --split-k on|off --large-pages on|off]\n"
    "            [--speculative lookup|draft:FILE [--draft-k K]]\n"
    "            generate a continuation (or, with --chat, an answer) and stream it; --speculative:\n"
    "            proposals from the text so far (prompt lookup) or from a draft model with the same\n"
    "            vocabulary, checked in one forward pass (greedy output unchanged, sampling keeps the\n"
    "            model's distribution); K (1-14, default 8): most tokens proposed per step, adapted\n"
    "            to the acceptance rate\n"
    "  chat      --model FILE [--system TEXT] [--think on|off]\n"
    "            [--template gemma|llama2|llama3|chatml|mistral|phi3|zephyr|fallback]  (default: the model's own)\n"
    "            [sampling and engine options as for run]\n"
    "            interactive chat; each turn prefills only its new tokens\n"
    "  run|chat  --remote URL [--api-key KEY] [--remote-model NAME] [--prompt TEXT] [--n-predict N] [--json]\n"
    "            [--temp T --top-p P --top-k K --min-p M --repeat-penalty R --seed S]   (only these are sent)\n"
    "            the same against an OpenAI-compatible server (vLLM, SGLang, llama-server, Ollama, serve):\n"
    "            URL like http://host:8000/v1; --json adds per-token logprobs when the server gives them;\n"
    "            the key may also come from $TOKENSCOPE_API_KEY\n"
    "  serve     --model FILE [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--parallel 4] [--queue 64]\n"
    "            [--ctx N] [--cors ORIGIN] [--alias NAME] [--template NAME] [--max-body BYTES]\n"
    "            [sampling and engine options as for run: the defaults of requests that omit them]\n"
    "            an OpenAI-compatible HTTP server: /v1/chat/completions, /v1/completions (SSE streaming),\n"
    "            /v1/models, /health, /metrics (Prometheus), /tokenscope/v1/kv; --port 0 picks a free\n"
    "            port; a host other than loopback needs --api-key (or $TOKENSCOPE_API_KEY)\n"
    "  bench     --model FILE [--prompt-lengths 128,512] [--n-decode 64] [--decode-contexts 16,4096]\n"
    "            [--concurrency 1,8,32,64] [--repeats 3] [engine options as for run] [--json]\n"
    "            prefill and decode speed against the machine's measured ceilings (each prompt\n"
    "            length: one warm-up run, then the mean of --repeats runs)\n"
    "            --speculative lookup|draft:FILE [--draft-k K]: plain against speculative decoding on\n"
    "            fixed grounded and open-ended prompts (acceptance, tokens per verification, speedup)\n"
    "  bench-tokenizer --model FILE --file TEXT [--seconds S] [--json]\n"
    "            tokenizer encode/decode speed over a text file, in MB/s\n"
    "  kernel-lab [--op gemv|attention] [--json]\n"
    "            every variant of a CUDA kernel timed on the same inputs\n"
    "  attention --model FILE --prompt TEXT [--chat] [--layer L] [--head H|mean] [--n-predict N]\n"
    "            --out FILE.json|.csv|.png|.svg [--scale sqrt|linear|log] [--cell PX]\n"
    "            attention weights of a prompt (all layers/heads unless chosen): numbers or a heatmap grid\n"
    "  render-template (--template FILE.jinja | --model FILE.gguf) --context FILE.json [--date YYYY-MM-DD]\n"
    "            the prompt text a chat template makes of a JSON context (messages, ...)\n"
    "  ppl       --model FILE --file TEXT [--ctx N] [--json]\n"
    "            perplexity over a text file\n"
    "  make-model --out FILE [--type f16|q8_0|q4_k|...] [--width 1024 --layers 16 --heads 16\n"
    "            --kv-heads 4 --ffn 2816 --vocab 32000 --seed 1]   a synthetic Llama for benchmarks\n"
    "  imatrix   --model FILE --file CALIBRATION.txt --out FILE.imatrix [--ctx 512] [--chunks N] [--threads N]\n"
    "            importance matrix: mean squared input activation per column of each weight matrix\n"
    "            (llama.cpp's GGUF imatrix format)\n"
    "  quantize  --model IN --out OUT --type T [--imatrix FILE] [--pure] [--threads N] [--json]\n"
    "            T: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K, recipes Q4_K_M Q5_K_M;\n"
    "            output projection Q6_K, _M recipes raise attn_v/ffn_down (--pure: T everywhere)\n"
    "  quant-eval --base FILE --models A,B,... --file TEXT [--ctx 512] [--decode-tokens 32] [--threads N]\n"
    "            [--json|--markdown] [--plot FILE.png|.svg]   size, bits/weight, perplexity, KL divergence\n"
    "            vs base, top-1, tok/s; the plot: mean KL (log) against file size\n"
    "  selftest  --device cuda [--model FILE]   every CUDA op and whole-model logits against the CPU,\n"
    "            and speculative decoding on the GPU; --device cpu runs the speculative checks on the CPU\n"
    "  devices   [--json]\n"
    "            the compute devices this build can use\n"
    "\n"
    "global options:\n"
    "  --log-level trace|debug|info|warn|error|critical|off  (default: $TOKENSCOPE_LOG or warn)\n"
    "  --version, --help\n";
// clang-format on

// The usage entries of `command` (its lines in kUsage: an entry starts at column 2 with the
// command's name, or names joined by '|', and goes on over the more deeply indented lines
// after it), with the usage line and the global options; empty when no entry names it.
std::string command_usage(const std::string& command) {
    std::istringstream in(kUsage);
    std::string line, entries, globals;
    bool in_entry = false, in_globals = false;
    while (std::getline(in, line)) {
        if (line == "global options:") in_globals = true;
        if (in_globals) {
            globals += line + "\n";
            continue;
        }
        const bool starts_entry =
            line.size() > 2 && line.compare(0, 2, "  ") == 0 && line[2] != ' ';
        if (starts_entry) {
            const std::string names = line.substr(2, line.find(' ', 2) - 2);
            in_entry = false;
            std::istringstream split(names);
            for (std::string name; std::getline(split, name, '|');) in_entry |= name == command;
        } else if (line.compare(0, 3, "   ") != 0) {
            in_entry = false;
        }
        if (in_entry) entries += line + "\n";
    }
    if (entries.empty()) return {};
    return "usage: tokenscope-cli [--log-level LEVEL] " + command + " [options]\n\n" + entries +
           "\n" + globals;
}

int dispatch(int argc, char** argv) {
    int first = 1;
    std::optional<std::string> log_level;
    while (first < argc) {
        const std::string arg = argv[first];
        if (arg == "--help" || arg == "-h") {
            std::fputs(kUsage, stdout);
            return 0;
        }
        if (arg == "--version") {
            std::printf("tokenscope-cli %s\n", TOKENSCOPE_VERSION);
            return 0;
        }
        if (arg == "--log-level") {
            if (first + 1 >= argc) throw tokenscope::InvalidArgument("--log-level needs a value");
            log_level = argv[first + 1];
            first += 2;
            continue;
        }
        if (arg.rfind("--log-level=", 0) == 0) {
            log_level = arg.substr(std::strlen("--log-level="));
            ++first;
            continue;
        }
        break;
    }
    tokenscope::log::configure(log_level);
    if (first >= argc) {
        throw tokenscope::InvalidArgument(std::string("no command given (commands: ") + kCommands +
                                          "; see --help)");
    }
    const std::string command = argv[first];
    // COMMAND --help (anywhere among its options) or COMMAND -h (first): that command's usage.
    for (int i = first + 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--help" || (arg == "-h" && i == first + 1)) {
            const std::string usage = command_usage(command);
            if (usage.empty()) break;  // an unknown command: the error below names it
            std::fputs(usage.c_str(), stdout);
            return 0;
        }
    }
    if (command == "inspect") return tokenscope::cli::run_inspect(argc, argv, first + 1);
    if (command == "tokenize") return tokenscope::cli::run_tokenize(argc, argv, first + 1);
    if (command == "devices") return tokenscope::cli::run_devices(argc, argv, first + 1);
    if (command == "run") return tokenscope::cli::run_run(argc, argv, first + 1);
    if (command == "chat") return tokenscope::cli::run_chat(argc, argv, first + 1);
    if (command == "serve") {
#ifdef TOKENSCOPE_HAVE_SERVER
        return tokenscope::cli::run_serve(argc, argv, first + 1);
#else
        throw tokenscope::InvalidArgument(
            "'serve': this build has no server (it was built without cpp-httplib and nlohmann-json; see tools/setup-deps)");
#endif
    }
    if (command == "bench") return tokenscope::cli::run_bench(argc, argv, first + 1);
    if (command == "bench-tokenizer") return tokenscope::cli::run_bench_tokenizer(argc, argv, first + 1);
    if (command == "render-template") return tokenscope::cli::run_render_template(argc, argv, first + 1);
    if (command == "ppl") return tokenscope::cli::run_ppl(argc, argv, first + 1);
    if (command == "imatrix") return tokenscope::cli::run_imatrix(argc, argv, first + 1);
    if (command == "quantize") return tokenscope::cli::run_quantize(argc, argv, first + 1);
    if (command == "quant-eval") return tokenscope::cli::run_quant_eval(argc, argv, first + 1);
    if (command == "make-model") return tokenscope::cli::run_make_model(argc, argv, first + 1);
    if (command == "selftest") return tokenscope::cli::run_selftest(argc, argv, first + 1);
    if (command == "kernel-lab") return tokenscope::cli::run_kernel_lab(argc, argv, first + 1);
    if (command == "attention") return tokenscope::cli::run_attention(argc, argv, first + 1);
    throw tokenscope::InvalidArgument("unknown command '" + command + "' (commands: " + kCommands +
                                      "; see --help)");
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return dispatch(argc, argv);
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "tokenscope-cli: error: out of memory\n");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tokenscope-cli: error: %s\n", e.what());
    }
    return 1;
}
