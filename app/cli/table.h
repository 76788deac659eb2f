#pragma once
// Plain-text tables for the CLI: columns sized to their widest cell (counted in UTF-8 code
// points), numbers right-aligned.
#include <cstdint>
#include <string>
#include <vector>

namespace tokenscope::cli {

class Table {
  public:
    explicit Table(std::vector<std::string> headers, std::vector<bool> right_aligned = {});
    void add_row(std::vector<std::string> cells);
    std::string render() const;

  private:
    std::vector<std::string> headers_;
    std::vector<bool> right_;
    std::vector<std::vector<std::string>> rows_;
};

// "253.1 MB" style, 1000-based with the exact byte count kept for the JSON output.
std::string human_bytes(std::uint64_t bytes);
// Escapes control characters so that a metadata string prints on one line.
std::string printable(const std::string& text, std::size_t max_chars = 60);

}  // namespace tokenscope::cli
