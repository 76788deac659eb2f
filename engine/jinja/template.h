#pragma once
// A Jinja chat template, parsed once and rendered per conversation, the way Hugging Face's
// apply_chat_template renders it with Python's jinja2: trim_blocks, lstrip_blocks, the
// loopcontrols extension, an immutable sandbox (list.append and the like are refused), and the
// globals raise_exception(msg) and strftime_now(format) beside Jinja's range, namespace, dict.
//
// What the subset covers and why it is enough: docs/architecture.md ("Chat templates").
// Statements: if/elif/else, for (with else, loop filter, loop.*), set (names, tuples,
// namespace attributes, block set), macro, call, filter blocks, break/continue, do, raw,
// generation. Not supported (no chat template we know uses them): extends/block/include/import,
// recursive loops, the string % and str.format operators.
//
// Rendering is bounded: a template that loops or recurses without end, or writes more than
// `max_output_bytes`, stops with a TemplateError instead of hanging the app.
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "jinja/ast.h"
#include "jinja/value.h"

namespace tokenscope::jinja {

// The template itself called raise_exception(message): it refuses this conversation (roles out
// of order, an unsupported role), as opposed to being broken.
class TemplateRaised : public TemplateError {
  public:
    using TemplateError::TemplateError;
};

struct RenderOptions {
    // What strftime_now() formats (local time); tests fix it for reproducible output.
    std::chrono::system_clock::time_point now = std::chrono::system_clock::now();
    std::size_t max_output_bytes = std::size_t{64} << 20;
    std::int64_t max_steps = 20'000'000;  // statements + loop iterations + calls
};

class Template {
  public:
    // Parses; throws TemplateError with the line of the problem.
    explicit Template(std::string_view source);

    // `context` holds the template's variables (messages, add_generation_prompt, bos_token,
    // ...). Throws TemplateError (TemplateRaised for raise_exception) with the line.
    std::string render(const Object& context, const RenderOptions& options = {}) const;

  private:
    std::shared_ptr<const StmtList> body_;
};

}  // namespace tokenscope::jinja
