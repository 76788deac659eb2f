#include "inspect/attention_export.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <set>

#include "inspect/export_files.h"
#include "util/error.h"
#include "util/json_writer.h"

namespace tokenscope::inspect {

namespace {

// The GUI's viridis anchors (ui/heatmap_renderer.cpp), so exported images match the screen.
constexpr std::array<std::uint32_t, 10> kViridis = {
    0x440154, 0x482878, 0x3E4A89, 0x31688E, 0x26828E,
    0x1F9E89, 0x35B779, 0x6DCD59, 0xB4DE2C, 0xFDE725,
};
constexpr float kLogGain = 1000.0f;
constexpr std::uint32_t kBackground = 0xFFFFFF;
constexpr std::uint32_t kMasked = 0xE6E6E6;
constexpr int kPanelGap = 8;    // pixels between panels and around the grid
constexpr int kCellGapMin = 6;  // cells at least this large get a 1 px separator, as on screen
// Token labels and per-cell tooltips in SVG only up to this context length: past it they are
// unreadable and make the file large.
constexpr std::size_t kSvgLabelTokens = 64;

std::string matrix_title(const AttentionMatrix& m) {
    return "layer " + std::to_string(m.layer) + " · " +
           (m.head < 0 ? std::string("mean of heads") : "head " + std::to_string(m.head));
}

std::size_t row_count(const AttentionExport& data) {
    std::size_t n = 0;
    for (const auto& m : data.matrices) n = std::max(n, m.rows.size());
    return n;
}

std::string csv_field(const std::string& text) {
    if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
    std::string out = "\"";
    for (char c : text) {
        if (c == '"') out += '"';
        out += c;
    }
    return out + '"';
}

struct Layout {
    int columns = 1;
    int rows = 1;
    int cell = 1;
    int side = 0;   // panel side in pixels (tokens x cell)
    int title = 0;  // pixels above each panel for its title (SVG only)
    int label = 0;  // pixels left of and above the grid for token labels (SVG only)
    int width = 0;
    int height = 0;
    int panel_x(int i) const { return label + kPanelGap + (i % columns) * (side + kPanelGap); }
    int panel_y(int i) const {
        return label + kPanelGap + (i / columns) * (side + title + kPanelGap) + title;
    }
};

Layout layout_of(const AttentionExport& data, const GridStyle& style, int title, int label) {
    Layout l;
    l.columns = grid_columns(data, style);
    l.rows = static_cast<int>((data.matrices.size() + static_cast<std::size_t>(l.columns) - 1) /
                              static_cast<std::size_t>(l.columns));
    l.cell = grid_cell(data, style);
    l.side = static_cast<int>(row_count(data)) * l.cell;
    l.title = title;
    l.label = label;
    l.width = label + kPanelGap + l.columns * (l.side + kPanelGap);
    l.height = label + kPanelGap + l.rows * (l.side + title + kPanelGap);
    return l;
}

}  // namespace

std::vector<AttentionMatrix> extract_matrices(const AttentionCapture& capture,
                                              const std::vector<int>& layers,
                                              const std::vector<int>& heads, std::int64_t rows) {
    rows = std::min(rows, capture.rows());
    std::vector<AttentionMatrix> out;
    for (int layer : layers) {
        if (!capture.wants_layer(layer))
            throw InvalidArgument("layer " + std::to_string(layer) + " was not captured");
        for (int head : heads) {
            if (head >= 0 && !capture.wants(layer, head))
                throw InvalidArgument("layer " + std::to_string(layer) + " head " +
                                      std::to_string(head) + " was not captured");
            AttentionMatrix m{layer, head, {}};
            m.rows.reserve(static_cast<std::size_t>(std::max<std::int64_t>(0, rows)));
            for (std::int64_t q = 0; q < rows; ++q)
                m.rows.push_back(head < 0 ? capture.mean_row(layer, q)
                                          : capture.row(layer, head, q));
            out.push_back(std::move(m));
        }
    }
    return out;
}

std::string attention_json(const AttentionExport& data) {
    JsonWriter w;
    w.begin_object();
    w.key("model").value(data.model);
    w.key("layers").value(data.model_layers);
    w.key("heads").value(data.model_heads);
    w.key("tokens").begin_array();
    for (std::size_t i = 0; i < data.token_ids.size(); ++i) {
        w.begin_object();
        w.key("id").value(static_cast<std::int64_t>(data.token_ids[i]));
        w.key("text").value(i < data.token_texts.size() ? data.token_texts[i] : std::string());
        w.end_object();
    }
    w.end_array();
    w.key("matrices").begin_array();
    for (const auto& m : data.matrices) {
        w.begin_object();
        w.key("layer").value(m.layer);
        w.key("head").value(m.head);
        w.key("rows").begin_array();
        for (const auto& row : m.rows) {
            w.begin_array();
            for (float v : row) w.value(static_cast<double>(v));
            w.end_array();
        }
        w.end_array();
        w.end_object();
    }
    w.end_array();
    w.end_object();
    return w.str() + "\n";
}

std::string attention_csv(const AttentionExport& data) {
    std::string out = "layer,head,query,key,query_token,key_token,weight\n";
    auto text = [&](std::size_t i) {
        return i < data.token_texts.size() ? csv_field(data.token_texts[i]) : std::string();
    };
    char number[32];
    for (const auto& m : data.matrices) {
        for (std::size_t q = 0; q < m.rows.size(); ++q) {
            for (std::size_t k = 0; k < m.rows[q].size(); ++k) {
                std::snprintf(number, sizeof number, "%.9g", static_cast<double>(m.rows[q][k]));
                out += std::to_string(m.layer) + ',' + std::to_string(m.head) + ',' +
                       std::to_string(q) + ',' + std::to_string(k) + ',' + text(q) + ',' + text(k) +
                       ',' + number + '\n';
            }
        }
    }
    return out;
}

WeightScale parse_weight_scale(const std::string& name) {
    if (name == "linear") return WeightScale::Linear;
    if (name == "sqrt") return WeightScale::Sqrt;
    if (name == "log") return WeightScale::Log;
    throw InvalidArgument("colour scale '" + name + "' is not linear, sqrt or log");
}

float scale_weight(float weight, WeightScale scale) {
    if (!(weight > 0.0f)) return 0.0f;
    weight = std::min(weight, 1.0f);
    switch (scale) {
        case WeightScale::Linear:
            return weight;
        case WeightScale::Sqrt:
            return std::sqrt(weight);
        case WeightScale::Log:
            return std::log1p(kLogGain * weight) / std::log1p(kLogGain);
    }
    return weight;
}

std::uint32_t viridis(float t) {
    if (!(t > 0.0f)) t = 0.0f;
    t = std::min(t, 1.0f);
    const float x = t * static_cast<float>(kViridis.size() - 1);
    const int i = std::min(static_cast<int>(x), static_cast<int>(kViridis.size()) - 2);
    const float f = x - static_cast<float>(i);
    const std::uint32_t a = kViridis[static_cast<std::size_t>(i)];
    const std::uint32_t b = kViridis[static_cast<std::size_t>(i) + 1];
    std::uint32_t out = 0;
    for (int shift : {16, 8, 0}) {
        const float u = static_cast<float>((a >> shift) & 0xFFu);
        const float v = static_cast<float>((b >> shift) & 0xFFu);
        out |= static_cast<std::uint32_t>(std::lround(u + (v - u) * f)) << shift;
    }
    return out;
}

int grid_columns(const AttentionExport& data, const GridStyle& style) {
    const int count = std::max<int>(1, static_cast<int>(data.matrices.size()));
    if (style.columns > 0) return std::min(style.columns, count);
    std::set<int> layers, heads;
    for (const auto& m : data.matrices) {
        layers.insert(m.layer);
        heads.insert(m.head);
    }
    if (layers.size() > 1 && heads.size() > 1 &&
        layers.size() * heads.size() == data.matrices.size())
        return static_cast<int>(heads.size());  // the layer x head overview
    return static_cast<int>(std::ceil(std::sqrt(static_cast<double>(count))));
}

int grid_cell(const AttentionExport& data, const GridStyle& style) {
    if (style.cell > 0) return style.cell;
    const int n = std::max<int>(1, static_cast<int>(row_count(data)));
    // One matrix: about 480 px; a grid: about 160 px per panel, so that 30 layers x 9 heads of
    // a short prompt still make an image a slide can hold.
    const int target = data.matrices.size() <= 1 ? 480 : 160;
    return std::clamp(target / n, 1, 24);
}

RgbImage attention_grid_image(const AttentionExport& data, const GridStyle& style) {
    if (data.matrices.empty() || row_count(data) == 0)
        throw InvalidArgument("no attention rows to draw");
    const Layout l = layout_of(data, style, 0, 0);
    RgbImage image(l.width, l.height, kBackground);
    const bool gaps = l.cell >= kCellGapMin;
    const int n = static_cast<int>(row_count(data));
    for (std::size_t i = 0; i < data.matrices.size(); ++i) {
        const auto& m = data.matrices[i];
        const int x0 = l.panel_x(static_cast<int>(i));
        const int y0 = l.panel_y(static_cast<int>(i));
        for (int q = 0; q < n; ++q) {
            for (int k = 0; k < n; ++k) {
                const bool known = q < static_cast<int>(m.rows.size()) && k <= q &&
                                   k < static_cast<int>(m.rows[static_cast<std::size_t>(q)].size());
                const std::uint32_t c =
                    known ? viridis(scale_weight(
                                m.rows[static_cast<std::size_t>(q)][static_cast<std::size_t>(k)],
                                style.scale))
                          : kMasked;
                const int inner = gaps ? l.cell - 1 : l.cell;
                image.fill_rect(x0 + k * l.cell, y0 + q * l.cell, inner, inner, c);
            }
        }
    }
    return image;
}

std::string attention_grid_svg(const AttentionExport& data, const GridStyle& style) {
    if (data.matrices.empty() || row_count(data) == 0)
        throw InvalidArgument("no attention rows to draw");
    const int n = static_cast<int>(row_count(data));
    const bool labels = data.matrices.size() == 1 &&
                        static_cast<std::size_t>(n) <= kSvgLabelTokens && !data.token_texts.empty();
    const bool tooltips = static_cast<std::size_t>(n) <= kSvgLabelTokens;
    const Layout l = layout_of(data, style, 16, labels ? 90 : 0);
    std::string s;
    s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(l.width) +
         "\" height=\"" + std::to_string(l.height) + "\" viewBox=\"0 0 " + std::to_string(l.width) +
         ' ' + std::to_string(l.height) + "\" font-family=\"sans-serif\" font-size=\"11\">\n";
    s += "<desc>" + xml_escape("tokenscope attention: " + data.model) + "</desc>\n";
    s += "<rect width=\"100%\" height=\"100%\" fill=\"#FFFFFF\"/>\n";
    auto token = [&](int i) {
        return static_cast<std::size_t>(i) < data.token_texts.size()
                   ? data.token_texts[static_cast<std::size_t>(i)]
                   : std::string();
    };
    char num[32];
    for (std::size_t i = 0; i < data.matrices.size(); ++i) {
        const auto& m = data.matrices[i];
        const int x0 = l.panel_x(static_cast<int>(i));
        const int y0 = l.panel_y(static_cast<int>(i));
        s += "<g>\n<text x=\"" + std::to_string(x0) + "\" y=\"" + std::to_string(y0 - 4) + "\">" +
             xml_escape(matrix_title(m)) + "</text>\n";
        s += "<rect x=\"" + std::to_string(x0) + "\" y=\"" + std::to_string(y0) + "\" width=\"" +
             std::to_string(l.side) + "\" height=\"" + std::to_string(l.side) + "\" fill=\"" +
             hex_color(kMasked) + "\"/>\n";
        for (int q = 0; q < static_cast<int>(m.rows.size()); ++q) {
            const auto& row = m.rows[static_cast<std::size_t>(q)];
            for (int k = 0; k <= q && k < static_cast<int>(row.size()); ++k) {
                const float w = row[static_cast<std::size_t>(k)];
                s += "<rect x=\"" + std::to_string(x0 + k * l.cell) + "\" y=\"" +
                     std::to_string(y0 + q * l.cell) + "\" width=\"" + std::to_string(l.cell) +
                     "\" height=\"" + std::to_string(l.cell) + "\" fill=\"" +
                     hex_color(viridis(scale_weight(w, style.scale))) + '"';
                if (tooltips) {
                    std::snprintf(num, sizeof num, "%.4f", static_cast<double>(w));
                    s += "><title>" +
                         xml_escape(token(q) + " \xE2\x86\x92 " + token(k) + ": " + num) +
                         "</title></rect>\n";
                } else {
                    s += "/>\n";
                }
            }
        }
        s += "</g>\n";
    }
    if (labels) {
        const int x0 = l.panel_x(0);
        const int y0 = l.panel_y(0);
        for (int i = 0; i < n; ++i) {
            const std::string t = xml_escape(token(i));
            const int c = i * l.cell + l.cell / 2;
            s += "<text x=\"" + std::to_string(x0 - 4) + "\" y=\"" + std::to_string(y0 + c + 4) +
                 "\" text-anchor=\"end\">" + t + "</text>\n";
            s += "<text transform=\"translate(" + std::to_string(x0 + c + 4) + ',' +
                 std::to_string(y0 - 20) + ") rotate(-60)\">" + t + "</text>\n";
        }
    }
    s += "</svg>\n";
    return s;
}

void write_attention(const std::string& path, const AttentionExport& data, const GridStyle& style) {
    const std::string ext = extension_of(path);
    if (ext == "png") {
        write_png(path, attention_grid_image(data, style));
        return;
    }
    std::string text;
    if (ext == "json")
        text = attention_json(data);
    else if (ext == "csv")
        text = attention_csv(data);
    else if (ext == "svg")
        text = attention_grid_svg(data, style);
    else
        throw InvalidArgument(path + ": the file name must end in .json, .csv, .png or .svg");
    write_text_file(path, text);
}

}  // namespace tokenscope::inspect
