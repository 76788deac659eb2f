#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <atomic>

#include <fmt/format.h>

#include "tokenizer/byte_level.h"
#include "tokenizer/vocabulary.h"
#include "util/error.h"

namespace tokenscope::tokenizer {

namespace {

constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";

// Symbols of one word as a doubly linked list over an array: merging keeps the left symbol and
// retires the right one (length 0).
struct Symbol {
    std::int32_t id;
    std::int32_t prev;
    std::int32_t next;
    std::uint32_t length;  // bytes of the word it covers; 0 once merged away
};

struct Candidate {
    std::uint32_t rank;
    std::int32_t left;
    std::int32_t right;
    std::int32_t left_id;
    std::int32_t right_id;
    std::int32_t result;
    // The heap's top is the lowest rank, then the leftmost pair.
    bool operator<(const Candidate& other) const {
        return rank != other.rank ? rank > other.rank : left > other.left;
    }
};

struct WordCache {
    std::uint64_t serial = 0;
    bool ignore_merges = false;
    std::unordered_map<std::string, std::vector<std::int32_t>> words;
};

WordCache& word_cache() {
    thread_local WordCache cache;
    return cache;
}

std::uint64_t next_serial() {
    static std::atomic<std::uint64_t> counter{0};
    return ++counter;
}

}  // namespace

BpeModel::BpeModel(const Vocabulary& vocabulary, const PieceIds& piece_ids,
                   const std::string& origin)
    : vocabulary_(&vocabulary), piece_ids_(&piece_ids), serial_(next_serial()) {
    const auto& spellings = byte_level::byte_spellings();
    for (int b = 0; b < 256; ++b) {
        const auto it = piece_ids.find(spellings[static_cast<std::size_t>(b)]);
        byte_ids_[b] = it == piece_ids.end() ? -1 : it->second;
    }

    const auto fail = [&](std::size_t index, std::string_view entry, const std::string& what) {
        throw FormatError(
            fmt::format("{}: key '{}': entry {} '{}': {}", origin, kMergesKey, index, entry, what));
    };
    const auto id_of = [&](std::size_t index, std::string_view entry, std::string_view piece) {
        const auto it = piece_ids.find(piece);
        if (it == piece_ids.end())
            fail(index, entry, fmt::format("'{}' is not in the vocabulary", piece));
        return it->second;
    };

    merges_.reserve(vocabulary.merges.size());
    std::string merged;
    for (std::size_t i = 0; i < vocabulary.merges.size(); ++i) {
        const std::string_view entry = vocabulary.merges[i];
        // Byte-level pieces never contain a literal space (it is spelled "Ġ"), so an entry is
        // exactly two non-empty pieces around exactly one space.
        const std::size_t space = entry.find(' ');
        if (space == std::string_view::npos || space == 0 || space + 1 == entry.size() ||
            entry.find(' ', space + 1) != std::string_view::npos)
            fail(i, entry, "expected two pieces separated by one space");
        const std::string_view left = entry.substr(0, space);
        const std::string_view right = entry.substr(space + 1);
        const std::int32_t left_id = id_of(i, entry, left);
        const std::int32_t right_id = id_of(i, entry, right);
        merged.assign(left).append(right);
        const std::int32_t result = id_of(i, entry, merged);
        // A repeated pair keeps its first (best) rank, as a rank table built in order would.
        merges_.insert_if_absent(MergeTable::key(left_id, right_id),
                                 MergeTable::Merge{static_cast<std::uint32_t>(i), result});
    }
}

void BpeModel::merge_word(std::string_view word, bool ignore_merges,
                          std::vector<std::int32_t>& out) const {
    if (word.empty()) return;
    if (ignore_merges && word.size() > 1) {
        const auto it = piece_ids_->find(byte_level::encode(word));
        if (it != piece_ids_->end() &&
            vocabulary_->types[static_cast<std::size_t>(it->second)] != TokenType::Control) {
            out.push_back(it->second);
            return;
        }
    }

    // Scratch space reused across words and calls (per thread: the model is shared): most
    // words are short, and allocating per word would cost more than the merging.
    thread_local std::vector<Symbol> symbols;
    thread_local std::vector<Candidate> queue;
    symbols.resize(word.size());
    queue.clear();
    for (std::size_t i = 0; i < word.size(); ++i) {
        symbols[i] = Symbol{byte_ids_[static_cast<unsigned char>(word[i])],
                            static_cast<std::int32_t>(i) - 1, static_cast<std::int32_t>(i) + 1, 1};
    }
    symbols.back().next = -1;

    const auto consider = [&](std::int32_t left, std::int32_t right) {
        if (left < 0 || right < 0) return;
        const std::int32_t left_id = symbols[static_cast<std::size_t>(left)].id;
        const std::int32_t right_id = symbols[static_cast<std::size_t>(right)].id;
        if (left_id < 0 || right_id < 0) return;
        const MergeTable::Merge* it = merges_.find(MergeTable::key(left_id, right_id));
        if (it == nullptr) return;
        queue.push_back(Candidate{it->rank, left, right, left_id, right_id, it->result});
        std::push_heap(queue.begin(), queue.end());
    };
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i)
        consider(static_cast<std::int32_t>(i), static_cast<std::int32_t>(i + 1));

    while (!queue.empty()) {
        std::pop_heap(queue.begin(), queue.end());
        const Candidate c = queue.back();
        queue.pop_back();
        Symbol& left = symbols[static_cast<std::size_t>(c.left)];
        Symbol& right = symbols[static_cast<std::size_t>(c.right)];
        // Stale when either side has been merged since the candidate was queued.
        if (left.length == 0 || right.length == 0 || left.next != c.right || left.id != c.left_id ||
            right.id != c.right_id)
            continue;
        left.id = c.result;
        left.length += right.length;
        right.length = 0;
        left.next = right.next;
        if (right.next >= 0) symbols[static_cast<std::size_t>(right.next)].prev = c.left;
        consider(left.prev, c.left);
        consider(c.left, left.next);
    }

    for (std::int32_t i = 0; i >= 0; i = symbols[static_cast<std::size_t>(i)].next) {
        const Symbol& s = symbols[static_cast<std::size_t>(i)];
        if (s.id >= 0) out.push_back(s.id);
        // A byte the vocabulary cannot spell: <unk> where there is one, else it is dropped
        // (as Hugging Face's BPE does without an unk_token).
        else if (vocabulary_->unk_id >= 0)
            out.push_back(vocabulary_->unk_id);
    }
    // Keep the scratch space of ordinary words, not that of one huge word.
    constexpr std::size_t kKeep = std::size_t{1} << 16;
    if (symbols.capacity() > kKeep) std::vector<Symbol>().swap(symbols);
    if (queue.capacity() > kKeep) std::vector<Candidate>().swap(queue);
}

void BpeModel::encode_word(std::string_view word, bool ignore_merges,
                           std::vector<std::int32_t>& out) const {
    // Running text repeats its words, and a word's tokens depend on nothing but the word, so
    // short words are remembered: a cache per thread (no locking), for one model at a time
    // (identified by serial number, not address, which a later model could reuse).
    constexpr std::size_t kMaxCachedWordBytes = 32;
    constexpr std::size_t kMaxCachedWords = 16384;
    WordCache& cache = word_cache();
    if (word.size() > kMaxCachedWordBytes) {
        merge_word(word, ignore_merges, out);
        return;
    }
    if (cache.serial != serial_ || cache.ignore_merges != ignore_merges ||
        cache.words.size() >= kMaxCachedWords) {
        cache.words.clear();
        cache.serial = serial_;
        cache.ignore_merges = ignore_merges;
    }
    thread_local std::string key;
    key.assign(word);
    if (const auto it = cache.words.find(key); it != cache.words.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
    }
    const std::size_t first = out.size();
    merge_word(word, ignore_merges, out);
    cache.words.emplace(key, std::vector<std::int32_t>(
                                 out.begin() + static_cast<std::ptrdiff_t>(first), out.end()));
}

void BpeModel::clear_thread_cache() {
    WordCache& cache = word_cache();
    cache.words.clear();
    cache.serial = 0;
}

}  // namespace tokenscope::tokenizer
