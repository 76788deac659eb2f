#include "inspect/attention_capture.h"

#include <algorithm>

#include "kv/half_rows.h"
#include "util/error.h"

namespace tokenscope::inspect {

AttentionCapture::AttentionCapture(CaptureSpec spec, int layers, int heads)
    : spec_(std::move(spec)), layers_(layers), heads_(heads) {
    for (int l : spec_.layers) {
        if (l < 0 || l >= layers) throw InvalidArgument("attention capture: layer " + std::to_string(l) + " out of range (model has " + std::to_string(layers) + ")");
    }
    for (int h : spec_.heads) {
        if (h < 0 || h >= heads) throw InvalidArgument("attention capture: head " + std::to_string(h) + " out of range (model has " + std::to_string(heads) + ")");
    }
    if (spec_.max_context < 0) throw InvalidArgument("attention capture: negative max_context");
    table_.resize(static_cast<std::size_t>(layers) * heads);
    captured_.assign(table_.size(), false);
    for (int l = 0; l < layers; ++l) {
        for (int h = 0; h < heads; ++h) {
            const bool layer_ok = spec_.layers.empty() || std::count(spec_.layers.begin(), spec_.layers.end(), l);
            const bool head_ok = spec_.heads.empty() || std::count(spec_.heads.begin(), spec_.heads.end(), h);
            captured_[static_cast<std::size_t>(l) * heads + h] = spec_.enabled && layer_ok && head_ok;
        }
    }
}

bool AttentionCapture::wants(int layer, int head) const {
    return captured_[static_cast<std::size_t>(layer) * heads_ + head];
}

bool AttentionCapture::wants_layer(int layer) const {
    for (int h = 0; h < heads_; ++h) {
        if (wants(layer, h)) return true;
    }
    return false;
}

std::vector<AttentionCapture::Row>* AttentionCapture::slot(int layer, int head) {
    return wants(layer, head) ? &table_[static_cast<std::size_t>(layer) * heads_ + head] : nullptr;
}

const std::vector<AttentionCapture::Row>* AttentionCapture::slot(int layer, int head) const {
    return wants(layer, head) ? &table_[static_cast<std::size_t>(layer) * heads_ + head] : nullptr;
}

void AttentionCapture::prepare_rows(std::int64_t end_pos) {
    end_pos = std::min(end_pos, spec_.max_context);
    for (std::size_t i = 0; i < table_.size(); ++i) {
        if (captured_[i]) table_[i].resize(static_cast<std::size_t>(std::max<std::int64_t>(0, end_pos)));
    }
    rows_ = std::max<std::int64_t>(0, end_pos);
}

void AttentionCapture::set_row(int layer, int head, std::int64_t pos, std::int64_t first_key,
                               std::span<const float> weights) {
    auto* rows = slot(layer, head);
    if (!rows || pos >= static_cast<std::int64_t>(rows->size())) return;
    Row& row = (*rows)[static_cast<std::size_t>(pos)];
    row.first_key = first_key;
    row.weights.resize(weights.size());
    // Every captured weight of every step passes here (30 layers x 9 heads x the context per
    // token for SmolLM2): converted one by one in integer code, the capture took 12-14 % of a
    // 512-token reply's decode speed.
    kv::floats_to_halves(weights, row.weights.data());
}

std::vector<float> AttentionCapture::row(int layer, int head, std::int64_t pos) const {
    std::vector<float> out(static_cast<std::size_t>(pos + 1), 0.0f);
    const auto* rows = slot(layer, head);
    if (!rows || pos < 0 || pos >= static_cast<std::int64_t>(rows->size())) return out;
    const Row& r = (*rows)[static_cast<std::size_t>(pos)];
    const auto first = static_cast<std::size_t>(r.first_key);
    if (first >= out.size()) return out;
    const std::size_t n = std::min(r.weights.size(), out.size() - first);
    kv::halves_to_floats(std::span(r.weights).first(n), out.data() + first);
    return out;
}

std::vector<float> AttentionCapture::mean_row(int layer, std::int64_t pos) const {
    std::vector<float> sum(static_cast<std::size_t>(pos + 1), 0.0f);
    int n = 0;
    for (int h = 0; h < heads_; ++h) {
        if (!wants(layer, h)) continue;
        const auto r = row(layer, h, pos);
        for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += r[i];
        ++n;
    }
    if (n > 0) {
        for (float& v : sum) v /= static_cast<float>(n);
    }
    return sum;
}

std::uint64_t AttentionCapture::bytes() const {
    std::uint64_t total = 0;
    for (const auto& rows : table_) {
        for (const auto& r : rows) total += r.weights.size() * sizeof(std::uint16_t);
    }
    return total;
}

}  // namespace tokenscope::inspect
