#pragma once
// Turns user text into an engine Request: raw text (BOS as the model wants) or a chat.
//
// A chat is rendered with the model's own chat template (the GGUF's tokenizer.chat_template,
// run by the Jinja interpreter in engine/jinja exactly as Hugging Face's apply_chat_template
// renders it), so every model gets the prompt format it was tuned on, default system prompt and
// all. The built-in family formats (tokenizer/chat_template.h) remain:
//   - when the user names one (--template), which is then used instead;
//   - when the file has no template (base models such as Gemma 3 270M);
//   - as the fallback when the model's template cannot be parsed (a warning, once) or refuses a
//     conversation by calling raise_exception (a warning for that request);
//   - for the stop strings: the family's end-of-turn markers become stop tokens.
#include <optional>
#include <span>
#include <string>

#include "jinja/template.h"
#include "runtime/engine.h"
#include "tokenizer/chat_template.h"

namespace tokenscope::runtime {

class PromptBuilder {
public:
    PromptBuilder(const Engine& engine, const std::optional<std::string>& template_name);

    Request raw(const std::string& text) const;
    // `warning` (optional) receives one line when the model's template could not render this
    // conversation and the family format was used instead; it is cleared otherwise.
    Request chat(std::span<const tokenizer::ChatMessage> messages, std::string* warning = nullptr) const;
    Request chat(std::initializer_list<tokenizer::ChatMessage> messages) const {
        return chat(std::span<const tokenizer::ChatMessage>(messages.begin(), messages.size()));
    }

    // The prompt text chat() encodes (control tokens spelled out).
    std::string render(std::span<const tokenizer::ChatMessage> messages, std::string* warning = nullptr) const;

    // Thinking models (Qwen 3): the template's enable_thinking variable; unset leaves the
    // template's default (thinking on).
    void set_enable_thinking(std::optional<bool> enable) { enable_thinking_ = enable; }
    // True when the model's own template reads enable_thinking (Qwen 3 and its kin).
    bool supports_thinking() const { return model_template_.has_value() && template_reads_thinking_; }

    // The built-in family: the format used without a model template, and the source of stop
    // strings.
    const tokenizer::ChatTemplate& chat_template() const { return family_; }
    bool uses_model_template() const { return model_template_.has_value(); }
    // For the model panel and the CLI banner: "model's own (ChatML family)", "chatml (--template)",
    // "gemma (no template in the file)", "chatml (the model's template failed: ...)".
    std::string description() const;
    // Why the model's own template is not used although the file has one; empty otherwise.
    const std::string& template_problem() const { return template_problem_; }

private:
    std::string render_model_template(std::span<const tokenizer::ChatMessage> messages) const;

    const Engine& engine_;
    tokenizer::ChatTemplate family_;
    std::optional<jinja::Template> model_template_;
    std::string template_problem_;
    bool family_chosen_by_user_ = false;
    bool file_has_template_ = false;
    std::optional<bool> enable_thinking_;
    bool template_reads_thinking_ = false;
};

}  // namespace tokenscope::runtime
