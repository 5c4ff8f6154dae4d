/* SPDX-License-Identifier: BSD-3-Clause */
/* The GEMM's input matrix of vccl-perf --concurrent-gemm (gemm.cc), also used by contrib/probes/gemm-beside-copy.cc:
 * n x n bf16 values in [-1, 1) from a fixed linear congruential sequence. Not zeros: a GEMM over zeros draws less
 * power and would run at clocks a real one does not. Header only, so the probe builds with a plain nvcc line. */
#ifndef VCCL_TOOLS_PERF_GEMM_INPUTS_H_
#define VCCL_TOOLS_PERF_GEMM_INPUTS_H_

#include <cstdint>
#include <cstring>
#include <vector>

namespace vperf {

inline std::vector<uint16_t> gemm_bf16_inputs(int n) {
    std::vector<uint16_t> host(size_t(n) * size_t(n));
    uint32_t x = 12345;
    for (uint16_t& v : host) {
        x = x * 1664525u + 1013904223u;
        float f = float(int32_t(x >> 8) - (1 << 23)) / float(1 << 23);
        uint32_t bits;
        memcpy(&bits, &f, sizeof(bits));
        v = uint16_t(bits >> 16); // bf16: the top half of a float
    }
    return host;
}

} // namespace vperf

#endif
