#pragma once
// Turns user text into an engine Request: raw text (BOS as the model wants) or a chat through
// the model's chat template (the template's stop strings, its end-of-turn tokens as stop
// tokens, and no second BOS when the template writes one).
#include <span>
#include <string>

#include "runtime/engine.h"
#include "tokenizer/chat_template.h"

namespace tokenscope::cli {

class PromptBuilder {
public:
    explicit PromptBuilder(const runtime::Engine& engine);

    runtime::Request raw(const std::string& text) const;
    runtime::Request chat(std::span<const tokenizer::ChatMessage> messages) const;
    runtime::Request chat(std::initializer_list<tokenizer::ChatMessage> messages) const {
        return chat(std::span<const tokenizer::ChatMessage>(messages.begin(), messages.size()));
    }
    const tokenizer::ChatTemplate& chat_template() const { return template_; }

private:
    const runtime::Engine& engine_;
    tokenizer::ChatTemplate template_;
};

}  // namespace tokenscope::cli
