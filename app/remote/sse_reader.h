#pragma once
// Server-Sent Events (the WHATWG "event stream" format) read incrementally from the bytes of a
// streamed HTTP body, which arrive cut at arbitrary places: an event is its "data:" lines,
// joined with "\n", ended by a blank line. Both "\n" and "\r\n" line ends occur in the wild
// (llama.cpp, proxies); comments (":") and other fields ("event:", "id:") are skipped.
#include <string>
#include <string_view>
#include <vector>

namespace tokenscope::remote {

class SseReader {
  public:
    // Appends bytes; returns the data of every event they completed, in order.
    std::vector<std::string> feed(std::string_view bytes);
    // The data of an event the stream ended without its blank line (some servers do).
    std::vector<std::string> finish();

  private:
    void line(std::string_view text, std::vector<std::string>& out);

    std::string pending_;  // bytes of an incomplete line
    std::string data_;     // the current event's data so far
    bool has_data_ = false;
};

}  // namespace tokenscope::remote
