#pragma once
// The Quantization window's explanation ("teaching overlay"): blocks and their scales, K-quant
// super-blocks, what an importance matrix changes, and what it all means for the model in use —
// its weight bytes at each type and its KV cache next to them. Numbers come from the type table
// (bytes per block) and the model's shape, not from a measurement.
#include <QString>

#include "panel_data.h"

namespace tokenscope::app {

// Bits per weight of a GGUF type: bytes per block * 8 / weights per block. 0 if unknown.
double bits_per_weight(const QString& type);
// KV cache bytes per token at `bytes_per_element` (2 for F16): keys and values, every layer.
qint64 kv_bytes_per_token(const ui::ModelInfoData& info, int bytes_per_element = 2);
// Rich text (HTML) for a QTextBrowser. `info` may be empty (no model loaded): the general part
// only.
QString quantization_explanation(const ui::ModelInfoData& info, qint64 context_tokens);

}  // namespace tokenscope::app
