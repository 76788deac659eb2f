#pragma once
// Byte-level BPE merging (GPT-2's algorithm): a word's bytes start as one symbol each (spelled
// in the byte-level alphabet, see byte_level.h) and the adjacent pair whose merge comes first in
// tokenizer.ggml.merges (rank = position) is merged, leftmost first among equals, until no pair
// has a merge. The symbols left are the tokens.
//
// Everything works on token ids: merges are checked against the vocabulary once, when the
// model is built, so merging never builds strings. Immutable after construction.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/merge_table.h"

namespace tokenscope::tokenizer {

struct Vocabulary;

class BpeModel {
  public:
    using PieceIds = std::unordered_map<std::string_view, std::int32_t>;

    // `piece_ids` maps every piece of `vocabulary` to its id and must outlive the model. Throws
    // FormatError ("<origin>: key 'tokenizer.ggml.merges': entry N ...") for an entry that is
    // not two pieces separated by one space, or that names a piece (or a merged piece) the
    // vocabulary lacks.
    BpeModel(const Vocabulary& vocabulary, const PieceIds& piece_ids, const std::string& origin);

    // Appends the ids of one pre-tokenized word (raw bytes, non-empty). With `ignore_merges` a
    // word that is a (non-control) vocabulary piece as a whole is that one token.
    void encode_word(std::string_view word, bool ignore_merges,
                     std::vector<std::int32_t>& out) const;

    std::size_t merge_count() const { return merges_.size(); }

    // encode_word remembers the tokens of short words, per thread; this forgets the calling
    // thread's (benchmarks use it to measure text never seen before).
    static void clear_thread_cache();

  private:
    // encode_word without the cache.
    void merge_word(std::string_view word, bool ignore_merges,
                    std::vector<std::int32_t>& out) const;

    const Vocabulary* vocabulary_;
    const PieceIds* piece_ids_;
    MergeTable merges_;
    std::uint64_t serial_;        // tells this model's word cache from any other's (encode_word)
    std::int32_t byte_ids_[256];  // the token spelling each single byte, -1 when absent
};

}  // namespace tokenscope::tokenizer
