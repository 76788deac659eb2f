#include "runtime/cpu_backend.h"

#include <algorithm>
#include <cmath>

#include <spdlog/spdlog.h>

#include "inspect/attention_capture.h"
#include "runtime/cpu_ops.h"
#include "util/error.h"

namespace tokenscope::runtime {

namespace {

// base^(-2i / rope_dims), divided by the file's per-pair factors when it has them (Llama 3.x
// rope_freqs: long wavelengths slowed down by up to the scaling factor).
std::vector<float> inverse_frequencies(std::int64_t rope_dims, double base,
                                       const std::vector<float>& factors) {
    std::vector<float> inv(static_cast<std::size_t>(rope_dims / 2));
    for (std::size_t i = 0; i < inv.size(); ++i) {
        const double f =
            std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(rope_dims));
        inv[i] = static_cast<float>(factors.empty() ? f : f / static_cast<double>(factors[i]));
    }
    return inv;
}

template <typename T>
void grow(std::vector<T>& v, std::int64_t n) {
    if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
}

// Rows per parallel_for chunk for a matrix of `rows` rows: enough chunks for balance across
// threads, each a multiple of the rows the kernel multiplies at once (tensor::matmul_row_multiple:
// 24 for the row tiles of decode and the F16 panels, 16 or 32 for the int8 prefill GEMMs, whose
// lanes are rows), so that no chunk ends in a partial tile. With 24 for everything a 1024-row
// matrix came in 72-row chunks, which the AVX-512 lane GEMM ran as three 32-row groups (a 72-row
// call took as long as a 96-row one: 0.158-0.160 ms against 0.124-0.127 ms for 64 rows, Q4_K,
// 1024 wide, 128 tokens, one thread, Intel Xeon family 6 model 0xCF).
// Prefill takes 8 chunks per thread (decode: CpuBackend::stream_matmuls).
std::int64_t row_grain(const model::WeightMatrix& w, int threads, std::int64_t tokens) {
    constexpr int kChunksPerThread = 8;
    const std::int64_t multiple = tensor::matmul_row_multiple(w.type, tokens, w.layout);
    const std::int64_t target = std::max(multiple, w.rows / (threads * kChunksPerThread));
    return (target + multiple - 1) / multiple * multiple;
}

}  // namespace

CpuBackend::CpuBackend(const model::ModelConfig& config, const model::ModelWeights& weights,
                       const kv::CacheShape& cache_shape, int threads)
    : config_(config),
      weights_(weights),
      storage_(cache_shape),
      pool_(threads),
      rope_global_(
          inverse_frequencies(config.rope_dims, config.rope_freq_base, weights.rope_freq_factors)),
      rope_local_(inverse_frequencies(config.rope_dims, config.rope_freq_base_local,
                                      weights.rope_freq_factors)) {
    spdlog::info(
        "cpu backend: {} threads, matmul kernels {} (weight prefetch {}, F16/BF16 rows {}), kv "
        "kernels {}",
        pool_.size(), tensor::active_kernels_name(),
        tensor::weight_prefetch_name(tensor::weight_prefetch()),
        tensor::weight_prefetch_name(tensor::half_row_prefetch()), storage_.kernel_name());
}

std::string CpuBackend::name() const {
    return std::string("cpu (") + std::to_string(pool_.size()) + " threads, " +
           tensor::active_kernels_name() + ")";
}

BackendMemory CpuBackend::memory() const {
    BackendMemory m;
    m.weight_bytes = weights_.total_bytes;
    m.kv_cache_bytes = storage_.bytes();
    for (const auto* v : {&x_, &xn_, &q_, &k_, &v_, &attn_, &proj_, &gate_, &up_}) {
        m.activation_bytes += v->capacity() * sizeof(float);
    }
    m.activation_bytes += attention_.bytes();
    return m;
}

void CpuBackend::prepare_input(const model::WeightMatrix& w, const float* x, std::int64_t tokens) {
    // Rows in chunks of 8: a decode step's single row stays on this thread.
    tensor::prepare_activations(
        w.type, x, tokens, w.cols, prepared_,
        [this](std::int64_t count, const std::function<void(std::int64_t, std::int64_t)>& body) {
            pool_.parallel_for(count, 8, body);
        });
}

void CpuBackend::matmul(const model::WeightMatrix& w, const float* x, std::int64_t tokens, float* y,
                        bool same_input) {
    if (!same_input || !prepared_.serves(w.type, w.cols, tokens)) prepare_input(w, x, tokens);
    if (tokens < tensor::kPanelMinTokens) {
        stream_matmuls({{&w, y}}, tokens);
        return;
    }
    const std::int64_t grain = row_grain(w, pool_.size(), tokens);
    pool_.parallel_for(w.rows, grain, [&](std::int64_t begin, std::int64_t end) {
        tensor::matmul_rows(w.type, w.data, w.cols, begin, end, prepared_, y, w.rows, w.layout);
    });
}

// Decode and short verification chunks stream the weights from memory. The matrices' rows, in
// units of the kernel's row multiple, go out as one share per thread (ThreadPool::
// parallel_for_shares), each read front to back in pieces of about kStreamPieceBytes, with the
// kernels prefetching on into the share's next piece (matmul_rows' stream_end); a thread done
// with its share takes pieces from the back of one that is behind.
//
// Before, each matrix went out as 2 chunks per thread through the shared counter: every chunk
// started a new stream whose first lines arrived by demand misses (8 chunks per thread had cost
// SmolLM2 and Gemma 3 270M 15-25 % of their decode; 1 per thread leaves a descheduled thread
// nothing to balance with), and the chunks' ends left a thread waiting. Decode in one process,
// the forms alternated every 16 steps for 30 rounds, median tok/s (2 threads, Zen 4, AVX-512),
// chunks, then shares in pieces of 64 and 128 KiB (and 256): 246M Q3_K 237.2, 250.0, 255.2;
// Q4_K 204.7, 212.4, 213.4; Q8_0 159.1, 159.4, 162.8; F16 89.5, 90.2, 92.3 (93.5); SmolLM2
// 223.7, 233.0, 237.7 (230.7); Gemma 3 270M 117.0, 118.6, 118.2 (119.0). Without prefetching
// on across pieces, 16-32 KiB pieces were 20-40 % slower than the chunks.
void CpuBackend::stream_matmuls(std::initializer_list<MatmulJob> jobs, std::int64_t tokens) {
    const MatmulJob* first = jobs.begin();
    stream_units_.clear();
    std::int64_t units = 0;
    std::int64_t bytes = 0;
    for (const MatmulJob& j : jobs) {
        const std::int64_t multiple = tensor::matmul_row_multiple(j.w->type, tokens, j.w->layout);
        stream_units_.push_back({units, multiple});
        units += (j.w->rows + multiple - 1) / multiple;
        bytes += static_cast<std::int64_t>(j.w->bytes);
    }
    stream_units_.push_back({units, 0});
    const std::int64_t piece =
        std::max<std::int64_t>(1, units * kStreamPieceBytes / std::max<std::int64_t>(bytes, 1));
    pool_.parallel_for_shares(
        units, piece, [&](std::int64_t begin, std::int64_t end, std::int64_t stream_end, int) {
            for (std::size_t j = 0; j + 1 < stream_units_.size(); ++j) {
                const std::int64_t first_unit = stream_units_[j].first;
                const std::int64_t next_unit = stream_units_[j + 1].first;
                if (std::max(begin, first_unit) >= std::min(end, next_unit)) continue;
                const model::WeightMatrix& w = *first[j].w;
                // Matrix j's row where unit u starts (its end for units past it).
                auto row_of = [&](std::int64_t u) {
                    return std::min(
                        w.rows, (std::min(u, next_unit) - first_unit) * stream_units_[j].multiple);
                };
                tensor::matmul_rows(w.type, w.data, w.cols, row_of(std::max(begin, first_unit)),
                                    row_of(end), prepared_, first[j].y, w.rows, w.layout,
                                    row_of(stream_end));
            }
        });
}

void CpuBackend::matmuls(std::initializer_list<MatmulJob> jobs, const float* x,
                         std::int64_t tokens) {
    const MatmulJob* first = jobs.begin();
    // The first matrix prepares; one hand-out for all where that preparation serves them all
    // (tensor::PreparedActivations::serves), else one matmul() each, which prepares again
    // where it must.
    prepare_input(*first->w, x, tokens);
    for (const MatmulJob& j : jobs) {
        if (!prepared_.serves(j.w->type, j.w->cols, tokens)) {
            for (const MatmulJob& k : jobs) matmul(*k.w, x, tokens, k.y, true);
            return;
        }
    }
    if (tokens < tensor::kPanelMinTokens) {
        stream_matmuls(jobs, tokens);
        return;
    }
    // The chunks each matrix would get from matmul(), all in one hand-out.
    row_chunks_.clear();
    int index = 0;
    for (const MatmulJob& j : jobs) {
        const std::int64_t grain = row_grain(*j.w, pool_.size(), tokens);
        for (std::int64_t b = 0; b < j.w->rows; b += grain)
            row_chunks_.push_back({index, b, std::min(j.w->rows, b + grain)});
        ++index;
    }
    pool_.parallel_for(static_cast<std::int64_t>(row_chunks_.size()), 1,
                       [&](std::int64_t begin, std::int64_t end) {
                           for (std::int64_t i = begin; i < end; ++i) {
                               const RowChunk& c = row_chunks_[static_cast<std::size_t>(i)];
                               const MatmulJob& j = first[c.job];
                               tensor::matmul_rows(j.w->type, j.w->data, j.w->cols, c.begin, c.end,
                                                   prepared_, j.y, j.w->rows, j.w->layout);
                           }
                       });
}

bool CpuBackend::plan_last_layer(const Batch& batch) {
    kept_rows_.clear();
    kept_chunks_.clear();
    // A calibration observer is shown every matrix's input for every token.
    if (observer_) return false;
    const int last = static_cast<int>(config_.layers - 1);
    std::int64_t t = 0;
    for (std::size_t ci = 0; ci < batch.chunks.size(); ++ci) {
        const SeqChunk& chunk = batch.chunks[ci];
        const AttentionChunk& all = attention_chunks_[ci];
        const auto n = static_cast<std::int64_t>(chunk.tokens.size());
        // Rows [0, captured) are recorded by the chunk's attention capture in the last layer
        // (it stops at its max_context), rows [wanted, n) return logits.
        std::int64_t captured = 0;
        if (chunk.capture != nullptr && chunk.capture->wants_layer(last)) {
            while (captured < n && chunk.capture->wants_position(chunk.start_pos + captured))
                ++captured;
        }
        const std::int64_t wanted = chunk.logits == LogitsWanted::All    ? 0
                                    : chunk.logits == LogitsWanted::Last ? n - 1
                                                                         : n;
        auto keep = [&](std::int64_t from, std::int64_t to) {
            if (from >= to) return;
            AttentionChunk run = all;
            run.first_row = static_cast<std::int64_t>(kept_rows_.size());
            run.tokens = to - from;
            run.start_pos = all.start_pos + from;
            run.slot_ids = all.slot_ids.first(static_cast<std::size_t>(run.start_pos + run.tokens));
            kept_chunks_.push_back(run);
            for (std::int64_t i = from; i < to; ++i) kept_rows_.push_back(t + i);
        };
        if (captured >= wanted) {
            keep(0, n);
        } else {
            keep(0, captured);
            keep(wanted, n);
        }
        t += n;
    }
    return static_cast<std::int64_t>(kept_rows_.size()) < t;
}

void CpuBackend::forward(const Batch& batch, kv::KvCacheManager& kv, ForwardOutputs& out) {
    const auto& c = config_;
    // Rows of the batch; in a pruned last layer, from its attention on, the kept rows.
    std::int64_t T = batch.total_tokens();
    const std::int64_t width = c.embedding_length;
    const std::int64_t hd = c.head_dim;
    storage_.apply(kv.take_block_copies());

    // Per-token bookkeeping and each chunk's slot list (positions [0, end) of its sequence).
    token_pos_.resize(static_cast<std::size_t>(T));
    token_slot_.resize(static_cast<std::size_t>(T));
    chunk_slots_.resize(batch.chunks.size());
    attention_chunks_.resize(batch.chunks.size());
    std::int64_t t = 0;
    std::int64_t longest = 0;
    for (std::size_t ci = 0; ci < batch.chunks.size(); ++ci) {
        const SeqChunk& chunk = batch.chunks[ci];
        const std::int64_t end = chunk.start_pos + static_cast<std::int64_t>(chunk.tokens.size());
        if (kv.num_tokens(chunk.seq) < end) {
            throw InvalidArgument("forward: sequence " + std::to_string(chunk.seq) + " has " +
                                  std::to_string(kv.num_tokens(chunk.seq)) +
                                  " cache slots, the chunk needs " + std::to_string(end));
        }
        auto& slots = chunk_slots_[ci];
        slots.resize(static_cast<std::size_t>(end));
        for (std::int64_t p = 0; p < end; ++p)
            slots[static_cast<std::size_t>(p)] = kv.slot(chunk.seq, static_cast<int>(p));
        longest = std::max(longest, end);
        attention_chunks_[ci] = {t, static_cast<std::int64_t>(chunk.tokens.size()), chunk.start_pos,
                                 slots, chunk.capture};
        for (std::size_t i = 0; i < chunk.tokens.size(); ++i, ++t) {
            token_pos_[static_cast<std::size_t>(t)] =
                chunk.start_pos + static_cast<std::int64_t>(i);
            token_slot_[static_cast<std::size_t>(t)] =
                slots[static_cast<std::size_t>(chunk.start_pos) + i];
        }
        if (chunk.capture) chunk.capture->prepare_rows(end);
    }

    // The rows the last layer carries past its keys and values: a prefill needs the last
    // layer's output only for the tokens whose logits it returns, but every token's K and V.
    const bool prune = plan_last_layer(batch);
    const std::int64_t R_last = static_cast<std::int64_t>(kept_rows_.size());

    grow(x_, T * width);
    grow(xn_, T * width);
    grow(q_, T * c.q_dim());
    grow(k_, T * c.kv_dim());
    grow(v_, T * c.v_dim());
    grow(attn_, T * c.heads * c.value_dim);
    grow(proj_, T * width);
    grow(gate_, T * c.ffn_length);
    grow(up_, T * c.ffn_length);
    attention_.reserve(pool_.size(), longest, static_cast<int>(c.heads / c.kv_heads),
                       static_cast<int>(hd));

    rope_global_.prepare(token_pos_.data(), T, c.rope_linear_scale);
    if (c.sliding_window > 0) rope_local_.prepare(token_pos_.data(), T, c.rope_linear_scale);

    // Embedding lookup: dequantize one row per token.
    t = 0;
    for (const auto& chunk : batch.chunks) {
        for (std::int32_t token : chunk.tokens) {
            if (token < 0 || token >= c.vocab_size) {
                throw InvalidArgument("forward: token id " + std::to_string(token) +
                                      " out of range (vocabulary has " +
                                      std::to_string(c.vocab_size) + ")");
            }
            float* row = x_.data() + t * width;
            const model::WeightMatrix& e = weights_.token_embedding;
            const std::uint8_t* stored = e.row(token);
            if (e.layout == tensor::RowLayout::Interleaved) {  // a tied, interleaved output
                embedding_row_.resize(e.bytes / static_cast<std::uint64_t>(e.rows));
                tensor::row_from_interleaved(e.type, static_cast<const std::uint8_t*>(e.data),
                                             width, token, embedding_row_.data());
                stored = embedding_row_.data();
            }
            tensor::dequantize_row(e.type, stored, row, width);
            if (c.embedding_scale != 1.0f) ops::scale(row, c.embedding_scale, width);
            ++t;
        }
    }

    for (std::int64_t l = 0; l < c.layers; ++l) {
        const model::LayerWeights& L = weights_.layers[static_cast<std::size_t>(l)];
        pool_.parallel_for(T, 4, [&](std::int64_t b, std::int64_t e) {
            for (std::int64_t i = b; i < e; ++i) {
                ops::rms_norm(x_.data() + i * width, L.attn_norm.data(), xn_.data() + i * width,
                              width, c.norm_eps);
            }
        });
        const int li = static_cast<int>(l);
        // In a pruned last layer the queries (and everything after attention) are computed for
        // the kept rows only, gathered into proj_ (free until the output projection).
        const bool pruned = prune && l == c.layers - 1;
        const std::int64_t Q = pruned ? R_last : T;  // query rows
        observe(li, MatmulSite::AttnQ, L.wq, xn_.data(), T);
        observe(li, MatmulSite::AttnK, L.wk, xn_.data(), T);
        observe(li, MatmulSite::AttnV, L.wv, xn_.data(), T);
        if (pruned) {
            for (std::int64_t r = 0; r < Q; ++r) {
                std::copy_n(xn_.data() + kept_rows_[static_cast<std::size_t>(r)] * width, width,
                            proj_.data() + r * width);
            }
            if (Q > 0) matmul(L.wq, proj_.data(), Q, q_.data());
            matmuls({{&L.wk, k_.data()}, {&L.wv, v_.data()}}, xn_.data(), T);
        } else {
            matmuls({{&L.wq, q_.data()}, {&L.wk, k_.data()}, {&L.wv, v_.data()}}, xn_.data(), T);
        }
        const bool neox = c.rope_style == model::RopeStyle::NeoX;
        const RopeTable& rope = c.uses_window(l) ? rope_local_ : rope_global_;
        // Query row r is batch row i (its position, hence its rope angles).
        auto finish_query = [&](std::int64_t r, std::int64_t i) {
            if (c.attention_bias) ops::add(q_.data() + r * c.q_dim(), L.bq.data(), c.q_dim());
            for (std::int64_t h = 0; h < c.heads; ++h) {
                float* head = q_.data() + r * c.q_dim() + h * hd;
                if (c.qk_norm) ops::rms_norm(head, L.q_norm.data(), head, hd, c.norm_eps);
                ops::rope(head, c.rope_dims, rope.cos(i), rope.sin(i), neox);
            }
        };
        auto finish_key_value = [&](std::int64_t i) {
            if (c.attention_bias) {
                ops::add(k_.data() + i * c.kv_dim(), L.bk.data(), c.kv_dim());
                ops::add(v_.data() + i * c.v_dim(), L.bv.data(), c.v_dim());
            }
            for (std::int64_t h = 0; h < c.kv_heads; ++h) {
                float* head = k_.data() + i * c.kv_dim() + h * hd;
                if (c.qk_norm) ops::rms_norm(head, L.k_norm.data(), head, hd, c.norm_eps);
                ops::rope(head, c.rope_dims, rope.cos(i), rope.sin(i), neox);
            }
            storage_.write(static_cast<int>(l), token_slot_[static_cast<std::size_t>(i)],
                           k_.data() + i * c.kv_dim(), v_.data() + i * c.v_dim());
        };
        if (pruned) {
            pool_.parallel_for(Q, 4, [&](std::int64_t b, std::int64_t e) {
                for (std::int64_t r = b; r < e; ++r)
                    finish_query(r, kept_rows_[static_cast<std::size_t>(r)]);
            });
            pool_.parallel_for(T, 4, [&](std::int64_t b, std::int64_t e) {
                for (std::int64_t i = b; i < e; ++i) finish_key_value(i);
            });
        } else {
            pool_.parallel_for(T, 4, [&](std::int64_t b, std::int64_t e) {
                for (std::int64_t i = b; i < e; ++i) {
                    finish_query(i, i);
                    finish_key_value(i);
                }
            });
        }
        if (pruned && Q == 0) break;  // no logits wanted: the cache is all this step had to fill

        const AttentionLayer attention_layer{static_cast<int>(l),
                                             static_cast<int>(c.heads),
                                             static_cast<int>(c.kv_heads),
                                             static_cast<int>(hd),
                                             c.attention_scale,
                                             c.uses_window(l) ? c.sliding_window : 0};
        attention_.run(pool_, storage_, attention_layer,
                       pruned ? std::span<const AttentionChunk>(kept_chunks_)
                              : std::span<const AttentionChunk>(attention_chunks_),
                       q_.data(), attn_.data());
        if (pruned) {
            // The residual stream of the kept rows, moved to the front (kept rows ascend, so
            // row r never overwrites a row still to be moved).
            for (std::int64_t r = 0; r < Q; ++r) {
                const std::int64_t i = kept_rows_[static_cast<std::size_t>(r)];
                if (i != r) std::copy_n(x_.data() + i * width, width, x_.data() + r * width);
            }
            T = Q;  // the rest of the layer, and the logits, see the kept rows only
        }

        observe(li, MatmulSite::AttnOutput, L.wo, attn_.data(), T);
        matmul(L.wo, attn_.data(), T, proj_.data());
        pool_.parallel_for(T, 4, [&](std::int64_t b, std::int64_t e) {
            for (std::int64_t i = b; i < e; ++i) {
                float* p = proj_.data() + i * width;
                if (c.post_norms) ops::rms_norm(p, L.post_attn_norm.data(), p, width, c.norm_eps);
                ops::add(x_.data() + i * width, p, width);
                ops::rms_norm(x_.data() + i * width, L.ffn_norm.data(), xn_.data() + i * width,
                              width, c.norm_eps);
            }
        });

        observe(li, MatmulSite::FfnGate, L.w_gate, xn_.data(), T);
        observe(li, MatmulSite::FfnUp, L.w_up, xn_.data(), T);
        matmuls({{&L.w_gate, gate_.data()}, {&L.w_up, up_.data()}}, xn_.data(), T);
        pool_.parallel_for(T, 4, [&](std::int64_t b, std::int64_t e) {
            for (std::int64_t i = b; i < e; ++i) {
                float* g = gate_.data() + i * c.ffn_length;
                const float* u = up_.data() + i * c.ffn_length;
                if (c.activation == model::FfnActivation::GeluTanh) {
                    ops::gelu_tanh_mul(g, u, c.ffn_length);
                } else {
                    ops::silu_mul(g, u, c.ffn_length);
                }
            }
        });
        observe(li, MatmulSite::FfnDown, L.w_down, gate_.data(), T);
        matmul(L.w_down, gate_.data(), T, proj_.data());
        pool_.parallel_for(T, 4, [&](std::int64_t b, std::int64_t e) {
            for (std::int64_t i = b; i < e; ++i) {
                float* p = proj_.data() + i * width;
                if (c.post_norms) ops::rms_norm(p, L.post_ffn_norm.data(), p, width, c.norm_eps);
                ops::add(x_.data() + i * width, p, width);
            }
        });
    }

    // Logits only for the rows that need them: gather those rows, norm, project.
    out.vocab_size = c.vocab_size;
    out.first_row.assign(batch.chunks.size(), -1);
    std::vector<std::int64_t> rows;
    t = 0;
    for (std::size_t ci = 0; ci < batch.chunks.size(); ++ci) {
        const SeqChunk& chunk = batch.chunks[ci];
        const auto n = static_cast<std::int64_t>(chunk.tokens.size());
        if (chunk.logits != LogitsWanted::None && n > 0)
            out.first_row[ci] = static_cast<std::int64_t>(rows.size());
        if (chunk.logits == LogitsWanted::All) {
            for (std::int64_t i = 0; i < n; ++i) rows.push_back(t + i);
        } else if (chunk.logits == LogitsWanted::Last && n > 0) {
            rows.push_back(t + n - 1);
        }
        t += n;
    }
    if (prune) {
        // Batch rows -> rows of the pruned last layer's output (kept_rows_ ascends).
        for (auto& r : rows) {
            r = std::lower_bound(kept_rows_.begin(), kept_rows_.end(), r) - kept_rows_.begin();
        }
    }
    const auto R = static_cast<std::int64_t>(rows.size());
    out.logits.resize(static_cast<std::size_t>(R * c.vocab_size));
    if (R == 0) return;
    for (std::int64_t r = 0; r < R; ++r) {
        ops::rms_norm(x_.data() + rows[static_cast<std::size_t>(r)] * width,
                      weights_.output_norm.data(), xn_.data() + r * width, width, c.norm_eps);
    }
    observe(-1, MatmulSite::Output, weights_.output, xn_.data(), R);
    matmul(weights_.output, xn_.data(), R, out.logits.data());
}

}  // namespace tokenscope::runtime
