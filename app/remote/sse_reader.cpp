#include "sse_reader.h"

namespace tokenscope::remote {

void SseReader::line(std::string_view text, std::vector<std::string>& out) {
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (text.empty()) {  // blank line: the event is complete
        if (has_data_) out.push_back(std::move(data_));
        data_.clear();
        has_data_ = false;
        return;
    }
    if (text.front() == ':') return;  // comment (keep-alive pings)
    const auto colon = text.find(':');
    const std::string_view field = text.substr(0, colon);
    if (field != "data") return;
    std::string_view value = colon == std::string_view::npos ? "" : text.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (has_data_) data_ += '\n';
    data_ += value;
    has_data_ = true;
}

std::vector<std::string> SseReader::feed(std::string_view bytes) {
    std::vector<std::string> out;
    pending_ += bytes;
    std::size_t start = 0;
    for (std::size_t end; (end = pending_.find('\n', start)) != std::string::npos; start = end + 1)
        line(std::string_view(pending_).substr(start, end - start), out);
    pending_.erase(0, start);
    return out;
}

std::vector<std::string> SseReader::finish() {
    std::vector<std::string> out;
    if (!pending_.empty()) line(pending_, out);
    pending_.clear();
    line("", out);
    return out;
}

}  // namespace tokenscope::remote
