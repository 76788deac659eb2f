#pragma once
// Chat prompt formats. A GGUF carries its chat format as a Jinja template
// (tokenizer.chat_template); we do not run Jinja. Instead detect() recognises the family by
// markers only that family's template contains, and format() writes what that family's official
// template renders (as Hugging Face's apply_chat_template does, i.e. with trim_blocks and
// lstrip_blocks), for the plain system/user/assistant text conversations the app produces.
//
// The output is text with the control tokens spelled out ("<start_of_turn>", "<s>"); encode it
// with EncodeOptions::parse_special = true, and user-typed content is then not escaped: that is
// the same trust model as the official templates.
//
// Families and the variant chosen where a family has several:
//
//   Gemma    Gemma 2/3 instruct:  <bos><start_of_turn>user\n{system}\n\n{user}<end_of_turn>\n
//            <start_of_turn>model\n{assistant}<end_of_turn>\n ... Gemma has no system role: a
//            leading system message becomes a prefix (+ "\n\n") of the first turn, as Gemma 3's
//            template does. Content is trimmed.
//   Llama2   Llama 2 chat: <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant}
//            </s><s>[INST] {user} [/INST]  (each turn's content, system block included, trimmed).
//   Llama3   Llama 3 instruct (3.0 form; 3.1+ templates add a "Cutting Knowledge Date" system
//            preamble that we do not write): <|begin_of_text|> then per message
//            <|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>, content trimmed.
//   ChatML   <|im_start|>{role}\n{content}<|im_end|>\n, content verbatim. No default system
//            prompt (Qwen's templates add one; we do not).
//   Mistral  Mistral-7B-Instruct-v0.3 ("v3") form: <s>[INST] {user}[/INST] {assistant}</s>
//            ... The system prompt has no turn of its own: it is prefixed (+ "\n\n") to the
//            LAST user message, and only when the conversation ends with a user message, as the
//            official v0.3 template does (so a system prompt is dropped when formatting a prefix
//            that ends with an assistant turn). Chosen over the [SYSTEM_PROMPT] (Tekken, V7)
//            form because it is plain [INST] text that every Mistral tokenizer handles; the
//            [SYSTEM_PROMPT] tokens exist only in the newest vocabularies.
//   Phi3     Phi-3 / Phi-3.5 instruct: <|{role}|>\n{content}<|end|>\n per message; without a
//            generation prompt the template ends with <|endoftext|>.
//   Zephyr   Zephyr / TinyLlama chat: <|{role}|>\n{content}</s>\n per message (the template's
//            eos_token is "</s>" for these models).
//   Fallback Unknown or absent template: a plain-text transcript that any base model can
//            continue and no special token is needed for:
//            "System: {system}\n\nUser: {user}\n\nAssistant: {assistant}\n\n" ... with
//            "Assistant:" as the generation prompt; content trimmed; stop string "\nUser:".
//
// add_generation_prompt opens an assistant turn at the end. Llama2 and Mistral templates have no
// such switch: "[/INST]" already hands the turn to the assistant, so the flag changes nothing
// there.
//
// Roles are exactly "system", "user" and "assistant"; anything else is InvalidArgument naming
// the role. Families that fold the system prompt into a user turn (Gemma, Llama2, Mistral)
// accept a system message only as the first message. Unlike the official templates we do not
// insist that user and assistant alternate.
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tokenscope::tokenizer {

enum class ChatTemplateKind { Gemma, Llama2, Llama3, ChatML, Mistral, Phi3, Zephyr, Fallback };

struct ChatMessage {
    std::string role;  // "system", "user" or "assistant"
    std::string content;
};

class ChatTemplate {
  public:
    // The family of a tokenizer.chat_template source (may be empty). Markers, first match wins:
    //   "<|im_start|>" ChatML; "<start_of_turn>" Gemma; "<|start_header_id|>" Llama3;
    //   "[INST]" with "<<SYS>>" Llama2, without Mistral; "<|end|>" with "<|user|>" or
    //   "<|assistant|>" Phi3; "<|user|>" Zephyr.
    // When no marker matches, `architecture` (general.architecture) decides where it is
    // unambiguous: any "gemma*" architecture is Gemma (GGUFs converted without a template, such
    // as the Gemma 3 270M file this project uses, still expect Gemma's format). Otherwise
    // Fallback.
    static ChatTemplate detect(std::string_view jinja_source, std::string_view architecture = {});
    static ChatTemplate of_kind(ChatTemplateKind kind);
    // By name() ("gemma", "llama2", "llama3", "chatml", "mistral", "phi3", "zephyr",
    // "fallback"), e.g. for a command-line override. Throws InvalidArgument listing the names.
    static ChatTemplate of_name(std::string_view name);

    ChatTemplateKind kind() const { return kind_; }
    const char* name() const;

    // The prompt text for `messages`. Throws InvalidArgument for an unknown role (naming it) or
    // a misplaced system message.
    std::string format(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

    // Strings that end the assistant's turn when they appear in generated text (the family's
    // end-of-turn tokens spelled out, or the fallback's next-speaker label).
    std::vector<std::string> stop_strings() const;

    // True when format() writes the BOS token itself ("<bos>", "<s>", "<|begin_of_text|>"): the
    // caller must then encode with add_bos = false, or the model sees two BOS tokens.
    bool template_writes_bos() const;

  private:
    explicit ChatTemplate(ChatTemplateKind kind) : kind_(kind) {}
    ChatTemplateKind kind_;
};

}  // namespace tokenscope::tokenizer
