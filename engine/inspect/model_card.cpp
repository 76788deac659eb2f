#include "inspect/model_card.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <system_error>

#include "gguf/file.h"
#include "tensor/type.h"

namespace tokenscope::inspect {

namespace {

std::string lower(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
}

// `word` appears in `text` delimited by non-alphanumerics (or the ends).
bool has_word(const std::string& text, const std::string& word) {
    for (std::size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
        const bool left = at == 0 || !std::isalnum(static_cast<unsigned char>(text[at - 1]));
        const std::size_t end = at + word.size();
        const bool right =
            end == text.size() || !std::isalnum(static_cast<unsigned char>(text[end]));
        if (left && right) return true;
    }
    return false;
}

bool says_instruct(const std::string& text) {
    const std::string t = lower(text);
    return t.find("instruct") != std::string::npos || has_word(t, "chat") || has_word(t, "it");
}

// When general.file_type is absent: the type holding most of the weight bytes.
std::string dominant_type(const gguf::File& file) {
    std::map<std::string, std::uint64_t> bytes;
    for (const auto& t : file.tensors())
        bytes[std::string(tensor::type_name(t.type))] += t.byte_size;
    std::string best;
    std::uint64_t most = 0;
    for (const auto& [name, n] : bytes) {
        if (n > most) {
            most = n;
            best = name;
        }
    }
    return best;
}

}  // namespace

std::string quantization_name(std::uint64_t file_type) {
    // LLAMA_FTYPE_* values (llama.h); the gaps are retired types.
    switch (file_type) {
        case 0:
            return "F32";
        case 1:
            return "F16";
        case 2:
            return "Q4_0";
        case 3:
            return "Q4_1";
        case 7:
            return "Q8_0";
        case 8:
            return "Q5_0";
        case 9:
            return "Q5_1";
        case 10:
            return "Q2_K";
        case 11:
            return "Q3_K_S";
        case 12:
            return "Q3_K_M";
        case 13:
            return "Q3_K_L";
        case 14:
            return "Q4_K_S";
        case 15:
            return "Q4_K_M";
        case 16:
            return "Q5_K_S";
        case 17:
            return "Q5_K_M";
        case 18:
            return "Q6_K";
        case 32:
            return "BF16";
        default:
            return "";
    }
}

std::string format_file_size(std::uint64_t bytes) {
    const char* units[] = {"B", "kB", "MB", "GB", "TB"};
    double value = static_cast<double>(bytes);
    int unit = 0;
    while (value >= 1000.0 && unit < 4) {
        value /= 1000.0;
        ++unit;
    }
    char text[32];
    std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
    return text;
}

ModelCard read_model_card(const std::filesystem::path& path) {
    const gguf::File file = gguf::File::open(path.string());
    ModelCard card;
    card.path = path;
    const std::string stem = path.stem().string();
    card.name = file.optional_string("general.name", stem);
    if (card.name.empty()) card.name = stem;
    card.architecture = file.optional_string("general.architecture", "");
    card.file_bytes = file.file_size();
    for (const auto& t : file.tensors()) card.parameters += t.element_count;
    const std::uint64_t file_type = file.optional_uint("general.file_type", ~0ull);
    card.quantization = file_type == ~0ull ? "" : quantization_name(file_type);
    if (card.quantization.empty()) card.quantization = dominant_type(file);
    card.tokenizer = file.optional_string("tokenizer.ggml.model", "");
    card.has_chat_template = file.find("tokenizer.chat_template") != nullptr;
    card.instruct = says_instruct(file.optional_string("general.finetune", "")) ||
                    says_instruct(card.name) || says_instruct(stem);
    return card;
}

std::vector<ModelCard> scan_model_folder(const std::filesystem::path& dir) {
    std::vector<ModelCard> cards;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        if (entry.path().extension() != ".gguf") continue;
        if (!entry.is_regular_file(ec)) continue;
        try {
            cards.push_back(read_model_card(entry.path()));
        } catch (const std::exception& e) {
            ModelCard bad;
            bad.path = entry.path();
            bad.name = entry.path().stem().string();
            bad.error = e.what();
            cards.push_back(std::move(bad));
        }
    }
    std::sort(cards.begin(), cards.end(), [](const ModelCard& a, const ModelCard& b) {
        return lower(a.name) < lower(b.name) || (lower(a.name) == lower(b.name) && a.path < b.path);
    });
    return cards;
}

}  // namespace tokenscope::inspect
