#pragma once
// A 5 x 7 pixel font for the labels of images the engine side draws (tokenscope-cli's PNG plots),
// where there is no font library: digits, capital letters (lower case is drawn as capitals) and
// the punctuation plot labels use. Each glyph sits in a 6 x 9 cell (one column and two rows of
// spacing); `scale` multiplies every pixel.
#include <cstdint>
#include <string_view>

#include "inspect/png_writer.h"

namespace tokenscope::inspect {

inline constexpr int kGlyphWidth = 5;
inline constexpr int kGlyphHeight = 7;
inline constexpr int kCellWidth = 6;
inline constexpr int kCellHeight = 9;

// Whether `c` has a glyph of its own (others, apart from lower case, draw as a hollow box).
bool has_glyph(char c);
// Bit (4 - x) of row y (0: top) is pixel (x, y) of c's glyph.
std::uint8_t glyph_row(char c, int y);

// Width in pixels of `text` drawn at `scale` (the last cell's spacing column not counted).
int text_width(std::string_view text, int scale = 1);
// Draws `text` with its top-left corner at (x, y); pixels outside the image are skipped.
void draw_text(RgbImage& image, int x, int y, std::string_view text, std::uint32_t rgb,
               int scale = 1);

}  // namespace tokenscope::inspect
