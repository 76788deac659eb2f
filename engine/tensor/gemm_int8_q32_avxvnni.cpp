// The AVX-VNNI form of the 32-block lane GEMM (gemm_int8_q32_lanes.h): vpdpbusd on ymm, for CPUs
// with AVX-VNNI but no AVX-512 (Intel Alder Lake and later client parts; AMD Zen 5 has both).
// Compiled with -mavxvnni; matmul_avx2 calls it only when MatmulArgs::avx_vnni is set
// (tensor::avx_vnni_in_use()).
#include "tensor/gemm_int8_q32_lanes.h"

namespace tokenscope::tensor::detail {

bool gemm_int8_q32_avxvnni(const MatmulArgs& args) {
    return run_q32_lanes<true>(args);
}

}  // namespace tokenscope::tensor::detail
