// Tests of the paged KV cache (engine/kv): BlockPool, KvCacheManager bookkeeping (allocation
// across block boundaries, running out, truncate, free, fork with copy-on-write, slots,
// stats), the byte formula for F32 / F16 / Q8, KvStorage round trips and attention helpers
// against a float64 reference, and a seeded randomized stress test that checks the
// bookkeeping invariants and the stored data of every sequence after each step.
//
// Expected numbers are worked out by hand in the comments, never taken from the code under
// test.
#include <QObject>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kv/block_pool.h"
#include "kv/half_rows.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_storage.h"
#include "kv/kv_types.h"
#include "tensor/f16.h"
#include "tensor/matmul.h"
#include "util/error.h"

Q_DECLARE_METATYPE(tokenscope::kv::CacheShape)
Q_DECLARE_METATYPE(tokenscope::kv::ElementType)
Q_DECLARE_METATYPE(tokenscope::kv::KernelChoice)

using tokenscope::InvalidArgument;
using namespace tokenscope::kv;
namespace tensor = tokenscope::tensor;

namespace {

// Deterministic with every standard library (mt19937 is specified bit for bit, the std
// distributions are not).
class Random {
  public:
    explicit Random(std::uint32_t seed) : gen_(seed) {}
    double unit() { return (static_cast<double>(gen_() >> 8) + 0.5) * 0x1p-24; }  // (0, 1)
    double uniform(double lo, double hi) { return lo + (hi - lo) * unit(); }
    int below(int n) { return static_cast<int>(gen_() % static_cast<std::uint32_t>(n)); }

  private:
    std::mt19937 gen_;
};

std::vector<float> random_floats(Random& rng, std::size_t n, double amplitude) {
    std::vector<float> out(n);
    for (float& x : out) x = static_cast<float>(rng.uniform(-amplitude, amplitude));
    return out;
}

CacheShape small_shape(int num_blocks, ElementType type = ElementType::F16) {
    return CacheShape{.layers = 2,
                      .kv_heads = 2,
                      .head_dim = 8,
                      .num_blocks = num_blocks,
                      .block_size = 16,
                      .type = type};
}

// The message of the InvalidArgument that `f` throws, or "(no exception)".
QString error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const InvalidArgument& e) {
        return QString::fromStdString(e.what());
    }
    return QStringLiteral("(no exception)");
}

#define EXPECT_ERROR_MENTIONS(expr, ...)                                                  \
    do {                                                                                  \
        const QString message_ = error_of([&] { (void)(expr); });                         \
        for (const char* part_ : {__VA_ARGS__}) {                                         \
            QVERIFY2(message_.contains(QLatin1String(part_)),                             \
                     qPrintable(QStringLiteral("'%1' lacks '%2'").arg(message_, part_))); \
        }                                                                                 \
    } while (false)

// "" when the bookkeeping is consistent, else what is wrong: every block's reference count
// equals the number of block-table entries naming it (so no block is in two tables without a
// retain), free + used == total, free blocks are exactly those with count 0, and every table
// has ceil(tokens / block_size) entries.
std::string check_invariants(const KvCacheManager& m) {
    const BlockPool& pool = m.pool();
    const int bs = m.shape().block_size;
    std::vector<int> refs(static_cast<std::size_t>(pool.num_total()), 0);
    for (SeqId seq : m.sequences()) {
        const auto& table = m.block_table(seq);
        const int tokens = m.num_tokens(seq);
        if (static_cast<int>(table.size()) != (tokens + bs - 1) / bs) {
            return "sequence " + std::to_string(seq) + " has " + std::to_string(table.size()) +
                   " blocks for " + std::to_string(tokens) + " tokens";
        }
        for (int b : table) ++refs[static_cast<std::size_t>(b)];
    }
    int zero = 0;
    for (int b = 0; b < pool.num_total(); ++b) {
        if (pool.ref_count(b) != refs[static_cast<std::size_t>(b)]) {
            return "block " + std::to_string(b) + " has ref count " +
                   std::to_string(pool.ref_count(b)) + " but " +
                   std::to_string(refs[static_cast<std::size_t>(b)]) + " table entries";
        }
        if (refs[static_cast<std::size_t>(b)] == 0) ++zero;
    }
    if (zero != pool.num_free()) return "free count differs from blocks with count 0";
    if (pool.num_free() + pool.num_used() != pool.num_total()) return "free + used != total";
    const KvStats st = m.stats();
    if (st.blocks_free + st.blocks_used != st.blocks_total) return "stats: free + used != total";
    return {};
}

}  // namespace

class TestKvCache : public QObject {
    Q_OBJECT

  private slots:
    void elementTypeNamesRoundTrip();
    void badShapesAreInvalidArgument();
    void blockPoolCountsReferences();

    void allocationAcrossBlockBoundaries();
    void outOfBlocksReturnsFalseAndChangesNothing();
    void truncateFreesWholeBlocks();
    void lastWriteNamesBlockAndSlot();
    void freeSequenceReturnsAllBlocks();
    void freedBlocksComeBackInAscendingOrder();
    void forkSharesBlocksAndCopiesOnWrite();
    void freeingAForkKeepsTheOtherSequencesData();
    void slotMapping();
    void statsNumbers();
    void errorsNameTheSequenceAndValues();

    void bytesFormulaIsExact_data();
    void bytesFormulaIsExact();
    void bytesFormulaText();
    void bytesWithASharedPrefixCountItOnce();

    void storageRoundTrip_data();
    void storageRoundTrip();
    void firstBlocksAreCommittedAtConstruction();
    void halfRowsMatchTheIntegerConversion();
    void dotAndAxpyMatchFloat64Reference_data();
    void dotAndAxpyMatchFloat64Reference();
    void copyBlockCopiesEveryLayerAndPart();
    void tilesMatchReadBackAndTablesAgree();

    void randomizedStress();
};

// ---------------------------------------------------------------------------------------------

void TestKvCache::elementTypeNamesRoundTrip() {
    for (ElementType t : {ElementType::F32, ElementType::F16, ElementType::Q8}) {
        QCOMPARE(parse_element_type(element_type_name(t)), std::optional<ElementType>(t));
    }
    QCOMPARE(QString(element_type_name(ElementType::F16)), QString("f16"));
    QCOMPARE(QString(element_type_name(ElementType::Q8)), QString("q8"));
    QVERIFY(!parse_element_type("bf16"));
    QVERIFY(!parse_element_type("F16"));
    QVERIFY(!parse_element_type(""));
    QCOMPARE(element_bytes(ElementType::F32), 4);
    QCOMPARE(element_bytes(ElementType::F16), 2);
    QCOMPARE(element_bytes(ElementType::Q8), 1);
}

void TestKvCache::badShapesAreInvalidArgument() {
    const CacheShape good = small_shape(4);
    validate(good);
    auto with = [&](auto change) {
        CacheShape s = good;
        change(s);
        return s;
    };
    EXPECT_ERROR_MENTIONS(KvCacheManager(with([](CacheShape& s) { s.layers = 0; })), "layers", "0");
    EXPECT_ERROR_MENTIONS(KvCacheManager(with([](CacheShape& s) { s.kv_heads = -3; })), "kv_heads",
                          "-3");
    EXPECT_ERROR_MENTIONS(KvCacheManager(with([](CacheShape& s) { s.head_dim = 0; })), "head_dim");
    EXPECT_ERROR_MENTIONS(KvCacheManager(with([](CacheShape& s) { s.num_blocks = 0; })),
                          "num_blocks");
    EXPECT_ERROR_MENTIONS(KvStorage(with([](CacheShape& s) { s.block_size = -1; })), "block_size",
                          "-1");
    // 2^20 blocks of 2^12 tokens = 2^32 tokens: more positions than an int holds.
    EXPECT_ERROR_MENTIONS(
        KvCacheManager(with([](CacheShape& s) { s.num_blocks = 1 << 20, s.block_size = 1 << 12; })),
        "1048576", "4096");
    // 2 * 2^30 * 2^30 * (2^30 * 4) * 1 * 16 bytes overflows 64 bits.
    EXPECT_ERROR_MENTIONS(KvCacheManager(with([](CacheShape& s) {
                              s.layers = 1 << 30, s.kv_heads = 1 << 30, s.head_dim = 1 << 30;
                              s.num_blocks = 1;
                              s.type = ElementType::F32;
                          })),
                          "overflows");
    EXPECT_ERROR_MENTIONS(BlockPool(0), "0");
}

void TestKvCache::blockPoolCountsReferences() {
    BlockPool pool(3);
    QCOMPARE(pool.num_total(), 3);
    QCOMPARE(pool.num_free(), 3);
    // A fresh pool hands out 0, 1, 2 in order.
    QCOMPARE(pool.allocate(), std::optional<int>(0));
    QCOMPARE(pool.allocate(), std::optional<int>(1));
    QCOMPARE(pool.allocate(), std::optional<int>(2));
    QCOMPARE(pool.allocate(), std::optional<int>());
    QCOMPARE(pool.num_used(), 3);
    pool.retain(1);
    QCOMPARE(pool.ref_count(1), 2);
    pool.release(1);
    QCOMPARE(pool.ref_count(1), 1);
    QCOMPARE(pool.num_free(), 0);
    pool.release(1);
    QCOMPARE(pool.ref_count(1), 0);
    QCOMPARE(pool.num_free(), 1);
    pool.release(0);
    // Most recently freed first.
    QCOMPARE(pool.allocate(), std::optional<int>(0));
    QCOMPARE(pool.allocate(), std::optional<int>(1));
    pool.release(2);
    EXPECT_ERROR_MENTIONS(pool.release(2), "block 2", "free");
    EXPECT_ERROR_MENTIONS(pool.retain(2), "block 2", "free");
    EXPECT_ERROR_MENTIONS(pool.ref_count(3), "block 3", "3 blocks");
    EXPECT_ERROR_MENTIONS(pool.retain(-1), "block -1");
}

// ---------------------------------------------------------------------------------------------

void TestKvCache::allocationAcrossBlockBoundaries() {
    KvCacheManager m(small_shape(10));
    // 15 and 16 tokens fit in one block of 16; 17 need two.
    QVERIFY(m.allocate_slots(1, 15));
    QVERIFY(m.allocate_slots(2, 16));
    QVERIFY(m.allocate_slots(3, 17));
    QCOMPARE(m.block_table(1).size(), std::size_t(1));
    QCOMPARE(m.block_table(2).size(), std::size_t(1));
    QCOMPARE(m.block_table(3).size(), std::size_t(2));
    QCOMPARE(m.block_table(1), std::vector<int>({0}));
    QCOMPARE(m.block_table(2), std::vector<int>({1}));
    QCOMPARE(m.block_table(3), std::vector<int>({2, 3}));
    QCOMPARE(m.num_tokens(3), 17);
    QCOMPARE(m.pool().num_free(), 6);

    // One token at a time: a new block exactly at tokens 1, 17, 33.
    KvCacheManager one(small_shape(10));
    for (int t = 1; t <= 33; ++t) {
        QCOMPARE(one.blocks_needed(7, 1), (t == 1 || t == 17 || t == 33) ? 1 : 0);
        QVERIFY(one.allocate_slots(7, 1));
        QCOMPARE(static_cast<int>(one.block_table(7).size()), (t + 15) / 16);
    }
    QCOMPARE(one.num_tokens(7), 33);

    // Growing 15 -> 16 stays in the block, 16 -> 17 takes a second.
    QVERIFY(m.allocate_slots(1, 1));
    QCOMPARE(m.block_table(1).size(), std::size_t(1));
    QVERIFY(m.allocate_slots(1, 1));
    QCOMPARE(m.block_table(1), std::vector<int>({0, 4}));
    QVERIFY2(check_invariants(m).empty(), check_invariants(m).c_str());
}

void TestKvCache::outOfBlocksReturnsFalseAndChangesNothing() {
    KvCacheManager m(small_shape(4));
    QVERIFY(m.allocate_slots(1, 40));  // 3 blocks: 16 + 16 + 8
    QCOMPARE(m.pool().num_free(), 1);

    // A new sequence needing 2 blocks: refused, and not created.
    QCOMPARE(m.blocks_needed(2, 20), 2);
    QVERIFY(!m.allocate_slots(2, 20));
    QVERIFY(!m.has_sequence(2));
    QCOMPARE(m.pool().num_free(), 1);

    // 40 + 25 = 65 tokens need 5 blocks, it has 3 and 1 is free: refused, nothing changes.
    QVERIFY(!m.allocate_slots(1, 25));
    QCOMPARE(m.num_tokens(1), 40);
    QCOMPARE(m.block_table(1), std::vector<int>({0, 1, 2}));
    QCOMPARE(m.pool().num_free(), 1);
    QVERIFY(m.take_block_copies().empty());

    // 40 + 24 = 64 tokens fit exactly in 4 blocks.
    QVERIFY(m.allocate_slots(1, 24));
    QCOMPARE(m.pool().num_free(), 0);
    QVERIFY(!m.allocate_slots(1, 1));
    QCOMPARE(m.num_tokens(1), 64);
    // Asking for zero slots always succeeds and creates the sequence.
    QVERIFY(m.allocate_slots(9, 0));
    QVERIFY(m.has_sequence(9));
    QCOMPARE(m.num_tokens(9), 0);
    QVERIFY(m.block_table(9).empty());
    // More than the whole cache can ever hold.
    QVERIFY(!m.allocate_slots(10, 1'000'000));
    QVERIFY(!m.has_sequence(10));
    QVERIFY2(check_invariants(m).empty(), check_invariants(m).c_str());
}

void TestKvCache::truncateFreesWholeBlocks() {
    KvCacheManager m(small_shape(8));
    QVERIFY(m.allocate_slots(1, 40));  // blocks 0, 1, 2
    QCOMPARE(m.pool().num_free(), 5);
    m.truncate(1, 40);  // no-op
    QCOMPARE(m.block_table(1).size(), std::size_t(3));
    m.truncate(1, 33);  // 33 tokens still need 3 blocks
    QCOMPARE(m.block_table(1).size(), std::size_t(3));
    m.truncate(1, 17);  // 2 blocks: block 2 freed
    QCOMPARE(m.block_table(1), std::vector<int>({0, 1}));
    QCOMPARE(m.pool().num_free(), 6);
    QCOMPARE(m.pool().ref_count(2), 0);
    m.truncate(1, 16);  // exactly one block
    QCOMPARE(m.block_table(1), std::vector<int>({0}));
    QCOMPARE(m.num_tokens(1), 16);
    m.truncate(1, 0);  // the sequence stays, empty
    QVERIFY(m.has_sequence(1));
    QVERIFY(m.block_table(1).empty());
    QCOMPARE(m.pool().num_free(), 8);
    QVERIFY(m.allocate_slots(1, 5));
    QCOMPARE(m.num_tokens(1), 5);
    QCOMPARE(m.block_table(1).size(), std::size_t(1));
    QVERIFY2(check_invariants(m).empty(), check_invariants(m).c_str());
}

// What the KV view highlights: the latest write's positions and the block and slot of its last
// token, computed by hand from block size 16 and the pool handing out blocks 0, 1, 2, ... in
// order (as allocationAcrossBlockBoundaries shows).
void TestKvCache::lastWriteNamesBlockAndSlot() {
    KvCacheManager m(small_shape(8));
    QCOMPARE(m.stats().last_write.seq, SeqId{-1});
    QVERIFY(m.allocate_slots(1, 20));  // positions 0-19: blocks 0, 1; position 19 = block 1 slot 3
    KvLastWrite w = m.stats().last_write;
    QCOMPARE(w.seq, SeqId{1});
    QCOMPARE(w.first_position, 0);
    QCOMPARE(w.count, 20);
    QCOMPARE(w.last_block, 1);
    QCOMPARE(w.last_slot, 3);
    QVERIFY(m.allocate_slots(2, 1));   // sequence 2's position 0: block 2, slot 0
    QVERIFY(m.allocate_slots(1, 13));  // positions 20-32: 32 = block 3 (third of seq 1), slot 0
    w = m.stats().last_write;
    QCOMPARE(w.seq, SeqId{1});
    QCOMPARE(w.first_position, 20);
    QCOMPARE(w.count, 13);
    QCOMPARE(w.last_block, 3);
    QCOMPARE(w.last_slot, 0);
    m.truncate(1, 25);  // rejected tokens: positions 20-24 stay, 24 = block 1 slot 8
    w = m.stats().last_write;
    QCOMPARE(w.count, 5);
    QCOMPARE(w.last_block, 1);
    QCOMPARE(w.last_slot, 8);
    m.truncate(1, 20);  // everything the write added is gone
    QCOMPARE(m.stats().last_write.seq, SeqId{-1});
    QVERIFY(m.allocate_slots(2, 1));
    QCOMPARE(m.stats().last_write.seq, SeqId{2});
    m.free_sequence(2);
    QCOMPARE(m.stats().last_write.seq, SeqId{-1});
}

void TestKvCache::freeSequenceReturnsAllBlocks() {
    KvCacheManager m(small_shape(8));
    QVERIFY(m.allocate_slots(1, 50));  // 4 blocks
    QVERIFY(m.allocate_slots(2, 10));  // 1 block
    QCOMPARE(m.pool().num_free(), 3);
    m.free_sequence(1);
    QVERIFY(!m.has_sequence(1));
    QCOMPARE(m.pool().num_free(), 7);
    m.free_sequence(2);
    QCOMPARE(m.pool().num_free(), 8);
    QVERIFY(m.sequences().empty());
    QCOMPARE(m.stats().blocks_used, 0);
    EXPECT_ERROR_MENTIONS(m.free_sequence(2), "sequence 2");
}

// KvStorage commits the pages of each (layer, kv head)'s first block of K and V when it is
// built (a first prompt writes all of them in one pass, and committing 2 MiB pages there cost
// up to 240 ms), and nothing else: 3 layers x 2 heads x K and V are 12 regions of 16 MiB (F16)
// or 8 MiB (Q8) here, so between 12 small pages and 12 large ones are in memory.
// Q8 also commits the first rows' scales.
void TestKvCache::firstBlocksAreCommittedAtConstruction() {
#ifndef __linux__
    QSKIP("resident bytes are measured with Linux's mincore");
#endif
    for (const ElementType type : {ElementType::F16, ElementType::Q8}) {
        const CacheShape shape{.layers = 3,
                               .kv_heads = 2,
                               .head_dim = 64,
                               .num_blocks = 8192,
                               .block_size = 16,
                               .type = type};
        KvStorage storage(shape);
        const std::uint64_t resident = storage.resident_bytes();
        const std::uint64_t regions = 2 * 3 * 2;
        qInfo("%s: %llu of %llu bytes resident after construction", element_type_name(type),
              static_cast<unsigned long long>(resident),
              static_cast<unsigned long long>(storage.bytes()));
        QVERIFY(resident >= regions * 4096);
        // Q8's K and V scales are 3 MiB arrays each, the first rows of the 6 regions spread
        // over them: up to two large pages each.
        QVERIFY(resident <=
                (regions + (type == ElementType::Q8 ? 4 : 0)) * tokenscope::kLargePageBytes);
        QVERIFY(resident < storage.bytes() / 2);
    }
}

// A sequence made after one was freed (or truncated) gets those blocks in ascending order, so
// that attention reads a head's keys forward through memory (KvStorage's layout; the comment in
// KvCacheManager::free_sequence has the measurement).
void TestKvCache::freedBlocksComeBackInAscendingOrder() {
    KvCacheManager m(small_shape(8));
    QVERIFY(m.allocate_slots(1, 64));  // blocks 0-3
    QCOMPARE(m.block_table(1), std::vector<int>({0, 1, 2, 3}));
    m.free_sequence(1);
    QVERIFY(m.allocate_slots(2, 64));
    QCOMPARE(m.block_table(2), std::vector<int>({0, 1, 2, 3}));
    m.truncate(2, 16);  // gives back blocks 1-3
    QVERIFY(m.allocate_slots(3, 48));
    QCOMPARE(m.block_table(3), std::vector<int>({1, 2, 3}));
}

void TestKvCache::forkSharesBlocksAndCopiesOnWrite() {
    KvCacheManager m(small_shape(10));
    QVERIFY(m.allocate_slots(1, 40));  // blocks 0, 1 full; block 2 holds 8
    m.fork(1, 2, 40);
    QCOMPARE(m.block_table(2), std::vector<int>({0, 1, 2}));
    for (int b : {0, 1, 2}) QCOMPARE(m.pool().ref_count(b), 2);
    QCOMPARE(m.pool().num_free(), 7);  // forking takes no block
    QVERIFY(m.take_block_copies().empty());

    // Sequence 2 appends into the shared, partially filled block 2: it gets a copy (block 3)
    // holding the 8 tokens, then writes token 40 there.
    QCOMPARE(m.blocks_needed(2, 1), 1);
    QVERIFY(m.allocate_slots(2, 1));
    QCOMPARE(m.block_table(2), std::vector<int>({0, 1, 3}));
    QCOMPARE(m.take_block_copies(), std::vector<BlockCopy>({{2, 3, 8}}));
    QCOMPARE(m.pool().ref_count(2), 1);
    QCOMPARE(m.pool().ref_count(3), 1);
    QCOMPARE(m.slot(2, 40), std::int64_t(3 * 16 + 8));

    // Sequence 1 now owns block 2 alone: it appends in place, no copy.
    QCOMPARE(m.blocks_needed(1, 1), 0);
    QVERIFY(m.allocate_slots(1, 1));
    QCOMPARE(m.block_table(1), std::vector<int>({0, 1, 2}));
    QVERIFY(m.take_block_copies().empty());

    // A fork of 20 tokens shares blocks 0 and 1; block 1 is full for sequence 1 but holds
    // only 4 of sequence 3's tokens, so sequence 3's first append copies those 4.
    m.fork(1, 3, 20);
    QCOMPARE(m.block_table(3), std::vector<int>({0, 1}));
    QCOMPARE(m.pool().ref_count(0), 3);
    QCOMPARE(m.pool().ref_count(1), 3);
    QVERIFY(m.allocate_slots(3, 1));
    QCOMPARE(m.block_table(3), std::vector<int>({0, 4}));
    QCOMPARE(m.take_block_copies(), std::vector<BlockCopy>({{1, 4, 4}}));
    QCOMPARE(m.pool().ref_count(1), 2);

    // A fork at a block boundary shares only full blocks: appending takes a fresh block.
    m.fork(1, 4, 32);
    QVERIFY(m.allocate_slots(4, 1));
    QCOMPARE(m.block_table(4), std::vector<int>({0, 1, 5}));
    QVERIFY(m.take_block_copies().empty());

    // Truncating back into a shared block and appending copies too: sequence 4 shares
    // blocks 0 and 1 with sequence 1; at 20 tokens its last block (1) holds 4 of its tokens.
    m.truncate(4, 20);
    QCOMPARE(m.block_table(4), std::vector<int>({0, 1}));
    QVERIFY(m.allocate_slots(4, 1));
    QCOMPARE(m.take_block_copies(), std::vector<BlockCopy>({{1, 5, 4}}));
    QCOMPARE(m.block_table(4), std::vector<int>({0, 5}));

    // Freeing the original keeps the forks' shared blocks alive.
    m.free_sequence(1);
    QVERIFY(m.pool().ref_count(0) == 3);  // sequences 2, 3, 4
    QVERIFY(m.pool().ref_count(1) == 1);  // sequence 2
    QCOMPARE(m.pool().ref_count(2), 0);   // sequence 1's own last block
    QVERIFY2(check_invariants(m).empty(), check_invariants(m).c_str());
    m.free_sequence(2);
    m.free_sequence(3);
    m.free_sequence(4);
    QCOMPARE(m.pool().num_free(), 10);
}

void TestKvCache::freeingAForkKeepsTheOtherSequencesData() {
    const CacheShape shape{.layers = 2,
                           .kv_heads = 2,
                           .head_dim = 4,
                           .num_blocks = 6,
                           .block_size = 4,
                           .type = ElementType::F32};
    KvCacheManager m(shape);
    KvStorage storage(shape);
    const int row = shape.kv_heads * shape.head_dim;
    // Token t of sequence s in layer l has K = (s * 1000 + t * 10 + l) + element / 100 and
    // V = -K: exact in float, distinct for every token.
    auto value = [](SeqId s, int t, int l, int i) {
        return static_cast<float>(static_cast<double>(s) * 1000 + t * 10 + l) + i / 100.0f;
    };
    auto write = [&](SeqId s, SeqId as, int from, int to) {
        storage.apply(m.take_block_copies());
        for (int t = from; t < to; ++t) {
            for (int l = 0; l < shape.layers; ++l) {
                std::vector<float> k(static_cast<std::size_t>(row)), v(k.size());
                for (int i = 0; i < row; ++i) k[i] = value(as, t, l, i), v[i] = -k[i];
                storage.write(l, m.slot(s, t), k.data(), v.data());
            }
        }
    };
    // "" when sequence s holds tokens [from, to) as written for sequence `as`.
    auto holds = [&](SeqId s, SeqId as, int from, int to) -> std::string {
        std::vector<float> k(static_cast<std::size_t>(shape.head_dim)), v(k.size());
        for (int t = from; t < to; ++t) {
            for (int l = 0; l < shape.layers; ++l) {
                for (int h = 0; h < shape.kv_heads; ++h) {
                    storage.read_k(l, m.slot(s, t), h, k.data());
                    storage.read_v(l, m.slot(s, t), h, v.data());
                    for (int i = 0; i < shape.head_dim; ++i) {
                        const float want = value(as, t, l, h * shape.head_dim + i);
                        if (k[i] != want || v[i] != -want) {
                            return "seq " + std::to_string(s) + " token " + std::to_string(t) +
                                   " layer " + std::to_string(l) + " differs";
                        }
                    }
                }
            }
        }
        return {};
    };

    QVERIFY(m.allocate_slots(1, 10));  // blocks 0, 1 full (4 each), block 2 holds 2
    write(1, 1, 0, 10);
    m.fork(1, 2, 10);
    QVERIFY(m.allocate_slots(2, 3));  // copy-on-write of block 2, then 3 new tokens
    write(2, 2, 10, 13);
    QVERIFY(m.allocate_slots(1, 1));  // in place
    write(1, 1, 10, 11);
    QVERIFY2(holds(1, 1, 0, 11).empty(), holds(1, 1, 0, 11).c_str());
    QVERIFY2(holds(2, 1, 0, 10).empty(), holds(2, 1, 0, 10).c_str());
    QVERIFY2(holds(2, 2, 10, 13).empty(), holds(2, 2, 10, 13).c_str());

    // Free sequence 1; a new sequence reuses its freed block and overwrites it.
    m.free_sequence(1);
    // Sequence 2 keeps 0, 1 (were shared), 3 (its copy of block 2) and 4; block 2 is free.
    QCOMPARE(m.pool().num_free(), 2);
    QVERIFY(m.allocate_slots(3, 8));
    write(3, 3, 0, 8);
    QVERIFY2(holds(2, 1, 0, 10).empty(), holds(2, 1, 0, 10).c_str());
    QVERIFY2(holds(2, 2, 10, 13).empty(), holds(2, 2, 10, 13).c_str());
    QVERIFY2(holds(3, 3, 0, 8).empty(), holds(3, 3, 0, 8).c_str());
}

void TestKvCache::slotMapping() {
    KvCacheManager m(small_shape(6));
    QVERIFY(m.allocate_slots(1, 16));  // block 0
    QVERIFY(m.allocate_slots(2, 16));  // block 1
    QVERIFY(m.allocate_slots(1, 16));  // block 2
    QCOMPARE(m.slot(1, 0), std::int64_t(0));
    QCOMPARE(m.slot(1, 15), std::int64_t(15));
    QCOMPARE(m.slot(1, 16), std::int64_t(2 * 16 + 0));  // = 32
    QCOMPARE(m.slot(1, 17), std::int64_t(2 * 16 + 1));  // = 33
    QCOMPARE(m.slot(2, 5), std::int64_t(1 * 16 + 5));   // = 21
    m.free_sequence(2);                                 // block 1 back on the free stack
    QVERIFY(m.allocate_slots(3, 20));                   // block 1, then block 3
    QCOMPARE(m.block_table(3), std::vector<int>({1, 3}));
    QCOMPARE(m.slot(3, 19), std::int64_t(3 * 16 + 3));  // = 51
    EXPECT_ERROR_MENTIONS(m.slot(3, 20), "position 20", "sequence 3", "20 tokens");
    EXPECT_ERROR_MENTIONS(m.slot(3, -1), "position -1");
    EXPECT_ERROR_MENTIONS(m.slot(2, 0), "sequence 2");
}

void TestKvCache::statsNumbers() {
    // 2 layers, 2 kv heads, head_dim 8, F16: 2 * 2 * 2 * 8 * 2 = 128 bytes per token.
    KvCacheManager m(small_shape(6));
    QVERIFY(m.allocate_slots(5, 20));  // blocks 0, 1 (16 + 4)
    QVERIFY(m.allocate_slots(3, 16));  // block 2
    m.fork(5, 7, 16);                  // shares block 0
    const KvStats st = m.stats();
    QCOMPARE(st.blocks_total, 6);
    QCOMPARE(st.blocks_used, 3);
    QCOMPARE(st.blocks_free, 3);
    QCOMPARE(st.block_size, 16);
    QCOMPARE(st.sequences.size(), std::size_t(3));
    // Ascending seq ids: 3, 5, 7.
    QCOMPARE(st.sequences[0].seq, SeqId(3));
    QCOMPARE(st.sequences[0].blocks, 1);
    QCOMPARE(st.sequences[0].tokens, 16);
    QCOMPARE(st.sequences[0].shared_blocks, 0);
    QCOMPARE(st.sequences[1].seq, SeqId(5));
    QCOMPARE(st.sequences[1].blocks, 2);
    QCOMPARE(st.sequences[1].tokens, 20);
    QCOMPARE(st.sequences[1].shared_blocks, 1);
    QCOMPARE(st.sequences[2].seq, SeqId(7));
    QCOMPARE(st.sequences[2].blocks, 1);
    QCOMPARE(st.sequences[2].tokens, 16);
    QCOMPARE(st.sequences[2].shared_blocks, 1);
    // Block 0 is shared by 5 and 7: shown as 5's, the lower id.
    QCOMPARE(st.block_owner, std::vector<SeqId>({5, 5, 3, -1, -1, -1}));
    QCOMPARE(st.block_refs, std::vector<int>({2, 1, 1, 0, 0, 0}));
    QCOMPARE(st.tokens_logical, std::int64_t(20 + 16 + 16));  // 52
    QCOMPARE(st.tokens_stored, std::int64_t(16 + 4 + 16));    // 36: block 0 once
    QCOMPARE(st.bytes_per_token, std::uint64_t(128));
    QCOMPARE(st.bytes_total, std::uint64_t(6 * 16 * 128));  // 12288
    QCOMPARE(st.bytes_used, std::uint64_t(36 * 128));       // 4608
}

void TestKvCache::errorsNameTheSequenceAndValues() {
    KvCacheManager m(small_shape(4));
    QVERIFY(m.allocate_slots(11, 20));
    EXPECT_ERROR_MENTIONS(m.num_tokens(12), "sequence 12");
    EXPECT_ERROR_MENTIONS(m.block_table(12), "sequence 12");
    EXPECT_ERROR_MENTIONS(m.truncate(12, 0), "sequence 12");
    EXPECT_ERROR_MENTIONS(m.truncate(11, 21), "sequence 11", "21", "20");
    EXPECT_ERROR_MENTIONS(m.truncate(11, -2), "sequence 11", "-2");
    EXPECT_ERROR_MENTIONS(m.allocate_slots(11, -1), "sequence 11", "-1");
    EXPECT_ERROR_MENTIONS(m.fork(12, 13, 0), "sequence 12");
    EXPECT_ERROR_MENTIONS(m.fork(11, 11, 0), "11", "already exists");
    EXPECT_ERROR_MENTIONS(m.fork(11, 13, 21), "21", "sequence 11", "20");
    QVERIFY(!m.has_sequence(13));
    QCOMPARE(m.num_tokens(11), 20);
    QVERIFY2(check_invariants(m).empty(), check_invariants(m).c_str());

    KvStorage storage(small_shape(4));
    std::vector<float> buf(16);
    EXPECT_ERROR_MENTIONS(storage.write(2, 0, buf.data(), buf.data()), "layer 2");
    EXPECT_ERROR_MENTIONS(storage.read_k(0, 64, 0, buf.data()), "slot 64", "slots 64");
    EXPECT_ERROR_MENTIONS(storage.read_v(0, 0, 2, buf.data()), "head 2");
    EXPECT_ERROR_MENTIONS(storage.copy_block({0, 4, 1}), "block 4");
    EXPECT_ERROR_MENTIONS(storage.copy_block({0, 1, 17}), "17 tokens");
}

// ---------------------------------------------------------------------------------------------

void TestKvCache::bytesFormulaIsExact_data() {
    QTest::addColumn<CacheShape>("shape");
    QTest::addColumn<int>("tokens");
    QTest::addColumn<quint64>("per_token");
    QTest::addColumn<quint64>("used");
    QTest::addColumn<quint64>("total");

    // 2 layers, 4 kv heads, head_dim 64, 10 blocks of 16 (160 slots), 37 tokens in use.
    const CacheShape base{.layers = 2, .kv_heads = 4, .head_dim = 64, .num_blocks = 10};
    CacheShape f32 = base, f16 = base, q8 = base;
    f32.type = ElementType::F32;
    q8.type = ElementType::Q8;
    // F32: 2 * 2 * 4 * 64 * 4 = 4096 B/token; 37 * 4096 = 151552; 160 * 4096 = 655360.
    QTest::newRow("f32") << f32 << 37 << quint64(4096) << quint64(151552) << quint64(655360);
    // F16: 2 * 2 * 4 * 64 * 2 = 2048 B/token; 37 * 2048 = 75776; 160 * 2048 = 327680.
    QTest::newRow("f16") << f16 << 37 << quint64(2048) << quint64(75776) << quint64(327680);
    // Q8: 2 * 2 * 4 * 64 * 1 = 1024 plus scales 2 * 2 * 4 * 4 = 64 -> 1088 B/token;
    // 37 * 1088 = 40256; 160 * 1088 = 174080.
    QTest::newRow("q8") << q8 << 37 << quint64(1088) << quint64(40256) << quint64(174080);
    // Gemma 3 270M: 18 layers, 1 kv head, head_dim 256, F16, 2048 blocks of 16 (32768 slots):
    // 2 * 18 * 1 * 256 * 2 = 18432 B/token; 1000 * 18432 = 18432000;
    // 32768 * 18432 = 603979776 (576 MiB).
    const CacheShape gemma{.layers = 18, .kv_heads = 1, .head_dim = 256, .num_blocks = 2048};
    QTest::newRow("gemma3-270m-f16")
        << gemma << 1000 << quint64(18432) << quint64(18432000) << quint64(603979776);
    // Odd sizes, block size 7, Q8: 2 * 3 * 5 * 17 * 1 = 510 plus 2 * 3 * 5 * 4 = 120
    // -> 630 B/token; 22 tokens -> 13860; 9 blocks * 7 = 63 slots -> 39690.
    const CacheShape odd{.layers = 3,
                         .kv_heads = 5,
                         .head_dim = 17,
                         .num_blocks = 9,
                         .block_size = 7,
                         .type = ElementType::Q8};
    QTest::newRow("q8-odd") << odd << 22 << quint64(630) << quint64(13860) << quint64(39690);
}

void TestKvCache::bytesFormulaIsExact() {
    QFETCH(CacheShape, shape);
    QFETCH(int, tokens);
    QFETCH(quint64, per_token);
    QFETCH(quint64, used);
    QFETCH(quint64, total);

    KvCacheManager m(shape);
    QVERIFY(m.allocate_slots(1, tokens));
    const KvStats st = m.stats();
    QCOMPARE(st.tokens_stored, std::int64_t(tokens));
    QCOMPARE(quint64(st.bytes_per_token), per_token);
    QCOMPARE(quint64(bytes_per_token(shape)), per_token);
    QCOMPARE(quint64(st.bytes_used), used);
    QCOMPARE(quint64(st.bytes_total), total);
    QCOMPARE(quint64(capacity_bytes(shape)), total);
    QVERIFY(QString::fromStdString(bytes_per_token_formula(shape))
                .endsWith(QStringLiteral("= %1 B per token").arg(per_token)));
    // The host storage allocates exactly the capacity.
    QCOMPARE(quint64(KvStorage(shape).bytes()), total);
}

void TestKvCache::bytesFormulaText() {
    const CacheShape gemma{.layers = 18, .kv_heads = 1, .head_dim = 256, .num_blocks = 4};
    QCOMPARE(QString::fromStdString(bytes_per_token_formula(gemma)),
             QString::fromUtf8(
                 "2 \u00d7 18 layers \u00d7 1 kv_heads \u00d7 256 head_dim \u00d7 2 B (f16) "
                 "= 18432 B per token"));
    const CacheShape odd{.layers = 3,
                         .kv_heads = 5,
                         .head_dim = 17,
                         .num_blocks = 9,
                         .block_size = 7,
                         .type = ElementType::Q8};
    QCOMPARE(QString::fromStdString(bytes_per_token_formula(odd)),
             QString::fromUtf8(
                 "2 \u00d7 3 layers \u00d7 5 kv_heads \u00d7 (17 head_dim \u00d7 1 B + 4 B "
                 "scale) (q8) = 630 B per token"));
}

void TestKvCache::bytesWithASharedPrefixCountItOnce() {
    // 2 layers, 4 kv heads, head_dim 64, F16: 2048 bytes per token.
    const CacheShape shape{.layers = 2, .kv_heads = 4, .head_dim = 64, .num_blocks = 10};
    KvCacheManager m(shape);
    QVERIFY(m.allocate_slots(1, 37));  // blocks 0, 1 full, block 2 holds 5
    m.fork(1, 2, 37);
    KvStats st = m.stats();
    QCOMPARE(st.tokens_logical, std::int64_t(74));
    QCOMPARE(st.tokens_stored, std::int64_t(37));
    QCOMPARE(st.bytes_used, std::uint64_t(37 * 2048));  // 75776
    // Sequence 2 appends 5: block 2 is copied (5 tokens) and the copy grows to 10.
    // Stored: 32 shared + 5 in block 2 + 10 in the copy = 47 -> 47 * 2048 = 96256.
    QVERIFY(m.allocate_slots(2, 5));
    st = m.stats();
    QCOMPARE(st.tokens_logical, std::int64_t(37 + 42));
    QCOMPARE(st.tokens_stored, std::int64_t(47));
    QCOMPARE(st.bytes_used, std::uint64_t(96256));
    // A fork of 20 tokens stores nothing new: its 20 tokens live in blocks 0 and 1.
    m.fork(1, 3, 20);
    QCOMPARE(m.stats().tokens_stored, std::int64_t(47));
}

// ---------------------------------------------------------------------------------------------

void TestKvCache::storageRoundTrip_data() {
    QTest::addColumn<ElementType>("type");
    QTest::addColumn<int>("head_dim");
    QTest::addColumn<KernelChoice>("kernels");
    for (KernelChoice kc : {KernelChoice::Best, KernelChoice::Scalar}) {
        const char* kn = kc == KernelChoice::Best ? "best" : "scalar";
        for (ElementType t : {ElementType::F32, ElementType::F16, ElementType::Q8}) {
            // 64: whole SIMD vectors; 21: 2 vectors and a 5-element tail.
            for (int d : {64, 21}) {
                QTest::addRow("%s-%d-%s", element_type_name(t), d, kn) << t << d << kc;
            }
        }
    }
}

void TestKvCache::storageRoundTrip() {
    QFETCH(ElementType, type);
    QFETCH(int, head_dim);
    QFETCH(KernelChoice, kernels);
    const CacheShape shape{.layers = 3,
                           .kv_heads = 2,
                           .head_dim = head_dim,
                           .num_blocks = 3,
                           .block_size = 4,
                           .type = type};
    KvStorage storage(shape, kernels);
    KvStorage scalar(shape, KernelChoice::Scalar);
    const auto row = static_cast<std::size_t>(shape.kv_heads * head_dim);
    Random rng(1234);
    const auto d = static_cast<std::size_t>(head_dim);

    // Rows of very different magnitudes, one all zero (Q8 scale 0), one with a single spike.
    struct Written {
        int layer;
        std::int64_t slot;
        std::vector<float> k, v;
    };
    std::vector<Written> written;
    for (int layer = 0; layer < shape.layers; ++layer) {
        for (std::int64_t slot = 0; slot < 12; slot += 1 + layer) {
            const double amplitude = std::ldexp(1.0, static_cast<int>(slot % 7) * 3 - 9);
            Written w{layer, slot, random_floats(rng, row, amplitude),
                      random_floats(rng, row, 2 * amplitude)};
            if (slot == 3) std::fill(w.k.begin(), w.k.begin() + head_dim, 0.0f);
            if (slot == 5) w.v[d + 2] = 1000.0f;
            storage.write(layer, slot, w.k.data(), w.v.data());
            scalar.write(layer, slot, w.k.data(), w.v.data());
            written.push_back(std::move(w));
        }
    }
    std::vector<float> out(d), ref(d);
    for (const Written& w : written) {
        for (int part = 0; part < 2; ++part) {
            for (int h = 0; h < shape.kv_heads; ++h) {
                const float* x = (part == 0 ? w.k.data() : w.v.data()) + h * head_dim;
                if (part == 0) {
                    storage.read_k(w.layer, w.slot, h, out.data());
                    scalar.read_k(w.layer, w.slot, h, ref.data());
                } else {
                    storage.read_v(w.layer, w.slot, h, out.data());
                    scalar.read_v(w.layer, w.slot, h, ref.data());
                }
                // The SIMD path stores and reads the very same values as the portable one.
                QCOMPARE(out, ref);
                double amax = 0;
                for (std::size_t i = 0; i < d; ++i) amax = std::max(amax, std::fabs(double(x[i])));
                const double scale = amax / 127.0;
                for (std::size_t i = 0; i < d; ++i) {
                    const double want = x[i];
                    const double got = out[i];
                    switch (type) {
                        case ElementType::F32:
                            QCOMPARE(got, want);
                            break;
                        case ElementType::F16: {
                            // Round to nearest even: relative error at most 2^-11 for normal
                            // halves, absolute 2^-25 below 2^-14 (subnormal spacing 2^-24),
                            // and bit-identical to the tensor library's conversion.
                            QVERIFY2(std::fabs(got - want) <=
                                         std::max(std::ldexp(std::fabs(want), -11), 0x1p-25),
                                     qPrintable(QString("%1 vs %2").arg(got).arg(want)));
                            QCOMPARE(out[i], tokenscope::tensor::f16_to_f32(
                                                 tokenscope::tensor::f32_to_f16(x[i])));
                            break;
                        }
                        case ElementType::Q8:
                            // |x - q * scale| <= scale / 2, with slack for the float rounding
                            // of x / scale and q * scale (a few ulps of amax).
                            QVERIFY2(
                                std::fabs(got - want) <= scale / 2 + amax * 0x1p-22,
                                qPrintable(
                                    QString("%1 vs %2, scale %3").arg(got).arg(want).arg(scale)));
                            break;
                    }
                }
            }
        }
    }
    // An all-zero Q8 row reads back as zeros (scale 0, no division by zero).
    storage.read_k(0, 3, 0, out.data());
    for (float x : out) QCOMPARE(x, 0.0f);
}

// kv::floats_to_halves / halves_to_floats (the attention capture's conversions) against
// tensor::f32_to_f16 / f16_to_f32, the integer code that defines the rounding (to nearest, ties
// to even), element by element and bit for bit. Inputs: random values over the half range and
// the edges worked out by hand: ties (1 + 2^-11 rounds down to 1, 1 + 3 * 2^-11 up to
// 1 + 2^-9), the largest half 65504, 65520 (the first value that overflows to infinity), the
// smallest subnormal 2^-24 and half of it (a tie that rounds to 0), -0, +-infinity. NaN is left
// out: F16C sets the quiet bit of a signalling NaN, the integer code keeps it as it is. Lengths
// 0-40 cover every tail of the 8-wide loop.
void TestKvCache::halfRowsMatchTheIntegerConversion() {
    Random rng(21);
    std::vector<float> values = {1.0f + 0x1p-11f,
                                 1.0f + 3 * 0x1p-11f,
                                 65504.0f,
                                 65520.0f,
                                 -65520.0f,
                                 0x1p-24f,
                                 0x1p-25f,
                                 0x1p-14f,
                                 -0.0f,
                                 0.0f,
                                 INFINITY,
                                 -INFINITY,
                                 0.1f,
                                 -3.0f};
    for (int i = 0; i < 600; ++i) {
        const double magnitude = std::ldexp(rng.unit(), rng.below(44) - 28);
        values.push_back(static_cast<float>(rng.below(2) ? magnitude : -magnitude));
    }
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8},
                          std::size_t{9}, std::size_t{23}, std::size_t{40}, values.size()}) {
        for (std::size_t start = 0; start + n <= values.size();
             start += std::max<std::size_t>(n, 97)) {
            const std::span<const float> in(values.data() + start, n);
            std::vector<std::uint16_t> halves(n + 1, 0xABCD);  // one guard element
            floats_to_halves(in, halves.data());
            QCOMPARE(halves[n], std::uint16_t{0xABCD});
            std::vector<float> back(n + 1, -7.0f);
            halves_to_floats(std::span<const std::uint16_t>(halves.data(), n), back.data());
            QCOMPARE(back[n], -7.0f);
            for (std::size_t i = 0; i < n; ++i) {
                const std::uint16_t want = tensor::f32_to_f16(in[i]);
                QVERIFY2(halves[i] == want,
                         qPrintable(QString("n %1, element %2 (%3): 0x%4, integer code 0x%5")
                                        .arg(n)
                                        .arg(i)
                                        .arg(double(in[i]), 0, 'g', 9)
                                        .arg(halves[i], 4, 16, QChar('0'))
                                        .arg(want, 4, 16, QChar('0'))));
                const float exact = tensor::f16_to_f32(want);
                QCOMPARE(std::memcmp(&back[i], &exact, sizeof exact), 0);
            }
        }
    }
    // The hand-worked edges, through the integer code (so that the comparison above is against
    // the right values, not only against itself).
    QCOMPARE(tensor::f32_to_f16(1.0f + 0x1p-11f), std::uint16_t{0x3C00});
    QCOMPARE(tensor::f32_to_f16(1.0f + 3 * 0x1p-11f), std::uint16_t{0x3C02});
    QCOMPARE(tensor::f32_to_f16(65520.0f), std::uint16_t{0x7C00});
    QCOMPARE(tensor::f32_to_f16(0x1p-25f), std::uint16_t{0x0000});
}

void TestKvCache::dotAndAxpyMatchFloat64Reference_data() {
    storageRoundTrip_data();
}

void TestKvCache::dotAndAxpyMatchFloat64Reference() {
    QFETCH(ElementType, type);
    QFETCH(int, head_dim);
    QFETCH(KernelChoice, kernels);
    const CacheShape shape{.layers = 2,
                           .kv_heads = 3,
                           .head_dim = head_dim,
                           .num_blocks = 4,
                           .block_size = 8,
                           .type = type};
    KvStorage storage(shape, kernels);
    const auto d = static_cast<std::size_t>(head_dim);
    const auto row = static_cast<std::size_t>(shape.kv_heads) * d;
    Random rng(99);
    const std::vector<std::int64_t> slot_list = {0, 5, 9, 17, 31, 30, 12};
    for (int layer = 0; layer < shape.layers; ++layer) {
        for (std::int64_t slot : slot_list) {
            const auto k = random_floats(rng, row, 2.0);
            const auto v = random_floats(rng, row, 3.0);
            storage.write(layer, slot, k.data(), v.data());
        }
    }
    const auto q = random_floats(rng, d, 1.5);
    const auto acc0 = random_floats(rng, d, 1.0);
    const auto weights = random_floats(rng, slot_list.size(), 1.0);
    // Float accumulation of n products: error at most about n * 2^-24 * sum |terms|.
    const double rel = (static_cast<double>(d) + 4) * 0x1p-24;

    std::vector<float> k(d), v(d);
    for (int layer = 0; layer < shape.layers; ++layer) {
        for (int h = 0; h < shape.kv_heads; ++h) {
            std::vector<float> scores(slot_list.size());
            storage.dot_k(layer, h, q.data(), slot_list, scores);
            std::vector<float> acc = acc0;
            storage.axpy_v(layer, h, slot_list, weights, acc.data());
            std::vector<double> acc_ref(acc0.begin(), acc0.end());
            std::vector<double> acc_mag(d);
            for (std::size_t i = 0; i < d; ++i) acc_mag[i] = std::fabs(acc_ref[i]);

            for (std::size_t j = 0; j < slot_list.size(); ++j) {
                // Reference on the stored (dequantized) values, in float64.
                storage.read_k(layer, slot_list[j], h, k.data());
                storage.read_v(layer, slot_list[j], h, v.data());
                double dot = 0, mag = 0;
                for (std::size_t i = 0; i < d; ++i) {
                    dot += double(q[i]) * double(k[i]);
                    mag += std::fabs(double(q[i]) * double(k[i]));
                }
                const float single = storage.dot_k(layer, slot_list[j], h, q.data());
                QCOMPARE(scores[j], single);  // the batched form is the same computation
                QVERIFY2(std::fabs(double(single) - dot) <= rel * mag + 1e-30,
                         qPrintable(QString("dot %1 vs %2").arg(single).arg(dot)));

                std::vector<float> one = acc0;
                storage.axpy_v(layer, slot_list[j], h, weights[j], one.data());
                for (std::size_t i = 0; i < d; ++i) {
                    const double want = double(acc0[i]) + double(weights[j]) * double(v[i]);
                    const double bound =
                        4 * 0x1p-24 *
                        (std::fabs(double(acc0[i])) + std::fabs(double(weights[j]) * double(v[i])));
                    QVERIFY2(std::fabs(double(one[i]) - want) <= bound,
                             qPrintable(QString("axpy %1 vs %2").arg(one[i]).arg(want)));
                    acc_ref[i] += double(weights[j]) * double(v[i]);
                    acc_mag[i] += std::fabs(double(weights[j]) * double(v[i]));
                }
            }
            for (std::size_t i = 0; i < d; ++i) {
                const double bound =
                    (static_cast<double>(slot_list.size()) + 4) * 0x1p-23 * acc_mag[i];
                QVERIFY2(std::fabs(double(acc[i]) - acc_ref[i]) <= bound,
                         qPrintable(QString("acc %1 vs %2").arg(acc[i]).arg(acc_ref[i])));
            }
        }
    }
}

void TestKvCache::copyBlockCopiesEveryLayerAndPart() {
    for (ElementType type : {ElementType::F32, ElementType::F16, ElementType::Q8}) {
        const CacheShape shape{.layers = 3,
                               .kv_heads = 2,
                               .head_dim = 5,
                               .num_blocks = 4,
                               .block_size = 4,
                               .type = type};
        KvStorage storage(shape);
        Random rng(7);
        const std::size_t row = 10;
        for (int layer = 0; layer < 3; ++layer) {
            for (std::int64_t slot = 0; slot < 16; ++slot) {
                const auto k = random_floats(rng, row, 1.0);
                const auto v = random_floats(rng, row, 1.0);
                storage.write(layer, slot, k.data(), v.data());
            }
        }
        // Copy the first 3 tokens of block 1 (slots 4..6) into block 3 (slots 12..14);
        // slot 15 keeps its own value.
        // K is stored transposed, so slot 15's K elements sit between copied ones.
        std::vector<float> before15(5), before15k(5);
        storage.read_v(2, 15, 1, before15.data());
        storage.read_k(2, 15, 1, before15k.data());
        storage.apply(std::vector<BlockCopy>{{1, 3, 3}});
        std::vector<float> a(5), b(5);
        for (int layer = 0; layer < 3; ++layer) {
            for (int t = 0; t < 3; ++t) {
                for (int h = 0; h < 2; ++h) {
                    storage.read_k(layer, 4 + t, h, a.data());
                    storage.read_k(layer, 12 + t, h, b.data());
                    QCOMPARE(a, b);
                    storage.read_v(layer, 4 + t, h, a.data());
                    storage.read_v(layer, 12 + t, h, b.data());
                    QCOMPARE(a, b);
                }
            }
        }
        storage.read_v(2, 15, 1, a.data());
        QCOMPARE(a, before15);
        storage.read_k(2, 15, 1, a.data());
        QCOMPARE(a, before15k);
    }
}

// An F16 or Q8 cache read in place (KvStorage::scores_in_place, accumulate_in_place) gives
// exactly what the tiles give with the same table: the scores of tile_scores and the sums of
// tile_accumulate (checked against float64 too: keys + 1 roundings of the sum of |terms|,
// twice), for every column, a slice of columns and a weight row per query row. F32 declines.
namespace {
void check_in_place(const KvStorage& storage, ElementType type, int head,
                    const std::vector<std::int64_t>& list, const std::vector<float>& q, int rows,
                    float scale, const std::vector<float>& tile_scores,
                    const KvStorage::Tile& values, Random& rng, const QString& where) {
    constexpr int kTile = KvStorage::kTileKeys;
    const int head_dim = storage.shape().head_dim;
    std::vector<float> scores(tile_scores.size(), -9.0f);
    const bool in_place =
        storage.scores_in_place(1, head, list, q.data(), rows, scale, scores.data(), kTile);
    std::vector<float> weights = random_floats(rng, static_cast<std::size_t>(rows * kTile), 1.0);
    std::vector<float> out(static_cast<std::size_t>(rows * head_dim), -9.0f);
    const bool accumulated =
        storage.accumulate_in_place(1, head, list, weights.data(), kTile, rows, 0, 0, out.data());
    if (type == ElementType::F32) {
        QVERIFY2(!in_place && !accumulated, qPrintable(where + " read in place"));
        QVERIFY2(scores[0] == -9.0f && out[0] == -9.0f, qPrintable(where + " wrote"));
        return;
    }
    QVERIFY2(in_place && accumulated, qPrintable(where + " declined"));
    QVERIFY2(std::memcmp(scores.data(), tile_scores.data(), scores.size() * sizeof(float)) == 0,
             qPrintable(where + " in-place scores differ from the tile's"));
    struct Columns {
        int first, cols;
    };
    for (const Columns c : {Columns{0, head_dim}, Columns{head_dim / 3, head_dim / 2}}) {
        const auto n = static_cast<std::size_t>(rows * c.cols);
        std::vector<float> start = random_floats(rng, n, 0.5);
        std::vector<float> direct = start, tiled = start;
        // The tile's rows restricted to the columns, as v_tile(first, cols) hands them out.
        KvStorage::Tile slice = values;
        for (int j = 0; j < kTile; ++j) slice.rows[j] = values.rows[j] + c.first;
        slice.cols = c.cols;
        storage.tile_accumulate(weights.data(), kTile, rows, slice, tiled.data());
        QVERIFY(storage.accumulate_in_place(1, head, list, weights.data(), kTile, rows, c.first,
                                            c.cols, direct.data()));
        const QString cols = where + QString(" columns %1+%2").arg(c.first).arg(c.cols);
        QVERIFY2(std::memcmp(direct.data(), tiled.data(), n * sizeof(float)) == 0,
                 qPrintable(cols + ": in-place sums differ from the tile's"));
        for (int r = 0; r < rows; ++r) {
            for (int i = 0; i < c.cols; ++i) {
                double sum = start[static_cast<std::size_t>(r * c.cols + i)];
                double mag = std::fabs(sum);
                for (int j = 0; j < kTile; ++j) {
                    const double t = double(weights[static_cast<std::size_t>(r * kTile + j)]) *
                                     double(values.rows[j][c.first + i]);
                    sum += t;
                    mag += std::fabs(t);
                }
                const double got = direct[static_cast<std::size_t>(r * c.cols + i)];
                QVERIFY2(
                    std::fabs(got - sum) <= 2 * (kTile + 1) * 0x1p-24 * mag,
                    qPrintable(
                        cols +
                        QString(" row %1 column %2: %3 vs %4").arg(r).arg(i).arg(got).arg(sum)));
            }
        }
    }
}
}  // namespace

// The attention tiles: k_tile's transposed tile and v_tile's rows hold exactly what read_k and
// read_v give, for slot lists that run across block boundaries, jump between blocks and start
// mid-block; and tile_scores gives the same bits with every kernel table (the contract in
// kv_kernels.h: one FMA chain per score), each score within the float bound of a float64 dot
// product of the same stored values.
// And the in-place reads (check_in_place) agree with the tiles.
void TestKvCache::tilesMatchReadBackAndTablesAgree() {
    struct Tables {
        KernelChoice kernels;
        tensor::SimdLevel level;
    };
    std::vector<Tables> tables = {{KernelChoice::Scalar, tensor::detected_simd_level()}};
    if (tensor::detected_simd_level() >= tensor::SimdLevel::Avx2)
        tables.push_back({KernelChoice::Best, tensor::SimdLevel::Avx2});
    if (tensor::detected_simd_level() == tensor::SimdLevel::Avx512)
        tables.push_back({KernelChoice::Best, tensor::SimdLevel::Avx512});
    struct LevelGuard {
        ~LevelGuard() { tensor::set_simd_level(tensor::detected_simd_level()); }
    } guard;
    constexpr int kTile = KvStorage::kTileKeys;
    for (ElementType type : {ElementType::F32, ElementType::F16, ElementType::Q8}) {
        for (int head_dim : {64, 21, 256}) {
            for (int block_size : {16, 4, 5}) {
                const CacheShape shape{.layers = 2,
                                       .kv_heads = 2,
                                       .head_dim = head_dim,
                                       .num_blocks = 24,
                                       .block_size = block_size,
                                       .type = type};
                const auto row = static_cast<std::size_t>(2 * head_dim);
                const std::int64_t slot_count = 24 * block_size;
                // 32 slot_count: a run from mid-block across two boundaries, a jump back, single
                // slot_count, and a run to the end of the cache.
                std::vector<std::int64_t> list;
                for (std::int64_t s = 3; s < 3 + 2 * block_size + 2; ++s) list.push_back(s);
                list.push_back(1);
                list.push_back(slot_count - 3 * block_size);
                while (list.size() < static_cast<std::size_t>(kTile))
                    list.push_back(slot_count - (kTile - static_cast<std::int64_t>(list.size())));
                list.resize(kTile);

                const int rows = 13;
                Random rng(static_cast<std::uint32_t>(head_dim * 7 + block_size));
                std::vector<std::vector<float>> ks(static_cast<std::size_t>(slot_count)),
                    vs(static_cast<std::size_t>(slot_count));
                for (std::int64_t s = 0; s < slot_count; ++s) {
                    ks[static_cast<std::size_t>(s)] = random_floats(rng, row, 2.0);
                    vs[static_cast<std::size_t>(s)] = random_floats(rng, row, 3.0);
                }
                const auto q = random_floats(rng, static_cast<std::size_t>(rows * head_dim), 1.5);
                const float scale = 0.125f;

                std::vector<float> first_scores;
                for (const Tables& t : tables) {
                    tensor::set_simd_level(t.level);
                    KvStorage storage(shape, t.kernels);
                    for (std::int64_t s = 0; s < slot_count; ++s) {
                        storage.write(1, s, ks[static_cast<std::size_t>(s)].data(),
                                      vs[static_cast<std::size_t>(s)].data());
                    }
                    const QString where = QString("%1 d%2 block %3 %4 level %5")
                                              .arg(element_type_name(type))
                                              .arg(head_dim)
                                              .arg(block_size)
                                              .arg(storage.kernel_name())
                                              .arg(tensor::simd_level_name(t.level));
                    std::vector<float> kbuf(static_cast<std::size_t>(kTile * head_dim), -7.0f);
                    std::vector<float> vbuf(kbuf.size(), -7.0f);
                    KvStorage::KeyTile kt;
                    KvStorage::Tile vt;
                    std::vector<float> k(static_cast<std::size_t>(head_dim)), v(k.size());
                    std::vector<float> scores(static_cast<std::size_t>(rows * kTile));
                    for (int head = 0; head < 2; ++head) {
                        storage.k_tile(1, head, list, kbuf.data(), kt);
                        storage.v_tile(1, head, list, vbuf.data(), vt);
                        QCOMPARE(kt.keys, kTile);
                        QCOMPARE(vt.keys, kTile);
                        storage.tile_scores(q.data(), rows, kt, scale, scores.data(), kTile);
                        for (int j = 0; j < kTile; ++j) {
                            storage.read_k(1, list[static_cast<std::size_t>(j)], head, k.data());
                            storage.read_v(1, list[static_cast<std::size_t>(j)], head, v.data());
                            for (int i = 0; i < head_dim; ++i) {
                                QVERIFY2(kt.values[i * kTile + j] == k[static_cast<std::size_t>(i)],
                                         qPrintable(where +
                                                    QString(" K key %1 element %2").arg(j).arg(i)));
                                QVERIFY2(vt.rows[j][i] == v[static_cast<std::size_t>(i)],
                                         qPrintable(where +
                                                    QString(" V key %1 element %2").arg(j).arg(i)));
                            }
                            for (int r = 0; r < rows; ++r) {
                                double dot = 0, mag = 0;
                                for (int i = 0; i < head_dim; ++i) {
                                    const double p =
                                        double(q[static_cast<std::size_t>(r * head_dim + i)]) *
                                        double(k[static_cast<std::size_t>(i)]);
                                    dot += p;
                                    mag += std::fabs(p);
                                }
                                // head_dim FMA roundings and the scale's: (head_dim + 1) u of
                                // the sum of |terms|.
                                const double got = scores[static_cast<std::size_t>(r * kTile + j)];
                                QVERIFY2(std::fabs(got - dot * scale) <=
                                             (head_dim + 1) * 0x1p-24 * mag * scale,
                                         qPrintable(where + QString(" score %1 %2: %3 vs %4")
                                                                .arg(r)
                                                                .arg(j)
                                                                .arg(got)
                                                                .arg(dot * scale)));
                            }
                        }
                        check_in_place(storage, type, head, list, q, rows, scale, scores, vt, rng,
                                       where);
                        if (QTest::currentTestFailed()) return;
                        if (head == 1) {
                            if (first_scores.empty()) {
                                first_scores = scores;
                            } else {
                                QVERIFY2(
                                    std::memcmp(first_scores.data(), scores.data(),
                                                scores.size() * sizeof(float)) == 0,
                                    qPrintable(where + " scores differ from the scalar table's"));
                            }
                        }
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------

// Random allocate / truncate / fork / free on a small pool (so it runs out often), with a
// one-float-per-token storage that records which token of which sequence lives in each slot.
// After every step: the invariants hold, a refused allocation changed nothing, blocks_needed
// predicted the blocks taken, and every sequence reads back exactly its own tokens (which
// catches a block shared without copy-on-write or reused while still referenced).
void TestKvCache::randomizedStress() {
    const CacheShape shape{.layers = 1,
                           .kv_heads = 1,
                           .head_dim = 1,
                           .num_blocks = 24,
                           .block_size = 4,
                           .type = ElementType::F32};
    KvCacheManager m(shape);
    KvStorage storage(shape);
    std::map<SeqId, std::vector<float>> expected;  // per sequence, its tokens' values
    Random rng(20240607);
    SeqId next_id = 0;
    float next_value = 1.0f;  // every written token gets a distinct value
    int refused = 0, copies = 0, forks = 0;

    auto snapshot = [&] {
        std::map<SeqId, std::pair<int, std::vector<int>>> s;
        for (SeqId id : m.sequences()) s[id] = {m.num_tokens(id), m.block_table(id)};
        return s;
    };
    auto pick = [&]() -> SeqId {
        auto it = expected.begin();
        std::advance(it, rng.below(static_cast<int>(expected.size())));
        return it->first;
    };

    for (int step = 0; step < 4000; ++step) {
        // Creation (new sequences, forks) and freeing roughly balance, so the pool stays
        // around full: some allocations succeed, some are refused.
        const int op = rng.below(20);
        if (expected.empty() || op < 9) {  // allocate: an existing or a new sequence
            const SeqId seq = (expected.empty() || rng.below(8) == 0) ? next_id++ : pick();
            const int n = rng.below(9);
            const int needed = m.blocks_needed(seq, n);
            const int free_before = m.pool().num_free();
            const auto before = snapshot();
            if (m.allocate_slots(seq, n)) {
                QVERIFY(needed <= free_before);
                QCOMPARE(m.pool().num_free(), free_before - needed);
                const auto pending = m.take_block_copies();
                copies += static_cast<int>(pending.size());
                storage.apply(pending);
                auto& values = expected[seq];
                for (int i = 0; i < n; ++i) {
                    const float x = next_value++;
                    storage.write(0, m.slot(seq, static_cast<int>(values.size())), &x, &x);
                    values.push_back(x);
                }
            } else {
                ++refused;
                QVERIFY(needed > free_before);
                QVERIFY(snapshot() == before);
                QCOMPARE(m.pool().num_free(), free_before);
                QVERIFY(m.take_block_copies().empty());
            }
        } else if (op < 12) {  // truncate
            const SeqId seq = pick();
            const int n = rng.below(m.num_tokens(seq) + 1);
            m.truncate(seq, n);
            expected[seq].resize(static_cast<std::size_t>(n));
        } else if (op < 15) {  // fork, half of the time the whole sequence
            const SeqId from = pick();
            const int n =
                rng.below(2) == 0 ? m.num_tokens(from) : rng.below(m.num_tokens(from) + 1);
            const SeqId to = next_id++;
            m.fork(from, to, n);
            const auto& src = expected[from];
            expected[to].assign(src.begin(), src.begin() + n);
            ++forks;
        } else {  // free
            const SeqId seq = pick();
            m.free_sequence(seq);
            expected.erase(seq);
        }

        const std::string problem = check_invariants(m);
        QVERIFY2(problem.empty(),
                 qPrintable(QString("step %1: %2").arg(step).arg(problem.c_str())));
        QCOMPARE(static_cast<int>(m.sequences().size()), static_cast<int>(expected.size()));
        std::int64_t logical = 0;
        for (const auto& [seq, values] : expected) {
            QCOMPARE(m.num_tokens(seq), static_cast<int>(values.size()));
            logical += static_cast<std::int64_t>(values.size());
            for (std::size_t t = 0; t < values.size(); ++t) {
                float k = 0, v = 0;
                storage.read_k(0, m.slot(seq, static_cast<int>(t)), 0, &k);
                storage.read_v(0, m.slot(seq, static_cast<int>(t)), 0, &v);
                QVERIFY2(k == values[t] && v == values[t],
                         qPrintable(QString("step %1: seq %2 token %3 reads %4, expected %5")
                                        .arg(step)
                                        .arg(seq)
                                        .arg(t)
                                        .arg(k)
                                        .arg(values[t])));
            }
        }
        const KvStats st = m.stats();
        QCOMPARE(st.tokens_logical, logical);
        QVERIFY(st.tokens_stored <= logical);
        QVERIFY(st.tokens_stored <= std::int64_t(st.blocks_used) * shape.block_size);
        QCOMPARE(st.bytes_used, st.bytes_per_token * std::uint64_t(st.tokens_stored));
    }
    // The run must have exercised the interesting paths, or it proves little.
    qInfo("%d refusals, %d copies, %d forks", refused, copies, forks);
    QVERIFY2(refused > 50, qPrintable(QString("only %1 refusals").arg(refused)));
    QVERIFY2(copies > 50, qPrintable(QString("only %1 copies").arg(copies)));
    QVERIFY2(forks > 200, qPrintable(QString("only %1 forks").arg(forks)));

    for (SeqId seq : m.sequences()) m.free_sequence(seq);
    QCOMPARE(m.pool().num_free(), shape.num_blocks);
}

QTEST_APPLESS_MAIN(TestKvCache)
#include "test_kv_cache.moc"
