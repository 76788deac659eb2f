#pragma once
// The quant-eval plot: each quantized model's mean KL divergence from the base (log scale)
// against its file size, one labelled point per model with a bar up to its p99 KL, and the
// base's size as a dashed line. PNG (drawn with the pixel font; the CLI has no font library)
// or SVG (real text), chosen by the file extension.
#include <cstdint>
#include <string>

#include "inspect/png_writer.h"
#include "quant/quant_eval.h"

namespace tokenscope::quant {

// Where things go; public so that tests can check a point lands where the mapping says.
struct EvalPlotLayout {
    int width = 0;
    int height = 0;
    int left = 0, right = 0, top = 0, bottom = 0;  // the plot area, in pixels
    double size_min_mb = 0, size_max_mb = 1;       // x axis
    double log_kl_min = -4, log_kl_max = 0;        // y axis, log10 of nats (whole decades)
    double size_tick_mb = 1;                       // spacing of the x axis's labelled ticks

    // Pixel column of a file size and row of a KL value; KL <= 0 (a model that equals the
    // base) and values below the axis sit on the bottom edge.
    int x_of(double size_mb) const;
    int y_of(double kl) const;
};

inline constexpr int kEvalPlotWidth = 960;
inline constexpr int kEvalPlotHeight = 600;
inline constexpr std::uint32_t kEvalPlotPointRgb = 0x1F6FB4;

// Throws InvalidArgument when there is no model to plot or the size is too small to draw in.
EvalPlotLayout eval_plot_layout(const EvalResult& result, int width = kEvalPlotWidth,
                                int height = kEvalPlotHeight);
// The label of a model on the plot: its file name without directory and ".gguf".
std::string eval_plot_label(const ModelEval& model);

inspect::RgbImage render_eval_plot_png(const EvalResult& result, int width = kEvalPlotWidth,
                                       int height = kEvalPlotHeight);
std::string render_eval_plot_svg(const EvalResult& result, int width = kEvalPlotWidth,
                                 int height = kEvalPlotHeight);
// InvalidArgument unless `path` ends in .png or .svg (any case).
void check_eval_plot_path(const std::string& path);
// .png or .svg by the extension of `path` (InvalidArgument otherwise); IoError when it cannot
// write.
void write_eval_plot(const std::string& path, const EvalResult& result);

}  // namespace tokenscope::quant
