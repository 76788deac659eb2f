// The engine's small utilities: UTF-8 validation, the JSON writer, log-level parsing.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>

#include "util/error.h"
#include "util/json_writer.h"
#include "util/log.h"
#include "util/utf8.h"

using namespace tokenscope;

class TestUtil : public QObject {
    Q_OBJECT

  private slots:
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
