#include "runtime/prompt_builder.h"

#include <spdlog/spdlog.h>

namespace tokenscope::runtime {

namespace {

std::string token_text(const tokenizer::Tokenizer& tok, std::int32_t id) {
    return id >= 0 ? tok.piece(id) : std::string();
}

}  // namespace

PromptBuilder::PromptBuilder(const Engine& engine, const std::optional<std::string>& template_name)
    : engine_(engine), family_(tokenizer::ChatTemplate::of_kind(tokenizer::ChatTemplateKind::Fallback)) {
    const std::string source = engine.file().optional_string("tokenizer.chat_template", "");
    file_has_template_ = !source.empty();
    template_reads_thinking_ = source.find("enable_thinking") != std::string::npos;
    if (template_name) {
        family_ = tokenizer::ChatTemplate::of_name(*template_name);
        family_chosen_by_user_ = true;
        return;
    }
    family_ = tokenizer::ChatTemplate::detect(source, engine.config().architecture);
    if (!file_has_template_) return;
    try {
        model_template_.emplace(source);
    } catch (const jinja::TemplateError& e) {
        template_problem_ = std::string("the model's chat template cannot be used (") + e.what() + "); using the " +
                            family_.name() + " format instead";
        spdlog::warn("{}", template_problem_);
    }
}

std::string PromptBuilder::description() const {
    if (family_chosen_by_user_) return std::string(family_.name()) + " (chosen)";
    if (model_template_) return std::string("model's own (") + family_.name() + " family)";
    if (!file_has_template_) return std::string(family_.name()) + " (no template in the file)";
    return std::string(family_.name()) + " (the model's template failed to parse)";
}

Request PromptBuilder::raw(const std::string& text) const {
    const auto& tok = engine_.tokenizer();
    Request r;
    r.prompt = tok.encode(text, {.add_bos = tok.add_bos() && tok.bos_id() >= 0, .parse_special = false});
    return r;
}

std::string PromptBuilder::render_model_template(std::span<const tokenizer::ChatMessage> messages) const {
    const auto& tok = engine_.tokenizer();
    using jinja::Value;
    jinja::Array list;
    for (const auto& m : messages) {
        jinja::Object message;
        message.set("role", Value::from(m.role));
        message.set("content", Value::from(m.content));
        list.push_back(Value::from(std::move(message)));
    }
    // The variables transformers' apply_chat_template passes.
    jinja::Object context;
    context.set("messages", Value::from(std::move(list)));
    context.set("add_generation_prompt", Value::from(true));
    context.set("bos_token", Value::from(token_text(tok, tok.bos_id())));
    context.set("eos_token", Value::from(token_text(tok, tok.eos_id())));
    context.set("tools", Value::none());
    context.set("documents", Value::none());
    if (enable_thinking_) context.set("enable_thinking", Value::from(*enable_thinking_));
    return model_template_->render(context);
}

std::string PromptBuilder::render(std::span<const tokenizer::ChatMessage> messages, std::string* warning) const {
    if (warning) warning->clear();
    if (model_template_) {
        try {
            return render_model_template(messages);
        } catch (const jinja::TemplateError& e) {
            const std::string line = std::string("the model's chat template refused this conversation (") + e.what() +
                                     "); using the " + family_.name() + " format for it";
            spdlog::warn("{}", line);
            if (warning) *warning = line;
        }
    }
    return family_.format(messages, true);
}

Request PromptBuilder::chat(std::span<const tokenizer::ChatMessage> messages, std::string* warning) const {
    const auto& tok = engine_.tokenizer();
    Request r;
    const std::string text = render(messages, warning);
    // The text is encoded with control tokens parsed, so the template's markers become single
    // tokens. Known gap: a control-token string typed inside a message is parsed too;
    // per-segment encoding would close it.
    const std::string bos = token_text(tok, tok.bos_id());
    const bool writes_bos = !bos.empty() && text.compare(0, bos.size(), bos) == 0;
    r.prompt = tok.encode(text, {.add_bos = tok.add_bos() && tok.bos_id() >= 0 && !writes_bos, .parse_special = true});
    // A model template of an unknown family still ends turns with EOS (always a stop) or the
    // vocabulary's end-of-turn token; the fallback's "\nUser:" would be wrong for it.
    const bool family_known = family_.kind() != tokenizer::ChatTemplateKind::Fallback;
    if (!model_template_ || family_known) {
        for (const auto& stop : family_.stop_strings()) {
            if (auto id = tok.token_id(stop); id && tok.is_control(*id)) {
                r.stop_tokens.push_back(*id);
            } else {
                r.stop_strings.push_back(stop);
            }
        }
    }
    const auto eot = engine_.file().optional_int("tokenizer.ggml.eot_token_id", -1);
    if (eot >= 0 && eot < tok.vocab_size()) r.stop_tokens.push_back(static_cast<std::int32_t>(eot));
    return r;
}

}  // namespace tokenscope::runtime
