// gguf::Writer -> gguf::File round trips: every metadata value type (nested arrays too),
// tensors of several formats, custom alignment, GGUF v2 and v3, and the writer's own
// refusals.
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "tensor/type.h"
#include "util/error.h"
#include "util/large_pages.h"
#include "util/test_paths.h"

#ifdef __linux__
#include <sys/resource.h>
#endif

using namespace tokenscope;
using gguf::Array;
using gguf::Value;
using gguf::ValueType;

namespace {

std::vector<std::pair<std::string, Value>> every_value_type() {
    Array nested{ValueType::Array, {}};
    nested.items.push_back(Value::i32s({1, -2, 3}));
    nested.items.push_back(Value::i32s({}));
    return {
        {"v.u8", Value::u8(255)},
        {"v.i8", Value::i8(-128)},
        {"v.u16", Value::u16(65535)},
        {"v.i16", Value::i16(-32768)},
        {"v.u32", Value::u32(4294967295u)},
        {"v.i32", Value::i32(std::numeric_limits<std::int32_t>::min())},
        {"v.u64", Value::u64(std::numeric_limits<std::uint64_t>::max())},
        {"v.i64", Value::i64(std::numeric_limits<std::int64_t>::min())},
        {"v.f32", Value::f32(-1.5e-7f)},
        {"v.f64", Value::f64(3.141592653589793)},
        {"v.bool", Value::boolean(true)},
        {"v.string", Value::string("h\xC3\xA9llo \xE2\x96\x81 world")},
        {"v.empty_string", Value::string("")},
        {"v.strings", Value::strings({"<s>", "", "\xE2\x96\x81the"})},
        {"v.floats", Value::f32s({0.0f, -1.0f, 1e30f})},
        {"v.nested", Value::array(nested)},
    };
}

}  // namespace

class TestGgufRoundtrip : public QObject {
    Q_OBJECT

  private slots:
    void metadataAndTensors_data() {
        QTest::addColumn<int>("version");
        QTest::addColumn<int>("alignment");
        QTest::addColumn<bool>("large_pages");
        // Each file also read as a copy in large pages (what the CPU backend loads): the
        // same values, tensors and bytes must come out.
        for (const bool large : {false, true}) {
            const char* suffix = large ? ", large pages" : ", mapped";
            QTest::newRow((std::string("v3, default alignment") + suffix).c_str())
                << 3 << 0 << large;
            QTest::newRow((std::string("v2, default alignment") + suffix).c_str())
                << 2 << 0 << large;
            QTest::newRow((std::string("v3, alignment 64") + suffix).c_str()) << 3 << 64 << large;
            QTest::newRow((std::string("v3, alignment 1") + suffix).c_str()) << 3 << 1 << large;
        }
    }

    void metadataAndTensors() {
        QFETCH(int, version);
        QFETCH(int, alignment);
        QFETCH(bool, large_pages);
        gguf::Writer writer(static_cast<std::uint32_t>(version));
        const auto values = every_value_type();
        for (const auto& [key, value] : values) writer.set(key, value);
        if (alignment)
            writer.set("general.alignment", Value::u32(static_cast<std::uint32_t>(alignment)));

        // Tensor payloads: recognisable byte patterns of the exact sizes the formats need.
        struct Spec {
            std::string name;
            tensor::Type type;
            std::vector<std::int64_t> dims;
        };
        const std::vector<Spec> specs = {
            {"f32", tensor::Type::F32, {3, 5}},
            {"q4k", tensor::Type::Q4_K, {256, 2}},
            {"q8", tensor::Type::Q8_0, {64}},
            {"f16.4d", tensor::Type::F16, {2, 3, 4, 5}},
        };
        std::vector<std::vector<std::uint8_t>> payloads;
        for (std::size_t s = 0; s < specs.size(); ++s) {
            std::int64_t rows = 1;
            for (std::size_t d = 1; d < specs[s].dims.size(); ++d) rows *= specs[s].dims[d];
            std::vector<std::uint8_t> data(tensor::row_bytes(specs[s].type, specs[s].dims[0]) *
                                           static_cast<std::size_t>(rows));
            for (std::size_t i = 0; i < data.size(); ++i)
                data[i] = static_cast<std::uint8_t>(i * 7 + s);
            writer.add_tensor(specs[s].name, specs[s].type, specs[s].dims, data);
            payloads.push_back(std::move(data));
        }

        const std::string path = test::scratch_dir() + "/roundtrip.gguf";
        writer.write(path);
        const gguf::File file = gguf::File::open(
            path, large_pages ? gguf::FileBytes::LargePages : gguf::FileBytes::Mapped);
        // The copy is made where the system offers large pages, and only then.
        QCOMPARE(file.in_large_pages(), large_pages && large_pages_available());
        QCOMPARE(file.version(), static_cast<std::uint32_t>(version));
        QCOMPARE(file.alignment(), static_cast<std::uint64_t>(alignment ? alignment : 32));
        for (const auto& [key, value] : values) {
            const Value* read = file.find(key);
            QVERIFY2(read, key.c_str());
            QVERIFY2(*read == value, (key + ": " + read->to_display_string()).c_str());
        }
        QCOMPARE(file.tensors().size(), specs.size());
        for (std::size_t s = 0; s < specs.size(); ++s) {
            const gguf::TensorInfo* t = file.find_tensor(specs[s].name);
            QVERIFY(t);
            QCOMPARE(t->type, specs[s].type);
            QCOMPARE(t->dims, specs[s].dims);
            QCOMPARE(t->byte_size, payloads[s].size());
            QCOMPARE((reinterpret_cast<std::uintptr_t>(t->data) -
                      reinterpret_cast<std::uintptr_t>(file.tensors()[0].data)) %
                         file.alignment(),
                     std::uintptr_t{0});
            QVERIFY(std::equal(payloads[s].begin(), payloads[s].end(), t->data));
        }
        // Writing what we read gives the same bytes again.
        gguf::Writer again(static_cast<std::uint32_t>(version));
        for (const auto& [key, value] : file.metadata()) again.set(key, value);
        for (const auto& t : file.tensors())
            again.add_tensor(t.name, t.type, t.dims, {t.data, t.byte_size});
        QVERIFY(again.to_bytes() == writer.to_bytes());
    }

    // A mapping turned into the File's own copy in ordinary pages (the engine does so where
    // large pages are not offered, to store interleaved weights): every tensor points into the
    // copy and reads the file's bytes, the copy takes edits and is sealed again, and a second
    // call changes nothing. A mapping refuses edits.
    void copyOutOfMappingMovesTensors() {
        gguf::Writer writer;
        writer.set("general.architecture", Value::string("llama"));
        std::vector<std::vector<std::uint8_t>> payloads;
        for (int t = 0; t < 3; ++t) {
            std::vector<std::uint8_t> data(tensor::row_bytes(tensor::Type::Q8_0, 64) * (t + 1));
            for (std::size_t i = 0; i < data.size(); ++i)
                data[i] = static_cast<std::uint8_t>(i * 13 + t);
            writer.add_tensor("t" + std::to_string(t), tensor::Type::Q8_0, {64, t + 1}, data);
            payloads.push_back(std::move(data));
        }
        const std::string path = test::scratch_dir() + "/copy_out.gguf";
        writer.write(path);
        gguf::File file = gguf::File::open(path, gguf::FileBytes::Mapped);
        QVERIFY(!file.is_private_copy());
        QVERIFY(!file.edit_copy([](std::span<std::uint8_t>) { QFAIL("edited a mapping"); }));
        const std::uint8_t* mapped_data = file.tensors()[0].data;

        file.copy_out_of_mapping();
        QVERIFY(file.is_private_copy());
        QVERIFY(!file.in_large_pages());
        QVERIFY(file.tensors()[0].data != mapped_data);
        for (std::size_t t = 0; t < payloads.size(); ++t) {
            const gguf::TensorInfo& info = file.tensors()[t];
            QCOMPARE(info.byte_size, payloads[t].size());
            QVERIFY(std::equal(payloads[t].begin(), payloads[t].end(), info.data));
            QCOMPARE(file.find_tensor(info.name)->data, info.data);
        }
        QCOMPARE(file.require_string("general.architecture"), std::string("llama"));
        const std::uint8_t* copied_data = file.tensors()[0].data;
        QVERIFY(file.edit_copy(
            [&](std::span<std::uint8_t> bytes) { bytes[file.data_offset()] ^= 0xff; }));
        QCOMPARE(file.tensors()[0].data[0], static_cast<std::uint8_t>(payloads[0][0] ^ 0xff));
        file.copy_out_of_mapping();  // already a copy: the edit stays
        QCOMPARE(file.tensors()[0].data, copied_data);
        QCOMPARE(file.tensors()[0].data[0], static_cast<std::uint8_t>(payloads[0][0] ^ 0xff));
    }

    // Where the system has no room for a copy of the weights, the file stays a mapping: a
    // warning, not a failed load. The address-space limit (RLIMIT_AS) is set just above what
    // the process maps already, so the copy's allocation fails for real.
    void noRoomForACopyKeepsTheMapping() {
#ifdef __linux__
        const std::size_t payload_bytes = std::size_t{48} << 20;
        gguf::Writer writer;
        writer.set("general.architecture", Value::string("llama"));
        std::vector<std::uint8_t> payload(payload_bytes);
        for (std::size_t i = 0; i < payload.size(); i += 4096)
            payload[i] = static_cast<std::uint8_t>(i >> 12);
        writer.add_tensor("big", tensor::Type::F32, {static_cast<std::int64_t>(payload_bytes / 4)},
                          payload);
        const std::string path = test::scratch_dir() + "/no_room.gguf";
        writer.write(path);
        payload.clear();
        payload.shrink_to_fit();

        gguf::File mapped = gguf::File::open(path, gguf::FileBytes::Mapped);
        const std::uint8_t* data = mapped.tensors()[0].data;
        rlimit old{};
        QCOMPARE(getrlimit(RLIMIT_AS, &old), 0);
        auto limit_to = [&](std::size_t headroom) {
            std::ifstream status("/proc/self/status");
            std::string line;
            std::size_t kib = 0;
            while (std::getline(status, line))
                if (line.rfind("VmSize:", 0) == 0) kib = std::stoul(line.substr(7));
            rlimit tight = old;
            tight.rlim_cur = std::min<rlim_t>(old.rlim_max, kib * 1024 + headroom);
            return setrlimit(RLIMIT_AS, &tight) == 0;
        };
        QVERIFY(limit_to(std::size_t{16} << 20));
        const bool copied = mapped.copy_out_of_mapping();
        const bool opened_large = [&] {
            // Room for the mapping but not for a second copy in large pages.
            setrlimit(RLIMIT_AS, &old);
            if (!limit_to(payload_bytes + (std::size_t{24} << 20))) return true;
            const gguf::File f = gguf::File::open(path, gguf::FileBytes::LargePages);
            return f.in_large_pages();
        }();
        setrlimit(RLIMIT_AS, &old);

        QVERIFY(!copied);
        QVERIFY(!mapped.is_private_copy());
        QCOMPARE(mapped.tensors()[0].data, data);
        QCOMPARE(mapped.tensors()[0].data[payload_bytes - 4096],
                 static_cast<std::uint8_t>((payload_bytes - 4096) >> 12));
        // Without large pages the open keeps the mapping anyway: nothing to check there.
        if (large_pages_available()) {
            QVERIFY(!opened_large);
        } else {
            qInfo("no large pages here (%s): the open in large pages is not checked",
                  large_pages_status().c_str());
        }
        // With room again, the same File copies.
        QVERIFY(mapped.copy_out_of_mapping());
        QVERIFY(mapped.is_private_copy());
        QCOMPARE(mapped.tensors()[0].data[payload_bytes - 4096],
                 static_cast<std::uint8_t>((payload_bytes - 4096) >> 12));
#else
        QSKIP("RLIMIT_AS is Linux's");
#endif
    }

    void floatSpecialValuesSurvive() {
        gguf::Writer writer;
        writer.set("nan", Value::f32(std::numeric_limits<float>::quiet_NaN()));
        writer.set("inf", Value::f64(-std::numeric_limits<double>::infinity()));
        const auto bytes = writer.to_bytes();
        const gguf::File file = gguf::File::parse("mem", bytes);
        QVERIFY(std::isnan(file.find("nan")->as_double()));
        QCOMPARE(file.find("inf")->as_double(), -std::numeric_limits<double>::infinity());
    }

    void setReplacesInPlace() {
        gguf::Writer writer;
        writer.set("a", Value::u32(1));
        writer.set("b", Value::u32(2));
        writer.set("a", Value::string("x"));
        const auto bytes = writer.to_bytes();
        const gguf::File file = gguf::File::parse("mem", bytes);
        QCOMPARE(file.metadata().size(), std::size_t{2});
        QCOMPARE(file.metadata()[0].first, std::string("a"));
        QCOMPARE(file.metadata()[0].second.as_string(), std::string("x"));
    }

    void writerRefusesBadTensors() {
        gguf::Writer writer;
        std::vector<std::uint8_t> data(10);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 writer.add_tensor("t", tensor::Type::F32, {4}, data));  // needs 16
        QVERIFY_THROWS_EXCEPTION(
            InvalidArgument, writer.add_tensor("t", tensor::Type::Q4_0, {10}, data));  // not 32k
        std::vector<std::uint8_t> ok(16);
        writer.add_tensor("t", tensor::Type::F32, {4}, ok);
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 writer.add_tensor("t", tensor::Type::F32, {4}, ok));
    }

    void typedGettersNameTheKey() {
        gguf::Writer writer;
        writer.set("general.architecture", Value::u32(5));
        const auto bytes = writer.to_bytes();
        const gguf::File file = gguf::File::parse("typed.gguf", bytes);
        try {
            file.require_string("general.architecture");
            QFAIL("no error for a uint32 read as string");
        } catch (const FormatError& e) {
            QCOMPARE(
                QString(e.what()),
                QString("typed.gguf: key 'general.architecture': expected a string, found uint32"));
        }
        try {
            file.require_uint("llama.block_count");
            QFAIL("no error for a missing key");
        } catch (const FormatError& e) {
            QCOMPARE(QString(e.what()), QString("typed.gguf: key 'llama.block_count': missing"));
        }
        QCOMPARE(file.optional_uint("absent", 7), std::uint64_t{7});
    }

    void missingFileIsIoError() {
        try {
            gguf::File::open("/nonexistent/model.gguf");
            QFAIL("opened a missing file");
        } catch (const IoError& e) {
            QVERIFY2(QString(e.what()).startsWith("/nonexistent/model.gguf: cannot open: "),
                     e.what());
        }
        QVERIFY_THROWS_EXCEPTION(IoError, gguf::File::open(test::scratch_dir()));
    }
};

QTEST_APPLESS_MAIN(TestGgufRoundtrip)
#include "test_gguf_roundtrip.moc"
