#pragma once
// `run --remote URL` and `chat --remote URL`: the same commands against a model served over
// the OpenAI API (vLLM, SGLang, llama-server, Ollama, `tokenscope-cli serve`) instead of a
// local GGUF. Only the sampling options the user gave are sent; the server's defaults rule
// the rest.
#include <vector>

#include "arguments.h"

namespace tokenscope::cli {

// --remote URL --api-key KEY --remote-model NAME
std::vector<OptionSpec> remote_option_specs();

// Builds without the HTTP libraries throw InvalidArgument saying so.
int run_remote_run(const Arguments& args);
int run_remote_chat(const Arguments& args);

}  // namespace tokenscope::cli
