#include "tokenizer/chat_template.h"

#include <array>
#include <utility>

#include <fmt/format.h>

#include "util/error.h"

namespace tokenscope::tokenizer {

namespace {

struct KindName {
    ChatTemplateKind kind;
    const char* name;
};

constexpr std::array<KindName, 8> kNames{{
    {ChatTemplateKind::Gemma, "gemma"},
    {ChatTemplateKind::Llama2, "llama2"},
    {ChatTemplateKind::Llama3, "llama3"},
    {ChatTemplateKind::ChatML, "chatml"},
    {ChatTemplateKind::Mistral, "mistral"},
    {ChatTemplateKind::Phi3, "phi3"},
    {ChatTemplateKind::Zephyr, "zephyr"},
    {ChatTemplateKind::Fallback, "fallback"},
}};

bool contains(std::string_view haystack, std::string_view needle) {
    return haystack.find(needle) != std::string_view::npos;
}

// Jinja's `trim` filter / Python's str.strip(), restricted to ASCII whitespace.
std::string_view trim(std::string_view s) {
    constexpr std::string_view kSpace = " \t\n\r\f\v";
    const auto first = s.find_first_not_of(kSpace);
    if (first == std::string_view::npos) return {};
    const auto last = s.find_last_not_of(kSpace);
    return s.substr(first, last - first + 1);
}

bool is_system(const ChatMessage& m) {
    return m.role == "system";
}
bool is_user(const ChatMessage& m) {
    return m.role == "user";
}

// Rejects unknown roles, and a system message anywhere but first for the families whose format
// has no system turn of its own.
void check_roles(const char* family, std::span<const ChatMessage> messages,
                 bool system_only_first) {
    for (std::size_t i = 0; i < messages.size(); ++i) {
        const auto& role = messages[i].role;
        if (role != "system" && role != "user" && role != "assistant")
            throw InvalidArgument(fmt::format(
                "chat template {}: message {} has role \"{}\"; the roles are system, user and "
                "assistant",
                family, i, role));
        if (system_only_first && i > 0 && role == "system")
            throw InvalidArgument(fmt::format(
                "chat template {}: message {} has role \"system\"; this format takes a system "
                "message only as the first message",
                family, i));
    }
}

// Splits off a leading system message: the families below fold it into another turn.
std::pair<const ChatMessage*, std::span<const ChatMessage>> split_system(
    std::span<const ChatMessage> messages) {
    if (!messages.empty() && is_system(messages.front()))
        return {&messages.front(), messages.subspan(1)};
    return {nullptr, messages};
}

std::string format_gemma(std::span<const ChatMessage> messages, bool add_generation_prompt) {
    const auto [system, turns] = split_system(messages);
    std::string out = "<bos>";
    for (std::size_t i = 0; i < turns.size(); ++i) {
        out += "<start_of_turn>";
        out += is_user(turns[i]) ? "user" : "model";
        out += '\n';
        // The system text is not trimmed; the turn's own content is.
        if (i == 0 && system) out += system->content + "\n\n";
        out += trim(turns[i].content);
        out += "<end_of_turn>\n";
    }
    if (add_generation_prompt) out += "<start_of_turn>model\n";
    return out;
}

std::string format_llama2(std::span<const ChatMessage> messages) {
    const auto [system, turns] = split_system(messages);
    std::string out;
    for (std::size_t i = 0; i < turns.size(); ++i) {
        std::string content = turns[i].content;
        if (i == 0 && system) content = "<<SYS>>\n" + system->content + "\n<</SYS>>\n\n" + content;
        const auto body = trim(content);  // trims the whole turn, system block included
        if (is_user(turns[i])) {
            out += "<s>[INST] ";
            out += body;
            out += " [/INST]";
        } else {
            out += ' ';
            out += body;
            out += " </s>";
        }
    }
    return out;
}

std::string format_llama3(std::span<const ChatMessage> messages, bool add_generation_prompt) {
    std::string out = "<|begin_of_text|>";
    for (const auto& m : messages) {
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
        out += trim(m.content);
        out += "<|eot_id|>";
    }
    if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return out;
}

std::string format_chatml(std::span<const ChatMessage> messages, bool add_generation_prompt) {
    std::string out;
    for (const auto& m : messages)
        out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    if (add_generation_prompt) out += "<|im_start|>assistant\n";
    return out;
}

std::string format_mistral(std::span<const ChatMessage> messages) {
    const auto [system, turns] = split_system(messages);
    std::string out = "<s>";
    for (std::size_t i = 0; i < turns.size(); ++i) {
        if (is_user(turns[i])) {
            out += "[INST] ";
            if (system && i + 1 == turns.size()) out += system->content + "\n\n";
            out += turns[i].content + "[/INST]";
        } else {
            out += ' ';
            out += trim(turns[i].content);
            out += "</s>";
        }
    }
    return out;
}

std::string format_phi3(std::span<const ChatMessage> messages, bool add_generation_prompt) {
    std::string out;
    for (const auto& m : messages) out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
    out += add_generation_prompt ? "<|assistant|>\n" : "<|endoftext|>";
    return out;
}

std::string format_zephyr(std::span<const ChatMessage> messages, bool add_generation_prompt) {
    std::string out;
    for (const auto& m : messages) out += "<|" + m.role + "|>\n" + m.content + "</s>\n";
    if (add_generation_prompt) out += "<|assistant|>\n";
    return out;
}

std::string format_fallback(std::span<const ChatMessage> messages, bool add_generation_prompt) {
    std::string out;
    for (const auto& m : messages) {
        out += is_system(m) ? "System: " : is_user(m) ? "User: " : "Assistant: ";
        out += trim(m.content);
        out += "\n\n";
    }
    if (add_generation_prompt) out += "Assistant:";
    return out;
}

}  // namespace

ChatTemplate ChatTemplate::detect(std::string_view src, std::string_view architecture) {
    using K = ChatTemplateKind;
    // Most specific first: ChatML templates sometimes mention other families' tokens in
    // comments or tool sections, the others do not mention <|im_start|>.
    if (contains(src, "<|im_start|>")) return ChatTemplate(K::ChatML);
    if (contains(src, "<start_of_turn>")) return ChatTemplate(K::Gemma);
    if (contains(src, "<|start_header_id|>")) return ChatTemplate(K::Llama3);
    if (contains(src, "[INST]"))
        return ChatTemplate(contains(src, "<<SYS>>") ? K::Llama2 : K::Mistral);
    // Phi-3 templates build the role tag as '<|' + role + '|>' and may never spell out
    // "<|user|>", but always end turns with "<|end|>"; Zephyr's end with eos_token.
    if (contains(src, "<|end|>") && (contains(src, "<|user|>") || contains(src, "<|assistant|>")))
        return ChatTemplate(K::Phi3);
    if (contains(src, "<|user|>")) return ChatTemplate(K::Zephyr);
    if (architecture.starts_with("gemma")) return ChatTemplate(K::Gemma);
    return ChatTemplate(K::Fallback);
}

ChatTemplate ChatTemplate::of_kind(ChatTemplateKind kind) {
    return ChatTemplate(kind);
}

ChatTemplate ChatTemplate::of_name(std::string_view name) {
    std::string known;
    for (const auto& entry : kNames) {
        if (name == entry.name) return ChatTemplate(entry.kind);
        if (!known.empty()) known += ", ";
        known += entry.name;
    }
    throw InvalidArgument(
        fmt::format("unknown chat template \"{}\"; the known ones are {}", name, known));
}

const char* ChatTemplate::name() const {
    for (const auto& entry : kNames)
        if (entry.kind == kind_) return entry.name;
    return "fallback";
}

std::string ChatTemplate::format(std::span<const ChatMessage> messages,
                                 bool add_generation_prompt) const {
    using K = ChatTemplateKind;
    const bool folds_system = kind_ == K::Gemma || kind_ == K::Llama2 || kind_ == K::Mistral;
    check_roles(name(), messages, folds_system);
    switch (kind_) {
        case K::Gemma:
            return format_gemma(messages, add_generation_prompt);
        case K::Llama2:
            return format_llama2(messages);
        case K::Llama3:
            return format_llama3(messages, add_generation_prompt);
        case K::ChatML:
            return format_chatml(messages, add_generation_prompt);
        case K::Mistral:
            return format_mistral(messages);
        case K::Phi3:
            return format_phi3(messages, add_generation_prompt);
        case K::Zephyr:
            return format_zephyr(messages, add_generation_prompt);
        case K::Fallback:
            break;
    }
    return format_fallback(messages, add_generation_prompt);
}

std::vector<std::string> ChatTemplate::stop_strings() const {
    using K = ChatTemplateKind;
    switch (kind_) {
        case K::Gemma:
            return {"<end_of_turn>", "<eos>"};
        case K::Llama2:
            return {"</s>"};
        case K::Llama3:
            return {"<|eot_id|>", "<|end_of_text|>"};
        case K::ChatML:
            return {"<|im_end|>", "<|endoftext|>"};
        case K::Mistral:
            return {"</s>"};
        case K::Phi3:
            return {"<|end|>", "<|endoftext|>"};
        case K::Zephyr:
            return {"</s>"};
        case K::Fallback:
            break;
    }
    return {"\nUser:"};
}

bool ChatTemplate::template_writes_bos() const {
    using K = ChatTemplateKind;
    return kind_ == K::Gemma || kind_ == K::Llama2 || kind_ == K::Llama3 || kind_ == K::Mistral;
}

}  // namespace tokenscope::tokenizer
