/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Host reductions. The type and op are resolved once per call (one switch), then a template loop runs with
 * no branch per element so the compiler can vectorise it. Integer arithmetic is done in the unsigned type
 * of the same width: overflow wraps (as the GPU kernels do) instead of being undefined behaviour.
 * fp16/bf16/fp8 have no native host arithmetic: they are widened to float in small blocks, reduced with the
 * float loop, and rounded back once per call (per pair of inputs: an algorithm that reduces step by step rounds at
 * every step); fp16 and bf16 in 256-bit vectors where the processor has them (core/reduce_simd16.h). FP8 has only
 * 65,536 pairs of inputs: their results are tabled once per op from that same path.
 */
#include "core/reduce.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/dtype.h"
#include "core/reduce_simd16.h"

namespace vccl {

namespace {

/* Wrapping integer arithmetic; plain arithmetic for floating point. */
template <typename T, bool kInt = std::is_integral<T>::value>
struct Arith {
    static T add(T a, T b) { return a + b; }
    static T mul(T a, T b) { return a * b; }
};
template <typename T>
struct Arith<T, true> {
    /* uint32/uint64 arithmetic is modular; int8/uint8 promote to int, which cannot overflow for two
     * 8-bit operands, and the conversion back is modular. */
    using U = typename std::make_unsigned<T>::type;
    static T add(T a, T b) { return T(U(U(a) + U(b))); }
    static T mul(T a, T b) { return T(U(U(a) * U(b))); }
};

template <typename T>
struct OpSum {
    static T apply(T a, T b) { return Arith<T>::add(a, b); }
};
template <typename T>
struct OpProd {
    static T apply(T a, T b) { return Arith<T>::mul(a, b); }
};
/* a > b ? a : b maps onto maxps/maxpd (and pmax for integers). */
template <typename T>
struct OpMax {
    static T apply(T a, T b) { return a > b ? a : b; }
};
template <typename T>
struct OpMin {
    static T apply(T a, T b) { return a < b ? a : b; }
};

/* Works in fixed blocks through a local array. The compiler vectorises the inner loop even at -O2 (its
 * "very cheap" cost model accepts a constant trip count and needs no aliasing check against a local), which
 * a plain loop over possibly aliasing pointers does not get: ~2x the throughput. Each block reads a and b
 * before writing dst, so dst may alias a or b exactly. */
template <typename T, template <typename> class Op>
void reduce_loop(T* dst, const T* a, const T* b, size_t count) {
    constexpr size_t kBlock = 256 / sizeof(T);
    size_t i = 0;
    for (; i + kBlock <= count; i += kBlock) {
        T tmp[kBlock];
        for (size_t j = 0; j < kBlock; ++j) tmp[j] = Op<T>::apply(a[i + j], b[i + j]);
        for (size_t j = 0; j < kBlock; ++j) dst[i + j] = tmp[j];
    }
    for (; i < count; ++i) dst[i] = Op<T>::apply(a[i], b[i]);
}

template <typename T>
void reduce_typed(void* dst, const void* a, const void* b, size_t count, vcclRedOp_t op) {
    T* d = static_cast<T*>(dst);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    switch (op) {
    case vcclSum:
    case vcclAvg: reduce_loop<T, OpSum>(d, x, y, count); break;
    case vcclProd: reduce_loop<T, OpProd>(d, x, y, count); break;
    case vcclMax: reduce_loop<T, OpMax>(d, x, y, count); break;
    case vcclMin: reduce_loop<T, OpMin>(d, x, y, count); break;
    default: break;
    }
}

/* Elements widened per block: small enough to stay in L1, large enough to amortise the loop overhead. */
constexpr size_t kWideBlock = 256;

inline uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}
inline float bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* fp16 <-> float without branches on the data, so the block loops vectorise (dtype.cc's versions are
 * out of line and branchy). Bit-identical to half_to_float/float_to_half, round to nearest even; the
 * tests compare them. */
struct HalfCodec {
    using Storage = uint16_t;
    static float to_float(uint16_t h) {
        // Exponent and mantissa moved to float position, then scaled by 2^(127-15): exact for normals and
        // subnormals alike. Inf/NaN (exponent 31) land at >= 2^16 and get the float exponent forced to 255.
        float f = bits_float(uint32_t(h & 0x7fffu) << 13) * bits_float(uint32_t(127 + 112) << 23);
        uint32_t u = float_bits(f);
        u |= f >= 65536.0f ? 0x7f800000u : 0u;
        return bits_float(u | (uint32_t(h & 0x8000u) << 16));
    }
    static uint16_t from_float(float f) {
        uint32_t u = float_bits(f);
        uint32_t sign = (u >> 16) & 0x8000u;
        u &= 0x7fffffffu;
        // Subnormal results: adding 0.5 (as float) aligns the mantissa so the FPU rounds to nearest even.
        uint32_t sub = float_bits(bits_float(u) + 0.5f) - 0x3f000000u;
        // Normal results: rebias the exponent and round to nearest even on the 13 dropped bits (a carry
        // into the exponent is correct, up to infinity).
        uint32_t norm = (u + (uint32_t(15 - 127) << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
        uint32_t out = u < 0x38800000u ? sub : norm;
        out = u >= 0x47800000u ? 0x7c00u : out;               // overflow to infinity
        out = u > 0x7f800000u ? 0x7e00u : out;                // NaN stays (quiet) NaN
        return uint16_t(out | sign);
    }
};
struct Bf16Codec {
    using Storage = uint16_t;
    static float to_float(uint16_t v) { return bf16_to_float(v); }
    static uint16_t from_float(float f) {
        uint32_t u = float_bits(f);
        uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
        return uint16_t((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : rounded); // NaN stays quiet NaN
    }
};

/* FP8: table lookup to float, dtype.cc's encoder back (round to nearest even, saturating to the largest finite
 * value as CUDA's __NV_SATFINITE conversion does). The reductions themselves look their results up (reduce_fp8). */
struct Fp8e4m3Codec {
    using Storage = uint8_t;
    static float to_float(uint8_t v) { return fp8e4m3_to_float(v); }
    static uint8_t from_float(float f) { return float_to_fp8e4m3(f); }
};
struct Fp8e5m2Codec {
    using Storage = uint8_t;
    static float to_float(uint8_t v) { return fp8e5m2_to_float(v); }
    static uint8_t from_float(float f) { return float_to_fp8e5m2(f); }
};

/* Always inlined so the full-block call sees a constant n (see reduce_loop). */
template <typename Codec, typename S = typename Codec::Storage>
inline __attribute__((always_inline)) void widen_reduce_narrow(S* d, const S* x, const S* y, size_t n,
                                                               vcclRedOp_t op) {
    float fa[kWideBlock], fb[kWideBlock];
    for (size_t i = 0; i < n; ++i) {
        fa[i] = Codec::to_float(x[i]);
        fb[i] = Codec::to_float(y[i]);
    }
    // Both inputs are read before dst is written, so dst may alias a or b.
    reduce_typed<float>(fa, fa, fb, n, op);
    for (size_t i = 0; i < n; ++i) d[i] = Codec::from_float(fa[i]);
}

template <typename Codec>
void reduce_narrow(void* dst, const void* a, const void* b, size_t count, vcclRedOp_t op) {
    using S = typename Codec::Storage;
    S* d = static_cast<S*>(dst);
    const S* x = static_cast<const S*>(a);
    const S* y = static_cast<const S*>(b);
    size_t base = 0;
    // Full blocks with a constant trip count (vectorised), then the tail.
    for (; base + kWideBlock <= count; base += kWideBlock) {
        widen_reduce_narrow<Codec>(d + base, x + base, y + base, kWideBlock, op);
    }
    if (base < count) widen_reduce_narrow<Codec>(d + base, x + base, y + base, count - base, op);
}


/* FP8 pairs: an op on two fp8 values is a function of their 16 bits, so each format and op has a table of all
 * 65,536 results (64 KiB, made on first use through widen_reduce_narrow itself, so every result is the one the
 * widening path gives): one load per element instead of two decodes and a branchy encode. */
template <typename Codec>
struct Fp8PairTable {
    uint8_t result[65536];
    explicit Fp8PairTable(vcclRedOp_t op) {
        uint8_t x[256], y[256];
        for (int a = 0; a < 256; ++a) {
            for (int b = 0; b < 256; ++b) {
                x[b] = uint8_t(a);
                y[b] = uint8_t(b);
            }
            widen_reduce_narrow<Codec>(result + a * 256, x, y, 256, op);
        }
    }
};

template <typename Codec>
const uint8_t* fp8_pair_table(vcclRedOp_t op) {
    switch (op) { // one table per op, each made the first time its op is used (thread-safe static init)
    case vcclProd: { static const Fp8PairTable<Codec> t(vcclProd); return t.result; }
    case vcclMax: { static const Fp8PairTable<Codec> t(vcclMax); return t.result; }
    case vcclMin: { static const Fp8PairTable<Codec> t(vcclMin); return t.result; }
    default: { static const Fp8PairTable<Codec> t(vcclSum); return t.result; } // Sum, and Avg before its scaling
    }
}

template <typename Codec>
void reduce_fp8(void* dst, const void* a, const void* b, size_t count, vcclRedOp_t op) {
    const uint8_t* table = fp8_pair_table<Codec>(op);
    uint8_t* d = static_cast<uint8_t*>(dst);
    const uint8_t* x = static_cast<const uint8_t*>(a);
    const uint8_t* y = static_cast<const uint8_t*>(b);
    // Both inputs of element i are read before it is written, so dst may alias a or b.
    for (size_t i = 0; i < count; ++i) d[i] = table[(size_t(x[i]) << 8) | y[i]];
}

/* One-input maps of FP8 (Avg's division, PreMulSum's product): past a few hundred elements, the 256 results are
 * computed once per call and looked up. */
constexpr size_t kFp8MapTableMin = 512;
template <typename Codec, typename F>
void map_fp8(uint8_t* d, const uint8_t* x, size_t count, F f) {
    if (count < kFp8MapTableMin) {
        for (size_t i = 0; i < count; ++i) d[i] = f(x[i]);
        return;
    }
    uint8_t table[256];
    for (int v = 0; v < 256; ++v) table[v] = f(uint8_t(v));
    for (size_t i = 0; i < count; ++i) d[i] = table[x[i]];
}

template <typename T>
void scale_typed(void* buf, size_t count, int nranks) {
    T* p = static_cast<T*>(buf);
    // Divide by the int itself: T(nranks) would truncate for 8-bit types once nranks exceeds their range.
    // (8-bit values promote to int; wider ones convert nranks to T, which holds any positive int.)
    for (size_t i = 0; i < count; ++i) p[i] = T(p[i] / nranks);
}

template <typename Codec>
void scale_narrow(void* buf, size_t count, int nranks) {
    using S = typename Codec::Storage;
    S* p = static_cast<S*>(buf);
    const float n = float(nranks);
    for (size_t i = 0; i < count; ++i) p[i] = Codec::from_float(Codec::to_float(p[i]) / n);
}

template <typename Codec>
void scale_fp8(void* buf, size_t count, int nranks) {
    uint8_t* p = static_cast<uint8_t*>(buf);
    const float n = float(nranks);
    map_fp8<Codec>(p, p, count, [n](uint8_t v) { return Codec::from_float(Codec::to_float(v) / n); });
}

template <typename T>
void premul_typed(void* dst, const void* src, size_t count, uint64_t scalar_bits) {
    T s;
    memcpy(&s, &scalar_bits, sizeof(T));
    T* d = static_cast<T*>(dst);
    const T* x = static_cast<const T*>(src);
    for (size_t i = 0; i < count; ++i) d[i] = Arith<T>::mul(x[i], s);
}

template <typename Codec>
void premul_narrow(void* dst, const void* src, size_t count, uint64_t scalar_bits) {
    using S = typename Codec::Storage;
    const float s = Codec::to_float(S(scalar_bits));
    S* d = static_cast<S*>(dst);
    const S* x = static_cast<const S*>(src);
    for (size_t i = 0; i < count; ++i) d[i] = Codec::from_float(Codec::to_float(x[i]) * s);
}

template <typename Codec>
void premul_fp8(void* dst, const void* src, size_t count, uint64_t scalar_bits) {
    const float s = Codec::to_float(uint8_t(scalar_bits));
    map_fp8<Codec>(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), count,
                   [s](uint8_t v) { return Codec::from_float(Codec::to_float(v) * s); });
}

/* fp16 and bf16: 256-bit vectors where the processor has them (same results), the portable loops otherwise. */
template <typename Codec>
void reduce_16(vcclDataType_t type, void* dst, const void* a, const void* b, size_t count, vcclRedOp_t op) {
    if (!simd16_available()) return reduce_narrow<Codec>(dst, a, b, count, op);
    reduce_simd16(type, static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b),
                  count, op);
}
template <typename Codec>
void scale_16(vcclDataType_t type, void* buf, size_t count, int nranks) {
    if (!simd16_available()) return scale_narrow<Codec>(buf, count, nranks);
    divide_simd16(type, static_cast<uint16_t*>(buf), count, float(nranks));
}
template <typename Codec>
void premul_16(vcclDataType_t type, void* dst, const void* src, size_t count, uint64_t scalar_bits) {
    if (!simd16_available()) return premul_narrow<Codec>(dst, src, count, scalar_bits);
    multiply_simd16(type, static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), count,
                    Codec::to_float(uint16_t(scalar_bits)));
}

} // namespace

void premul_host(void* dst, const void* src, size_t count, vcclDataType_t type, uint64_t scalar_bits) {
    switch (type) {
    case vcclInt8: premul_typed<int8_t>(dst, src, count, scalar_bits); break;
    case vcclUint8: premul_typed<uint8_t>(dst, src, count, scalar_bits); break;
    case vcclInt32: premul_typed<int32_t>(dst, src, count, scalar_bits); break;
    case vcclUint32: premul_typed<uint32_t>(dst, src, count, scalar_bits); break;
    case vcclInt64: premul_typed<int64_t>(dst, src, count, scalar_bits); break;
    case vcclUint64: premul_typed<uint64_t>(dst, src, count, scalar_bits); break;
    case vcclFloat16: premul_16<HalfCodec>(type, dst, src, count, scalar_bits); break;
    case vcclFloat32: premul_typed<float>(dst, src, count, scalar_bits); break;
    case vcclFloat64: premul_typed<double>(dst, src, count, scalar_bits); break;
    case vcclBfloat16: premul_16<Bf16Codec>(type, dst, src, count, scalar_bits); break;
    case vcclFloat8e4m3: premul_fp8<Fp8e4m3Codec>(dst, src, count, scalar_bits); break;
    case vcclFloat8e5m2: premul_fp8<Fp8e5m2Codec>(dst, src, count, scalar_bits); break;
    default: break;
    }
}

void reduce_host(void* dst, const void* a, const void* b, size_t count, vcclDataType_t type, vcclRedOp_t op) {
    switch (type) {
    case vcclInt8: reduce_typed<int8_t>(dst, a, b, count, op); break;
    case vcclUint8: reduce_typed<uint8_t>(dst, a, b, count, op); break;
    case vcclInt32: reduce_typed<int32_t>(dst, a, b, count, op); break;
    case vcclUint32: reduce_typed<uint32_t>(dst, a, b, count, op); break;
    case vcclInt64: reduce_typed<int64_t>(dst, a, b, count, op); break;
    case vcclUint64: reduce_typed<uint64_t>(dst, a, b, count, op); break;
    case vcclFloat16: reduce_16<HalfCodec>(type, dst, a, b, count, op); break;
    case vcclFloat32: reduce_typed<float>(dst, a, b, count, op); break;
    case vcclFloat64: reduce_typed<double>(dst, a, b, count, op); break;
    case vcclBfloat16: reduce_16<Bf16Codec>(type, dst, a, b, count, op); break;
    case vcclFloat8e4m3: reduce_fp8<Fp8e4m3Codec>(dst, a, b, count, op); break;
    case vcclFloat8e5m2: reduce_fp8<Fp8e5m2Codec>(dst, a, b, count, op); break;
    default: break;
    }
}

void reduce_16bit_portable(void* dst, const void* a, const void* b, size_t count, vcclDataType_t type, vcclRedOp_t op) {
    if (type == vcclFloat16) reduce_narrow<HalfCodec>(dst, a, b, count, op);
    if (type == vcclBfloat16) reduce_narrow<Bf16Codec>(dst, a, b, count, op);
}

void scale_avg_host(void* buf, size_t count, vcclDataType_t type, int nranks) {
    if (nranks <= 1) return; // dividing by one changes nothing
    switch (type) {
    case vcclInt8: scale_typed<int8_t>(buf, count, nranks); break;
    case vcclUint8: scale_typed<uint8_t>(buf, count, nranks); break;
    case vcclInt32: scale_typed<int32_t>(buf, count, nranks); break;
    case vcclUint32: scale_typed<uint32_t>(buf, count, nranks); break;
    case vcclInt64: scale_typed<int64_t>(buf, count, nranks); break;
    case vcclUint64: scale_typed<uint64_t>(buf, count, nranks); break;
    case vcclFloat16: scale_16<HalfCodec>(type, buf, count, nranks); break;
    case vcclFloat32: scale_typed<float>(buf, count, nranks); break;
    case vcclFloat64: scale_typed<double>(buf, count, nranks); break;
    case vcclBfloat16: scale_16<Bf16Codec>(type, buf, count, nranks); break;
    case vcclFloat8e4m3: scale_fp8<Fp8e4m3Codec>(buf, count, nranks); break;
    case vcclFloat8e5m2: scale_fp8<Fp8e5m2Codec>(buf, count, nranks); break;
    default: break;
    }
}

} // namespace vccl
