#pragma once
// Attention weights captured while a request runs, for the heatmap. Opt-in per request: which
// layers and heads (empty = all) and up to which context length. Each captured row is the
// softmax over the keys a query saw, stored as f16 (half the memory of f32; the heatmap needs
// no more precision). Prefill fills the lower triangle; every decode step appends a row.
//
// Threading: the forward pass calls prepare_rows() on one thread, then set_row() from worker
// threads for distinct (layer, head, position) rows; readers must not run concurrently with a
// forward pass of the same sequence (the engine hands out snapshots between steps).
#include <cstdint>
#include <span>
#include <vector>

namespace tokenscope::inspect {

struct CaptureSpec {
    bool enabled = false;
    std::vector<int> layers;  // empty: every layer
    std::vector<int> heads;   // empty: every head
    std::int64_t max_context = 2048;  // query positions at or past this are not captured
};

class AttentionCapture {
public:
    AttentionCapture(CaptureSpec spec, int layers, int heads);

    const CaptureSpec& spec() const { return spec_; }
    bool wants(int layer, int head) const;
    bool wants_layer(int layer) const;
    bool wants_position(std::int64_t pos) const { return pos < spec_.max_context; }

    // Makes rows [0, end_pos) addressable for every captured (layer, head); rows past the
    // end are dropped (the cache was truncated). Single-threaded.
    void prepare_rows(std::int64_t end_pos);
    // Stores the weights of query `pos` over keys [first_key, first_key + weights.size()).
    void set_row(int layer, int head, std::int64_t pos, std::int64_t first_key,
                 std::span<const float> weights);

    std::int64_t rows() const { return rows_; }
    // Query `pos`'s weights over keys [0, pos] (zeros outside the window it saw; all zeros
    // if the row was never captured).
    std::vector<float> row(int layer, int head, std::int64_t pos) const;
    // The mean over the captured heads of one layer.
    std::vector<float> mean_row(int layer, std::int64_t pos) const;
    std::uint64_t bytes() const;

private:
    struct Row {
        std::int64_t first_key = 0;
        std::vector<std::uint16_t> weights;  // f16
    };
    std::vector<Row>* slot(int layer, int head);
    const std::vector<Row>* slot(int layer, int head) const;

    CaptureSpec spec_;
    int layers_;
    int heads_;
    std::vector<std::vector<Row>> table_;  // [layer * heads + head] -> rows by position (empty if not captured)
    std::vector<bool> captured_;
    std::int64_t rows_ = 0;
};

}  // namespace tokenscope::inspect
