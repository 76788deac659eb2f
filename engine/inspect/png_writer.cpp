#include "inspect/png_writer.h"

#include <array>
#include <cstdio>

#include "util/error.h"

namespace tokenscope::inspect {

namespace {

std::array<std::uint32_t, 256> make_crc_table() {
    std::array<std::uint32_t, 256> table{};
    for (std::uint32_t n = 0; n < 256; ++n) {
        std::uint32_t c = n;
        for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[n] = c;
    }
    return table;
}

void put_u32_be(std::vector<std::uint8_t>& out, std::uint32_t v) {
    out.push_back(static_cast<std::uint8_t>(v >> 24));
    out.push_back(static_cast<std::uint8_t>(v >> 16));
    out.push_back(static_cast<std::uint8_t>(v >> 8));
    out.push_back(static_cast<std::uint8_t>(v));
}

// length, type, data, CRC over type + data.
void put_chunk(std::vector<std::uint8_t>& out, const char type[4],
               std::span<const std::uint8_t> data) {
    put_u32_be(out, static_cast<std::uint32_t>(data.size()));
    const std::size_t type_at = out.size();
    out.insert(out.end(), type, type + 4);
    out.insert(out.end(), data.begin(), data.end());
    put_u32_be(out, crc32(std::span(out).subspan(type_at)));
}

}  // namespace

RgbImage::RgbImage(int w, int h, std::uint32_t fill_rgb) : width(w), height(h) {
    if (w < 0 || h < 0) throw InvalidArgument("image size must not be negative");
    rgb.resize(static_cast<std::size_t>(w) * static_cast<std::size_t>(h) * 3);
    fill_rect(0, 0, w, h, fill_rgb);
}

void RgbImage::set(int x, int y, std::uint32_t v) {
    if (x < 0 || y < 0 || x >= width || y >= height) return;
    std::uint8_t* p = &rgb[(static_cast<std::size_t>(y) * static_cast<std::size_t>(width) +
                            static_cast<std::size_t>(x)) *
                           3];
    p[0] = static_cast<std::uint8_t>(v >> 16);
    p[1] = static_cast<std::uint8_t>(v >> 8);
    p[2] = static_cast<std::uint8_t>(v);
}

std::uint32_t RgbImage::at(int x, int y) const {
    const std::uint8_t* p = &rgb[(static_cast<std::size_t>(y) * static_cast<std::size_t>(width) +
                                  static_cast<std::size_t>(x)) *
                                 3];
    return (std::uint32_t{p[0]} << 16) | (std::uint32_t{p[1]} << 8) | p[2];
}

void RgbImage::fill_rect(int x, int y, int w, int h, std::uint32_t v) {
    for (int yy = std::max(0, y); yy < std::min(height, y + h); ++yy)
        for (int xx = std::max(0, x); xx < std::min(width, x + w); ++xx) set(xx, yy, v);
}

std::uint32_t crc32(std::span<const std::uint8_t> bytes, std::uint32_t crc) {
    static const std::array<std::uint32_t, 256> table = make_crc_table();
    crc = ~crc;
    for (std::uint8_t b : bytes) crc = table[(crc ^ b) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}

std::uint32_t adler32(std::span<const std::uint8_t> bytes) {
    constexpr std::uint32_t kMod = 65521;
    std::uint32_t a = 1, b = 0;
    // 5552 bytes is the most that can be summed before b could overflow 32 bits.
    for (std::size_t i = 0; i < bytes.size();) {
        const std::size_t end = std::min(bytes.size(), i + 5552);
        for (; i < end; ++i) {
            a += bytes[i];
            b += a;
        }
        a %= kMod;
        b %= kMod;
    }
    return (b << 16) | a;
}

std::vector<std::uint8_t> encode_png(const RgbImage& image) {
    if (image.width <= 0 || image.height <= 0)
        throw InvalidArgument("cannot write an empty image as PNG");
    const std::size_t stride = static_cast<std::size_t>(image.width) * 3;
    if (image.rgb.size() != stride * static_cast<std::size_t>(image.height))
        throw InvalidArgument("image pixel buffer does not match its size");

    // The raw scanlines, each preceded by filter type 0 (None).
    std::vector<std::uint8_t> raw;
    raw.reserve((stride + 1) * static_cast<std::size_t>(image.height));
    for (int y = 0; y < image.height; ++y) {
        raw.push_back(0);
        const auto* row = image.rgb.data() + stride * static_cast<std::size_t>(y);
        raw.insert(raw.end(), row, row + stride);
    }

    // zlib: CMF/FLG (deflate, 32 KiB window, no dictionary; 0x7801 is divisible by 31), stored
    // blocks of at most 65535 bytes, Adler-32 of the uncompressed data.
    std::vector<std::uint8_t> z;
    z.reserve(raw.size() + raw.size() / 65535 * 5 + 16);
    z.push_back(0x78);
    z.push_back(0x01);
    std::size_t at = 0;
    do {
        const std::size_t n = std::min<std::size_t>(65535, raw.size() - at);
        const bool last = at + n == raw.size();
        z.push_back(last ? 1 : 0);  // BFINAL, BTYPE = 00 (stored)
        z.push_back(static_cast<std::uint8_t>(n));
        z.push_back(static_cast<std::uint8_t>(n >> 8));
        z.push_back(static_cast<std::uint8_t>(~n));
        z.push_back(static_cast<std::uint8_t>(~n >> 8));
        z.insert(z.end(), raw.begin() + static_cast<std::ptrdiff_t>(at),
                 raw.begin() + static_cast<std::ptrdiff_t>(at + n));
        at += n;
    } while (at < raw.size());
    put_u32_be(z, adler32(raw));

    std::vector<std::uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    std::vector<std::uint8_t> ihdr;
    put_u32_be(ihdr, static_cast<std::uint32_t>(image.width));
    put_u32_be(ihdr, static_cast<std::uint32_t>(image.height));
    ihdr.insert(ihdr.end(),
                {8, 2, 0, 0, 0});  // 8 bits, truecolour, deflate, filter 0, no interlace
    put_chunk(png, "IHDR", ihdr);
    put_chunk(png, "IDAT", z);
    put_chunk(png, "IEND", {});
    return png;
}

void write_png(const std::string& path, const RgbImage& image) {
    const auto bytes = encode_png(image);
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) throw IoError(path + ": cannot open for writing");
    const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    if (std::fclose(f) != 0 || !ok) throw IoError(path + ": write failed");
}

}  // namespace tokenscope::inspect
