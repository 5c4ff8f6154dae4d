/* SPDX-License-Identifier: BSD-3-Clause */
/* Element access and combining rules shared by the reduction kernels (reduce_kernels.cu, ll_collectives.cu):
 * fp16, bf16 and fp8 are accumulated in float, every other type in itself. fp8 results are rounded to nearest even and
 * saturate to the largest finite value (CUDA's __NV_SATFINITE conversion, NaN stays NaN). Device code only. */
#ifndef VCCL_DEVICE_REDUCE_OPS_CUH_
#define VCCL_DEVICE_REDUCE_OPS_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "device/kernels/premul_arg.h"
#include "vccl.h"

namespace vccl {
namespace {

template <typename T> struct Acc { using type = T; };
template <> struct Acc<__half> { using type = float; };
template <> struct Acc<__nv_bfloat16> { using type = float; };
template <> struct Acc<__nv_fp8_e4m3> { using type = float; };
template <> struct Acc<__nv_fp8_e5m2> { using type = float; };

template <typename T> __device__ typename Acc<T>::type load(const void* p, size_t i) {
    return static_cast<const T*>(p)[i];
}
template <> __device__ float load<__half>(const void* p, size_t i) { return __half2float(static_cast<const __half*>(p)[i]); }
template <> __device__ float load<__nv_bfloat16>(const void* p, size_t i) {
    return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}

/* fp8 through the conversion intrinsics (exact to float; from float round-to-nearest-even, __NV_SATFINITE). */
template <> __device__ float load<__nv_fp8_e4m3>(const void* p, size_t i) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<const __nv_fp8_e4m3*>(p)[i].__x, __NV_E4M3)));
}
template <> __device__ float load<__nv_fp8_e5m2>(const void* p, size_t i) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<const __nv_fp8_e5m2*>(p)[i].__x, __NV_E5M2)));
}

template <typename T> __device__ void store(void* p, size_t i, typename Acc<T>::type v) { static_cast<T*>(p)[i] = T(v); }
template <> __device__ void store<__half>(void* p, size_t i, float v) { static_cast<__half*>(p)[i] = __float2half_rn(v); }
template <> __device__ void store<__nv_bfloat16>(void* p, size_t i, float v) {
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
}
template <> __device__ void store<__nv_fp8_e4m3>(void* p, size_t i, float v) {
    static_cast<__nv_fp8_e4m3*>(p)[i].__x = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}
template <> __device__ void store<__nv_fp8_e5m2>(void* p, size_t i, float v) {
    static_cast<__nv_fp8_e5m2*>(p)[i].__x = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E5M2);
}

/* Element k of the T-typed elements packed in a 64-bit word (little-endian: element 0 in the low bytes), as the
 * accumulation type. */
template <typename T> __device__ __forceinline__ typename Acc<T>::type unit_element(uint64_t unit, int k) {
    uint64_t bits = unit >> (8 * sizeof(T) * k);
    T v;
    memcpy(&v, &bits, sizeof(T)); // the low bytes
    return load<T>(&v, 0);
}

template <typename A, int Op> __device__ A combine(A a, A b) {
    if (Op == vcclProd) return a * b;
    if (Op == vcclMax) return a > b ? a : b;
    if (Op == vcclMin) return a < b ? a : b;
    return a + b; // vcclSum and vcclAvg
}

/* PreMulSum's scalar as the accumulation type: read from device memory when the call's scalar lives there (read when
 * the kernel runs, so a value the stream wrote before the call counts), else the element held in host_bits. */
template <typename T> __device__ typename Acc<T>::type premul_factor(const PreMulArg& p) {
    T raw;
    if (p.device_scalar != nullptr) {
        raw = *static_cast<const T*>(p.device_scalar);
    } else {
        memcpy(&raw, &p.host_bits, sizeof(T));
    }
    return load<T>(&raw, 0);
}

/* v times PreMulSum's scalar s, rounded to T: the value a separate scaling pass would have stored, so a fused kernel
 * gives the same bits as one that reads a scaled copy (integers wrap; fp16 and bf16 are multiplied in float). */
template <typename T>
__device__ __forceinline__ typename Acc<T>::type premul_scale(typename Acc<T>::type v, typename Acc<T>::type s) {
    T t[1];
    store<T>(t, 0, combine<typename Acc<T>::type, vcclProd>(v, s));
    return load<T>(t, 0);
}

/* The T-typed elements packed in a 64-bit word (unit_element's layout), each multiplied by s and rounded to T. */
template <typename T> __device__ __forceinline__ uint64_t premul_scale_unit(uint64_t unit, typename Acc<T>::type s) {
    constexpr int kPerUnit = 8 / int(sizeof(T));
    T out[kPerUnit];
#pragma unroll
    for (int k = 0; k < kPerUnit; ++k) {
        store<T>(out, k, combine<typename Acc<T>::type, vcclProd>(unit_element<T>(unit, k), s));
    }
    uint64_t r;
    memcpy(&r, out, 8);
    return r;
}

/* kernel<<<grid, block, 0, stream>>>(args...), returning this launch's own error. After <<<>>> only
 * cudaGetLastError() tells, and it also returns an older error of this thread that has nothing to do with the
 * launch (one of vccl's own calls that failed without clearing it: vccl's static CUDA runtime keeps its last error
 * apart from the application's): the caller would then give up a call whose kernel is queued and will run (the
 * low-latency allreduce would tell its peers "abandoned" while its data arrives). */
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, Args&&... args) {
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.stream = stream;
    return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

/* Returns launch(std::integral_constant<int, OP>) for the run-time op, so each kernel is instantiated per op. */
template <typename Launch> cudaError_t for_op(vcclRedOp_t op, Launch&& launch) {
    switch (op) {
    case vcclSum: return launch(std::integral_constant<int, vcclSum>());
    case vcclProd: return launch(std::integral_constant<int, vcclProd>());
    case vcclMax: return launch(std::integral_constant<int, vcclMax>());
    case vcclMin: return launch(std::integral_constant<int, vcclMin>());
    case vcclAvg: return launch(std::integral_constant<int, vcclAvg>());
    default: return cudaErrorInvalidValue;
    }
}

/* Returns launch(T()) for the run-time datatype (only the value's type matters), so each kernel is instantiated per
 * type; cudaErrorInvalidValue for a type that is not reduced (the API checked the type before). */
template <typename Launch> cudaError_t for_type(vcclDataType_t type, Launch&& launch) {
    switch (type) {
    case vcclInt8: return launch(int8_t());
    case vcclUint8: return launch(uint8_t());
    case vcclInt32: return launch(int32_t());
    case vcclUint32: return launch(uint32_t());
    case vcclInt64: return launch(int64_t());
    case vcclUint64: return launch(uint64_t());
    case vcclFloat16: return launch(__half());
    case vcclBfloat16: return launch(__nv_bfloat16());
    case vcclFloat8e4m3: return launch(__nv_fp8_e4m3());
    case vcclFloat8e5m2: return launch(__nv_fp8_e5m2());
    case vcclFloat32: return launch(float());
    case vcclFloat64: return launch(double());
    default: return cudaErrorInvalidValue;
    }
}

} // namespace
} // namespace vccl

#endif
