#pragma once
// Running a model over a calibration text to collect its importance matrix, as llama-imatrix
// does: non-overlapping windows of `ctx` tokens (each starting with BOS when the model wants
// one), every weight matrix's input activations squared and summed per column. Shared by
// `tokenscope-cli imatrix` and the app's Quantization window.
#include <cstdint>
#include <functional>
#include <string>

#include "quant/imatrix.h"
#include "runtime/engine.h"

namespace tokenscope::quant {

struct ImatrixProgress {
    std::uint32_t window = 0;  // windows done
    std::uint32_t windows = 0;
    std::int64_t tokens = 0;  // tokens run so far
    double tokens_per_second = 0;
    double perplexity = 0;  // of the text so far (a by-product of the forward passes)
};

struct ImatrixRunOptions {
    runtime::EngineOptions engine;  // device forced to CPU, kv_capacity_tokens set to ctx
    std::int64_t ctx = 512;
    std::size_t max_windows = 0;  // 0: the whole text
    std::string dataset;          // recorded in the imatrix (imatrix.datasets)
    // After each window; may throw to stop (the exception propagates, nothing is returned).
    std::function<void(const ImatrixProgress&)> progress;
};

struct ImatrixRun {
    Imatrix imatrix;
    std::uint32_t windows = 0;
    std::int64_t tokens = 0;
    double perplexity = 0;
    double seconds = 0;
};

// Throws IoError / FormatError for the model, InvalidArgument for a text under 2 tokens.
ImatrixRun compute_imatrix(const std::string& model_path, const std::string& text,
                           const ImatrixRunOptions& options);

}  // namespace tokenscope::quant
