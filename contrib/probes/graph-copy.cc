/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A small device-to-device copy made by launching a one-node graph (its node's pointers set per copy with
 * cudaGraphExecMemcpyNodeSetParams1D) instead of cudaMemcpyAsync: host time per copy, the device's time per copy
 * when 1000 are queued back to back, for 8 B to 32 KiB, and what CUPTI's activity records say ran (kernels or
 * copies) for 10 copies of 4 KiB made each way. Copies go to a second mapping of a VMM allocation, as into a peer's
 * buffer.
 *
 * Found on an H100 host (CUDA 13.0), 2026-11-25: the graph launch costs the host 2.3-5.1 us per copy against
 * 4.4-7.5 us for cudaMemcpyAsync, the device about 2 us either way, but CUPTI shows each graph copy as a kernel
 * (10 kernels, 0 copies), so a send/recv built on it would not be free of SMs (docs/PERFORMANCE.md, "Device
 * send/recv"). Not built by make:
 *   nvcc -O2 -std=c++17 -I/usr/local/cuda/include -o graph-copy contrib/probes/graph-copy.cc -lcupti && ./graph-copy
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
static int g_kernels = 0, g_memcpys = 0, g_other = 0;
static void CUPTIAPI buffer_requested(uint8_t** buf, size_t* size, size_t* max) {
    *size = 1 << 20; *buf = (uint8_t*)aligned_alloc(8, *size); *max = 0;
}
static void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buf, size_t, size_t valid) {
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) ++g_kernels;
        else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) ++g_memcpys;
        else ++g_other;
    }
    free(buf);
}
int main() {
    cudaSetDevice(0); cudaFree(0);
    CUmemAllocationProp prop{}; prop.type = CU_MEM_ALLOCATION_TYPE_PINNED; prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE; prop.location.id = 0;
    size_t g = 0; cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    CUmemGenericAllocationHandle h; if (cuMemCreate(&h, g, &prop, 0) != CUDA_SUCCESS) { printf("create failed\n"); return 1; }
    CUdeviceptr a = 0, b = 0; cuMemAddressReserve(&a, g, 0, 0, 0); cuMemAddressReserve(&b, g, 0, 0, 0); cuMemMap(a, g, 0, h, 0); cuMemMap(b, g, 0, h, 0);
    CUmemAccessDesc ad{}; ad.location = prop.location; ad.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE; cuMemSetAccess(a, g, &ad, 1); cuMemSetAccess(b, g, &ad, 1);
    char* src = nullptr; cudaMalloc((void**)&src, 4 << 20);
    cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaGraph_t gr; cudaGraphCreate(&gr, 0); cudaGraphNode_t node;
    cudaGraphAddMemcpyNode1D(&node, gr, nullptr, 0, (void*)b, src, 8, cudaMemcpyDeviceToDevice);
    cudaGraphExec_t ex; if (cudaGraphInstantiate(&ex, gr, 0) != cudaSuccess) { printf("instantiate failed\n"); return 1; }
    unsigned k = 0;
    auto graph_copy = [&](size_t bytes) {
        ++k; char* dst = (char*)b + (k & 1) * 65536; // the pointers change with every copy
        return cudaGraphExecMemcpyNodeSetParams1D(ex, node, dst, src + (k & 2) * 1024, bytes, cudaMemcpyDeviceToDevice) == cudaSuccess &&
               cudaGraphLaunch(ex, s) == cudaSuccess;
    };
    auto plain_copy = [&](size_t bytes) {
        ++k; char* dst = (char*)b + (k & 1) * 65536;
        return cudaMemcpyAsync(dst, src + (k & 2) * 1024, bytes, cudaMemcpyDeviceToDevice, s) == cudaSuccess;
    };
    auto time = [&](const char* name, size_t bytes, const std::function<bool(size_t)>& fn) {
        for (int i = 0; i < 200; ++i) fn(bytes);
        cudaStreamSynchronize(s);
        double host = 0; int n = 0;
        for (int round = 0; round < 50; ++round) {
            auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < 100; ++i) if (!fn(bytes)) { printf("%s failed\n", name); exit(1); }
            host += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count(); n += 100;
            cudaStreamSynchronize(s);
        }
        // Back to back: the stream first waits on an event recorded after all are queued, so the device runs them
        // in one go and their device time shows without the host's.
        cudaEvent_t gate, e0, e1; cudaEventCreate(&gate); cudaEventCreate(&e0); cudaEventCreate(&e1);
        cudaStream_t other; cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking);
        volatile int* flag; cudaHostAlloc((void**)&flag, 4, cudaHostAllocMapped); *flag = 0;
        cuStreamWaitValue32((CUstream)s, (CUdeviceptr)flag, 1, CU_STREAM_WAIT_VALUE_GEQ);
        cudaEventRecord(e0, s);
        for (int i = 0; i < 1000; ++i) fn(bytes);
        cudaEventRecord(e1, s);
        *flag = 1;
        cudaStreamSynchronize(s);
        float ms = 0; cudaEventElapsedTime(&ms, e0, e1);
        printf("%-34s %6zu B: host %5.2f us per copy, device %5.2f us per copy back to back\n", name, bytes, host / n, ms);
        cudaFreeHost((void*)flag); cudaStreamDestroy(other);
    };
    for (size_t bytes : {size_t(8), size_t(4096), size_t(32768), size_t(1 << 20)}) {
        time("cudaMemcpyAsync", bytes, plain_copy);
        time("graph launch, node set per copy", bytes, graph_copy);
    }
    cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
    for (int i = 0; i < 10; ++i) graph_copy(4096);
    cudaStreamSynchronize(s); cuptiActivityFlushAll(1);
    printf("CUPTI, 10 graph copies: %d kernels, %d memcpys, %d other records\n", g_kernels, g_memcpys, g_other);
    g_kernels = g_memcpys = g_other = 0;
    for (int i = 0; i < 10; ++i) plain_copy(4096);
    cudaStreamSynchronize(s); cuptiActivityFlushAll(1);
    printf("CUPTI, 10 cudaMemcpyAsync: %d kernels, %d memcpys, %d other records\n", g_kernels, g_memcpys, g_other);
    return 0;
}
