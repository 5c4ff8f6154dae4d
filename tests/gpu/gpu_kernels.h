/* SPDX-License-Identifier: BSD-3-Clause */
/* Kernels of the device-memory tests (gpu_kernels.cu), behind plain C++ declarations so that test_gpu.cc
 * compiles with the host compiler. */
#ifndef VCCL_TESTS_GPU_GPU_KERNELS_H_
#define VCCL_TESTS_GPU_GPU_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define VT_HOST_DEVICE __host__ __device__
#else
#define VT_HOST_DEVICE
#endif

/* Element i of the pattern written by vt_slow_fill for `seed`. */
VT_HOST_DEVICE inline uint32_t vt_pattern(size_t i, uint32_t seed) {
    return (seed * 2654435761u) ^ (uint32_t(i) * 40503u + 17u);
}

/* Spins about `spin_us` microseconds on the GPU, then writes vt_pattern(i, seed) to buf[0..n). */
cudaError_t vt_slow_fill(uint32_t* buf, size_t n, uint32_t seed, unsigned spin_us, cudaStream_t stream);
/* Blocks the stream until the host sets *flag (host-mapped memory, device address) to non-zero. */
cudaError_t vt_wait_flag(const uint32_t* flag, cudaStream_t stream);
/* out[i] = in[i] + 1 for i < n. */
cudaError_t vt_add_one(uint32_t* out, const uint32_t* in, size_t n, cudaStream_t stream);
/* A launch that fails (invalid configuration) and leaves its error in CUDA's last error, as an application's
 * unchecked launch would; returns that error without clearing it. */
cudaError_t vt_leave_launch_error(cudaStream_t stream);

#endif
