// `tokenscope-cli attention` as a user runs it, on a tiny model: the JSON holds exactly the
// engine's AttentionCapture for the same prompt, and the float64 reference's softmax weights
// (within f16 storage error); CSV, PNG and SVG hold the same cells; bad options fail with one
// line. Also the dependency-free PNG encoder the command uses (checksums, multi-block streams,
// decoded by Qt's independent PNG reader).
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QXmlStreamReader>
#include <QtTest>
#include <cmath>
#ifdef TOKENSCOPE_TEST_HAVE_QT_GUI
#include <QImage>
#endif

#include "inspect/attention_export.h"
#include "inspect/png_writer.h"
#include "reference/reference_forward.h"
#include "reference/tiny_model.h"
#include "runtime/engine.h"
#include "runtime/prompt_builder.h"
#include "util/cli_process.h"

using namespace tokenscope;

namespace {

using Result = test::CliResult;

Result run_cli(const QStringList& args) { return test::run_process(TOKENSCOPE_CLI, args, {}, 60000); }

QByteArray read_all(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return f.readAll();
}

const char* const kPrompt = "The little robot walked into the garden";

}  // namespace

class TestCliAttention : public QObject {
    Q_OBJECT
    test::TinyModelSpec spec_;
    QString model_;
    QTemporaryDir dir_;

    QString out(const char* name) const { return dir_.filePath(name); }

  private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        model_ = QString::fromStdString(test::tiny_model_path("cli_attention_llama", spec_));
    }

    // Every layer and head of the prompt, in the JSON, equals what the engine captures for
    // the same request in this process (bit for bit: f16 -> f32 -> 9 digits -> f32), and the
    // float64 reference's softmax within the f16 bound test_forward uses (1e-3).
    void jsonEqualsEngineCaptureAndReference() {
        const QString path = out("all.json");
        const Result r = run_cli(
            {"attention", "--model", model_, "--prompt", kPrompt, "--threads", "2", "--out", path});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        const QJsonObject o = QJsonDocument::fromJson(read_all(path)).object();
        QCOMPARE(o["layers"].toInt(), int(spec_.layers));
        QCOMPARE(o["heads"].toInt(), int(spec_.heads));
        const QJsonArray matrices = o["matrices"].toArray();
        QCOMPARE(matrices.size(), int(spec_.layers * spec_.heads));

        runtime::EngineOptions options;
        options.threads = 2;
        auto engine = runtime::Engine::load(model_.toStdString(), options);
        const runtime::PromptBuilder builder(*engine, std::nullopt);
        runtime::Request request = builder.raw(kPrompt);
        request.sampling.temperature = 0.0f;
        request.max_tokens = 1;
        request.capture.enabled = true;
        const auto id = engine->submit(request);
        while (engine->has_work()) engine->step();
        const inspect::AttentionCapture* capture = engine->capture(id);
        QVERIFY(capture);
        const auto n = static_cast<qsizetype>(request.prompt.size());
        QCOMPARE(capture->rows(), std::int64_t(n));

        const QJsonArray tokens = o["tokens"].toArray();
        QCOMPARE(tokens.size(), n);
        std::vector<std::int32_t> ids;
        for (qsizetype i = 0; i < n; ++i) {
            QCOMPARE(tokens[i].toObject()["id"].toInt(),
                     request.prompt[static_cast<std::size_t>(i)]);
            ids.push_back(request.prompt[static_cast<std::size_t>(i)]);
        }
        const auto ref = test::reference_forward(model_.toStdString(), spec_, ids);

        double worst = 0.0;
        for (const auto& mv : matrices) {
            const QJsonObject m = mv.toObject();
            const int layer = m["layer"].toInt();
            const int head = m["head"].toInt();
            const QJsonArray rows = m["rows"].toArray();
            QCOMPARE(rows.size(), n);
            for (qsizetype q = 0; q < n; ++q) {
                const QJsonArray row = rows[q].toArray();
                const auto engine_row = capture->row(layer, head, q);
                const auto& ref_row = ref.attention[size_t(layer)][size_t(head)][size_t(q)];
                QCOMPARE(row.size(), qsizetype(engine_row.size()));
                for (qsizetype k = 0; k < row.size(); ++k) {
                    const float v = static_cast<float>(row[k].toDouble());
                    if (v != engine_row[size_t(k)])
                        QFAIL(qPrintable(QString("layer %1 head %2 q %3 k %4: json %5, engine %6")
                                             .arg(layer)
                                             .arg(head)
                                             .arg(q)
                                             .arg(k)
                                             .arg(double(v))
                                             .arg(double(engine_row[size_t(k)]))));
                    worst = std::max(worst, std::abs(double(v) - ref_row[size_t(k)]));
                }
            }
        }
        qInfo("attention JSON vs float64 reference: worst absolute error %.3g", worst);
        QVERIFY2(worst <= 1e-3, qPrintable(QString::number(worst)));
    }

    // --n-predict adds one row per generated token that went through the model; --head mean
    // is the mean over the heads (checked against the reference's mean).
    void generatedRowsAndMeanHead() {
        const QString path = out("mean.json");
        const Result r =
            run_cli({"attention", "--model", model_, "--prompt", kPrompt, "--threads", "2",
                     "--layer", "1", "--head", "mean", "--n-predict", "3", "--out", path});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        const QJsonObject o = QJsonDocument::fromJson(read_all(path)).object();
        const QJsonArray tokens = o["tokens"].toArray();
        const QJsonArray matrices = o["matrices"].toArray();
        QCOMPARE(matrices.size(), 1);
        const QJsonObject m = matrices[0].toObject();
        QCOMPARE(m["layer"].toInt(), 1);
        QCOMPARE(m["head"].toInt(), -1);
        const QJsonArray rows = m["rows"].toArray();
        QCOMPARE(rows.size(), tokens.size());
        std::vector<std::int32_t> ids;
        for (const auto& t : tokens) ids.push_back(t.toObject()["id"].toInt());
        // Prompt + 2 generated tokens (the third was sampled but never run through the model).
        runtime::EngineOptions options;
        auto engine = runtime::Engine::load(model_.toStdString(), options);
        QCOMPARE(ids.size(),
                 runtime::PromptBuilder(*engine, std::nullopt).raw(kPrompt).prompt.size() + 2);
        const auto ref = test::reference_forward(model_.toStdString(), spec_, ids);
        double worst = 0;
        for (qsizetype q = 0; q < rows.size(); ++q) {
            const QJsonArray row = rows[q].toArray();
            QCOMPARE(row.size(), q + 1);
            for (qsizetype k = 0; k <= q; ++k) {
                double mean = 0;
                for (int h = 0; h < spec_.heads; ++h)
                    mean += ref.attention[1][size_t(h)][size_t(q)][size_t(k)];
                worst = std::max(worst, std::abs(row[k].toDouble() - mean / double(spec_.heads)));
            }
        }
        QVERIFY2(worst <= 1e-3, qPrintable(QString::number(worst)));
    }

    // CSV: a header and one line per cell of the lower triangle, the same numbers as JSON.
    void csvHasEveryCell() {
        const QString csv = out("h2.csv");
        const QString json = out("h2.json");
        for (const QString& path : {csv, json}) {
            const Result r =
                run_cli({"attention", "--model", model_, "--prompt", kPrompt, "--threads", "2",
                         "--layer", "0", "--head", "2", "--out", path});
            QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        }
        const QList<QByteArray> lines = read_all(csv).trimmed().split('\n');
        QCOMPARE(lines[0], QByteArray("layer,head,query,key,query_token,key_token,weight"));
        const QJsonArray rows = QJsonDocument::fromJson(read_all(json))
                                    .object()["matrices"]
                                    .toArray()[0]
                                    .toObject()["rows"]
                                    .toArray();
        const qsizetype n = rows.size();
        QCOMPARE(lines.size(), 1 + n * (n + 1) / 2);
        // The last line is the last row's last key, and its weight is the JSON's.
        const QList<QByteArray> last = lines.back().split(',');
        QCOMPARE(last[0], QByteArray("0"));
        QCOMPARE(last[1], QByteArray("2"));
        QCOMPARE(last[2].toInt(), int(n - 1));
        QCOMPARE(last[3].toInt(), int(n - 1));
        QCOMPARE(last.back().toDouble(), rows[n - 1].toArray()[n - 1].toDouble());
    }

    // PNG: a 2 x 2 grid of the four heads of layer 0 at 4 px per token, of the size the layout
    // promises; the first cell (weight 1: the first token sees only itself) is viridis' top
    // colour, cells above the diagonal are grey.
    void pngGridHasTheRightSizeAndColours() {
        const QString path = out("grid.png");
        const Result r = run_cli({"attention", "--model", model_, "--prompt", kPrompt, "--threads",
                                  "2", "--layer", "0", "--cell", "4", "--out", path});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        const QByteArray bytes = read_all(path);
        QVERIFY(bytes.size() > 100);
        QVERIFY(bytes.startsWith("\x89PNG\r\n\x1a\n"));
        runtime::EngineOptions options;
        auto engine = runtime::Engine::load(model_.toStdString(), options);
        const int n = int(runtime::PromptBuilder(*engine, std::nullopt).raw(kPrompt).prompt.size());
        const int side = n * 4;
        const int expected = 8 + 2 * (side + 8);
#ifdef TOKENSCOPE_TEST_HAVE_QT_GUI
        QImage image;
        QVERIFY(image.loadFromData(bytes, "PNG"));
        QCOMPARE(image.size(), QSize(expected, expected));
        QCOMPARE(image.pixel(8, 8) & 0xFFFFFFu, 0xFDE725u);
        QCOMPARE(image.pixel(8 + side - 2, 8) & 0xFFFFFFu, 0xE6E6E6u);
        // The second panel starts a gap after the first.
        QCOMPARE(image.pixel(8 + side + 8, 8) & 0xFFFFFFu, 0xFDE725u);
#else
        // Without QtGui: the IHDR fields.
        auto be32 = [&](int at) {
            return (quint32(quint8(bytes[at])) << 24) | (quint32(quint8(bytes[at + 1])) << 16) |
                   (quint32(quint8(bytes[at + 2])) << 8) | quint8(bytes[at + 3]);
        };
        QCOMPARE(int(be32(16)), expected);
        QCOMPARE(int(be32(20)), expected);
#endif
    }

    // SVG: well-formed XML with one rect per lower-triangle cell (plus one background per
    // panel and the page), a title per panel.
    void svgIsWellFormed() {
        const QString path = out("one.svg");
        const Result r = run_cli({"attention", "--model", model_, "--prompt", kPrompt, "--threads",
                                  "2", "--layer", "1", "--head", "3", "--out", path});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        QXmlStreamReader xml(read_all(path));
        int rects = 0;
        bool titled = false;
        while (!xml.atEnd()) {
            if (xml.readNext() == QXmlStreamReader::StartElement) {
                if (xml.name() == QLatin1String("rect")) ++rects;
                if (xml.name() == QLatin1String("text") &&
                    xml.readElementText().contains("layer 1 · head 3"))
                    titled = true;
            }
        }
        QVERIFY2(!xml.hasError(), qPrintable(xml.errorString()));
        QVERIFY(titled);
        runtime::EngineOptions options;
        auto engine = runtime::Engine::load(model_.toStdString(), options);
        const int n = int(runtime::PromptBuilder(*engine, std::nullopt).raw(kPrompt).prompt.size());
        QCOMPARE(rects, n * (n + 1) / 2 + 2);
    }

    void badOptionsFailWithOneLine() {
        const struct {
            QStringList args;
            const char* names;
        } cases[] = {
            {{"--layer", "99", "--out", out("x.json")}, "--layer"},
            {{"--head", "7", "--out", out("x.json")}, "--head"},
            {{"--out", out("x.txt")}, ".json, .csv, .png or .svg"},
            {{"--scale", "cubic", "--out", out("x.png")}, "cubic"},
        };
        for (const auto& c : cases) {
            const Result r =
                run_cli(QStringList{"attention", "--model", model_, "--prompt", "Hi"} + c.args);
            QCOMPARE(r.exit_code, 1);
            QVERIFY2(r.err.contains(c.names), qPrintable(r.err));
            QCOMPARE(r.err.trimmed().count('\n'), 0);
        }
        const Result missing = run_cli({"attention", "--model", model_, "--prompt", "Hi"});
        QCOMPARE(missing.exit_code, 1);
        QVERIFY2(missing.err.contains("--out"), qPrintable(missing.err));
    }

    // The encoder alone: the standard check values of both checksums, and an image whose
    // scanlines need several stored blocks (> 65535 bytes) read back pixel for pixel.
    void pngEncoder() {
        const std::string digits = "123456789";
        const auto* d = reinterpret_cast<const std::uint8_t*>(digits.data());
        QCOMPARE(inspect::crc32({d, digits.size()}), 0xCBF43926u);
        const std::string wiki = "Wikipedia";
        QCOMPARE(
            inspect::adler32({reinterpret_cast<const std::uint8_t*>(wiki.data()), wiki.size()}),
            0x11E60398u);
        inspect::RgbImage image(300, 97, 0x000000);
        for (int y = 0; y < image.height; ++y)
            for (int x = 0; x < image.width; ++x)
                image.set(x, y,
                          std::uint32_t((x * 7) & 0xFF) << 16 |
                              std::uint32_t((y * 13) & 0xFF) << 8 | std::uint32_t((x ^ y) & 0xFF));
        const auto png = inspect::encode_png(image);
        QVERIFY(png.size() > 300 * 97 * 3);
#ifdef TOKENSCOPE_TEST_HAVE_QT_GUI
        QImage decoded;
        QVERIFY(decoded.loadFromData(png.data(), int(png.size()), "PNG"));
        QCOMPARE(decoded.size(), QSize(300, 97));
        for (int y = 0; y < image.height; ++y)
            for (int x = 0; x < image.width; ++x)
                if ((decoded.pixel(x, y) & 0xFFFFFFu) != image.at(x, y))
                    QFAIL(qPrintable(QString("pixel %1,%2").arg(x).arg(y)));
#endif
        QVERIFY_THROWS_EXCEPTION(std::exception, inspect::encode_png(inspect::RgbImage{}));
    }
};

QTEST_GUILESS_MAIN(TestCliAttention)
#include "test_cli_attention.moc"
