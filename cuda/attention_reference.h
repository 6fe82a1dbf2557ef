// The attention kernels' function in float64 (plain C++), the reference that the CUDA self-test
// (cuda/selftest.cu) and the CPU tests of the kernels (tests/cuda/) compare with.
#pragma once

#include "cuda/launch_geometry.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace cc::cuda {

// out[r][h][d] = sum_j softmax_j(q[r][h] . k[h / G][j] * scale) v[h / G][j][d] over the keys j that
// row r, at position first_pos + r, sees (geom::attn_first_key(pos, window) <= j <= pos).
// q: (rows, heads * head_dim); k, v: [kv_heads][n][head_dim] with n >= first_pos + rows.
inline std::vector<double> attention_reference(const std::vector<float>& q, const std::vector<float>& k,
                                               const std::vector<float>& v, int heads, int kv_heads, int head_dim,
                                               int window, int first_pos, int rows, double scale) {
    const size_t qd = size_t(heads) * size_t(head_dim), hd = size_t(head_dim);
    const size_t n = k.size() / (size_t(kv_heads) * hd);
    const int group = heads / kv_heads;
    std::vector<double> out(size_t(rows) * qd);
    for (int r = 0; r < rows; ++r) {
        const int pos = first_pos + r, lo = geom::attn_first_key(pos, window);
        for (int h = 0; h < heads; ++h) {
            const size_t kvh = size_t(h / group);
            const float* qr = &q[size_t(r) * qd + size_t(h) * hd];
            std::vector<double> p(size_t(pos - lo + 1));
            double m = -1e300;
            for (int j = lo; j <= pos; ++j) {
                double dot = 0;
                for (size_t d = 0; d < hd; ++d) dot += double(qr[d]) * k[(kvh * n + size_t(j)) * hd + d];
                p[size_t(j - lo)] = dot * scale;
                m = std::max(m, p[size_t(j - lo)]);
            }
            double l = 0;
            for (double& x : p) l += (x = std::exp(x - m));
            for (size_t d = 0; d < hd; ++d) {
                double acc = 0;
                for (int j = lo; j <= pos; ++j) acc += p[size_t(j - lo)] * v[(kvh * n + size_t(j)) * hd + d];
                out[size_t(r) * qd + size_t(h) * hd + d] = acc / l;
            }
        }
    }
    return out;
}

}  // namespace cc::cuda
