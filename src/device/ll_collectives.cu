/* The low-latency collective kernels (device/ll_collectives.h): up to LlArgs::max_blocks thread blocks per call. */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/dtype.h"
#include "device/ll_collectives.h"
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

/* Waits for a peer's header word of this call (its collective and byte count, send_and_check). */
__device__ bool wait_header(const uint64_t* p, uint32_t seq, volatile int* control, uint32_t* header) {
    const volatile uint64_t* vp = p;
    uint64_t x = *vp;
    for (unsigned spins = 1; uint32_t(x >> 32) != seq; ++spins) {
        if ((spins & 255u) == 0 && control[kLlAbort] != 0) return false;
        x = *vp;
    }
    *header = uint32_t(x);
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

/* This block's range of the message's units: each block owns whole 8-byte units (no element, at most 8 bytes,
 * straddles two blocks). */
__device__ __forceinline__ void block_units(uint32_t units, uint32_t* u0, uint32_t* u1) {
    const uint32_t per_block = (units + gridDim.x - 1) / gridDim.x;
    *u0 = min(units, blockIdx.x * per_block);
    *u1 = min(units, *u0 + per_block);
}

__device__ __forceinline__ bool aligned8(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 7u) == 0; }

/* The input this rank sends to peer p: the whole input, or (ReduceScatter) block p of it. */
template <LlKind Kind> __device__ __forceinline__ const char* sent_to(const void* in, int p, uint32_t bytes) {
    return static_cast<const char*>(in) + (Kind == LlKind::ReduceScatter ? size_t(p) * bytes : 0);
}

/* Steps 1 and 2 of every kind: this block's units into every peer's memory (block 0 also the header word with the
 * kind and byte count), then every peer's header (each block reads it): a peer whose header differs is reported
 * and not waited for (skip). False when the communicator was aborted while waiting. */
template <LlKind Kind>
__device__ bool send_and_check(const LlArgs& a, const void* in, uint32_t bytes, uint32_t u0, uint32_t u1, int* skip,
                               int* aborted) {
    const uint64_t tag = uint64_t(a.seq) << 32;
    const bool in_aligned = aligned8(in);
    for (uint32_t u = u0 + threadIdx.x; u < u1; u += blockDim.x) {
        // The same unit goes to every peer, except ReduceScatter's: block p of the input to peer p.
        uint64_t d = Kind == LlKind::ReduceScatter ? 0 : input_unit(in, u, bytes, in_aligned);
        for (int p = 0; p < a.nranks; ++p) {
            if (p == a.rank) continue;
            if (Kind == LlKind::ReduceScatter) {
                const char* src = sent_to<Kind>(in, p, bytes);
                d = input_unit(src, u, bytes, aligned8(src));
            }
            store_pair(a.outbox[p] + kLlDataWord + 2 * size_t(u), tag | (d & 0xFFFFFFFFull), tag | (d >> 32));
        }
    }
    const uint32_t header = (uint32_t(Kind) << 28) | bytes; // LlKind: never kLlAbandonedBytes
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        for (int p = 0; p < a.nranks; ++p) {
            if (p != a.rank) *reinterpret_cast<volatile uint64_t*>(a.outbox[p]) = tag | header;
        }
    }
    for (int p = threadIdx.x; p < kMaxLlRanks; p += blockDim.x) {
        int s = 0;
        if (p < a.nranks && p != a.rank) {
            uint32_t b = 0;
            if (!wait_header(a.inbox[p], a.seq, a.control, &b)) {
                *aborted = 1;
                s = 1;
            } else if (b != header) {
                a.control[kLlMismatch] = p + 1;
                s = 1;
            }
        }
        skip[p] = s;
    }
    __syncthreads();
    return *aborted == 0;
}

/* After the block's last wait: the last block to get here tells the host (kLlDone) through a counter in this rank's
 * own device memory; destroy need not abort the kernel once every block is here. A block that gave up on an abort
 * counts too, so the counter is back to 0 for the next call, which follows on the stream. */
__device__ __forceinline__ void arrive(const LlArgs& a) {
    __syncthreads(); // every thread of the block is done waiting
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(a.arrivals, 1u) == gridDim.x - 1) {
            *a.arrivals = 0;
            a.control[kLlDone] = int(a.seq);
        }
    }
}

/* AllReduce and ReduceScatter. Each block sends its range of units and then, unit by unit, waits for the peers'
 * words of that unit and reduces its elements in rank order (this rank's own from `in`) straight into `out`.
 * `out` may alias this rank's own part of `in`: a unit of it is read and written by one thread only, reads first. */
template <typename T, int Op, LlKind Kind>
__global__ void __launch_bounds__(kLlThreads) ll_reduce_kernel(LlArgs a, const void* in, void* out, size_t count,
                                                               uint32_t bytes) {
    using A = typename Acc<T>::type;
    constexpr int kPerUnit = 8 / sizeof(T);
    __shared__ int skip[kMaxLlRanks];
    __shared__ int aborted;
    if (threadIdx.x == 0) aborted = 0;
    __syncthreads(); // before any thread may set it
    uint32_t u0, u1;
    block_units((bytes + 7) / 8, &u0, &u1);
    bool gave_up = !send_and_check<Kind>(a, in, bytes, u0, u1, skip, &aborted);
    const char* own = sent_to<Kind>(in, a.rank, bytes);
    const bool own_aligned = aligned8(own);
    for (uint32_t u = u0 + threadIdx.x; u < u1 && !gave_up; u += blockDim.x) {
        A acc[kPerUnit];
        bool first = true;
        for (int r = 0; r < a.nranks; ++r) {
            uint64_t d = 0;
            if (r == a.rank) {
                d = input_unit(own, u, bytes, own_aligned);
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
    arrive(a);
}

/* Bytes 8u .. 8u + 7 (fewer at the end of `bytes`) of `unit` into dst. */
__device__ __forceinline__ void write_unit(char* dst, uint32_t u, uint32_t bytes, uint64_t unit) {
    if (aligned8(dst) && 8 * u + 8 <= bytes) {
        reinterpret_cast<uint64_t*>(dst)[u] = unit;
        return;
    }
    for (uint32_t b = 0; b < 8 && 8 * u + b < bytes; ++b) dst[8 * u + b] = char(unit >> (8 * b));
}

/* AllGather: each rank's `bytes` land in block r of `out`; this rank's own block is copied from `in` unless `in`
 * is that block (in place). */
__global__ void __launch_bounds__(kLlThreads) ll_allgather_kernel(LlArgs a, const void* in, void* out, uint32_t bytes) {
    __shared__ int skip[kMaxLlRanks];
    __shared__ int aborted;
    if (threadIdx.x == 0) aborted = 0;
    __syncthreads();
    uint32_t u0, u1;
    block_units((bytes + 7) / 8, &u0, &u1);
    bool gave_up = !send_and_check<LlKind::AllGather>(a, in, bytes, u0, u1, skip, &aborted);
    char* const outp = static_cast<char*>(out);
    char* const mine = outp + size_t(a.rank) * bytes;
    const bool copy_own = mine != in, in_aligned = aligned8(in);
    for (uint32_t u = u0 + threadIdx.x; u < u1 && !gave_up; u += blockDim.x) {
        if (copy_own) write_unit(mine, u, bytes, input_unit(in, u, bytes, in_aligned));
        for (int r = 0; r < a.nranks; ++r) {
            if (r == a.rank || skip[r]) continue;
            uint64_t d = 0;
            if (!wait_pair(a.inbox[r] + kLlDataWord + 2 * size_t(u), a.seq, a.control, &d)) {
                gave_up = true;
                break;
            }
            write_unit(outp + size_t(r) * bytes, u, bytes, d);
        }
    }
    arrive(a);
}

int grid_for(const LlArgs& a, uint32_t bytes) {
    const uint32_t units = (bytes + 7) / 8;
    return int(std::min<uint32_t>(uint32_t(std::max(1, a.max_blocks)),
                                  std::max(1u, (units + kLlUnitsPerBlock - 1) / kLlUnitsPerBlock)));
}

template <typename T>
cudaError_t launch_reduce(const LlArgs& a, LlKind kind, const void* in, void* out, size_t count, vcclRedOp_t op,
                          cudaStream_t s) {
    const uint32_t bytes = uint32_t(count * sizeof(T));
    const int blocks = grid_for(a, bytes);
    return for_op(op, [&](auto o) {
        constexpr int kOp = decltype(o)::value;
        return kind == LlKind::ReduceScatter
                   ? launch_kernel(ll_reduce_kernel<T, kOp, LlKind::ReduceScatter>, blocks, kLlThreads, s, a, in, out,
                                   count, bytes)
                   : launch_kernel(ll_reduce_kernel<T, kOp, LlKind::AllReduce>, blocks, kLlThreads, s, a, in, out,
                                   count, bytes);
    });
}

} // namespace

vcclResult_t ll_collective(const LlArgs& a, LlKind kind, const void* in, void* out, size_t count, vcclDataType_t type,
                           vcclRedOp_t op, vcclStream_t stream) {
    if (a.nranks < 1 || a.nranks > kMaxLlRanks || a.seq == 0 || a.arrivals == nullptr) return vcclInternalError;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    cudaError_t err;
    if (kind == LlKind::AllGather) {
        const uint32_t bytes = uint32_t(count * dtype_size(type));
        err = launch_kernel(ll_allgather_kernel, grid_for(a, bytes), kLlThreads, s, a, in, out, bytes);
        return err == cudaSuccess ? vcclSuccess : vcclUnhandledCudaError;
    }
    switch (type) {
    case vcclInt8: err = launch_reduce<int8_t>(a, kind, in, out, count, op, s); break;
    case vcclUint8: err = launch_reduce<uint8_t>(a, kind, in, out, count, op, s); break;
    case vcclInt32: err = launch_reduce<int32_t>(a, kind, in, out, count, op, s); break;
    case vcclUint32: err = launch_reduce<uint32_t>(a, kind, in, out, count, op, s); break;
    case vcclInt64: err = launch_reduce<int64_t>(a, kind, in, out, count, op, s); break;
    case vcclUint64: err = launch_reduce<uint64_t>(a, kind, in, out, count, op, s); break;
    case vcclFloat16: err = launch_reduce<__half>(a, kind, in, out, count, op, s); break;
    case vcclBfloat16: err = launch_reduce<__nv_bfloat16>(a, kind, in, out, count, op, s); break;
    case vcclFloat32: err = launch_reduce<float>(a, kind, in, out, count, op, s); break;
    case vcclFloat64: err = launch_reduce<double>(a, kind, in, out, count, op, s); break;
    default: return vcclInvalidArgument;
    }
    return err == cudaSuccess ? vcclSuccess : vcclUnhandledCudaError;
}

} // namespace vccl
