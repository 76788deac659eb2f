#pragma once
// The CPU backend: the transformer's forward pass over a ragged batch, f32 activations,
// weights read in their file format by the SIMD kernels of tensor/matmul.h, K/V in the paged
// cache (kv::KvStorage), work split over a thread pool.
#include <memory>
#include <initializer_list>
#include <vector>

#include "kv/kv_storage.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "runtime/backend.h"
#include "runtime/cpu_attention.h"
#include "runtime/rope_table.h"
#include "runtime/thread_pool.h"
#include "tensor/matmul.h"

namespace tokenscope::runtime {

// Which matmul of the forward pass an observer is shown. The GGUF tensor behind each is
// named by the model (blk.N.attn_q.weight, ...; phi3's fused attn_qkv / ffn_up serve two or
// three sites with the same input).
enum class MatmulSite { AttnQ, AttnK, AttnV, AttnOutput, FfnGate, FfnUp, FfnDown, Output };

// Sees the f32 input activations of every weight matmul of CpuBackend::forward, before the
// product: `x` holds `tokens` rows of `w.cols` floats. Called on the forward pass's thread,
// between parallel loops. `layer` is -1 for the output projection. The importance matrix
// (quant/imatrix.h) is built from these.
class MatmulObserver {
public:
    virtual ~MatmulObserver() = default;
    virtual void on_matmul(int layer, MatmulSite site, const model::WeightMatrix& w, const float* x,
                           std::int64_t tokens) = 0;
};

class CpuBackend : public Backend {
public:
    // `config` and `weights` must outlive the backend (the Engine owns all three).
    CpuBackend(const model::ModelConfig& config, const model::ModelWeights& weights,
               const kv::CacheShape& cache_shape, int threads);

    void forward(const Batch& batch, kv::KvCacheManager& kv, ForwardOutputs& out) override;
    std::string name() const override;
    BackendMemory memory() const override;

    int threads() const { return pool_.size(); }
    const kv::KvStorage& kv_storage() const { return storage_; }
    // Null (the default) turns observation off; the only cost left is one branch per matmul.
    // The observer must outlive its registration.
    void set_matmul_observer(MatmulObserver* observer) { observer_ = observer; }

private:
    // prepared_ = x's `tokens` rows prepared for w's type and width, split over the pool.
    void prepare_input(const model::WeightMatrix& w, const float* x, std::int64_t tokens);
    // y[t * w.rows + r] = W[r] · x[t] for t < tokens. same_input: x is the previous call's
    // input, unchanged, so its prepared activations are reused where they serve this weight
    // type (tensor::PreparedActivations::serves; q/k/v and gate/up share their input).
    void matmul(const model::WeightMatrix& w, const float* x, std::int64_t tokens, float* y,
                bool same_input = false);
    // Several matrices over the same input (q/k/v, gate/up), each y = W x as matmul() computes
    // it, in one hand-out (prefill's row chunks, or decode's shares: stream_matmuls): one wait
    // for the slowest thread instead of one per matrix. Falls back to one matmul() per matrix
    // when the first one's preparation does not serve them all.
    struct MatmulJob {
        const model::WeightMatrix* w;
        float* y;
    };
    void matmuls(std::initializer_list<MatmulJob> jobs, const float* x, std::int64_t tokens);
    // Decode's hand-out of the jobs' rows (tokens under tensor::kPanelMinTokens; prepared_
    // already serves them all): one share per thread, read in pieces (the .cpp says why).
    void stream_matmuls(std::initializer_list<MatmulJob> jobs, std::int64_t tokens);
    // Bytes of weights per piece of stream_matmuls.
    static constexpr std::int64_t kStreamPieceBytes = 128 << 10;
    // Decides which rows of the batch the last layer computes past its keys and values (the
    // ones whose logits are wanted, and those an attention capture records in that layer) into
    // kept_rows_ and kept_chunks_; false when that is every row (decode, verification, perplexity)
    // or an observer is set. Needs attention_chunks_ filled.
    bool plan_last_layer(const Batch& batch);
    void observe(int layer, MatmulSite site, const model::WeightMatrix& w, const float* x, std::int64_t tokens) {
        if (observer_) observer_->on_matmul(layer, site, w, x, tokens);
    }

    const model::ModelConfig& config_;
    const model::ModelWeights& weights_;
    kv::KvStorage storage_;
    ThreadPool pool_;
    RopeTable rope_global_, rope_local_;  // the local one for sliding-window layers
    MatmulObserver* observer_ = nullptr;

    // Scratch, grown to the largest batch seen and reused.
    std::vector<float> x_, xn_, q_, k_, v_, attn_, proj_, gate_, up_;
    CpuAttention attention_;  // and its per-thread scratch
    tensor::PreparedActivations prepared_;
    // matmuls()' work items: rows [begin, end) of jobs[job].
    struct RowChunk {
        int job;
        std::int64_t begin, end;
    };
    std::vector<RowChunk> row_chunks_;
    // stream_matmuls: matrix j's rows are units [first, next one's first), `multiple` rows each.
    struct StreamUnits {
        std::int64_t first, multiple;
    };
    std::vector<StreamUnits> stream_units_;
    std::vector<std::uint8_t> embedding_row_;  // one row of an interleaved embedding
    // Per token of the current batch.
    std::vector<std::int64_t> token_pos_, token_slot_;
    // Per chunk: the physical slots of positions [0, start_pos + tokens).
    std::vector<std::vector<std::int64_t>> chunk_slots_;
    // Per chunk: what attention needs (its rows, positions, slots and capture).
    std::vector<AttentionChunk> attention_chunks_;
    // The last layer's kept rows (ascending batch rows) and their chunks, first_row counting
    // kept rows (plan_last_layer).
    std::vector<std::int64_t> kept_rows_;
    std::vector<AttentionChunk> kept_chunks_;
};

}  // namespace tokenscope::runtime
