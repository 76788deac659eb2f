#pragma once
// Quantizing a whole GGUF model, llama-quantize style: a target (a plain type or a mixed
// recipe), a per-tensor type choice close to llama.cpp's, optional importance weights, and an
// atomic write (temporary file beside the output, renamed only when complete).
//
// Per-tensor rules (pure = false):
//  - tensors with fewer than 2 dims, or whose name does not end in ".weight", are copied as they
//    are (norms, biases, rope factors stay F32);
//  - output.weight (token_embd.weight when the output is tied to it): Q6_K for every target below
//    8 bits (Q8_0 when its rows are not a multiple of 256), the target itself for
//    F32/F16/BF16/Q8_0;
//  - Q2_K: attn_v gets Q4_K (Q3_K when fewer than 4 query heads share a KV head), ffn_down and
//    attn_output Q3_K;
//  - Q4_K_M / Q5_K_M: attn_v and ffn_down get Q6_K in the "more bits" layers (the first and last
//    eighth of the layers and every third one between: llama.cpp's use_more_bits); a fused
//    attn_qkv gets Q5_K (Q4_K_M) / Q6_K (Q5_K_M); everything else Q4_K / Q5_K;
//  - every other matrix: the target type.
// A row length that the chosen type's block does not divide falls back (Q2_K/Q3_K -> Q4_0,
// Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, then F16) with a warning naming the tensor.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/type.h"

namespace tokenscope::gguf {
class File;
struct TensorInfo;
}  // namespace tokenscope::gguf

namespace tokenscope::quant {

struct Imatrix;

struct QuantTarget {
    const char* name;         // "Q4_K_M"
    tensor::Type base;        // the type most matrices get
    std::uint32_t file_type;  // general.file_type (llama_ftype)
};

// Case-insensitive; nullopt when unknown.
std::optional<QuantTarget> parse_target(std::string_view name);
// "F32, F16, BF16, Q8_0, ..." for error messages and --help.
std::string target_names();

struct TensorPlan {
    std::string name;
    tensor::Type from;
    tensor::Type to;
    bool copy = false;      // bytes copied unchanged (not a matrix, or already the target type)
    bool weighted = false;  // quantized with importance weights
    std::string note;       // why `to` differs from the target's base type, if it does
};

// The type of every tensor of `model` for `target`. Warnings (row-length fallbacks) are
// appended to `warnings`.
std::vector<TensorPlan> plan_types(const gguf::File& model, const QuantTarget& target, bool pure,
                                   std::vector<std::string>& warnings);

struct QuantizeOptions {
    QuantTarget target;
    bool pure = false;  // every matrix gets the target's base type
    const Imatrix* imatrix = nullptr;
    std::string imatrix_path;  // recorded in the output's metadata
    int threads = 1;
    // Called before each tensor is converted (index, count, plan); may throw to cancel.
    std::function<void(std::size_t, std::size_t, const TensorPlan&)> progress;
    // Warnings (re-quantization, fallbacks) as they are found.
    std::function<void(const std::string&)> warn;
};

struct QuantizeResult {
    std::vector<TensorPlan> tensors;
    std::vector<std::string> warnings;
    std::uint64_t input_bytes = 0;   // tensor data read
    std::uint64_t output_bytes = 0;  // size of the written file
    double seconds = 0.0;
};

// Reads `input`, writes `output` atomically. Throws InvalidArgument (bad target, an imatrix
// from another model), FormatError (bad input), IoError (writing); `output` is then untouched.
QuantizeResult quantize_model(const std::string& input, const std::string& output,
                              const QuantizeOptions& options);

}  // namespace tokenscope::quant
