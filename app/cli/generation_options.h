#pragma once
// Options shared by the commands that generate text (run, chat, bench, ppl): the engine's
// settings and the sampling parameters, parsed and validated from the command line.
#include <vector>

#include "arguments.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"

namespace tokenscope::cli {

// --threads N --ctx N --kv-type f16|f32|q8 --batch N
std::vector<OptionSpec> engine_option_specs();
runtime::EngineOptions engine_options(const Arguments& args);

// --speculative off|lookup|draft:PATH --draft-k K (run, chat, bench)
std::vector<OptionSpec> speculation_option_specs();
// Sets options.speculation from them (unchanged when absent).
void apply_speculation_options(const Arguments& args, runtime::EngineOptions& options);

// --temp --top-k --top-p --min-p --repeat-penalty --repeat-window --seed
std::vector<OptionSpec> sampling_option_specs();
runtime::SamplingParams sampling_params(const Arguments& args);

// Appends `extra` to `specs`.
std::vector<OptionSpec> join(std::vector<OptionSpec> specs, const std::vector<OptionSpec>& extra);

}  // namespace tokenscope::cli
