#pragma once
// The numbers behind an attention view, taken out of an AttentionCapture and written as JSON,
// CSV, PNG or SVG: for `tokenscope-cli attention` and the GUI's export menus, so both write the
// same formats. No Qt here: the CLI builds without it.
//
// Image layout: one panel per matrix (query rows x key columns, lower triangle), panels in a
// grid: a layer x head overview when several layers and heads are chosen (row = layer, column =
// head), otherwise as square as possible. Colours: the viridis map on a sqrt (default), linear
// or log scale of the weight, the same as the GUI heatmap; cells above the diagonal are grey.
#include <cstdint>
#include <string>
#include <vector>

#include "inspect/attention_capture.h"
#include "inspect/png_writer.h"

namespace tokenscope::inspect {

struct AttentionMatrix {
    int layer = 0;
    int head = -1;                         // -1: the mean over the captured heads
    std::vector<std::vector<float>> rows;  // row q: weights over keys 0..q
};

struct AttentionExport {
    std::string model;  // file name or path, for the reader
    int model_layers = 0;
    int model_heads = 0;
    std::vector<std::int32_t> token_ids;  // one per row (query position)
    std::vector<std::string> token_texts;
    std::vector<AttentionMatrix> matrices;
};

// Rows [0, rows) of the chosen layers and heads (head -1: the mean over heads). Throws
// InvalidArgument for a layer or head the capture does not hold.
std::vector<AttentionMatrix> extract_matrices(const AttentionCapture& capture,
                                              const std::vector<int>& layers,
                                              const std::vector<int>& heads, std::int64_t rows);

// {"model", "layers", "heads", "tokens": [{"id", "text"}], "matrices": [{"layer", "head",
// "rows": [[w00], [w10, w11], ...]}]}; head is -1 for the mean. Weights with 9 significant
// digits, so every f32 reads back exactly.
std::string attention_json(const AttentionExport& data);
// One line per cell of the lower triangle: layer,head,query,key,query_token,key_token,weight
// (a header line first; token texts quoted as RFC 4180 wants).
std::string attention_csv(const AttentionExport& data);

enum class WeightScale { Linear, Sqrt, Log };
// "linear", "sqrt", "log"; nullopt-like: throws InvalidArgument for anything else.
WeightScale parse_weight_scale(const std::string& name);
// Weight in [0, 1] -> position on the colour map (clamped; NaN -> 0). Same formulas as the GUI.
float scale_weight(float weight, WeightScale scale);
// viridis, t clamped to [0, 1]: 0xRRGGBB.
std::uint32_t viridis(float t);

struct GridStyle {
    int cell = 0;  // pixels per token; 0: chosen from the context length and panel count
    WeightScale scale = WeightScale::Sqrt;
    int columns = 0;  // panels per row; 0: the layout described above
};
// Panels per row and the cell size the style resolves to for `data`.
int grid_columns(const AttentionExport& data, const GridStyle& style);
int grid_cell(const AttentionExport& data, const GridStyle& style);

RgbImage attention_grid_image(const AttentionExport& data, const GridStyle& style);
// The same grid as vector graphics, with a title per panel (and token labels and a tooltip per
// cell when the context is short enough to read them).
std::string attention_grid_svg(const AttentionExport& data, const GridStyle& style);

// Writes `data` to `path` in the format its extension names (.json, .csv, .png, .svg);
// throws InvalidArgument for another extension and IoError when writing fails.
void write_attention(const std::string& path, const AttentionExport& data, const GridStyle& style);

}  // namespace tokenscope::inspect
