#include "kv/kv_cache_manager.h"

#include <algorithm>

#include <fmt/format.h>

#include "util/error.h"

namespace tokenscope::kv {

namespace {

const CacheShape& validated(const CacheShape& shape) {
    validate(shape);
    return shape;
}

}  // namespace

KvCacheManager::KvCacheManager(const CacheShape& shape)
    : shape_(validated(shape)), pool_(shape.num_blocks) {}

const KvCacheManager::Sequence& KvCacheManager::find(SeqId seq, const char* what) const {
    const auto it = seqs_.find(seq);
    if (it == seqs_.end()) {
        throw InvalidArgument(fmt::format("kv: {} of unknown sequence {}", what, seq));
    }
    return it->second;
}

// Appending into the last block is only safe when no other sequence reads that block.
bool KvCacheManager::needs_copy_on_write(const Sequence& s) const {
    return s.num_tokens % shape_.block_size != 0 && pool_.ref_count(s.blocks.back()) > 1;
}

int KvCacheManager::blocks_needed(SeqId seq, int n_new) const {
    if (n_new < 0) {
        throw InvalidArgument(
            fmt::format("kv: sequence {} asked for a negative number of slots ({})", seq, n_new));
    }
    if (n_new == 0) return 0;
    const auto it = seqs_.find(seq);
    if (it == seqs_.end()) return blocks_for(n_new);
    const Sequence& s = it->second;
    return blocks_for(static_cast<std::int64_t>(s.num_tokens) + n_new) -
           static_cast<int>(s.blocks.size()) + (needs_copy_on_write(s) ? 1 : 0);
}

bool KvCacheManager::allocate_slots(SeqId seq, int n_new) {
    const int needed = blocks_needed(seq, n_new);  // validates n_new
    if (needed > pool_.num_free()) return false;
    // blocks_needed fits in the pool, so the new total is at most the capacity: an int.
    Sequence& s = seqs_[seq];
    if (n_new == 0) return true;
    if (needs_copy_on_write(s)) {
        const int shared = s.blocks.back();
        const int copy = *pool_.allocate();
        copies_.push_back({shared, copy, s.num_tokens % shape_.block_size});
        pool_.release(shared);  // still referenced by the other sequence(s)
        s.blocks.back() = copy;
    }
    s.num_tokens += n_new;
    while (static_cast<int>(s.blocks.size()) < blocks_for(s.num_tokens)) {
        s.blocks.push_back(*pool_.allocate());
    }
    const int last = s.num_tokens - 1;
    last_write_ = {seq, s.num_tokens - n_new, n_new,
                   s.blocks[static_cast<std::size_t>(last / shape_.block_size)],
                   last % shape_.block_size};
    return true;
}

void KvCacheManager::truncate(SeqId seq, int n_tokens) {
    const Sequence& found = find(seq, "truncate");
    if (n_tokens < 0 || n_tokens > found.num_tokens) {
        throw InvalidArgument(fmt::format("kv: truncate sequence {} to {} tokens, it has {}", seq,
                                          n_tokens, found.num_tokens));
    }
    Sequence& s = seqs_.at(seq);
    const auto keep = static_cast<std::size_t>(blocks_for(n_tokens));
    // Last block first, as in free_sequence.
    for (std::size_t i = s.blocks.size(); i > keep; --i) pool_.release(s.blocks[i - 1]);
    s.blocks.resize(keep);
    s.num_tokens = n_tokens;
    // Rolled back past what the last write added (rejected draft tokens): keep the part that
    // stayed, or forget it when none did.
    if (last_write_.seq == seq && last_write_.first_position + last_write_.count > n_tokens) {
        if (last_write_.first_position >= n_tokens) {
            last_write_ = {};
        } else {
            const int last = n_tokens - 1;
            last_write_.count = n_tokens - last_write_.first_position;
            last_write_.last_block = s.blocks[static_cast<std::size_t>(last / shape_.block_size)];
            last_write_.last_slot = last % shape_.block_size;
        }
    }
}

void KvCacheManager::free_sequence(SeqId seq) {
    const Sequence& s = find(seq, "free");
    // Last block first: the pool hands out the block released last first, so the next sequence
    // gets these blocks in ascending order, and attention's stream over a head's keys
    // (KvStorage's layout) runs forward through memory (one Zen 3 core read 2 KiB blocks in
    // ascending order at 8.0-8.4 GB/s, in descending order at 6.0-7.6).
    for (auto block = s.blocks.rbegin(); block != s.blocks.rend(); ++block) pool_.release(*block);
    seqs_.erase(seq);
    if (last_write_.seq == seq) last_write_ = {};
}

void KvCacheManager::fork(SeqId from, SeqId to, int n_tokens) {
    const Sequence& source = find(from, "fork");
    if (has_sequence(to)) {
        throw InvalidArgument(
            fmt::format("kv: fork of sequence {} into {}, which already exists", from, to));
    }
    if (n_tokens < 0 || n_tokens > source.num_tokens) {
        throw InvalidArgument(fmt::format("kv: fork of {} tokens of sequence {}, it has {}",
                                          n_tokens, from, source.num_tokens));
    }
    Sequence copy;
    copy.num_tokens = n_tokens;
    copy.blocks.assign(source.blocks.begin(), source.blocks.begin() + blocks_for(n_tokens));
    for (int block : copy.blocks) pool_.retain(block);
    seqs_.emplace(to, std::move(copy));  // after the last use of `source`: may rehash
}

std::vector<BlockCopy> KvCacheManager::take_block_copies() {
    std::vector<BlockCopy> out;
    out.swap(copies_);
    return out;
}

int KvCacheManager::num_tokens(SeqId seq) const {
    return find(seq, "num_tokens").num_tokens;
}

const std::vector<int>& KvCacheManager::block_table(SeqId seq) const {
    return find(seq, "block_table").blocks;
}

std::int64_t KvCacheManager::slot(SeqId seq, int pos) const {
    const Sequence& s = find(seq, "slot");
    if (pos < 0 || pos >= s.num_tokens) {
        throw InvalidArgument(fmt::format(
            "kv: slot of position {} in sequence {}, it has {} tokens", pos, seq, s.num_tokens));
    }
    const int bs = shape_.block_size;
    return static_cast<std::int64_t>(s.blocks[static_cast<std::size_t>(pos / bs)]) * bs + pos % bs;
}

std::vector<SeqId> KvCacheManager::sequences() const {
    std::vector<SeqId> ids;
    ids.reserve(seqs_.size());
    for (const auto& entry : seqs_) ids.push_back(entry.first);
    std::sort(ids.begin(), ids.end());
    return ids;
}

KvStats KvCacheManager::stats() const {
    KvStats st;
    const int bs = shape_.block_size;
    st.blocks_total = pool_.num_total();
    st.blocks_free = pool_.num_free();
    st.blocks_used = pool_.num_used();
    st.block_size = bs;
    st.block_owner.assign(static_cast<std::size_t>(st.blocks_total), -1);
    st.block_refs.resize(static_cast<std::size_t>(st.blocks_total));
    for (int b = 0; b < st.blocks_total; ++b)
        st.block_refs[static_cast<std::size_t>(b)] = pool_.ref_count(b);

    // Tokens held by each physical block: the most any referencing sequence keeps in it.
    std::vector<int> filled(static_cast<std::size_t>(st.blocks_total), 0);
    for (SeqId id : sequences()) {  // ascending, so the first owner written is the lowest id
        const Sequence& s = seqs_.at(id);
        SequenceStats ss{id, static_cast<int>(s.blocks.size()), 0, s.num_tokens};
        for (std::size_t i = 0; i < s.blocks.size(); ++i) {
            const auto b = static_cast<std::size_t>(s.blocks[i]);
            if (st.block_refs[b] > 1) ++ss.shared_blocks;
            if (st.block_owner[b] < 0) st.block_owner[b] = id;
            const int in_block = std::min(bs, s.num_tokens - static_cast<int>(i) * bs);
            filled[b] = std::max(filled[b], in_block);
        }
        st.tokens_logical += s.num_tokens;
        st.sequences.push_back(ss);
    }
    for (int f : filled) st.tokens_stored += f;

    st.bytes_per_token = bytes_per_token(shape_);
    st.bytes_total = capacity_bytes(shape_);
    st.bytes_used = st.bytes_per_token * static_cast<std::uint64_t>(st.tokens_stored);
    st.last_write = last_write_;
    return st;
}

}  // namespace tokenscope::kv
