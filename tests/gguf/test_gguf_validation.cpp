// Malformed GGUF input: every defect is a FormatError whose message names the file, the byte
// offset of the bad field and the key or tensor involved. Offsets in the expectations are
// computed from the layout the test itself wrote (RawGguf records where each field went).
#include <QtTest>
#include <random>

#include "gguf/file.h"
#include "util/error.h"
#include "util/raw_gguf.h"

using tokenscope::FormatError;
using tokenscope::gguf::File;
using tokenscope::test::RawGguf;

namespace {

// A small valid file; the offsets of the fields the tests corrupt are recorded.
struct Layout {
    RawGguf raw;
    std::size_t version_at, tensor_count_at, kv_count_at;
    std::size_t arch_key_at, align_value_at, array_type_at, array_len_at, bool_value_at;
    std::size_t t0_ndims_at, t0_dim0_at, t0_type_at, t0_offset_at, t1_name_at, t1_offset_at;
    std::size_t data_at;
};

struct Options {
    std::string second_key = "general.alignment";
    std::string second_tensor = "b";
};

Layout make_valid(const Options& options = {}) {
    Layout l;
    RawGguf& r = l.raw;
    r.put<std::uint32_t>(0x46554747);
    l.version_at = r.put<std::uint32_t>(3);
    l.tensor_count_at = r.put<std::uint64_t>(2);
    l.kv_count_at = r.put<std::uint64_t>(4);
    // kv 0: general.architecture = "test"
    l.arch_key_at = r.put_string("general.architecture");
    r.put<std::uint32_t>(8);
    r.put_string("test");
    // kv 1: general.alignment = uint32 32
    r.put_string(options.second_key);
    r.put<std::uint32_t>(4);
    l.align_value_at = r.put<std::uint32_t>(32);
    // kv 2: test.array = [int32 x 3]
    r.put_string("test.array");
    r.put<std::uint32_t>(9);
    l.array_type_at = r.put<std::uint32_t>(5);
    l.array_len_at = r.put<std::uint64_t>(3);
    for (std::int32_t v : {1, 2, 3}) r.put<std::int32_t>(v);
    // kv 3: test.flag = true
    r.put_string("test.flag");
    r.put<std::uint32_t>(7);
    l.bool_value_at = r.put<std::uint8_t>(1);
    // tensor 0: "a", F32, 8 x 2 (64 bytes) at 0
    r.put_string("a");
    l.t0_ndims_at = r.put<std::uint32_t>(2);
    l.t0_dim0_at = r.put<std::int64_t>(8);
    r.put<std::int64_t>(2);
    l.t0_type_at = r.put<std::uint32_t>(0);
    l.t0_offset_at = r.put<std::uint64_t>(0);
    // tensor 1: Q8_0, 32 elements (one 34-byte block) at 64
    l.t1_name_at = r.put_string(options.second_tensor);
    r.put<std::uint32_t>(1);
    r.put<std::int64_t>(32);
    r.put<std::uint32_t>(8);
    l.t1_offset_at = r.put<std::uint64_t>(64);
    r.pad_to(32);
    l.data_at = r.size();
    for (int i = 0; i < 64 + 34; ++i) r.bytes.push_back(static_cast<std::uint8_t>(i));
    return l;
}

File parse(const RawGguf& raw) {
    return File::parse("case.gguf", raw.bytes);
}

QString error_of(const RawGguf& raw) {
    try {
        parse(raw);
    } catch (const FormatError& e) {
        return QString::fromUtf8(e.what());
    }
    return QString();
}

}  // namespace

class TestGgufValidation : public QObject {
    Q_OBJECT

  private:
    // Checks the message names the file, the offset and every fragment.
    void expect(const RawGguf& raw, std::size_t offset, const QStringList& fragments) {
        const QString message = error_of(raw);
        QVERIFY2(!message.isEmpty(), "the file was accepted");
        QVERIFY2(message.startsWith("case.gguf: "), qPrintable(message));
        const QString where = QString("offset %1: ").arg(offset);
        QVERIFY2(message.contains(where), qPrintable(message + " -- expected " + where));
        for (const auto& f : fragments)
            QVERIFY2(message.contains(f), qPrintable(message + " -- expected " + f));
        QVERIFY2(!message.contains('\n'), "message is not one line");
    }

  private slots:
    void validFileParses() {
        Layout l = make_valid();
        const File f = parse(l.raw);
        QCOMPARE(f.version(), 3u);
        QCOMPARE(f.metadata().size(), std::size_t{4});
        QCOMPARE(f.tensors().size(), std::size_t{2});
        QCOMPARE(f.data_offset(), l.data_at);
        QCOMPARE(f.tensors()[1].byte_size, std::uint64_t{34});
        QCOMPARE(int(f.tensors()[1].data[0]), 64);  // our data bytes count up from 0
        QCOMPARE(f.require_array("test.array").items.at(2).as_int(), std::int64_t{3});
        QCOMPARE(f.optional_bool("test.flag", false), true);
    }

    void badMagic() {
        Layout l = make_valid();
        l.raw.bytes[0] = 'X';
        expect(l.raw, 0, {"bad magic", "not a GGUF file"});
    }
    void tooShort() {
        RawGguf r;
        r.put<std::uint32_t>(0x46554747);
        expect(r, 0, {"4 bytes", "too short"});
    }
    void versionOne() {
        Layout l = make_valid();
        l.raw.patch<std::uint32_t>(l.version_at, 1);
        expect(l.raw, 4, {"version 1 is not supported"});
    }
    void versionUnknown() {
        Layout l = make_valid();
        l.raw.patch<std::uint32_t>(l.version_at, 7);
        expect(l.raw, 4, {"unsupported GGUF version 7"});
    }
    void bigEndian() {
        Layout l = make_valid();
        l.raw.patch<std::uint32_t>(l.version_at, 0x03000000);
        expect(l.raw, 4, {"big-endian"});
    }
    void countsBeyondFileSize() {
        Layout l = make_valid();
        l.raw.patch<std::uint64_t>(l.kv_count_at, 1ull << 40);
        expect(l.raw, l.kv_count_at, {"metadata count 1099511627776", "cannot fit"});
        Layout t = make_valid();
        t.raw.patch<std::uint64_t>(t.tensor_count_at, ~0ull);
        expect(t.raw, t.tensor_count_at, {"tensor count", "cannot fit"});
    }
    void stringLengthPastEnd() {
        Layout l = make_valid();
        l.raw.patch<std::uint64_t>(l.arch_key_at, 1ull << 62);
        expect(l.raw, l.arch_key_at, {"metadata key length 4611686018427387904", "past the end"});
    }
    void unknownValueType() {
        Layout l = make_valid();
        l.raw.patch<std::uint32_t>(l.array_type_at, 13);
        expect(l.raw, l.array_type_at, {"key 'test.array'", "unknown array element type 13"});
    }
    void arrayLengthPastEnd() {
        Layout l = make_valid();
        l.raw.patch<std::uint64_t>(l.array_len_at, 1ull << 50);
        expect(l.raw, l.array_len_at,
               {"key 'test.array'", "array of 1125899906842624 int32", "past the end"});
    }
    void boolNotZeroOrOne() {
        Layout l = make_valid();
        l.raw.patch<std::uint8_t>(l.bool_value_at, 2);
        expect(l.raw, l.bool_value_at, {"key 'test.flag'", "bool value 2"});
    }
    void duplicateKey() {
        Options o;
        o.second_key = "general.architecture";
        Layout l = make_valid(o);
        // The duplicate starts right after the first key/value: 8+20 key, 4 type, 8+4 value.
        expect(l.raw, l.arch_key_at + 28 + 4 + 12,
               {"key 'general.architecture'", "duplicate metadata key"});
    }
    void duplicateTensorName() {
        Options o;
        o.second_tensor = "a";
        Layout l = make_valid(o);
        expect(l.raw, l.t1_name_at, {"tensor 'a'", "duplicate tensor name"});
    }
    void alignmentNotPowerOfTwo() {
        Layout l = make_valid();
        l.raw.patch<std::uint32_t>(l.align_value_at, 48);
        const QString message = error_of(l.raw);
        QVERIFY2(message.contains("key 'general.alignment'") &&
                     message.contains("48 is not a power of two"),
                 qPrintable(message));
    }
    void dimensionCount() {
        for (std::uint32_t bad : {0u, 5u}) {
            Layout l = make_valid();
            l.raw.patch<std::uint32_t>(l.t0_ndims_at, bad);
            expect(l.raw, l.t0_ndims_at, {"tensor 'a'", QString("dimension count %1").arg(bad)});
        }
    }
    void nonPositiveDimension() {
        Layout l = make_valid();
        l.raw.patch<std::int64_t>(l.t0_dim0_at, -8);
        expect(l.raw, l.t0_dim0_at, {"tensor 'a'", "dimension 0 is -8"});
    }
    void elementCountOverflow() {
        Layout l = make_valid();
        l.raw.patch<std::int64_t>(l.t0_dim0_at, std::int64_t{1} << 62);
        expect(l.raw, l.t0_dim0_at + 8, {"tensor 'a'", "overflows 64 bits at dimension 1"});
    }
    void unknownTensorType() {
        Layout l = make_valid();
        l.raw.patch<std::uint32_t>(l.t0_type_at, 99);
        expect(l.raw, l.t0_type_at, {"tensor 'a'", "unknown tensor type id 99", "Q4_K"});
    }
    void rowNotWholeBlocks() {
        Layout l = make_valid();
        l.raw.patch<std::uint32_t>(l.t0_type_at, 12);  // Q4_K needs rows of 256
        expect(l.raw, l.t0_type_at, {"tensor 'a'", "row length 8", "Q4_K", "256"});
    }
    void misalignedOffset() {
        Layout l = make_valid();
        l.raw.patch<std::uint64_t>(l.t1_offset_at, 65);
        expect(l.raw, l.t1_offset_at, {"tensor 'b'", "data offset 65", "alignment 32"});
    }
    void dataPastEnd() {
        Layout l = make_valid();
        l.raw.patch<std::uint64_t>(l.t1_offset_at, 96);
        expect(l.raw, l.t1_offset_at, {"tensor 'b'", "outside the file"});
        Layout t = make_valid();
        t.raw.bytes.resize(t.raw.size() - 1);
        expect(t.raw, t.t1_offset_at, {"tensor 'b'", "outside the file"});
    }
    void overlappingTensors() {
        Layout l = make_valid();
        l.raw.patch<std::uint64_t>(l.t1_offset_at, 32);
        expect(l.raw, l.t1_offset_at, {"tensor 'b'", "overlaps tensor 'a'"});
    }

    // Every prefix of a valid file is rejected with a FormatError (never a crash or a
    // success that reads past the end).
    void everyTruncationRejected() {
        Layout l = make_valid();
        for (std::size_t n = 0; n < l.raw.size(); ++n) {
            std::vector<std::uint8_t> prefix(l.raw.bytes.begin(), l.raw.bytes.begin() + n);
            bool rejected = false;
            try {
                File::parse("cut.gguf", prefix);
            } catch (const FormatError& e) {
                rejected = QString(e.what()).startsWith("cut.gguf: offset ");
            }
            QVERIFY2(rejected, qPrintable(QString("prefix of %1 bytes").arg(n)));
        }
    }

    // Seeded random byte flips: each result parses or is a FormatError; nothing else.
    void randomCorruptionsNeverCrash() {
        Layout l = make_valid();
        std::mt19937 rng(1234);
        int rejected = 0;
        for (int round = 0; round < 5000; ++round) {
            std::vector<std::uint8_t> bytes = l.raw.bytes;
            const int flips = 1 + static_cast<int>(rng() % 4);
            for (int i = 0; i < flips; ++i)
                bytes[rng() % l.data_at] = static_cast<std::uint8_t>(rng());
            try {
                File::parse("random.gguf", bytes);
            } catch (const FormatError&) {
                ++rejected;
            }
        }
        QVERIFY(rejected > 1000);  // most flips in the header must be caught
    }
};

QTEST_APPLESS_MAIN(TestGgufValidation)
#include "test_gguf_validation.moc"
