#pragma once
// A dependency-free PNG encoder for images the engine side draws (tokenscope-cli attention):
// 8-bit RGB, no filtering, the zlib stream made of deflate "stored" blocks (no compression).
// Every PNG reader accepts stored blocks, and the CLI builds without Qt or zlib (GPU machines),
// so this is the one way to write a PNG there. Files are about 3 bytes per pixel, which is fine
// for a heatmap of a few hundred thousand pixels.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tokenscope::inspect {

struct RgbImage {
    int width = 0;
    int height = 0;
    std::vector<std::uint8_t> rgb;  // row-major, 3 bytes per pixel, top row first

    RgbImage() = default;
    RgbImage(int w, int h, std::uint32_t fill_rgb);
    void set(int x, int y, std::uint32_t rgb_value);  // 0xRRGGBB; ignored outside the image
    std::uint32_t at(int x, int y) const;
    void fill_rect(int x, int y, int w, int h, std::uint32_t rgb_value);
};

// CRC-32 (ISO-HDLC, as PNG chunks use) and Adler-32 (as the zlib trailer uses).
std::uint32_t crc32(std::span<const std::uint8_t> bytes, std::uint32_t crc = 0);
std::uint32_t adler32(std::span<const std::uint8_t> bytes);

// The whole PNG file. Throws InvalidArgument for an empty or inconsistent image.
std::vector<std::uint8_t> encode_png(const RgbImage& image);
// Writes encode_png(image) to `path`; throws IoError when it cannot.
void write_png(const std::string& path, const RgbImage& image);

}  // namespace tokenscope::inspect
