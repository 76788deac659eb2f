#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <span>

#include <fmt/format.h>

#include "tokenizer/pretokenizer_patterns.h"
#include "util/error.h"

namespace tokenscope::tokenizer {

namespace {

struct Spec {
    std::string_view name;
    std::vector<std::string_view> expressions;
    bool ignore_merges = false;
    bool add_bos = false;
};

// The names are llama.cpp's (its converter writes them); a few aliases that it maps to the same
// expressions are accepted too.
std::span<const Spec> specs() {
    using namespace patterns;
    static const std::vector<Spec> table{
        {"llama-bpe", {kLlama3}, true, true},
        {"llama3", {kLlama3}, true, true},
        {"llama-v3", {kLlama3}, true, true},
        {"qwen2", {kQwen2}},
        {"qwen35", {kQwen35}},
        {"gpt-2", {kGpt2}},
        {"mpt", {kGpt2}},
        {"olmo", {kGpt2}},
        {"starcoder", {kSingleDigit, kGpt2}},
        {"smollm", {kSingleDigit, kGpt2}},
        {"command-r", {kSingleDigit, kGpt2}},
        {"refact", {kSingleDigit, kGpt2}},
        {"falcon", {kFalconPunctuation, kGpt2, kFalconDigits}},
        {"deepseek-llm",
         {kDeepseekNewline, kDeepseekLetters, kDeepseekPunctuation, kDeepseekTrailingSpace,
          kDeepseekCjk, kDeepseekNumbers}},
    };
    return table;
}

struct CodeDeleter {
    void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};
using Code = std::unique_ptr<pcre2_code, CodeDeleter>;

Code compile(std::string_view expression) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    // UCP: \s, \w and \d follow Unicode as Hugging Face's (Oniguruma) engine does. DOLLAR_ENDONLY:
    // "$" means the end of the piece, not "before a final newline".
    Code code(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(expression.data()), expression.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error, &offset,
                            nullptr));
    if (!code) {
        std::array<PCRE2_UCHAR, 256> text{};
        pcre2_get_error_message(error, text.data(), text.size());
        // A bug in pretokenizer_patterns.h, not in the model file.
        throw InvalidArgument(fmt::format("pre-tokenizer expression does not compile at {}: {}",
                                          offset, reinterpret_cast<const char*>(text.data())));
    }
    // Without JIT (an unsupported CPU) pcre2_match interprets the same code, only slower.
    (void)pcre2_jit_compile(code.get(), PCRE2_JIT_COMPLETE);
    return code;
}

// Per-thread match state: one ovector pair is enough (the expressions capture nothing) and a
// JIT stack larger than the 32 KiB default leaves room for long runs of one character class.
struct MatchState {
    struct DataDeleter {
        void operator()(pcre2_match_data* d) const { pcre2_match_data_free(d); }
    };
    struct ContextDeleter {
        void operator()(pcre2_match_context* c) const { pcre2_match_context_free(c); }
    };
    struct StackDeleter {
        void operator()(pcre2_jit_stack* s) const { pcre2_jit_stack_free(s); }
    };
    std::unique_ptr<pcre2_match_data, DataDeleter> data{pcre2_match_data_create(1, nullptr)};
    std::unique_ptr<pcre2_match_context, ContextDeleter> context{
        pcre2_match_context_create(nullptr)};
    std::unique_ptr<pcre2_jit_stack, StackDeleter> stack{
        pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr)};

    MatchState() {
        if (!data || !context || !stack) throw std::bad_alloc();
        pcre2_jit_stack_assign(context.get(), nullptr, stack.get());
    }
};

MatchState& match_state() {
    thread_local MatchState state;
    return state;
}

std::size_t utf8_char_length(unsigned char lead) {
    if (lead < 0xC0) return 1;
    if (lead < 0xE0) return 2;
    if (lead < 0xF0) return 3;
    return 4;
}

}  // namespace

struct PreTokenizer::Impl {
    const Spec* spec = nullptr;
    std::string name;
    std::vector<Code> expressions;

    // Splits `piece` by one expression: matches and the gaps between them, in order.
    void split_one(const pcre2_code* code, std::string_view piece,
                   std::vector<std::string_view>& out) const;
};

void PreTokenizer::Impl::split_one(const pcre2_code* code, std::string_view piece,
                                   std::vector<std::string_view>& out) const {
    MatchState& state = match_state();
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
    std::size_t gap_start = 0;
    std::size_t pos = 0;
    while (pos < piece.size()) {
        // The text was validated as UTF-8 before it got here: skip PCRE2's own check.
        const int rc = pcre2_match(code, subject, piece.size(), pos, PCRE2_NO_UTF_CHECK,
                                   state.data.get(), state.context.get());
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            std::array<PCRE2_UCHAR, 256> text{};
            pcre2_get_error_message(rc, text.data(), text.size());
            throw InvalidArgument(fmt::format("pre-tokenizer '{}': matching {} bytes failed: {}",
                                              name, piece.size(),
                                              reinterpret_cast<const char*>(text.data())));
        }
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data.get());
        const std::size_t start = ovector[0];
        const std::size_t end = ovector[1];
        if (end == start) {
            // An empty match splits nothing; step over one character so the loop moves on.
            if (start >= piece.size()) break;
            pos = start + utf8_char_length(static_cast<unsigned char>(piece[start]));
            continue;
        }
        if (start > gap_start) out.push_back(piece.substr(gap_start, start - gap_start));
        out.push_back(piece.substr(start, end - start));
        gap_start = pos = end;
    }
    if (gap_start < piece.size()) out.push_back(piece.substr(gap_start));
}

PreTokenizer::PreTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

std::string PreTokenizer::supported_names() {
    std::string names;
    for (const Spec& spec : specs()) {
        if (!names.empty()) names += ", ";
        names += spec.name;
    }
    return names;
}

PreTokenizer PreTokenizer::for_name(std::string_view name, const std::string& origin) {
    for (const Spec& spec : specs()) {
        if (spec.name != name) continue;
        auto impl = std::make_unique<Impl>();
        impl->spec = &spec;
        impl->name = std::string(name);
        for (const std::string_view expression : spec.expressions)
            impl->expressions.push_back(compile(expression));
        return PreTokenizer(std::move(impl));
    }
    throw FormatError(fmt::format(
        "{}: key 'tokenizer.ggml.pre': pre-tokenizer '{}' is not supported (supported: {})", origin,
        name, supported_names()));
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& words) const {
    if (text.empty()) return;
    std::vector<std::string_view> pieces{text};
    std::vector<std::string_view> next;
    for (const Code& code : impl_->expressions) {
        next.clear();
        for (const std::string_view piece : pieces) impl_->split_one(code.get(), piece, next);
        pieces.swap(next);
    }
    words.insert(words.end(), pieces.begin(), pieces.end());
}

const std::string& PreTokenizer::name() const {
    return impl_->name;
}
bool PreTokenizer::ignore_merges() const {
    return impl_->spec->ignore_merges;
}
bool PreTokenizer::default_add_bos(std::string_view name) {
    for (const Spec& spec : specs())
        if (spec.name == name) return spec.add_bos;
    return false;
}

}  // namespace tokenscope::tokenizer
