#include "tokenizer/detokenizer.h"

#include "tokenizer/tokenizer.h"
#include "util/utf8.h"

namespace tokenscope::tokenizer {

namespace {
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
}

std::string StreamingDetokenizer::push(std::int32_t id) {
    const std::string_view bytes = tokenizer_->token_bytes(id, at_start_);  // may throw
    if (!tokenizer_->is_control(id)) at_start_ = false;
    pending_.append(bytes);

    // Emit every complete sequence; an ill-formed byte becomes U+FFFD right away (as
    // utf8::sanitize would do it on the whole text); stop at a valid but incomplete tail.
    std::string out;
    std::string_view rest = pending_;
    while (!rest.empty()) {
        const int n = utf8::sequence_length(rest);
        if (n < 0) break;
        if (n == 0) {
            out.append(kReplacement);
            rest.remove_prefix(1);
        } else {
            out.append(rest.substr(0, static_cast<std::size_t>(n)));
            rest.remove_prefix(static_cast<std::size_t>(n));
        }
    }
    pending_.erase(0, pending_.size() - rest.size());
    return out;
}

std::string StreamingDetokenizer::flush() {
    std::string out = utf8::sanitize(pending_);
    reset();
    return out;
}

void StreamingDetokenizer::reset() {
    pending_.clear();
    at_start_ = true;
}

}  // namespace tokenscope::tokenizer
