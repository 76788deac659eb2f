// The engine's small utilities: UTF-8 validation, the JSON writer, log-level parsing, the
// large-page buffer.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>
#include <algorithm>
#include <cstdint>

#include "util/error.h"
#include "util/json_writer.h"
#include "util/large_pages.h"
#include "util/log.h"
#include "util/utf8.h"

using namespace tokenscope;

class TestUtil : public QObject {
    Q_OBJECT

  private slots:
    // Aligned, zeroed, writable, movable, protectable; and where the system offers
    // transparent huge pages, backed by them once touched (the reason the buffer exists).
    void largePageBuffer() {
        const std::size_t bytes = 3 * kLargePageBytes + 5;
        LargePageBuffer buffer(bytes);
        QCOMPARE(buffer.size(), bytes);
        QCOMPARE(reinterpret_cast<std::uintptr_t>(buffer.data()) % kLargePageBytes,
                 std::uintptr_t{0});
        QVERIFY(std::all_of(buffer.data(), buffer.data() + bytes,
                            [](std::byte b) { return b == std::byte{0}; }));
#ifdef __linux__
        // The zero check above only read: reading anonymous memory maps the shared zero page,
        // which mincore may count, so residency is checked on a fresh buffer and after writes.
        const LargePageBuffer untouched(bytes);
        QCOMPARE(untouched.resident_bytes(), std::size_t{0});
#endif
        for (std::size_t i = 0; i < bytes; ++i) buffer.data()[i] = static_cast<std::byte>(i % 251);
#ifdef __linux__
        QVERIFY2(buffer.resident_bytes() >= bytes,
                 qPrintable(QString::number(buffer.resident_bytes())));
#endif
        const std::string mode = transparent_huge_pages_mode();
        qInfo("transparent huge pages: %s; %zu of %zu bytes in huge pages", mode.c_str(),
              buffer.huge_page_bytes(), bytes);
        QVERIFY(buffer.huge_page_bytes() <= 4 * kLargePageBytes);
        if (large_pages_available()) {
            QVERIFY2(buffer.huge_page_bytes() >= kLargePageBytes,
                     "THP is on, yet none of 8 MiB of touched, madvised memory is in huge pages");
        } else {
            QCOMPARE(buffer.huge_page_bytes(), std::size_t{0});
        }

        LargePageBuffer moved(std::move(buffer));
        QCOMPARE(buffer.data(), nullptr);
        QCOMPARE(moved.size(), bytes);
        QCOMPARE(moved.data()[bytes - 1], static_cast<std::byte>((bytes - 1) % 251));
        QVERIFY(moved.make_read_only());
        QCOMPARE(moved.data()[12345], static_cast<std::byte>(12345 % 251));

        // Ordinary pages are not asked for huge ones ("always" may still give them unasked),
        // and TOKENSCOPE_LARGE_PAGES=off makes the process behave as if none were offered.
        LargePageBuffer ordinary(bytes, Pages::Ordinary);
        std::fill(ordinary.data(), ordinary.data() + bytes, std::byte{1});
        if (mode != "always") QCOMPARE(ordinary.huge_page_bytes(), std::size_t{0});
        QVERIFY(large_pages_status().find(mode) != std::string::npos);
        QVERIFY(large_pages_status().find("TOKENSCOPE_LARGE_PAGES") == std::string::npos);
        qputenv("TOKENSCOPE_LARGE_PAGES", "off");
        QVERIFY(!large_pages_available());
        QVERIFY(large_pages_status().find("turned off by TOKENSCOPE_LARGE_PAGES=off") !=
                std::string::npos);
        LargePageBuffer refused(bytes);
        std::fill(refused.data(), refused.data() + bytes, std::byte{1});
        if (mode != "always") QCOMPARE(refused.huge_page_bytes(), std::size_t{0});
        qunsetenv("TOKENSCOPE_LARGE_PAGES");
        QCOMPARE(large_pages_available(), mode == "always" || mode == "madvise");

        LargePageBuffer empty(0);
        QCOMPARE(empty.data(), nullptr);
        QCOMPARE(empty.huge_page_bytes(), std::size_t{0});
        moved = std::move(empty);
        QCOMPARE(moved.data(), nullptr);
    }

    void utf8SequenceLengths() {
        QCOMPARE(utf8::sequence_length("a"), 1);
        QCOMPARE(utf8::sequence_length("\xC3\xA9"), 2);          // é
        QCOMPARE(utf8::sequence_length("\xE2\x96\x81"), 3);      // ▁
        QCOMPARE(utf8::sequence_length("\xF0\x9F\xA6\x99"), 4);  // 🦙
        QCOMPARE(utf8::sequence_length("\xF0\x9F\xA6"), -1);     // incomplete
        QCOMPARE(utf8::sequence_length("\x80"), 0);              // stray continuation
        QCOMPARE(utf8::sequence_length("\xC0\xAF"), 0);          // overlong '/'
        QCOMPARE(utf8::sequence_length("\xED\xA0\x80"), 0);      // surrogate U+D800
        QCOMPARE(utf8::sequence_length("\xF4\x90\x80\x80"), 0);  // beyond U+10FFFF
        QCOMPARE(utf8::sequence_length("\xE2\x28\xA1"), 0);      // bad second byte
    }

    void utf8Sanitize() {
        QVERIFY(utf8::is_valid("h\xC3\xA9llo"));
        QVERIFY(!utf8::is_valid("h\xC3"));
        QCOMPARE(utf8::sanitize("a\xFF"
                                "b"),
                 std::string("a\xEF\xBF\xBD"
                             "b"));
        QCOMPARE(utf8::sanitize("\xF0\x9F"), std::string("\xEF\xBF\xBD\xEF\xBF\xBD"));
        QVERIFY(utf8::is_valid(utf8::sanitize("\xC0\x80\xED\xBF\xBF\xF8")));
    }

    void jsonWriterProducesParsableJson() {
        JsonWriter json;
        json.begin_object();
        json.key("text").value("quote \" backslash \\ newline \n tab \t ctrl \x01 bad \xFF");
        json.key("n").value(std::int64_t{-5});
        json.key("list").begin_array().value(1).value(2.5).value(true).null().end_array();
        json.key("empty").begin_object().end_object();
        json.end_object();
        QJsonParseError error{};
        const QJsonDocument doc =
            QJsonDocument::fromJson(QByteArray::fromStdString(json.str()), &error);
        QVERIFY2(error.error == QJsonParseError::NoError, qPrintable(error.errorString()));
        const QJsonObject o = doc.object();
        QCOMPARE(o["text"].toString(),
                 QString::fromUtf8(
                     "quote \" backslash \\ newline \n tab \t ctrl \x01 bad \xEF\xBF\xBD"));
        QCOMPARE(o["n"].toInt(), -5);
        QCOMPARE(o["list"].toArray().size(), 4);
        QCOMPARE(o["list"].toArray()[1].toDouble(), 2.5);
    }

    void logLevels() {
        QCOMPARE(log::parse_level("debug").value(), spdlog::level::debug);
        QVERIFY(!log::parse_level("verbose").has_value());
        try {
            log::configure(std::string("loud"));
            QFAIL("accepted an unknown level");
        } catch (const InvalidArgument& e) {
            QVERIFY(QString(e.what()).contains("unknown log level 'loud'"));
        }
        log::configure(std::string("error"));
        QCOMPARE(spdlog::get_level(), spdlog::level::err);
    }
};

QTEST_APPLESS_MAIN(TestUtil)
#include "test_util.moc"
