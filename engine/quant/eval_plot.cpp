#include "quant/eval_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "inspect/export_files.h"
#include "inspect/pixel_font.h"
#include "util/error.h"

namespace tokenscope::quant {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// The pixel font's magnification: 14-pixel letters at the default size, 7-pixel ones in a plot
// under 720 pixels wide (the app's plot pane), where doubled letters would not fit the title.
int text_scale_for(int width) {
    return width >= 720 ? 2 : 1;
}
constexpr std::uint32_t kBackground = 0xFFFFFF;
constexpr std::uint32_t kInk = 0x202020;
constexpr std::uint32_t kGrid = 0xE4E4E4;
constexpr std::uint32_t kBaseLine = 0x9A9A9A;
constexpr std::uint32_t kBar = 0x8DB8DE;

double size_mb(const ModelEval& m) {
    return static_cast<double>(m.file_bytes) / kMiB;
}

// The smallest of 1, 2, 5 x 10^k that cuts `span` into at most `count` steps.
double nice_step(double span, int count) {
    const double raw = span / count;
    const double decade = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 5.0, 10.0}) {
        if (m * decade >= raw) return m * decade;
    }
    return 10.0 * decade;
}

std::string format_number(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", v);
    return b;
}

std::string decade_label(int k) {
    return k >= 0 ? format_number(std::pow(10.0, k)) : "1E" + std::to_string(k);
}

struct Box {
    int x0, y0, x1, y1;
    bool overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
};

// Where each model's label goes: right of its point, or left where it would leave the image,
// moved down (then up) in steps of a line while it overlaps a label placed before it.
std::vector<Box> place_labels(const EvalPlotLayout& l, const EvalResult& r) {
    const int kTextScale = text_scale_for(l.width);
    std::vector<Box> placed;
    const int h = inspect::kGlyphHeight * kTextScale;
    for (const ModelEval& m : r.models) {
        const int px = l.x_of(size_mb(m)), py = l.y_of(m.kl_mean);
        const int w = inspect::text_width(eval_plot_label(m), kTextScale);
        int x0 = px + 9;
        if (x0 + w > l.width - 4) x0 = px - 9 - w;
        Box best{x0, py - h / 2, x0 + w, py - h / 2 + h};
        for (int step = 0; step < 12; ++step) {
            const int dy = (step % 2 == 0 ? 1 : -1) * ((step + 1) / 2) * (h + 4);
            const Box b{x0, py - h / 2 + dy, x0 + w, py - h / 2 + dy + h};
            if (std::none_of(placed.begin(), placed.end(),
                             [&](const Box& o) { return o.overlaps(b); })) {
                best = b;
                break;
            }
        }
        placed.push_back(best);
    }
    return placed;
}

void draw_line(inspect::RgbImage& img, int x0, int y0, int x1, int y1, std::uint32_t rgb,
               int dash = 0) {
    const int n = std::max(std::abs(x1 - x0), std::abs(y1 - y0));
    for (int i = 0; i <= n; ++i) {
        if (dash > 0 && (i / dash) % 2 == 1) continue;
        const double t = n == 0 ? 0.0 : static_cast<double>(i) / n;
        img.set(static_cast<int>(std::lround(x0 + t * (x1 - x0))),
                static_cast<int>(std::lround(y0 + t * (y1 - y0))), rgb);
    }
}

void fill_disc(inspect::RgbImage& img, int cx, int cy, int radius, std::uint32_t rgb) {
    for (int y = -radius; y <= radius; ++y) {
        for (int x = -radius; x <= radius; ++x) {
            if (x * x + y * y <= radius * radius) img.set(cx + x, cy + y, rgb);
        }
    }
}

const char* const kTitle = "KL DIVERGENCE FROM THE BASE AGAINST FILE SIZE";
const char* const kXAxis = "FILE SIZE (MIB)";
const char* const kYAxis = "MEAN KL (NATS), BAR TO P99";

}  // namespace

int EvalPlotLayout::x_of(double mb) const {
    const double t = (mb - size_min_mb) / (size_max_mb - size_min_mb);
    return left + static_cast<int>(std::lround(t * (right - left)));
}

int EvalPlotLayout::y_of(double kl) const {
    const double lk = kl > 0 ? std::clamp(std::log10(kl), log_kl_min, log_kl_max) : log_kl_min;
    const double t = (lk - log_kl_min) / (log_kl_max - log_kl_min);
    return bottom - static_cast<int>(std::lround(t * (bottom - top)));
}

std::string eval_plot_label(const ModelEval& model) {
    std::string name = model.path;
    const std::size_t slash = name.find_last_of("/\\");
    if (slash != std::string::npos) name = name.substr(slash + 1);
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0)
        name.resize(name.size() - 5);
    return name;
}

EvalPlotLayout eval_plot_layout(const EvalResult& r, int width, int height) {
    if (r.models.empty()) throw InvalidArgument("quant-eval plot: no model to plot");
    if (width < 320 || height < 240) {
        throw InvalidArgument("quant-eval plot: " + std::to_string(width) + " x " +
                              std::to_string(height) + " is too small (at least 320 x 240)");
    }
    EvalPlotLayout l;
    l.width = width;
    l.height = height;
    l.left = 90;
    l.right = width - 30;
    l.top = 50;
    l.bottom = height - 70;
    double largest = size_mb(r.base);
    double low = HUGE_VAL, high = 0;
    for (const ModelEval& m : r.models) {
        largest = std::max(largest, size_mb(m));
        if (m.kl_mean > 0) low = std::min(low, m.kl_mean);
        high = std::max({high, m.kl_mean, m.kl_p99});
    }
    l.size_min_mb = 0;
    l.size_tick_mb = nice_step(std::max(largest, 1e-3) * 1.05, 6);
    l.size_max_mb = std::ceil(largest * 1.05 / l.size_tick_mb) * l.size_tick_mb;
    if (high <= 0) {  // every model equals the base
        l.log_kl_min = -4;
        l.log_kl_max = 0;
    } else {
        if (low == HUGE_VAL) low = high;
        l.log_kl_min = std::floor(std::log10(low)) - (low == high ? 1 : 0);
        l.log_kl_max = std::ceil(std::log10(high));
        if (l.log_kl_max <= l.log_kl_min) l.log_kl_max = l.log_kl_min + 1;
    }
    return l;
}

inspect::RgbImage render_eval_plot_png(const EvalResult& r, int width, int height) {
    const EvalPlotLayout l = eval_plot_layout(r, width, height);
    const int kTextScale = text_scale_for(width);
    inspect::RgbImage img(width, height, kBackground);
    const int glyph_h = inspect::kGlyphHeight * kTextScale;
    // Grid and ticks: a line per decade of KL, per x tick.
    for (int k = static_cast<int>(l.log_kl_min); k <= static_cast<int>(l.log_kl_max); ++k) {
        const int y = l.y_of(std::pow(10.0, k));
        draw_line(img, l.left, y, l.right, y, kGrid);
        const std::string t = decade_label(k);
        inspect::draw_text(img, l.left - 8 - inspect::text_width(t, kTextScale), y - glyph_h / 2, t,
                           kInk, kTextScale);
    }
    for (double s = l.size_min_mb; s <= l.size_max_mb + 1e-9; s += l.size_tick_mb) {
        const int x = l.x_of(s);
        draw_line(img, x, l.top, x, l.bottom, kGrid);
        const std::string t = format_number(s);
        inspect::draw_text(img, x - inspect::text_width(t, kTextScale) / 2, l.bottom + 8, t, kInk,
                           kTextScale);
    }
    draw_line(img, l.left, l.bottom, l.right, l.bottom, kInk);
    draw_line(img, l.left, l.top, l.left, l.bottom, kInk);
    // The base model's size.
    if (r.base.file_bytes > 0) {
        const int x = l.x_of(size_mb(r.base));
        draw_line(img, x, l.top, x, l.bottom, kBaseLine, 4);
        inspect::draw_text(img, x - inspect::text_width("BASE", kTextScale) - 4, l.top + 4, "BASE",
                           kBaseLine, kTextScale);
    }
    // Bars to p99, then points on top, then labels.
    for (const ModelEval& m : r.models) {
        const int x = l.x_of(size_mb(m));
        if (m.kl_p99 > m.kl_mean) {
            for (int dx = -1; dx <= 1; ++dx)
                draw_line(img, x + dx, l.y_of(m.kl_mean), x + dx, l.y_of(m.kl_p99), kBar);
        }
    }
    for (const ModelEval& m : r.models)
        fill_disc(img, l.x_of(size_mb(m)), l.y_of(m.kl_mean), 5, kEvalPlotPointRgb);
    const std::vector<Box> labels = place_labels(l, r);
    for (std::size_t i = 0; i < r.models.size(); ++i) {
        inspect::draw_text(img, labels[i].x0, labels[i].y0, eval_plot_label(r.models[i]), kInk,
                           kTextScale);
    }
    inspect::draw_text(img, (width - inspect::text_width(kTitle, kTextScale)) / 2, 8, kTitle, kInk,
                       kTextScale);
    inspect::draw_text(img, (l.left + l.right - inspect::text_width(kXAxis, kTextScale)) / 2,
                       height - 8 - glyph_h, kXAxis, kInk, kTextScale);
    // Above the plot area from its left edge: clear of the title and of the top tick's label.
    inspect::draw_text(img, l.left, l.top - glyph_h - 6, kYAxis, kInk, kTextScale);
    return img;
}

std::string render_eval_plot_svg(const EvalResult& r, int width, int height) {
    const EvalPlotLayout l = eval_plot_layout(r, width, height);
    auto line = [&](int x0, int y0, int x1, int y1, std::uint32_t rgb, const char* extra = "") {
        return "<line x1=\"" + std::to_string(x0) + "\" y1=\"" + std::to_string(y0) + "\" x2=\"" +
               std::to_string(x1) + "\" y2=\"" + std::to_string(y1) + "\" stroke=\"" +
               inspect::hex_color(rgb) + "\"" + extra + "/>\n";
    };
    auto text = [&](int x, int y, const std::string& t, const char* anchor = "start") {
        return "<text x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(y) +
               "\" text-anchor=\"" + anchor + "\">" + inspect::xml_escape(t) + "</text>\n";
    };
    std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) +
                    "\" height=\"" + std::to_string(height) +
                    "\" font-family=\"sans-serif\" font-size=\"14\">\n";
    s +=
        "<rect width=\"100%\" height=\"100%\" fill=\"" + inspect::hex_color(kBackground) + "\"/>\n";
    for (int k = static_cast<int>(l.log_kl_min); k <= static_cast<int>(l.log_kl_max); ++k) {
        const int y = l.y_of(std::pow(10.0, k));
        s += line(l.left, y, l.right, y, kGrid);
        s += text(l.left - 8, y + 5, decade_label(k), "end");
    }
    for (double v = l.size_min_mb; v <= l.size_max_mb + 1e-9; v += l.size_tick_mb) {
        const int x = l.x_of(v);
        s += line(x, l.top, x, l.bottom, kGrid);
        s += text(x, l.bottom + 22, format_number(v), "middle");
    }
    s += line(l.left, l.bottom, l.right, l.bottom, kInk);
    s += line(l.left, l.top, l.left, l.bottom, kInk);
    if (r.base.file_bytes > 0) {
        const int x = l.x_of(size_mb(r.base));
        s += line(x, l.top, x, l.bottom, kBaseLine, " stroke-dasharray=\"4 4\"");
        s += text(x - 4, l.top + 16, "base", "end");
    }
    const std::vector<Box> labels = place_labels(l, r);
    for (std::size_t i = 0; i < r.models.size(); ++i) {
        const ModelEval& m = r.models[i];
        const int x = l.x_of(size_mb(m)), y = l.y_of(m.kl_mean);
        if (m.kl_p99 > m.kl_mean) s += line(x, y, x, l.y_of(m.kl_p99), kBar, " stroke-width=\"3\"");
        s += "<circle cx=\"" + std::to_string(x) + "\" cy=\"" + std::to_string(y) +
             "\" r=\"5\" fill=\"" + inspect::hex_color(kEvalPlotPointRgb) + "\"><title>" +
             inspect::xml_escape(eval_plot_label(m)) + ": " + format_number(size_mb(m)) +
             " MiB, mean KL " + format_number(m.kl_mean) + ", p99 " + format_number(m.kl_p99) +
             "</title></circle>\n";
        s += text(labels[i].x0, labels[i].y1 - 1, eval_plot_label(m));
    }
    s += text(width / 2, 22, "KL divergence from the base against file size", "middle");
    s += text((l.left + l.right) / 2, height - 14, "file size (MiB)", "middle");
    s += text(l.left, l.top - 8, "mean KL (nats), bar to p99");
    s += "</svg>\n";
    return s;
}

void check_eval_plot_path(const std::string& path) {
    const std::string ext = inspect::extension_of(path);
    if (ext != "png" && ext != "svg")
        throw InvalidArgument(path + ": the plot's file name must end in .png or .svg");
}

void write_eval_plot(const std::string& path, const EvalResult& result) {
    check_eval_plot_path(path);
    if (inspect::extension_of(path) == "png") {
        inspect::write_png(path, render_eval_plot_png(result));
        return;
    }
    inspect::write_text_file(path, render_eval_plot_svg(result));
}

}  // namespace tokenscope::quant
