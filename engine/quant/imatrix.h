#pragma once
// The importance matrix ("imatrix"): for each weight matrix, the sum over the calibration
// tokens of the squared input activation of each input column, and the number of tokens.
// Its mean (sum / count) is what the importance-weighted quantizers use.
//
// File format: llama.cpp's GGUF imatrix (general.type = "imatrix"; per matrix NAME two F32
// tensors, NAME.in_sum2 [columns, 1] and NAME.counts [1, 1]; keys imatrix.datasets,
// imatrix.chunk_count, imatrix.chunk_size), so llama-quantize --imatrix reads ours and we read
// its. Reading also accepts llama.cpp's legacy .dat layout.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/cpu_backend.h"

namespace tokenscope::gguf {
class File;
}

namespace tokenscope::quant {

struct ImatrixEntry {
    std::vector<float> sums;  // per input column: sum of x^2 over the tokens seen
    double count = 0;         // tokens seen
};

struct Imatrix {
    std::map<std::string, ImatrixEntry> entries;  // by weight tensor name ("blk.0.attn_q.weight")
    std::vector<std::string> datasets;
    std::uint32_t chunk_count = 0;
    std::uint32_t chunk_size = 0;

    // sums / count (1 where nothing was seen); empty when `name` has no entry.
    std::vector<float> mean(const std::string& name) const;
};

// Throws IoError / FormatError naming the file.
void save_imatrix(const Imatrix& imatrix, const std::string& path);
Imatrix load_imatrix(const std::string& path);

// Checks that `imatrix` was computed for `model`: every entry names a matrix of the model with
// as many columns as the entry has values, and at least one does. Throws InvalidArgument naming
// the first mismatch (an imatrix from another model).
void check_imatrix_fits(const Imatrix& imatrix, const std::string& imatrix_path,
                        const gguf::File& model);

// Collects an Imatrix from the CPU forward pass (CpuBackend::set_matmul_observer). Names the
// sites after the model's tensors: fused attn_qkv / ffn_up (phi3) are counted once; a tied
// output projection (no output.weight) is not collected.
class ImatrixCollector : public runtime::MatmulObserver {
  public:
    explicit ImatrixCollector(const gguf::File& model);
    void on_matmul(int layer, runtime::MatmulSite site, const model::WeightMatrix& w,
                   const float* x, std::int64_t tokens) override;
    Imatrix& imatrix() { return imatrix_; }

  private:
    std::string name_of(int layer, runtime::MatmulSite site) const;
    const gguf::File& model_;
    Imatrix imatrix_;
    std::map<std::pair<int, int>, ImatrixEntry*> slots_;  // (layer, site) -> entry, null = skipped
};

}  // namespace tokenscope::quant
