/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reduction kernels. Per (type, op) a grid-stride kernel over 16-byte packs (the aligned bulk) and a scalar
 * one (the remainder, or everything when a pointer is unaligned); each thread reads one pack or element of
 * every source, combines them in the accumulation type (float for fp16/bf16, the type itself otherwise) and
 * writes once. Compact on purpose: the grid is bounded by max_ctas so concurrent compute keeps most of the GPU.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/dtype.h"
#include "device/kernels/reduce_kernels.h"
#include "device/kernels/reduce_ops.cuh"

namespace vccl {

namespace {

struct Sources {
    const void* ptr[kMaxReduceSources];
};

template <typename T, int Op>
__global__ void reduce_kernel(void* dst, Sources srcs, int nsrcs, size_t count, int divide_by, PreMulArg first) {
    using A = typename Acc<T>::type;
    const A s = first.on ? premul_factor<T>(first) : A(1);
    size_t stride = size_t(gridDim.x) * blockDim.x;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
        A acc = load<T>(srcs.ptr[0], i);
        if (first.on) acc = premul_scale<T>(acc, s);
        for (int s = 1; s < nsrcs; ++s) acc = combine<A, Op>(acc, load<T>(srcs.ptr[s], i));
        if (Op == vcclAvg && divide_by > 0) acc = acc / A(divide_by);
        store<T>(dst, i, acc);
    }
}

/* The same reduction on 16-byte packs: 128-bit loads and stores, kUnroll packs per thread in flight, so that
 * a grid of VCCL_MAX_CTAS blocks keeps enough bytes in flight to approach memory bandwidth (the scalar kernel
 * above reads about 0.4 TB/s at 32 blocks). Every pointer must be 16-byte aligned. */
template <typename T> struct alignas(16) Pack {
    static constexpr int kElems = 16 / int(sizeof(T));
    T v[kElems];
};

/* Packs per thread in flight: 8 for 4- and 8-byte types, 4 for 2-byte ones (their accumulators take twice the
 * registers), 2 for 1-byte types, whose 16-element packs would otherwise need more registers than a 512-thread block
 * may have (the launch then fails). 8 rather than 4 made float PreMulSum, whose scaling pass is bound by the bytes in
 * flight, 3-6% faster from 32 MiB (on 2x H200 AllReduce 512 MiB 1911 -> 1858 us, ReduceScatter 1149 -> 1084)
 * and left Sum as it was (no spills: at most 128 registers at 512 threads). */
template <typename T> struct Unroll {
    static constexpr int value = Pack<T>::kElems > 8 ? 2 : Pack<T>::kElems > 4 ? 4 : 8;
};
constexpr int kPackThreads = 512;
constexpr int kScalarThreads = 512;

template <typename T, int Op>
__global__ void __launch_bounds__(kPackThreads) reduce_pack_kernel(Pack<T>* dst, Sources srcs, int nsrcs, size_t npacks,
                                                                   int divide_by, PreMulArg first) {
    using A = typename Acc<T>::type;
    constexpr int E = Pack<T>::kElems;
    constexpr int kUnroll = Unroll<T>::value;
    const A s = first.on ? premul_factor<T>(first) : A(1);
    size_t stride = size_t(gridDim.x) * blockDim.x;
    for (size_t base = size_t(blockIdx.x) * blockDim.x + threadIdx.x; base < npacks; base += stride * kUnroll) {
        A acc[kUnroll][E];
        Pack<T> in[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            size_t k = base + size_t(u) * stride;
            if (k < npacks) in[u] = static_cast<const Pack<T>*>(srcs.ptr[0])[k];
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
            for (int e = 0; e < E; ++e) {
                acc[u][e] = load<T>(in[u].v, e);
                if (first.on) acc[u][e] = premul_scale<T>(acc[u][e], s);
            }
        }
        for (int s = 1; s < nsrcs; ++s) {
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                size_t k = base + size_t(u) * stride;
                if (k < npacks) in[u] = static_cast<const Pack<T>*>(srcs.ptr[s])[k];
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
                for (int e = 0; e < E; ++e) acc[u][e] = combine<A, Op>(acc[u][e], load<T>(in[u].v, e));
            }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            size_t k = base + size_t(u) * stride;
            if (k >= npacks) continue;
            Pack<T> out;
#pragma unroll
            for (int e = 0; e < E; ++e) {
                A v = acc[u][e];
                if (Op == vcclAvg && divide_by > 0) v = v / A(divide_by);
                store<T>(out.v, e, v);
            }
            dst[k] = out;
        }
    }
}

template <typename T>
cudaError_t launch_packs(void* dst, const Sources& s, int n, size_t npacks, vcclRedOp_t op, int divide_by,
                         const PreMulArg& first, int blocks, cudaStream_t stream) {
    auto* d = static_cast<Pack<T>*>(dst);
    return for_op(op, [&](auto o) {
        return launch_kernel(reduce_pack_kernel<T, decltype(o)::value>, blocks, kPackThreads, stream, d, s, n, npacks,
                             divide_by, first);
    });
}

template <typename T>
cudaError_t launch_scalar(void* dst, const Sources& s, int n, size_t count, vcclRedOp_t op, int divide_by,
                          const PreMulArg& first, int blocks, cudaStream_t stream) {
    return for_op(op, [&](auto o) {
        return launch_kernel(reduce_kernel<T, decltype(o)::value>, blocks, kScalarThreads, stream, dst, s, n, count,
                             divide_by, first);
    });
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

/* Blocks for `items` at `per_block` each, at least 1 and at most max_ctas. */
int grid_blocks(size_t items, size_t per_block, int max_ctas) {
    return int(std::min<size_t>(std::max<size_t>((items + per_block - 1) / per_block, 1), size_t(max_ctas)));
}

/* Packs for the 16-byte-aligned bulk, the scalar kernel for the remainder (or for everything when some
 * pointer is not aligned). */
template <typename T>
cudaError_t launch_type(void* dst, const Sources& s, int n, size_t count, vcclRedOp_t op, int divide_by,
                        const PreMulArg& first, int max_ctas, cudaStream_t stream) {
    const size_t per_pack = size_t(Pack<T>::kElems);
    bool aligned = aligned16(dst);
    for (int i = 0; i < n; ++i) aligned = aligned && aligned16(s.ptr[i]);
    size_t npacks = aligned ? count / per_pack : 0;
    if (npacks > 0) {
        int blocks = grid_blocks(npacks, size_t(kPackThreads) * Unroll<T>::value, max_ctas);
        cudaError_t err = launch_packs<T>(dst, s, n, npacks, op, divide_by, first, blocks, stream);
        if (err != cudaSuccess) return err;
    }
    size_t done = npacks * per_pack, rest = count - done;
    if (rest == 0) return cudaSuccess;
    Sources tail = {};
    for (int i = 0; i < n; ++i) tail.ptr[i] = static_cast<const T*>(s.ptr[i]) + done;
    return launch_scalar<T>(static_cast<T*>(dst) + done, tail, n, rest, op, divide_by, first,
                            grid_blocks(rest, kScalarThreads, max_ctas), stream);
}

} // namespace

/* A reduction of one source whose elements are scaled as they are read (device_reduce's `first`): the same packs and
 * grid as every reduction (a scaling loop of its own, one element per thread, read about 0.4 TB/s at 32 blocks: 128
 * MiB of float took 1.23 ms against a sum's 0.41 on 2x H200). */
vcclResult_t device_premul(void* dst, const void* src, size_t count, vcclDataType_t type, const void* device_scalar,
                           uint64_t host_bits, int max_ctas, vcclStream_t stream) {
    PreMulArg scalar;
    scalar.device_scalar = device_scalar;
    scalar.host_bits = host_bits;
    scalar.on = 1;
    const void* srcs[1] = {src};
    return device_reduce(dst, srcs, 1, count, type, vcclSum, 0, max_ctas, stream, scalar);
}

vcclResult_t device_reduce(void* dst, const void* const* srcs, int nsrcs, size_t count, vcclDataType_t type,
                           vcclRedOp_t op, int divide_by, int max_ctas, vcclStream_t stream, const PreMulArg& first) {
    if (count == 0) return vcclSuccess;
    if (nsrcs < 1 || nsrcs > kMaxReduceSources) return vcclInternalError;
    Sources s = {};
    for (int i = 0; i < nsrcs; ++i) s.ptr[i] = srcs[i];
    if (max_ctas < 1) max_ctas = 1;
    cudaStream_t cs = static_cast<cudaStream_t>(stream);
    const cudaError_t err = for_type(type, [&](auto t) {
        return launch_type<decltype(t)>(dst, s, nsrcs, count, op, divide_by, first, max_ctas, cs);
    });
    if (err == cudaErrorInvalidValue && !dtype_valid(type)) return vcclInvalidArgument;
    return err == cudaSuccess ? vcclSuccess : vcclUnhandledCudaError;
}

} // namespace vccl
