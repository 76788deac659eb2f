#include "runtime/prompt_builder.h"

namespace tokenscope::runtime {

namespace {
tokenizer::ChatTemplate choose_template(const Engine& engine, const std::optional<std::string>& name) {
    if (name) return tokenizer::ChatTemplate::of_name(*name);
    return tokenizer::ChatTemplate::detect(engine.file().optional_string("tokenizer.chat_template", ""));
}
}  // namespace

PromptBuilder::PromptBuilder(const Engine& engine, const std::optional<std::string>& template_name)
    : engine_(engine), template_(choose_template(engine, template_name)) {}

Request PromptBuilder::raw(const std::string& text) const {
    const auto& tok = engine_.tokenizer();
    Request r;
    r.prompt = tok.encode(text, {.add_bos = tok.add_bos() && tok.bos_id() >= 0, .parse_special = false});
    return r;
}

Request PromptBuilder::chat(std::span<const tokenizer::ChatMessage> messages) const {
    const auto& tok = engine_.tokenizer();
    Request r;
    const std::string text = template_.format(messages, true);
    // The formatted text is encoded with control tokens parsed, so the template's markers
    // become single tokens. Known gap: a control-token string typed inside a message is parsed
    // too; per-segment encoding would close it.
    const bool bos = tok.add_bos() && tok.bos_id() >= 0 && !template_.template_writes_bos();
    r.prompt = tok.encode(text, {.add_bos = bos, .parse_special = true});
    for (const auto& stop : template_.stop_strings()) {
        if (auto id = tok.token_id(stop); id && tok.is_control(*id)) {
            r.stop_tokens.push_back(*id);
        } else {
            r.stop_strings.push_back(stop);
        }
    }
    return r;
}

}  // namespace tokenscope::runtime
