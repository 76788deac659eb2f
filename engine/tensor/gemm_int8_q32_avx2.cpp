// The AVX2 form of the 32-block lane GEMM (gemm_int8_q32_lanes.h): vpmaddubsw, for every AVX2 CPU.
#include "tensor/gemm_int8_q32_lanes.h"

namespace tokenscope::tensor::detail {

bool gemm_int8_q32_avx2(const MatmulArgs& args) {
    return run_q32_lanes<false>(args);
}

}  // namespace tokenscope::tensor::detail
