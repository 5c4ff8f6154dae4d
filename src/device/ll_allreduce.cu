/* The low-latency allreduce kernel (device/ll_allreduce.h): one thread block per call. */
#include <cuda_runtime.h>

#include <cstdint>

#include "device/ll_allreduce.h"
#include "device/reduce_ops.cuh"

namespace vccl {

namespace {

constexpr int kLlThreads = 512;

__device__ __forceinline__ void store_word(uint64_t* p, uint64_t v) { *reinterpret_cast<volatile uint64_t*>(p) = v; }

/* Waits until the word at p carries `seq`; false when the communicator was aborted first. */
__device__ bool wait_word(const uint64_t* p, uint32_t seq, volatile int* control, uint64_t* out) {
    const volatile uint64_t* vp = p;
    uint64_t x = *vp;
    for (unsigned spins = 1; uint32_t(x >> 32) != seq; ++spins) {
        // The abort flag is in host memory (a PCIe read): looked at now and then.
        if ((spins & 255u) == 0 && control[kLlAbort] != 0) return false;
        x = *vp;
    }
    *out = x;
    return true;
}

template <typename T, int Op>
__global__ void __launch_bounds__(kLlThreads) ll_allreduce_kernel(LlArgs a, const void* in, void* out, size_t count,
                                                                  uint32_t bytes) {
    using A = typename Acc<T>::type;
    __shared__ int skip[kMaxLlRanks];
    __shared__ int aborted;
    if (threadIdx.x == 0) aborted = 0;
    __syncthreads(); // before any thread may set it
    const uint32_t words = (bytes + 3) / 4;
    const uint64_t tag = uint64_t(a.seq) << 32;

    // 1. This rank's words: into its own scratch row, and into every peer's memory.
    const auto* src = static_cast<const unsigned char*>(in);
    const bool aligned = (reinterpret_cast<uintptr_t>(in) & 3u) == 0;
    uint32_t* mine = a.scratch + size_t(a.rank) * a.stride_words;
    for (uint32_t w = threadIdx.x; w < words; w += blockDim.x) {
        uint32_t v = 0;
        if (aligned && 4 * w + 4 <= bytes) {
            v = reinterpret_cast<const uint32_t*>(in)[w];
        } else {
            for (uint32_t b = 0; b < 4 && 4 * w + b < bytes; ++b) v |= uint32_t(src[4 * w + b]) << (8 * b);
        }
        mine[w] = v;
        for (int p = 0; p < a.nranks; ++p) {
            if (p != a.rank) store_word(a.outbox[p] + 1 + w, tag | v);
        }
    }
    if (threadIdx.x == 0) {
        for (int p = 0; p < a.nranks; ++p) {
            if (p != a.rank) store_word(a.outbox[p], tag | bytes);
        }
    }

    // 2. Every peer's count: a different one is reported and that peer is not waited for.
    for (int p = threadIdx.x; p < kMaxLlRanks; p += blockDim.x) {
        int s = 0;
        if (p < a.nranks && p != a.rank) {
            uint64_t h = 0;
            if (!wait_word(a.inbox[p], a.seq, a.control, &h)) {
                aborted = 1;
                s = 1;
            } else if (uint32_t(h) != bytes) {
                a.control[kLlMismatch] = p + 1;
                s = 1;
            }
        }
        skip[p] = s;
    }
    __syncthreads();
    if (aborted) return;

    // 3. Their words, into their scratch rows.
    for (int p = 0; p < a.nranks; ++p) {
        if (p == a.rank || skip[p]) continue;
        uint32_t* row = a.scratch + size_t(p) * a.stride_words;
        for (uint32_t w = threadIdx.x; w < words; w += blockDim.x) {
            uint64_t x = 0;
            if (!wait_word(a.inbox[p] + 1 + w, a.seq, a.control, &x)) {
                aborted = 1;
                break;
            }
            row[w] = uint32_t(x);
        }
    }
    __syncthreads(); // also makes the rows written by other threads visible
    if (aborted) return;
    if (threadIdx.x == 0) a.control[kLlDone] = int(a.seq); // no longer waits: destroy need not abort it

    // 4. Reduce in rank order. `out` may be `in`: every input word was read in step 1.
    for (size_t i = threadIdx.x; i < count; i += blockDim.x) {
        A acc = load<T>(a.scratch, i);
        for (int r = 1; r < a.nranks; ++r) acc = combine<A, Op>(acc, load<T>(a.scratch + size_t(r) * a.stride_words, i));
        if (Op == vcclAvg) acc = acc / A(a.nranks);
        store<T>(out, i, acc);
    }
}

template <typename T>
cudaError_t launch(const LlArgs& a, const void* in, void* out, size_t count, vcclRedOp_t op, cudaStream_t s) {
    uint32_t bytes = uint32_t(count * sizeof(T));
    return for_op(op, [&](auto o) {
        return launch_kernel(ll_allreduce_kernel<T, decltype(o)::value>, 1, kLlThreads, s, a, in, out, count, bytes);
    });
}

} // namespace

vcclResult_t ll_allreduce(const LlArgs& a, const void* in, void* out, size_t count, vcclDataType_t type,
                          vcclRedOp_t op, vcclStream_t stream) {
    if (a.nranks < 1 || a.nranks > kMaxLlRanks || a.seq == 0) return vcclInternalError;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    cudaError_t err;
    switch (type) {
    case vcclInt8: err = launch<int8_t>(a, in, out, count, op, s); break;
    case vcclUint8: err = launch<uint8_t>(a, in, out, count, op, s); break;
    case vcclInt32: err = launch<int32_t>(a, in, out, count, op, s); break;
    case vcclUint32: err = launch<uint32_t>(a, in, out, count, op, s); break;
    case vcclInt64: err = launch<int64_t>(a, in, out, count, op, s); break;
    case vcclUint64: err = launch<uint64_t>(a, in, out, count, op, s); break;
    case vcclFloat16: err = launch<__half>(a, in, out, count, op, s); break;
    case vcclBfloat16: err = launch<__nv_bfloat16>(a, in, out, count, op, s); break;
    case vcclFloat32: err = launch<float>(a, in, out, count, op, s); break;
    case vcclFloat64: err = launch<double>(a, in, out, count, op, s); break;
    default: return vcclInvalidArgument;
    }
    return err == cudaSuccess ? vcclSuccess : vcclUnhandledCudaError;
}

} // namespace vccl
