/*
 * Host time per enqueue of the CUDA calls a small direct send/recv makes, on one GPU with no peer: the copy
 * (cudaMemcpyAsync with either kind, the driver's cuMemcpyDtoDAsync and cuMemcpyAsync), a stream memory
 * operation (cuStreamWriteValue32, cuStreamBatchMemOp) and an event record. Copies go to a second mapping of
 * a VMM allocation, as into a peer's buffer. It bounds what the SM-free path can reach for small messages:
 * each send/recv pays at least one copy and two memory operations on the host (docs/PERFORMANCE.md,
 * "Fourteenth session"). Not built by make:
 *   nvcc -O2 -std=c++17 -o enqueue-cost contrib/probes/enqueue-cost.cc && ./enqueue-cost
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
template <typename Fn> bool entry(const char* n, Fn* f) {
    cudaDriverEntryPointQueryResult q;
    return cudaGetDriverEntryPointByVersion(n, (void**)f, 12000, cudaEnableDefault, &q) == cudaSuccess && q == cudaDriverEntryPointSuccess;
}
int main() {
    cudaSetDevice(0); cudaFree(0);
    decltype(&cuMemcpyDtoDAsync_v2) dtod; decltype(&cuMemcpyAsync) cpy; decltype(&cuStreamWriteValue32_v2) wv;
    decltype(&cuStreamBatchMemOp_v2) batch; decltype(&cuMemCreate) mcreate; decltype(&cuMemAddressReserve) reserve;
    decltype(&cuMemMap) mmap_; decltype(&cuMemSetAccess) access; decltype(&cuMemGetAllocationGranularity) gran;
    if (!entry("cuMemcpyDtoDAsync", &dtod) || !entry("cuMemcpyAsync", &cpy) || !entry("cuStreamWriteValue32", &wv) ||
        !entry("cuStreamBatchMemOp", &batch) || !entry("cuMemCreate", &mcreate) || !entry("cuMemAddressReserve", &reserve) ||
        !entry("cuMemMap", &mmap_) || !entry("cuMemSetAccess", &access) || !entry("cuMemGetAllocationGranularity", &gran)) { printf("no entry\n"); return 1; }
    CUmemAllocationProp prop{}; prop.type = CU_MEM_ALLOCATION_TYPE_PINNED; prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE; prop.location.id = 0;
    size_t g = 0; gran(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    CUmemGenericAllocationHandle h; if (mcreate(&h, g, &prop, 0) != CUDA_SUCCESS) { printf("create failed\n"); return 1; }
    CUdeviceptr a = 0, b = 0; reserve(&a, g, 0, 0, 0); reserve(&b, g, 0, 0, 0); mmap_(a, g, 0, h, 0); mmap_(b, g, 0, h, 0);
    CUmemAccessDesc ad{}; ad.location = prop.location; ad.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE; access(a, g, &ad, 1); access(b, g, &ad, 1);
    void* src = nullptr; cudaMalloc(&src, 1 << 20); uint32_t* flag = nullptr; cudaMalloc((void**)&flag, 4096);
    cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); CUstream cs = (CUstream)s;
    auto time = [&](const char* name, const std::function<bool()>& fn) {
        for (int i = 0; i < 200; ++i) fn();
        cudaStreamSynchronize(s);
        double total = 0; int n = 0;
        for (int round = 0; round < 50; ++round) {
            auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < 100; ++i) if (!fn()) { printf("%s failed\n", name); return; }
            total += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count(); n += 100;
            cudaStreamSynchronize(s);
        }
        printf("%-48s %6.2f us per call\n", name, total / n);
    };
    for (size_t bytes : {size_t(8), size_t(4096), size_t(32768)}) {
        printf("-- %zu bytes\n", bytes);
        time("cudaMemcpyAsync Default", [&] { return cudaMemcpyAsync((void*)b, src, bytes, cudaMemcpyDefault, s) == cudaSuccess; });
        time("cudaMemcpyAsync DeviceToDevice", [&] { return cudaMemcpyAsync((void*)b, src, bytes, cudaMemcpyDeviceToDevice, s) == cudaSuccess; });
        time("cuMemcpyDtoDAsync", [&] { return dtod(b, (CUdeviceptr)src, bytes, cs) == CUDA_SUCCESS; });
        time("cuMemcpyAsync", [&] { return cpy(b, (CUdeviceptr)src, bytes, cs) == CUDA_SUCCESS; });
        time("cudaMemcpyAsync to cudaMalloc memory", [&] { return cudaMemcpyAsync(flag + 64, src, bytes > 2048 ? 2048 : bytes, cudaMemcpyDeviceToDevice, s) == cudaSuccess; });
    }
    uint32_t v = 0;
    time("cuStreamWriteValue32", [&] { return wv(cs, (CUdeviceptr)flag, ++v, 0) == CUDA_SUCCESS; });
    CUstreamBatchMemOpParams ops[2]; memset(ops, 0, sizeof(ops));
    ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32; ops[0].writeValue.address = (CUdeviceptr)flag;
    ops[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32; ops[1].waitValue.address = (CUdeviceptr)flag; ops[1].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
    time("cuStreamBatchMemOp (write + wait)", [&] { ops[0].writeValue.value = ++v; ops[1].waitValue.value = v; return batch(cs, 2, ops, 0) == CUDA_SUCCESS; });
    time("cudaEventRecord", [&] { static cudaEvent_t e = nullptr; if (!e) cudaEventCreateWithFlags(&e, cudaEventDisableTiming); return cudaEventRecord(e, s) == cudaSuccess; });
    int dev; time("cudaGetDevice", [&] { return cudaGetDevice(&dev) == cudaSuccess; });
    cudaPointerAttributes at; time("cudaPointerGetAttributes", [&] { return cudaPointerGetAttributes(&at, (void*)b) == cudaSuccess; });
    return 0;
}
