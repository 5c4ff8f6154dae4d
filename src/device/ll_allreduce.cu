/* The low-latency allreduce kernel (device/ll_allreduce.h): up to LlArgs::max_blocks thread blocks per call. */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "device/ll_allreduce.h"
#include "device/reduce_ops.cuh"

namespace vccl {

namespace {

constexpr int kLlThreads = 512;
/* 8-byte units of the message a block takes on before another block is worth its launch and its share of the
 * waits: 2 per thread. 16 KiB is 2 blocks, 256 KiB 32 (VCCL_MAX_CTAS bounds them). */
constexpr uint32_t kLlUnitsPerBlock = 2 * kLlThreads;

/* One unit: two words (data bytes 0-3 and 4-7, each with the call's number) in one 16-byte access. A reader
 * checks both numbers: each 8-byte half is stored whole. */
__device__ __forceinline__ void store_pair(uint64_t* p, uint64_t lo, uint64_t hi) {
    asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(lo), "l"(hi) : "memory");
}
__device__ __forceinline__ void load_pair(const uint64_t* p, uint64_t* lo, uint64_t* hi) {
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(*lo), "=l"(*hi) : "l"(p) : "memory");
}

/* Waits until both words of the unit at p carry `seq`, then gives its 8 data bytes; false when the
 * communicator was aborted first. */
__device__ bool wait_pair(const uint64_t* p, uint32_t seq, volatile int* control, uint64_t* data) {
    uint64_t lo, hi;
    load_pair(p, &lo, &hi);
    for (unsigned spins = 1; uint32_t(lo >> 32) != seq || uint32_t(hi >> 32) != seq; ++spins) {
        // The abort flag is in host memory (a PCIe read): looked at now and then.
        if ((spins & 255u) == 0 && control[kLlAbort] != 0) return false;
        load_pair(p, &lo, &hi);
    }
    *data = (lo & 0xFFFFFFFFull) | (hi << 32);
    return true;
}

/* Waits for a peer's header word (its byte count) of this call. */
__device__ bool wait_header(const uint64_t* p, uint32_t seq, volatile int* control, uint32_t* bytes) {
    const volatile uint64_t* vp = p;
    uint64_t x = *vp;
    for (unsigned spins = 1; uint32_t(x >> 32) != seq; ++spins) {
        if ((spins & 255u) == 0 && control[kLlAbort] != 0) return false;
        x = *vp;
    }
    *bytes = uint32_t(x);
    return true;
}

/* Bytes 8u .. 8u + 7 of the input, zero past its end. */
__device__ __forceinline__ uint64_t input_unit(const void* in, uint32_t u, uint32_t bytes, bool aligned) {
    if (aligned && 8 * u + 8 <= bytes) return static_cast<const uint64_t*>(in)[u];
    const auto* src = static_cast<const unsigned char*>(in);
    uint64_t v = 0;
    for (uint32_t b = 0; b < 8 && 8 * u + b < bytes; ++b) v |= uint64_t(src[8 * u + b]) << (8 * b);
    return v;
}

/* Element k of the T-typed elements a unit holds, as the accumulation type. */
template <typename T> __device__ __forceinline__ typename Acc<T>::type unit_element(uint64_t unit, int k) {
    uint64_t bits = unit >> (8 * sizeof(T) * k);
    T v;
    memcpy(&v, &bits, sizeof(T)); // little-endian: the low bytes
    return load<T>(&v, 0);
}

/* Each block owns a range of 8-byte units of the message (no element, at most 8 bytes, straddles two): it
 * stores its units into every peer's memory, then, unit by unit, waits for the peers' words of that unit and
 * reduces its elements in rank order straight into `out`. Blocks never wait for one another; the last one to
 * stop waiting says so to the host (kLlDone) through a counter in this rank's own device memory. `out` may be
 * `in`: a unit of `in` is read (twice) and written by one thread only, reads first. */
template <typename T, int Op>
__global__ void __launch_bounds__(kLlThreads) ll_allreduce_kernel(LlArgs a, const void* in, void* out, size_t count,
                                                                  uint32_t bytes) {
    using A = typename Acc<T>::type;
    constexpr int kPerUnit = 8 / sizeof(T);
    __shared__ int skip[kMaxLlRanks];
    __shared__ int aborted;
    if (threadIdx.x == 0) aborted = 0;
    __syncthreads(); // before any thread may set it
    const uint64_t tag = uint64_t(a.seq) << 32;
    const uint32_t units = (bytes + 7) / 8;
    const uint32_t per_block = (units + gridDim.x - 1) / gridDim.x;
    const uint32_t u0 = min(units, blockIdx.x * per_block), u1 = min(units, u0 + per_block);
    const bool aligned = (reinterpret_cast<uintptr_t>(in) & 7u) == 0;

    // 1. This block's units, into every peer's memory.
    for (uint32_t u = u0 + threadIdx.x; u < u1; u += blockDim.x) {
        const uint64_t d = input_unit(in, u, bytes, aligned);
        for (int p = 0; p < a.nranks; ++p) {
            if (p != a.rank) store_pair(a.outbox[p] + kLlDataWord + 2 * size_t(u), tag | (d & 0xFFFFFFFFull), tag | (d >> 32));
        }
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        for (int p = 0; p < a.nranks; ++p) {
            if (p != a.rank) *reinterpret_cast<volatile uint64_t*>(a.outbox[p]) = tag | bytes;
        }
    }

    // 2. Every peer's count (each block reads it): a different one is reported and that peer is not waited for.
    for (int p = threadIdx.x; p < kMaxLlRanks; p += blockDim.x) {
        int s = 0;
        if (p < a.nranks && p != a.rank) {
            uint32_t b = 0;
            if (!wait_header(a.inbox[p], a.seq, a.control, &b)) {
                aborted = 1;
                s = 1;
            } else if (b != bytes) {
                a.control[kLlMismatch] = p + 1;
                s = 1;
            }
        }
        skip[p] = s;
    }
    __syncthreads();

    // 3. Unit by unit: every rank's 8 bytes in rank order (this rank's from `in`), reduced into `out`.
    bool gave_up = aborted != 0;
    for (uint32_t u = u0 + threadIdx.x; u < u1 && !gave_up; u += blockDim.x) {
        A acc[kPerUnit];
        bool first = true;
        for (int r = 0; r < a.nranks; ++r) {
            uint64_t d = 0;
            if (r == a.rank) {
                d = input_unit(in, u, bytes, aligned);
            } else if (skip[r]) {
                continue;
            } else if (!wait_pair(a.inbox[r] + kLlDataWord + 2 * size_t(u), a.seq, a.control, &d)) {
                gave_up = true;
                break;
            }
#pragma unroll
            for (int k = 0; k < kPerUnit; ++k) {
                const A e = unit_element<T>(d, k);
                acc[k] = first ? e : combine<A, Op>(acc[k], e);
            }
            first = false;
        }
        if (gave_up) break;
        const size_t base = size_t(u) * kPerUnit;
#pragma unroll
        for (int k = 0; k < kPerUnit; ++k) {
            if (base + k >= count) break;
            A v = acc[k];
            if (Op == vcclAvg) v = v / A(a.nranks);
            store<T>(out, base + k, v);
        }
    }
    __syncthreads(); // every thread of the block is done waiting
    if (threadIdx.x == 0) {
        // No longer waits (or gave up on an abort): destroy need not abort it once every block is here.
        __threadfence();
        if (atomicAdd(a.arrivals, 1u) == gridDim.x - 1) {
            *a.arrivals = 0; // every block has counted: ready for the next call, which follows on the stream
            a.control[kLlDone] = int(a.seq);
        }
    }
}

template <typename T>
cudaError_t launch(const LlArgs& a, const void* in, void* out, size_t count, vcclRedOp_t op, cudaStream_t s) {
    uint32_t bytes = uint32_t(count * sizeof(T));
    uint32_t units = (bytes + 7) / 8;
    int blocks = int(std::min<uint32_t>(uint32_t(std::max(1, a.max_blocks)),
                                        std::max(1u, (units + kLlUnitsPerBlock - 1) / kLlUnitsPerBlock)));
    return for_op(op, [&](auto o) {
        return launch_kernel(ll_allreduce_kernel<T, decltype(o)::value>, blocks, kLlThreads, s, a, in, out, count, bytes);
    });
}

} // namespace

vcclResult_t ll_allreduce(const LlArgs& a, const void* in, void* out, size_t count, vcclDataType_t type,
                          vcclRedOp_t op, vcclStream_t stream) {
    if (a.nranks < 1 || a.nranks > kMaxLlRanks || a.seq == 0 || a.arrivals == nullptr) return vcclInternalError;
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
