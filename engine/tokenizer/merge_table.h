#pragma once
// The BPE merge ranks as an open-addressing hash table: (left id, right id) -> (rank, merged
// id). Looking pairs up is most of what encoding costs, and a flat table of 16-byte slots
// (linear probing, at most half full) takes one cache miss per lookup where
// std::unordered_map's node-based buckets take two or three.
#include <cstdint>
#include <vector>

namespace tokenscope::tokenizer {

class MergeTable {
  public:
    struct Merge {
        std::uint32_t rank;
        std::int32_t result;
    };

    static std::uint64_t key(std::int32_t left, std::int32_t right) {
        return (std::uint64_t{static_cast<std::uint32_t>(left)} << 32) |
               static_cast<std::uint32_t>(right);
    }

    // Sized for `expected` entries before any insert.
    void reserve(std::size_t expected) {
        std::size_t capacity = 16;
        int bits = 4;
        while (capacity < expected * 2) {
            capacity *= 2;
            ++bits;
        }
        slots_.assign(capacity, Slot{kEmpty, {}});
        mask_ = capacity - 1;
        shift_ = 64 - bits;
        size_ = 0;
    }

    // Keeps the first value inserted for a key (the best rank when inserting in rank order).
    void insert_if_absent(std::uint64_t k, Merge merge) {
        if ((size_ + 1) * 2 > slots_.size()) grow();
        for (std::size_t i = slot_of(k);; i = (i + 1) & mask_) {
            if (slots_[i].key == k) return;
            if (slots_[i].key == kEmpty) {
                slots_[i] = Slot{k, merge};
                ++size_;
                return;
            }
        }
    }

    const Merge* find(std::uint64_t k) const {
        if (slots_.empty()) return nullptr;
        for (std::size_t i = slot_of(k);; i = (i + 1) & mask_) {
            if (slots_[i].key == k) return &slots_[i].merge;
            if (slots_[i].key == kEmpty) return nullptr;
        }
    }

    std::size_t size() const { return size_; }

  private:
    // Ids are non-negative, so the key of (-1, -1) never occurs and marks an empty slot.
    static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
    struct Slot {
        std::uint64_t key;
        Merge merge;
    };

    std::size_t slot_of(std::uint64_t k) const {
        // Fibonacci hashing (the product's top bits): spreads the structured keys, small ids
        // in both halves, over the table.
        return static_cast<std::size_t>((k * 0x9E3779B97F4A7C15ull) >> shift_);
    }

    void grow() {
        std::vector<Slot> old;
        old.swap(slots_);
        reserve(old.empty() ? 8 : old.size());
        for (const Slot& s : old)
            if (s.key != kEmpty) insert_if_absent(s.key, s.merge);
    }

    std::vector<Slot> slots_;
    std::size_t mask_ = 0;
    int shift_ = 60;
    std::size_t size_ = 0;
};

}  // namespace tokenscope::tokenizer
