/* SPDX-License-Identifier: BSD-3-Clause */
/* The low-latency collective kernels (device/kernels/ll_collectives.h): up to LlArgs::max_blocks thread blocks per call. */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/dtype.h"
#include "device/kernels/ll_collectives.h"
#include "device/kernels/ll_sync.cuh"
#include "device/kernels/reduce_ops.cuh"

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

/* Units a thread keeps in flight. Loads issued back to back overlap their latency; a thread that loaded one unit
 * and waited for it before loading the next kept one 16-byte load per thread in flight, so the kernel was bound by
 * memory latency (about 70 GB/s at 2 MiB on 32 blocks), not by NVLink or HBM. The same holds for the input loads
 * ahead of the stores to the peers. */
constexpr int kLlBatch = 4;

/* Waits until both words of each of the batch's units carry `seq` (units b, b + stride, ... below u1; the words
 * of unit u at words + 2u), then gives their 8 data bytes (0 for units past u1); false when the communicator was
 * aborted first. All the batch's loads are issued before the first is looked at. */
__device__ __forceinline__ bool wait_units(const uint64_t* words, uint32_t b, uint32_t stride, uint32_t u1, uint32_t seq,
                           volatile int* control, uint64_t* data) {
    uint64_t lo[kLlBatch], hi[kLlBatch];
    const uint64_t arrived = uint64_t(seq) << 32; // what a unit past u1 pretends to hold
#pragma unroll
    for (int j = 0; j < kLlBatch; ++j) {
        const uint32_t u = b + j * stride;
        if (u < u1) {
            load_pair(words + 2 * size_t(u), &lo[j], &hi[j]);
        } else {
            lo[j] = hi[j] = arrived;
        }
    }
#pragma unroll
    for (int j = 0; j < kLlBatch; ++j) {
        for (unsigned spins = 1; uint32_t(lo[j] >> 32) != seq || uint32_t(hi[j] >> 32) != seq; ++spins) {
            // The abort flag is in host memory (a PCIe read): looked at now and then.
            if ((spins & 255u) == 0 && control[kLlAbort] != 0) return false;
            load_pair(words + 2 * size_t(b + j * stride), &lo[j], &hi[j]);
        }
        data[j] = (lo[j] & 0xFFFFFFFFull) | (hi[j] << 32);
    }
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

/* The input units of a batch (units b, b + stride, ... below u1; 0 past it), all loads issued first. */
__device__ __forceinline__ void input_units(const void* in, uint32_t b, uint32_t stride, uint32_t u1, uint32_t bytes,
                                            bool aligned, uint64_t* data) {
#pragma unroll
    for (int j = 0; j < kLlBatch; ++j) {
        const uint32_t u = b + j * stride;
        data[j] = u < u1 ? input_unit(in, u, bytes, aligned) : 0;
    }
}

/* This block's range of the message's units: each block owns whole 8-byte units (no element, at most 8 bytes,
 * straddles two blocks). */
__device__ __forceinline__ void block_units(uint32_t units, uint32_t* u0, uint32_t* u1) {
    const uint32_t per_block = (units + gridDim.x - 1) / gridDim.x;
    *u0 = min(units, blockIdx.x * per_block);
    *u1 = min(units, *u0 + per_block);
}

__device__ __forceinline__ bool aligned8(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 7u) == 0; }

/* The input this rank sends to peer p: the whole input, or (ReduceScatter, AlltoAll) block p of it. */
template <LlKind Kind> __device__ __forceinline__ const char* sent_to(const void* in, int p, uint32_t bytes) {
    constexpr bool kBlocks = Kind == LlKind::ReduceScatter || Kind == LlKind::AlltoAll;
    return static_cast<const char*>(in) + (kBlocks ? size_t(p) * bytes : 0);
}

/* Broadcast and Reduce: every rank tells every peer its root (word 1 of its set), and every block checks the peers'
 * roots after their headers matched: a peer that named another root is reported and skipped like a peer whose
 * header differs. Ends with a barrier. False when aborted. */
__device__ __forceinline__ void publish_root(const LlArgs& a) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const uint64_t word = (uint64_t(call_seq(a)) << 32) | uint32_t(a.root);
    for (int p = 0; p < a.nranks; ++p) {
        if (p != a.rank) *reinterpret_cast<volatile uint64_t*>(outbox(a, p) + 1) = word;
    }
}
/* The abort is gathered by the barrier itself (__syncthreads_or), not through the block's `aborted` word: threads
 * of a slower warp may still be reading that word as check_headers returns it. */
__device__ __forceinline__ bool check_roots(const LlArgs& a, int* skip) {
    int gave_up = 0;
    for (int p = threadIdx.x; p < a.nranks; p += blockDim.x) {
        if (p == a.rank || skip[p]) continue;
        uint32_t root = 0;
        if (!wait_word(inbox(a, p) + 1, call_seq(a), 0, a.control, &root)) {
            gave_up = 1;
            skip[p] = 1;
        } else if (root != uint32_t(a.root)) {
            a.control[kLlMismatch] = p + 1;
            skip[p] = 1;
        }
    }
    return __syncthreads_or(gave_up) == 0;
}

/* What send_and_check does to the input units it loaded before storing them: nothing, or (PreMulSum) scale them. */
struct Unscaled {
    __device__ __forceinline__ void operator()(uint64_t*) const {}
};

/* Steps 1 and 2 of every kind: this block's units into every peer's memory (block 0 also the header word with the
 * kind and byte count), then every peer's header (each block reads it): a peer whose header differs is reported
 * and not waited for (skip). False when the communicator was aborted while waiting. Broadcast: only the root
 * sends units; Reduce: only to the root; both: every rank sends its root. `scale(d)` is applied to each batch of
 * kLlBatch input units before they are stored. */
template <LlKind Kind, typename Scale = Unscaled>
__device__ bool send_and_check(const LlArgs& a, const void* in, uint32_t bytes, uint32_t u0, uint32_t u1, int* skip,
                               int* aborted, Scale scale = Scale()) {
    const uint64_t tag = uint64_t(call_seq(a)) << 32;
    const bool in_aligned = aligned8(in);
    constexpr bool kBlocks = Kind == LlKind::ReduceScatter || Kind == LlKind::AlltoAll;
    constexpr bool kRooted = Kind == LlKind::Broadcast || Kind == LlKind::Reduce;
    // Broadcast: the root sends to everyone; Reduce: everyone but the root sends to the root.
    const bool sends = Kind == LlKind::Broadcast ? a.rank == a.root
                       : Kind == LlKind::Reduce  ? a.rank != a.root
                                                 : true;
    for (uint32_t b = u0 + threadIdx.x; sends && b < u1; b += kLlBatch * blockDim.x) {
        // The same units go to every peer, except ReduceScatter's and AlltoAll's: block p of the input to peer p.
        uint64_t d[kLlBatch];
        if (!kBlocks) {
            input_units(in, b, blockDim.x, u1, bytes, in_aligned, d);
            scale(d);
        }
        for (int p = 0; p < a.nranks; ++p) {
            if (p == a.rank || (Kind == LlKind::Reduce && p != a.root)) continue;
            if (kBlocks) {
                const char* src = sent_to<Kind>(in, p, bytes);
                input_units(src, b, blockDim.x, u1, bytes, aligned8(src), d);
                scale(d);
            }
#pragma unroll
            for (int j = 0; j < kLlBatch; ++j) {
                const uint32_t u = b + j * blockDim.x;
                if (u < u1) {
                    store_pair(outbox(a, p) + kLlDataWord + 2 * size_t(u), tag | (d[j] & 0xFFFFFFFFull),
                               tag | (d[j] >> 32));
                }
            }
        }
    }
    const uint32_t header = (uint32_t(Kind) << 28) | bytes; // LlKind: never kLlAbandonedBytes
    if (kRooted) publish_root(a);
    publish_header(a, header);
    if (!check_headers(a, header, skip, aborted)) return false;
    return !kRooted || check_roots(a, skip);
}

/* AllReduce, ReduceScatter and Reduce. Each block sends its range of units and then, unit by unit, waits for the
 * peers' words of that unit and reduces its elements in rank order (this rank's own from `in`) straight into `out`
 * (Reduce: the root only; the others only send). `out` may alias this rank's own part of `in`: a unit of it is
 * read and written by one thread only, reads first. Scaled (PreMulSum, a Sum; a.premul has the scalar): the input
 * is multiplied as it is loaded, for the peers and for this rank's own part alike, so the peers receive scaled data. */
template <typename T, int Op, LlKind Kind, bool Scaled>
__global__ void __launch_bounds__(kLlThreads) ll_reduce_kernel(LlArgs a, const void* in, void* out, size_t count,
                                                               uint32_t bytes) {
    using A = typename Acc<T>::type;
    constexpr int kPerUnit = 8 / sizeof(T);
    __shared__ int skip[kMaxLlRanks];
    __shared__ int aborted;
    if (!begin_call(a)) return;
    if (threadIdx.x == 0) aborted = 0;
    __syncthreads(); // before any thread may set it
    uint32_t u0, u1;
    block_units((bytes + 7) / 8, &u0, &u1);
    const A factor = Scaled ? premul_factor<T>(a.premul) : A(1);
    auto scale = [&](uint64_t* d) {
#pragma unroll
        for (int j = 0; j < (Scaled ? kLlBatch : 0); ++j) d[j] = premul_scale_unit<T>(d[j], factor);
    };
    bool gave_up = !send_and_check<Kind>(a, in, bytes, u0, u1, skip, &aborted, scale);
    const char* own = sent_to<Kind>(in, a.rank, bytes);
    const bool own_aligned = aligned8(own);
    const bool receives = Kind != LlKind::Reduce || a.rank == a.root;
    for (uint32_t b = u0 + threadIdx.x; receives && b < u1 && !gave_up; b += kLlBatch * blockDim.x) {
        A acc[kLlBatch][kPerUnit];
        bool first = true;
        for (int r = 0; r < a.nranks; ++r) {
            uint64_t d[kLlBatch];
            if (r == a.rank) {
                input_units(own, b, blockDim.x, u1, bytes, own_aligned, d);
                scale(d);
            } else if (skip[r]) {
                continue;
            } else if (!wait_units(inbox(a, r) + kLlDataWord, b, blockDim.x, u1, call_seq(a), a.control, d)) {
                gave_up = true;
                break;
            }
#pragma unroll
            for (int j = 0; j < kLlBatch; ++j) {
#pragma unroll
                for (int k = 0; k < kPerUnit; ++k) {
                    const A e = unit_element<T>(d[j], k);
                    acc[j][k] = first ? e : combine<A, Op>(acc[j][k], e);
                }
            }
            first = false;
        }
        if (gave_up) break;
#pragma unroll
        for (int j = 0; j < kLlBatch; ++j) {
            // A unit past u1 is the next block's: it stores it.
            if (b + j * blockDim.x >= u1) break;
            const size_t base = size_t(b + j * blockDim.x) * kPerUnit;
#pragma unroll
            for (int k = 0; k < kPerUnit; ++k) {
                if (base + k >= count) break;
                A v = acc[j][k];
                if (Op == vcclAvg) v = v / A(a.nranks);
                store<T>(out, base + k, v);
            }
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

/* The kinds that place what they receive. AllGather: each rank's `bytes` land in block r of `out`. AlltoAll: block
 * r of `out` comes from rank r (its block of its input for this rank). Broadcast: `out` comes from the root. This
 * rank's own block is copied from `in` unless it is already there (in place; Broadcast: the root only). */
template <LlKind Kind>
__global__ void __launch_bounds__(kLlThreads) ll_place_kernel(LlArgs a, const void* in, void* out, uint32_t bytes) {
    __shared__ int skip[kMaxLlRanks];
    __shared__ int aborted;
    if (!begin_call(a)) return;
    if (threadIdx.x == 0) aborted = 0;
    __syncthreads();
    uint32_t u0, u1;
    block_units((bytes + 7) / 8, &u0, &u1);
    bool gave_up = !send_and_check<Kind>(a, in, bytes, u0, u1, skip, &aborted);
    constexpr bool kBroadcast = Kind == LlKind::Broadcast;
    char* const outp = static_cast<char*>(out);
    auto block_of = [&](int r) { return kBroadcast ? outp : outp + size_t(r) * bytes; };
    const char* own = sent_to<Kind>(in, a.rank, bytes);
    char* const mine = block_of(a.rank);
    const bool copy_own = (!kBroadcast || a.rank == a.root) && mine != own, own_aligned = aligned8(own);
    for (uint32_t b = u0 + threadIdx.x; b < u1 && !gave_up; b += kLlBatch * blockDim.x) {
        uint64_t d[kLlBatch];
        if (copy_own) {
            input_units(own, b, blockDim.x, u1, bytes, own_aligned, d);
#pragma unroll
            for (int j = 0; j < kLlBatch; ++j) {
                if (b + j * blockDim.x < u1) write_unit(mine, b + j * blockDim.x, bytes, d[j]);
            }
        }
        for (int r = 0; r < a.nranks; ++r) {
            if (r == a.rank || skip[r] || (kBroadcast && r != a.root)) continue;
            if (!wait_units(inbox(a, r) + kLlDataWord, b, blockDim.x, u1, call_seq(a), a.control, d)) {
                gave_up = true;
                break;
            }
#pragma unroll
            for (int j = 0; j < kLlBatch; ++j) {
                if (b + j * blockDim.x < u1) write_unit(block_of(r), b + j * blockDim.x, bytes, d[j]);
            }
        }
    }
    arrive(a);
}

int grid_for(const LlArgs& a, uint32_t bytes) {
    const uint32_t units = (bytes + 7) / 8;
    return int(std::min<uint32_t>(uint32_t(std::max(1, a.max_blocks)),
                                  std::max(1u, (units + kLlUnitsPerBlock - 1) / kLlUnitsPerBlock)));
}

template <typename T, int Op, bool Scaled>
cudaError_t launch_reduce_kind(const LlArgs& a, LlKind kind, const void* in, void* out, size_t count, uint32_t bytes,
                               int blocks, cudaStream_t s) {
    return kind == LlKind::ReduceScatter
               ? launch_kernel(ll_reduce_kernel<T, Op, LlKind::ReduceScatter, Scaled>, blocks, kLlThreads, s, a, in,
                               out, count, bytes)
           : kind == LlKind::Reduce
               ? launch_kernel(ll_reduce_kernel<T, Op, LlKind::Reduce, Scaled>, blocks, kLlThreads, s, a, in, out,
                               count, bytes)
               : launch_kernel(ll_reduce_kernel<T, Op, LlKind::AllReduce, Scaled>, blocks, kLlThreads, s, a, in, out,
                               count, bytes);
}

template <typename T>
cudaError_t launch_reduce(const LlArgs& a, LlKind kind, const void* in, void* out, size_t count, vcclRedOp_t op,
                          cudaStream_t s) {
    const uint32_t bytes = uint32_t(count * sizeof(T));
    const int blocks = grid_for(a, bytes);
    // PreMulSum is a Sum: its scaled kernels are compiled for that op alone.
    if (a.premul.on != 0) {
        if (op != vcclSum) return cudaErrorInvalidValue;
        return launch_reduce_kind<T, vcclSum, true>(a, kind, in, out, count, bytes, blocks, s);
    }
    return for_op(op, [&](auto o) {
        return launch_reduce_kind<T, decltype(o)::value, false>(a, kind, in, out, count, bytes, blocks, s);
    });
}

} // namespace

vcclResult_t ll_collective(const LlArgs& a, LlKind kind, const void* in, void* out, size_t count, vcclDataType_t type,
                           vcclRedOp_t op, vcclStream_t stream) {
    if (a.nranks < 1 || a.nranks > kMaxLlRanks || a.seq == 0 || a.arrivals == nullptr) return vcclInternalError;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    cudaError_t err;
    if (kind == LlKind::AllGather || kind == LlKind::AlltoAll || kind == LlKind::Broadcast) {
        const uint32_t bytes = uint32_t(count * dtype_size(type));
        const int blocks = grid_for(a, bytes);
        auto place = kind == LlKind::AllGather  ? ll_place_kernel<LlKind::AllGather>
                     : kind == LlKind::AlltoAll ? ll_place_kernel<LlKind::AlltoAll>
                                                : ll_place_kernel<LlKind::Broadcast>;
        err = launch_kernel(place, blocks, kLlThreads, s, a, in, out, bytes);
        return err == cudaSuccess ? vcclSuccess : vcclUnhandledCudaError;
    }
    err = for_type(type, [&](auto t) { return launch_reduce<decltype(t)>(a, kind, in, out, count, op, s); });
    return err == cudaSuccess ? vcclSuccess : vcclUnhandledCudaError;
}

} // namespace vccl
