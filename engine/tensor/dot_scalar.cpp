// Portable kernels for every format: the fallback on CPUs without AVX2 and on other
// architectures, and the reference the SIMD levels are tested against. They run the same
// packed integer arithmetic as the SIMD kernels (so the integer sums are identical), just
// one element at a time.
#include <cstring>

#include "tensor/f16.h"
#include "tensor/matmul_internal.h"
#include "tensor/matmul_tiling.h"

namespace tokenscope::tensor::detail {

namespace {

struct ScalarQ32 {
    static constexpr int kRows = 2;
    static constexpr int kTokens = 2;
    static void pack(Type type, const std::uint8_t* blocks, std::int64_t nb, std::uint8_t* u,
                     float* d, float* c) {
        pack_q32_row(type, blocks, nb, u, d, c);
    }
    template <int R, int T>
    static void tile(Q32Tile<kRows, kTokens>& t) {
        const std::int64_t nb = t.len / 32;
        for (int i = 0; i < R; ++i) {
            for (int j = 0; j < T; ++j) {
                const auto* q = reinterpret_cast<const std::int8_t*>(t.aq[j]);
                float acc = 0.0f;
                for (std::int64_t b = 0; b < nb; ++b) {
                    std::int32_t sum = 0;
                    for (int k = 0; k < 32; ++k) sum += t.wu[i][32 * b + k] * q[32 * b + k];
                    acc +=
                        t.wd[i][b] * t.ad[j][b] * static_cast<float>(sum) + t.wc[i][b] * t.as[j][b];
                }
                t.res[i][j] = acc;
            }
        }
    }
};

struct ScalarK {
    static constexpr int kRows = 2;
    static constexpr int kTokens = 2;
    static void pack(Type type, const std::uint8_t* blocks, std::int64_t nb, std::uint8_t* u,
                     std::int16_t* sc, float* d, float* c) {
        pack_k_row(type, blocks, nb, u, sc, d, c);
    }
    template <int R, int T>
    static void tile(KTile<kRows, kTokens>& t) {
        const std::int64_t nb = t.len / 256;
        for (int i = 0; i < R; ++i) {
            for (int j = 0; j < T; ++j) {
                const auto* q = reinterpret_cast<const std::int8_t*>(t.aq[j]);
                float acc = 0.0f;
                for (std::int64_t b = 0; b < nb; ++b) {
                    std::int32_t isum = 0;
                    float corr = 0.0f;
                    for (int s = 0; s < 16; ++s) {
                        const std::int64_t e0 = 256 * b + 16 * s;
                        std::int32_t sum = 0;
                        for (int k = 0; k < 16; ++k) sum += t.wu[i][e0 + k] * q[e0 + k];
                        isum += t.wsc[i][e0 / 2] * sum;
                        corr += t.wc[i][16 * b + s] * t.as[j][16 * b + s];
                    }
                    acc += t.wd[i][b] * t.ad[j][b] * static_cast<float>(isum) + corr;
                }
                t.res[i][j] = acc;
            }
        }
    }
};

template <Type W>
float load_weight(const std::uint8_t* row, std::int64_t k) {
    if constexpr (W == Type::F32) {
        float v;
        std::memcpy(&v, row + 4 * k, sizeof v);
        return v;
    } else {
        const auto h = static_cast<std::uint16_t>(row[2 * k] | (row[2 * k + 1] << 8));
        if constexpr (W == Type::F16) return f16_to_f32(h);
        return bf16_to_f32(h);
    }
}

template <Type W>
struct ScalarF {
    static constexpr int kRows = 2;
    static constexpr int kTokens = 4;
    template <int R, int T>
    static void tile(FTile<kRows, kTokens>& t) {
        float acc[R][T] = {};
        for (std::int64_t k = 0; k < t.n; ++k) {
            float w[R];
            for (int i = 0; i < R; ++i) w[i] = load_weight<W>(t.w[i], k);
            for (int j = 0; j < T; ++j) {
                for (int i = 0; i < R; ++i) acc[i][j] += w[i] * t.a[j][k];
            }
        }
        for (int i = 0; i < R; ++i) {
            for (int j = 0; j < T; ++j) t.res[i][j] = acc[i][j];
        }
    }
};

}  // namespace

void matmul_scalar(const MatmulArgs& args) {
    switch (args.type) {
        case Type::F32:
            run_f<ScalarF<Type::F32>>(args);
            return;
        case Type::F16:
            run_f<ScalarF<Type::F16>>(args);
            return;
        case Type::BF16:
            run_f<ScalarF<Type::BF16>>(args);
            return;
        case Type::Q4_0:
        case Type::Q4_1:
        case Type::Q5_0:
        case Type::Q5_1:
        case Type::Q8_0:
            run_q32<ScalarQ32>(args);
            return;
        case Type::Q2_K:
        case Type::Q3_K:
        case Type::Q4_K:
        case Type::Q5_K:
        case Type::Q6_K:
            run_k<ScalarK>(args);
            return;
    }
}

}  // namespace tokenscope::tensor::detail
