// The quant-eval plot (engine/quant/eval_plot) and the pixel font it labels PNGs with
// (engine/inspect/pixel_font). Expected positions are worked out by hand from the layout the
// header documents (margins 90/30/50/70 at 960 x 600; x from 0 to whole ticks of 1-2-5 steps
// past 105 % of the largest file; y in whole decades of KL).
#include <QObject>
#include <QtTest>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "inspect/pixel_font.h"
#include "inspect/png_writer.h"
#include "quant/eval_plot.h"
#include "util/error.h"

using namespace tokenscope;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
const char* const kDrawn = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_.,-+=()%/:<>x ";

quant::ModelEval model(const char* path, double mib, double kl_mean, double kl_p99) {
    quant::ModelEval m;
    m.path = path;
    m.file_bytes = static_cast<std::uint64_t>(mib * kMiB);
    m.kl_mean = kl_mean;
    m.kl_p99 = kl_p99;
    return m;
}

// Base 500 MiB; three models at 100/200/300 MiB with mean KL 0.001/0.01/0.1, p99 ten times that.
quant::EvalResult three_models() {
    quant::EvalResult r;
    r.base = model("/models/base-f32.gguf", 500, 0, 0);
    r.models = {model("/models/m-Q8_0.gguf", 300, 0.001, 0.01),
                model("/models/m-Q4_K_M.gguf", 200, 0.01, 0.1),
                model("/models/m-Q2_K.gguf", 100, 0.1, 1.0)};
    return r;
}

}  // namespace

class TestEvalPlot : public QObject {
    Q_OBJECT

  private slots:
    void glyphsAreInkedAndDistinct() {
        std::set<std::vector<int>> seen;
        for (const char* c = kDrawn; *c; ++c) {
            QVERIFY2(inspect::has_glyph(*c), std::string(1, *c).c_str());
            std::vector<int> rows;
            int ink = 0;
            for (int y = 0; y < inspect::kGlyphHeight; ++y) {
                rows.push_back(inspect::glyph_row(*c, y));
                ink += __builtin_popcount(rows.back());
                QVERIFY(rows.back() < (1 << inspect::kGlyphWidth));
            }
            QCOMPARE(ink > 0, *c != ' ');
            QVERIFY2(seen.insert(rows).second, (std::string("glyph drawn twice: ") + *c).c_str());
        }
        // Lower case draws as capitals; a character without a glyph as a hollow box.
        for (int y = 0; y < inspect::kGlyphHeight; ++y) {
            QCOMPARE(inspect::glyph_row('k', y), inspect::glyph_row('K', y));
            const int box = inspect::glyph_row('@', y);
            QCOMPARE(box, y == 0 || y == inspect::kGlyphHeight - 1 ? 0x1F : 0x11);
        }
    }

    void textStaysInItsBoxWithEveryPixelScaled() {
        const std::string text = "Q4_K_M 4.9";
        const int scale = 2, x0 = 10, y0 = 20;
        inspect::RgbImage img(200, 40, 0xFFFFFF);
        inspect::draw_text(img, x0, y0, text, 0x000000, scale);
        QCOMPARE(inspect::text_width(text, scale), (10 * 6 - 1) * 2);
        int expected_ink = 0;
        for (char c : text) {
            for (int y = 0; y < inspect::kGlyphHeight; ++y)
                expected_ink += __builtin_popcount(inspect::glyph_row(c, y)) * scale * scale;
        }
        int ink = 0;
        for (int y = 0; y < img.height; ++y) {
            for (int x = 0; x < img.width; ++x) {
                if (img.at(x, y) == 0xFFFFFF) continue;
                ++ink;
                QVERIFY(x >= x0 && x < x0 + inspect::text_width(text, scale));
                QVERIFY(y >= y0 && y < y0 + inspect::kGlyphHeight * scale);
            }
        }
        QCOMPARE(ink, expected_ink);
    }

    void layoutMapsSizesAndKlAsWorkedOutByHand() {
        const quant::EvalPlotLayout l = quant::eval_plot_layout(three_models());
        QCOMPARE(l.left, 90);
        QCOMPARE(l.right, 930);
        QCOMPARE(l.top, 50);
        QCOMPARE(l.bottom, 530);
        // 105 % of 500 MiB = 525 in at most 6 steps: 87.5 rounds up to a step of 100, axis to 600.
        QCOMPARE(l.size_tick_mb, 100.0);
        QCOMPARE(l.size_max_mb, 600.0);
        QCOMPARE(l.log_kl_min, -3.0);       // floor(log10 0.001)
        QCOMPARE(l.log_kl_max, 0.0);        // ceil(log10 1.0)
        QCOMPARE(l.x_of(300), 90 + 420);    // half of 840 pixels
        QCOMPARE(l.x_of(100), 90 + 140);    // a sixth
        QCOMPARE(l.y_of(0.01), 530 - 160);  // one decade of three above the bottom: 480 / 3
        QCOMPARE(l.y_of(1.0), 50);
        QCOMPARE(l.y_of(0.0), 530);   // equal to the base: on the bottom edge
        QCOMPARE(l.y_of(1e-9), 530);  // below the axis: clamped
    }

    void pngDrawsEachPointAndBarWhereTheLayoutSays() {
        const quant::EvalResult r = three_models();
        const quant::EvalPlotLayout l = quant::eval_plot_layout(r);
        const inspect::RgbImage img = quant::render_eval_plot_png(r);
        QCOMPARE(img.width, quant::kEvalPlotWidth);
        QCOMPARE(img.height, quant::kEvalPlotHeight);
        for (const quant::ModelEval& m : r.models) {
            const int x = l.x_of(static_cast<double>(m.file_bytes) / kMiB);
            QCOMPARE(img.at(x, l.y_of(m.kl_mean)), quant::kEvalPlotPointRgb);
            // Halfway up the bar to p99, well clear of the point's 5-pixel disc.
            const int mid = (l.y_of(m.kl_mean) + l.y_of(m.kl_p99)) / 2;
            QVERIFY(img.at(x, mid) != 0xFFFFFFu);
            QVERIFY(img.at(x, mid) != quant::kEvalPlotPointRgb);
        }
        const std::vector<std::uint8_t> png = inspect::encode_png(img);
        QVERIFY(png.size() > static_cast<std::size_t>(img.width * img.height * 3));
        QCOMPARE(std::memcmp(png.data(), "\x89PNG\r\n\x1a\n", 8), 0);
    }

    void svgHasEveryModelAndItsNumbers() {
        const std::string svg = quant::render_eval_plot_svg(three_models());
        QVERIFY(svg.rfind("<svg", 0) == 0);
        std::size_t circles = 0;
        for (std::size_t p = svg.find("<circle"); p != std::string::npos;
             p = svg.find("<circle", p + 1))
            ++circles;
        QCOMPARE(circles, std::size_t{3});
        for (const char* label : {"m-Q8_0", "m-Q4_K_M", "m-Q2_K"})
            QVERIFY(svg.find(label) != std::string::npos);
        QVERIFY(svg.find("mean KL 0.01, p99 0.1") != std::string::npos);
    }

    void labelsAreFileNamesWithoutDirectoryOrExtension() {
        QCOMPARE(quant::eval_plot_label(model("/a/b/gemma-Q4_0.gguf", 1, 0, 0)),
                 std::string("gemma-Q4_0"));
        QCOMPARE(quant::eval_plot_label(model("C:\\m\\x.bin", 1, 0, 0)), std::string("x.bin"));
    }

    void badInputIsNamed() {
        quant::EvalResult none;
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, quant::eval_plot_layout(none));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                                 quant::eval_plot_layout(three_models(), 100, 100));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, quant::check_eval_plot_path("plot.jpg"));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, quant::check_eval_plot_path("dir.png/plot"));
        quant::check_eval_plot_path("plot.PNG");
        quant::check_eval_plot_path("plot.svg");
        // Every model equal to the base: no KL to scale by, the default decades, nothing breaks.
        quant::EvalResult same = three_models();
        for (auto& m : same.models) m.kl_mean = m.kl_p99 = 0;
        const quant::EvalPlotLayout l = quant::eval_plot_layout(same);
        QCOMPARE(l.log_kl_min, -4.0);
        QCOMPARE(quant::render_eval_plot_png(same).width, quant::kEvalPlotWidth);
    }
};

QTEST_GUILESS_MAIN(TestEvalPlot)
#include "test_eval_plot.moc"
