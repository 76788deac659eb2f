#pragma once
// Small pieces every exporter of the engine side uses (attention_export, quant/eval_plot): the
// lower-case extension that picks the format, SVG text and colours, and writing a text file.
#include <cstdint>
#include <string>

namespace tokenscope::inspect {

// "plot.PNG" -> "png"; "" without an extension (a dot in a directory name does not count).
std::string extension_of(const std::string& path);
// Text for SVG/XML: & < > " escaped; control characters XML 1.0 forbids become spaces.
std::string xml_escape(const std::string& text);
// 0xRRGGBB -> "#RRGGBB".
std::string hex_color(std::uint32_t rgb);
// Writes `text` to `path`; IoError naming the path when it cannot.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace tokenscope::inspect
