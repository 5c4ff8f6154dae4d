/*
 * Reduction kernels. One grid-stride kernel per (type, op); each thread reads one element of every source,
 * combines them in the accumulation type (float for fp16/bf16, the type itself otherwise) and writes once.
 * Compact on purpose: the grid is bounded by max_ctas so concurrent compute keeps most of the GPU.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "device/reduce_kernels.h"

namespace vccl {

namespace {

struct Sources {
    const void* ptr[kMaxReduceSources];
};

template <typename T> struct Acc { using type = T; };
template <> struct Acc<__half> { using type = float; };
template <> struct Acc<__nv_bfloat16> { using type = float; };

template <typename T> __device__ typename Acc<T>::type load(const void* p, size_t i) {
    return static_cast<const T*>(p)[i];
}
template <> __device__ float load<__half>(const void* p, size_t i) { return __half2float(static_cast<const __half*>(p)[i]); }
template <> __device__ float load<__nv_bfloat16>(const void* p, size_t i) {
    return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}

template <typename T> __device__ void store(void* p, size_t i, typename Acc<T>::type v) { static_cast<T*>(p)[i] = T(v); }
template <> __device__ void store<__half>(void* p, size_t i, float v) { static_cast<__half*>(p)[i] = __float2half_rn(v); }
template <> __device__ void store<__nv_bfloat16>(void* p, size_t i, float v) {
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
}

template <typename A, int Op> __device__ A combine(A a, A b) {
    if (Op == vcclProd) return a * b;
    if (Op == vcclMax) return a > b ? a : b;
    if (Op == vcclMin) return a < b ? a : b;
    return a + b; // vcclSum and vcclAvg
}

template <typename T, int Op>
__global__ void reduce_kernel(void* dst, Sources srcs, int nsrcs, size_t count, int divide_by) {
    using A = typename Acc<T>::type;
    size_t stride = size_t(gridDim.x) * blockDim.x;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
        A acc = load<T>(srcs.ptr[0], i);
        for (int s = 1; s < nsrcs; ++s) acc = combine<A, Op>(acc, load<T>(srcs.ptr[s], i));
        if (Op == vcclAvg && divide_by > 0) acc = acc / A(divide_by);
        store<T>(dst, i, acc);
    }
}

template <typename T>
cudaError_t launch_type(void* dst, const Sources& s, int n, size_t count, vcclRedOp_t op, int divide_by, int blocks,
                        cudaStream_t stream) {
    const int threads = 512;
    switch (op) {
    case vcclSum: reduce_kernel<T, vcclSum><<<blocks, threads, 0, stream>>>(dst, s, n, count, divide_by); break;
    case vcclProd: reduce_kernel<T, vcclProd><<<blocks, threads, 0, stream>>>(dst, s, n, count, divide_by); break;
    case vcclMax: reduce_kernel<T, vcclMax><<<blocks, threads, 0, stream>>>(dst, s, n, count, divide_by); break;
    case vcclMin: reduce_kernel<T, vcclMin><<<blocks, threads, 0, stream>>>(dst, s, n, count, divide_by); break;
    case vcclAvg: reduce_kernel<T, vcclAvg><<<blocks, threads, 0, stream>>>(dst, s, n, count, divide_by); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

} // namespace

vcclResult_t device_reduce(void* dst, const void* const* srcs, int nsrcs, size_t count, vcclDataType_t type,
                           vcclRedOp_t op, int divide_by, int max_ctas, vcclStream_t stream) {
    if (count == 0) return vcclSuccess;
    if (nsrcs < 1 || nsrcs > kMaxReduceSources) return vcclInternalError;
    Sources s = {};
    for (int i = 0; i < nsrcs; ++i) s.ptr[i] = srcs[i];
    const size_t threads = 512;
    size_t want = (count + threads - 1) / threads;
    int blocks = int(want < size_t(max_ctas) ? want : size_t(max_ctas));
    if (blocks < 1) blocks = 1;
    cudaStream_t cs = static_cast<cudaStream_t>(stream);
    cudaError_t err;
    switch (type) {
    case vcclInt8: err = launch_type<int8_t>(dst, s, nsrcs, count, op, divide_by, blocks, cs); break;
    case vcclUint8: err = launch_type<uint8_t>(dst, s, nsrcs, count, op, divide_by, blocks, cs); break;
    case vcclInt32: err = launch_type<int32_t>(dst, s, nsrcs, count, op, divide_by, blocks, cs); break;
    case vcclUint32: err = launch_type<uint32_t>(dst, s, nsrcs, count, op, divide_by, blocks, cs); break;
    case vcclInt64: err = launch_type<int64_t>(dst, s, nsrcs, count, op, divide_by, blocks, cs); break;
    case vcclUint64: err = launch_type<uint64_t>(dst, s, nsrcs, count, op, divide_by, blocks, cs); break;
    case vcclFloat16: err = launch_type<__half>(dst, s, nsrcs, count, op, divide_by, blocks, cs); break;
    case vcclBfloat16: err = launch_type<__nv_bfloat16>(dst, s, nsrcs, count, op, divide_by, blocks, cs); break;
    case vcclFloat32: err = launch_type<float>(dst, s, nsrcs, count, op, divide_by, blocks, cs); break;
    case vcclFloat64: err = launch_type<double>(dst, s, nsrcs, count, op, divide_by, blocks, cs); break;
    default: return vcclInvalidArgument;
    }
    return err == cudaSuccess ? vcclSuccess : vcclUnhandledCudaError;
}

} // namespace vccl
