/* SPDX-License-Identifier: BSD-3-Clause */
/* Says whether this machine has a usable CUDA device: prints what it found, exits 0 when at least one
 * device answers and 1 otherwise (tests/gpu/run-gpu-test.sh turns that into a skip). */
#include <cuda_runtime_api.h>

#include <cstdio>

int main() {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        std::printf("no usable CUDA device: %s\n", err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
        return 1;
    }
    for (int d = 0; d < count; ++d) {
        cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, d) == cudaSuccess) std::printf("GPU %d: %s\n", d, prop.name);
    }
    void* p = nullptr;
    err = cudaMalloc(&p, 1);
    if (err != cudaSuccess) {
        std::printf("CUDA device found but cudaMalloc failed: %s\n", cudaGetErrorString(err));
        return 1;
    }
    cudaFree(p);
    return 0;
}
