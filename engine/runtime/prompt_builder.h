#pragma once
// Turns user text into an engine Request: raw text (BOS as the model wants) or a chat through
// the model's chat template (the template's stop strings, its end-of-turn tokens as stop
// tokens, and no second BOS when the template writes one).
#include <optional>
#include <span>
#include <string>

#include "runtime/engine.h"
#include "tokenizer/chat_template.h"

namespace tokenscope::runtime {

class PromptBuilder {
public:
    // The template is the one named (--template) or, by default, the family detected from the
    // file's tokenizer.chat_template. A file without one is a base (pretrained) model such as
    // the default Gemma 3 270M: it gets the plain "User:/Assistant:" fallback, which base
    // models continue sensibly, rather than an instruct format they were never tuned on.
    PromptBuilder(const Engine& engine, const std::optional<std::string>& template_name);

    Request raw(const std::string& text) const;
    Request chat(std::span<const tokenizer::ChatMessage> messages) const;
    Request chat(std::initializer_list<tokenizer::ChatMessage> messages) const {
        return chat(std::span<const tokenizer::ChatMessage>(messages.begin(), messages.size()));
    }
    const tokenizer::ChatTemplate& chat_template() const { return template_; }

private:
    const Engine& engine_;
    tokenizer::ChatTemplate template_;
};

}  // namespace tokenscope::runtime
