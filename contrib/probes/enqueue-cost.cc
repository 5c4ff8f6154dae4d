/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Host time per enqueue of the CUDA calls a small direct send/recv makes, on one GPU with no peer: the copy
 * (cudaMemcpyAsync with either kind, the driver's cuMemcpyDtoDAsync and cuMemcpyAsync), stream memory operations
 * (cuStreamWriteValue32, cuStreamBatchMemOp), an event record; then whether one enqueue can carry more work:
 * cudaMemcpyBatchAsync of 1, 4 and 16 copies, and cudaGraphLaunch of a one-copy graph and of a graph holding a
 * send's stream work (memory operation, 8 B copy, memory operation), with and without setting its memory-operation
 * nodes first. Copies go to a second mapping of a VMM allocation, as into a peer's buffer. 100 calls per round,
 * 50 rounds, the stream synchronised between rounds.
 *
 * Found on an H100 host (16 cores, CUDA 13.0), 2026-11-25: a copy costs the host about 5 us to enqueue whichever
 * API makes it (8 B 4.2-5.3 us), a stream memory operation 1.2-1.5 us, an event 0.3-0.4 us; a batch of copies
 * costs as much per copy as separate copies (1 / 4 / 16 copies 4.4-5.0 / 18.1-18.7 / 62-76 us); a graph launch
 * costs 1.4-2.0 us (one copy) and 3.6-5.2 us (a send's stream work), but its copy runs as a kernel
 * (contrib/probes/graph-copy.cc). On the 2x H200 host a copy to the peer GPU costs 2.6 us
 * (contrib/probes/enqueue-threads.cc). docs/PERFORMANCE.md, "Device send/recv", uses these figures.
 * Not built by make:
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
    // One enqueue for several pieces of work: batched copies, and graphs instantiated once and launched per
    // call (a send's READY wait, copy and DONE write would be one launch; the values change per transfer).
    for (size_t count : {size_t(1), size_t(4), size_t(16)}) {
        void* dsts[16]; const void* srcs[16]; size_t sizes[16];
        for (size_t i = 0; i < count; ++i) { dsts[i] = (char*)b + 64 * i; srcs[i] = (char*)src + 64 * i; sizes[i] = 8; }
        cudaMemcpyAttributes attr{}; attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream; size_t idx = 0;
        char name[64]; snprintf(name, sizeof(name), "cudaMemcpyBatchAsync, %zu copies of 8 B", count);
        time(name, [&] { return cudaMemcpyBatchAsync(dsts, srcs, sizes, count, &attr, &idx, 1, s) == cudaSuccess; });
    }
    decltype(&cuGraphAddBatchMemOpNode) add_memop; decltype(&cuGraphExecBatchMemOpNodeSetParams) set_memop;
    if (!entry("cuGraphAddBatchMemOpNode", &add_memop) || !entry("cuGraphExecBatchMemOpNodeSetParams", &set_memop)) { printf("no graph entry\n"); return 1; }
    CUcontext ctx; cuCtxGetCurrent(&ctx);
    {   // a graph of one 8-byte copy
        cudaGraph_t gr; cudaGraphCreate(&gr, 0); cudaGraphNode_t node;
        cudaGraphAddMemcpyNode1D(&node, gr, nullptr, 0, (void*)b, src, 8, cudaMemcpyDeviceToDevice);
        cudaGraphExec_t ex; if (cudaGraphInstantiate(&ex, gr, 0) != cudaSuccess) { printf("instantiate failed\n"); return 1; }
        time("cudaGraphLaunch: one 8 B copy", [&] { return cudaGraphLaunch(ex, s) == cudaSuccess; });
    }
    {   // memory operations (write + wait), an 8-byte copy, a write: a send's stream work in one launch
        CUstreamBatchMemOpParams pre[2], post[1]; memset(pre, 0, sizeof(pre)); memset(post, 0, sizeof(post));
        pre[0] = ops[0]; pre[1] = ops[1]; post[0] = ops[0];
        post[0].writeValue.address = (CUdeviceptr)(flag + 1);
        pre[0].writeValue.value = pre[1].waitValue.value = 1; post[0].writeValue.value = 1;
        CUDA_BATCH_MEM_OP_NODE_PARAMS pp{ctx, 2, pre, 0}, qp{ctx, 1, post, 0};
        cudaGraph_t gr; cudaGraphCreate(&gr, 0); CUgraphNode n1, n3; cudaGraphNode_t n2;
        if (add_memop(&n1, (CUgraph)gr, nullptr, 0, &pp) != CUDA_SUCCESS) { printf("memop node failed\n"); return 1; }
        cudaGraphNode_t d1 = (cudaGraphNode_t)n1;
        cudaGraphAddMemcpyNode1D(&n2, gr, &d1, 1, (void*)b, src, 8, cudaMemcpyDeviceToDevice);
        if (add_memop(&n3, (CUgraph)gr, (CUgraphNode*)&n2, 1, &qp) != CUDA_SUCCESS) { printf("memop node 2 failed\n"); return 1; }
        cudaGraphExec_t ex; if (cudaGraphInstantiate(&ex, gr, 0) != cudaSuccess) { printf("instantiate 2 failed\n"); return 1; }
        time("cudaGraphLaunch: memops, 8 B copy, memop", [&] { return cudaGraphLaunch(ex, s) == cudaSuccess; });
        time("  the same with new values set first", [&] {
            ++v; pre[0].writeValue.value = v; pre[1].waitValue.value = v; post[0].writeValue.value = v;
            return set_memop((CUgraphExec)ex, n1, &pp) == CUDA_SUCCESS && set_memop((CUgraphExec)ex, n3, &qp) == CUDA_SUCCESS &&
                   cudaGraphLaunch(ex, s) == cudaSuccess; });
        time("  setting new values only (two nodes)", [&] {
            ++v; pre[0].writeValue.value = v; pre[1].waitValue.value = v; post[0].writeValue.value = v;
            return set_memop((CUgraphExec)ex, n1, &pp) == CUDA_SUCCESS && set_memop((CUgraphExec)ex, n3, &qp) == CUDA_SUCCESS; });
    }
    int dev; time("cudaGetDevice", [&] { return cudaGetDevice(&dev) == cudaSuccess; });
    cudaPointerAttributes at; time("cudaPointerGetAttributes", [&] { return cudaPointerGetAttributes(&at, (void*)b) == cudaSuccess; });
    return 0;
}
