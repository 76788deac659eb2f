#include "reference/reference_forward.h"

#include <cmath>
#include <stdexcept>

#include "gguf/file.h"
#include "tensor/type.h"

namespace tokenscope::test {

namespace {

using Vec = std::vector<double>;
using Mat = std::vector<Vec>;  // rows

Mat load_matrix(const gguf::File& f, const std::string& name) {
    const gguf::TensorInfo* t = f.find_tensor(name);
    if (!t) throw std::runtime_error("reference: missing " + name);
    const std::int64_t cols = t->dims[0];
    const std::int64_t rows = t->element_count / cols;
    const std::size_t row_bytes = t->byte_size / static_cast<std::size_t>(rows);
    Mat m(static_cast<std::size_t>(rows), Vec(static_cast<std::size_t>(cols)));
    std::vector<float> row(static_cast<std::size_t>(cols));
    for (std::int64_t r = 0; r < rows; ++r) {
        tensor::dequantize_row(t->type, t->data + static_cast<std::size_t>(r) * row_bytes, row.data(), cols);
        for (std::int64_t c = 0; c < cols; ++c) m[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)] = row[static_cast<std::size_t>(c)];
    }
    return m;
}

Vec load_vector(const gguf::File& f, const std::string& name) { return load_matrix(f, name).at(0); }

// Rows [first, first + count) of m: Phi-3's fused matrices taken apart.
Mat rows_of(const Mat& m, std::size_t first, std::size_t count) {
    return Mat(m.begin() + static_cast<std::ptrdiff_t>(first), m.begin() + static_cast<std::ptrdiff_t>(first + count));
}

Vec matvec(const Mat& w, const Vec& x) {
    Vec y(w.size(), 0.0);
    for (std::size_t r = 0; r < w.size(); ++r) {
        double s = 0.0;
        for (std::size_t c = 0; c < x.size(); ++c) s += w[r][c] * x[c];
        y[r] = s;
    }
    return y;
}

Vec rms_norm(const Vec& x, const Vec& w, double eps) {
    double ss = 0.0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
    Vec y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
    return y;
}

// Rotation of dimension pairs by position * base^(-2i/d) / factor[i] (factors: Llama 3.x
// rope_freqs, else 1); Gemma, Qwen and Phi-3 pair i with i + d/2, Llama pairs 2i with 2i + 1.
void rope(double* head, std::int64_t d, std::int64_t pos, double base, bool halves, const Vec& factors) {
    for (std::int64_t i = 0; i < d / 2; ++i) {
        const double factor = factors.empty() ? 1.0 : factors[static_cast<std::size_t>(i)];
        const double theta =
            static_cast<double>(pos) * std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(d)) / factor;
        const std::int64_t a = halves ? i : 2 * i;
        const std::int64_t b = halves ? i + d / 2 : 2 * i + 1;
        const double x0 = head[a], x1 = head[b];
        head[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
        head[b] = x0 * std::sin(theta) + x1 * std::cos(theta);
    }
}

void add_bias(Vec& x, const Vec& b) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += b.at(i);
}

}  // namespace

ReferenceOutput reference_forward(const std::string& gguf_path, const TinyModelSpec& spec,
                                  std::span<const std::int32_t> tokens) {
    const gguf::File f = gguf::File::open(gguf_path);
    const bool gemma = spec.architecture == "gemma3";
    const bool qwen2 = spec.architecture == "qwen2", qwen3 = spec.architecture == "qwen3";
    const bool phi3 = spec.architecture == "phi3";
    const bool halves = gemma || qwen2 || qwen3 || phi3;  // RoPE pairs (i, i + d/2)
    const bool qk_norm = gemma || qwen3;
    const Vec rope_factors = f.find_tensor("rope_freqs.weight") ? load_vector(f, "rope_freqs.weight") : Vec{};
    const auto n = static_cast<std::int64_t>(tokens.size());
    const std::int64_t d = spec.width, hd = spec.head_dim;
    const double eps = spec.norm_eps;
    const Mat embedding = load_matrix(f, "token_embd.weight");
    const Mat output = (gemma || spec.tied_output) ? embedding : load_matrix(f, "output.weight");

    std::vector<Vec> x(static_cast<std::size_t>(n));
    for (std::int64_t t = 0; t < n; ++t) {
        x[static_cast<std::size_t>(t)] = embedding.at(static_cast<std::size_t>(tokens[static_cast<std::size_t>(t)]));
        if (gemma) {
            for (double& v : x[static_cast<std::size_t>(t)]) v *= std::sqrt(static_cast<double>(d));
        }
    }
    ReferenceOutput out;
    out.attention.resize(static_cast<std::size_t>(spec.layers));
    for (std::int64_t l = 0; l < spec.layers; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        Mat wq, wk, wv, wg, wu;
        if (phi3) {
            // attn_qkv: q, k, v rows in that order; ffn_up: gate rows, then up rows.
            const Mat qkv = load_matrix(f, p + "attn_qkv.weight"), gate_up = load_matrix(f, p + "ffn_up.weight");
            const auto q_rows = static_cast<std::size_t>(spec.heads * hd), kv_rows = static_cast<std::size_t>(spec.kv_heads * hd);
            wq = rows_of(qkv, 0, q_rows);
            wk = rows_of(qkv, q_rows, kv_rows);
            wv = rows_of(qkv, q_rows + kv_rows, kv_rows);
            wg = rows_of(gate_up, 0, static_cast<std::size_t>(spec.ffn));
            wu = rows_of(gate_up, static_cast<std::size_t>(spec.ffn), static_cast<std::size_t>(spec.ffn));
        } else {
            wq = load_matrix(f, p + "attn_q.weight");
            wk = load_matrix(f, p + "attn_k.weight");
            wv = load_matrix(f, p + "attn_v.weight");
            wg = load_matrix(f, p + "ffn_gate.weight");
            wu = load_matrix(f, p + "ffn_up.weight");
        }
        const Mat wo = load_matrix(f, p + "attn_output.weight");
        const Mat wd = load_matrix(f, p + "ffn_down.weight");
        const Vec attn_norm = load_vector(f, p + "attn_norm.weight"), ffn_norm = load_vector(f, p + "ffn_norm.weight");
        // Gemma 3: five sliding-window layers, then one global layer; local RoPE base 10 000.
        const bool local = spec.sliding_window > 0 && (!gemma || (l + 1) % 6 != 0);
        const double base = gemma && local ? 10000.0 : spec.rope_base;

        std::vector<Vec> q(static_cast<std::size_t>(n)), k(static_cast<std::size_t>(n)), v(static_cast<std::size_t>(n));
        for (std::int64_t t = 0; t < n; ++t) {
            const Vec h = rms_norm(x[static_cast<std::size_t>(t)], attn_norm, eps);
            q[static_cast<std::size_t>(t)] = matvec(wq, h);
            k[static_cast<std::size_t>(t)] = matvec(wk, h);
            v[static_cast<std::size_t>(t)] = matvec(wv, h);
            if (qwen2) {
                add_bias(q[static_cast<std::size_t>(t)], load_vector(f, p + "attn_q.bias"));
                add_bias(k[static_cast<std::size_t>(t)], load_vector(f, p + "attn_k.bias"));
                add_bias(v[static_cast<std::size_t>(t)], load_vector(f, p + "attn_v.bias"));
            }
            for (std::int64_t head = 0; head < spec.heads; ++head) {
                double* qh = q[static_cast<std::size_t>(t)].data() + head * hd;
                if (qk_norm) {
                    const Vec qn = rms_norm(Vec(qh, qh + hd), load_vector(f, p + "attn_q_norm.weight"), eps);
                    std::copy(qn.begin(), qn.end(), qh);
                }
                rope(qh, hd, t, base, halves, rope_factors);
            }
            for (std::int64_t head = 0; head < spec.kv_heads; ++head) {
                double* kh = k[static_cast<std::size_t>(t)].data() + head * hd;
                if (qk_norm) {
                    const Vec kn = rms_norm(Vec(kh, kh + hd), load_vector(f, p + "attn_k_norm.weight"), eps);
                    std::copy(kn.begin(), kn.end(), kh);
                }
                rope(kh, hd, t, base, halves, rope_factors);
            }
        }
        auto& attention = out.attention[static_cast<std::size_t>(l)];
        attention.assign(static_cast<std::size_t>(spec.heads), std::vector<Vec>(static_cast<std::size_t>(n)));
        const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
        std::vector<Vec> attn_out(static_cast<std::size_t>(n), Vec(static_cast<std::size_t>(spec.heads * hd), 0.0));
        for (std::int64_t head = 0; head < spec.heads; ++head) {
            const std::int64_t kvh = head / (spec.heads / spec.kv_heads);
            for (std::int64_t i = 0; i < n; ++i) {
                // softmax(q k^T * scale + mask): mask keys after i, and keys outside the window.
                Vec w(static_cast<std::size_t>(i + 1), 0.0);
                double max = -1e300;
                for (std::int64_t j = 0; j <= i; ++j) {
                    if (local && i - j >= spec.sliding_window) continue;
                    double s = 0.0;
                    for (std::int64_t e = 0; e < hd; ++e) {
                        s += q[static_cast<std::size_t>(i)][static_cast<std::size_t>(head * hd + e)] *
                             k[static_cast<std::size_t>(j)][static_cast<std::size_t>(kvh * hd + e)];
                    }
                    w[static_cast<std::size_t>(j)] = s * scale;
                    max = std::max(max, s * scale);
                }
                double sum = 0.0;
                for (std::int64_t j = 0; j <= i; ++j) {
                    if (local && i - j >= spec.sliding_window) {
                        w[static_cast<std::size_t>(j)] = 0.0;
                        continue;
                    }
                    w[static_cast<std::size_t>(j)] = std::exp(w[static_cast<std::size_t>(j)] - max);
                    sum += w[static_cast<std::size_t>(j)];
                }
                for (double& wj : w) wj /= sum;
                for (std::int64_t j = 0; j <= i; ++j) {
                    for (std::int64_t e = 0; e < hd; ++e) {
                        attn_out[static_cast<std::size_t>(i)][static_cast<std::size_t>(head * hd + e)] +=
                            w[static_cast<std::size_t>(j)] * v[static_cast<std::size_t>(j)][static_cast<std::size_t>(kvh * hd + e)];
                    }
                }
                attention[static_cast<std::size_t>(head)][static_cast<std::size_t>(i)] = std::move(w);
            }
        }
        for (std::int64_t t = 0; t < n; ++t) {
            Vec o = matvec(wo, attn_out[static_cast<std::size_t>(t)]);
            if (gemma) o = rms_norm(o, load_vector(f, p + "post_attention_norm.weight"), eps);
            Vec& xt = x[static_cast<std::size_t>(t)];
            for (std::int64_t e = 0; e < d; ++e) xt[static_cast<std::size_t>(e)] += o[static_cast<std::size_t>(e)];
            const Vec h = rms_norm(xt, ffn_norm, eps);
            Vec g = matvec(wg, h);
            const Vec u = matvec(wu, h);
            for (std::size_t e = 0; e < g.size(); ++e) {
                const double a = g[e];
                // SiLU(a) = a * sigmoid(a); GELU(a) ~ 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3)))
                const double act = gemma ? 0.5 * a * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (a + 0.044715 * a * a * a)))
                                         : a / (1.0 + std::exp(-a));
                g[e] = act * u[e];
            }
            Vec down = matvec(wd, g);
            if (gemma) down = rms_norm(down, load_vector(f, p + "post_ffw_norm.weight"), eps);
            for (std::int64_t e = 0; e < d; ++e) xt[static_cast<std::size_t>(e)] += down[static_cast<std::size_t>(e)];
        }
    }
    const Vec out_norm = load_vector(f, "output_norm.weight");
    for (std::int64_t t = 0; t < n; ++t) out.logits.push_back(matvec(output, rms_norm(x[static_cast<std::size_t>(t)], out_norm, eps)));
    return out;
}

double relative_error(std::span<const float> a, std::span<const double> b) {
    double num = 0.0, den = 0.0;
    for (std::size_t i = 0; i < b.size(); ++i) {
        const double diff = static_cast<double>(a[i]) - b[i];
        num += diff * diff;
        den += b[i] * b[i];
    }
    return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace tokenscope::test
