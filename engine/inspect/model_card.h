#pragma once
// What a model picker shows about a GGUF file without loading it: its name, architecture,
// size, quantization, parameter count and whether it is an instruct (chat-tuned) model. Read
// from the metadata and tensor table only (the file is mapped and validated, no weights are
// touched), so a folder of models is listed in milliseconds per file.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tokenscope::inspect {

struct ModelCard {
    std::filesystem::path path;
    std::string name;          // general.name, else the file name without ".gguf"
    std::string architecture;  // general.architecture
    std::string quantization;  // "Q4_K_M", "Q4_1", "F16", ... (see quantization_name)
    std::uint64_t file_bytes = 0;
    std::int64_t parameters = 0;  // elements of all tensors
    std::string tokenizer;        // tokenizer.ggml.model ("llama", "gpt2", ...), "" when absent
    bool has_chat_template = false;
    // Chat-tuned: general.finetune, general.name or the file name says "instruct", "chat" or
    // "it" as a word (Gemma's "-it"). Base models rarely say so, and a template alone does not
    // tell (base GGUFs often carry one), so this is a naming rule, shown as such in the UI.
    bool instruct = false;
    std::string error;  // non-empty when the file could not be read; the other fields are empty
};

// Throws IoError / FormatError for a file that is not a valid GGUF.
ModelCard read_model_card(const std::filesystem::path& path);

// Every *.gguf in `dir` (not recursive), sorted by name; unreadable files are listed with
// `error` set instead of failing the scan. A missing directory gives an empty list.
std::vector<ModelCard> scan_model_folder(const std::filesystem::path& dir);

// llama.cpp's general.file_type numbering (LLAMA_FTYPE_*) as the name users know; "" for
// values it does not define.
std::string quantization_name(std::uint64_t file_type);

// "98.4 MB" style, decimal units (as file managers show file sizes).
std::string format_file_size(std::uint64_t bytes);

}  // namespace tokenscope::inspect
