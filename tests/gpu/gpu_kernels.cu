/* SPDX-License-Identifier: BSD-3-Clause */
#include "gpu_kernels.h"

namespace {

__global__ void slow_fill_kernel(uint32_t* buf, size_t n, uint32_t seed, long long spin_ns) {
    // globaltimer counts nanoseconds on every GPU generation the tests run on.
    unsigned long long start, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (static_cast<long long>(t - start) < spin_ns);
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        buf[i] = vt_pattern(i, seed);
    }
}

__global__ void add_one_kernel(uint32_t* out, const uint32_t* in, size_t n) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        out[i] = in[i] + 1u;
    }
}

__global__ void wait_flag_kernel(const volatile uint32_t* flag) {
    while (*flag == 0) {
        __nanosleep(1000);
    }
}

int blocks_for(size_t n) {
    size_t b = (n + 255) / 256;
    return int(b < 1 ? 1 : b > 1024 ? 1024 : b);
}

} // namespace

cudaError_t vt_slow_fill(uint32_t* buf, size_t n, uint32_t seed, unsigned spin_us, cudaStream_t stream) {
    slow_fill_kernel<<<blocks_for(n), 256, 0, stream>>>(buf, n, seed, static_cast<long long>(spin_us) * 1000);
    return cudaGetLastError();
}

cudaError_t vt_add_one(uint32_t* out, const uint32_t* in, size_t n, cudaStream_t stream) {
    add_one_kernel<<<blocks_for(n), 256, 0, stream>>>(out, in, n);
    return cudaGetLastError();
}

cudaError_t vt_wait_flag(const uint32_t* flag, cudaStream_t stream) {
    wait_flag_kernel<<<1, 1, 0, stream>>>(flag);
    return cudaGetLastError();
}

cudaError_t vt_leave_launch_error(cudaStream_t stream) {
    add_one_kernel<<<1, 4096, 0, stream>>>(nullptr, nullptr, 0); // more threads than a block may have
    return cudaPeekAtLastError();
}
