#pragma once
// Turns a stream of generated token ids into text that is always complete, well-formed UTF-8.
// A character may arrive split over several tokens: sentencepiece byte-fallback tokens
// (<0xE4><0xBD><0xA0>) or byte-level BPE pieces that each spell part of its UTF-8 bytes (GPT-2,
// Llama 3, Qwen: an emoji is often two or three tokens). Its first bytes are held back until it
// is complete. Bytes that can never become part of a
// well-formed sequence come out as U+FFFD at once.
//
// Concatenating every push() and the final flush() gives exactly Tokenizer::decode() of the
// same ids.
#include <cstdint>
#include <string>

namespace tokenscope::tokenizer {

class Tokenizer;

class StreamingDetokenizer {
public:
    // `tokenizer` must outlive this object and must not be moved from meanwhile.
    explicit StreamingDetokenizer(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

    // The text that token `id` completes (possibly empty). Throws InvalidArgument on an id out
    // of range, leaving the state unchanged.
    std::string push(std::int32_t id);
    // Whatever is still held back, with an incomplete trailing sequence as U+FFFD; resets.
    std::string flush();
    // Starts a new text: drops held-back bytes and re-arms the leading-space rule.
    void reset();

    // Bytes held back, waiting for the rest of a character.
    std::size_t pending_bytes() const { return pending_.size(); }

private:
    const Tokenizer* tokenizer_;
    std::string pending_;
    bool at_start_ = true;
};

}  // namespace tokenscope::tokenizer
