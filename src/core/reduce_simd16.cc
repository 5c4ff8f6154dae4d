/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fp16 and bf16 host arithmetic eight values at a time: widened to float, the float operation, narrowed back with
 * round to nearest even. fp16 converts with the F16C instructions; bf16 with AVX2 integer operations (a shift to
 * widen; to narrow, the rounding add of core/dtype.h's float_to_bf16). The portable loops of reduce.cc need
 * about twenty SSE2 operations per fp16 element for its rounding and special cases: 16 MiB Sum here is over 10x
 * faster for fp16 and about 4x for bf16 on the development machine.
 *
 * Results are bit-identical to the portable path: both compute in float with the same IEEE operations, the
 * widening is exact and the narrowing correctly rounded. Only NaN payloads could differ, so NaN results are the
 * portable path's: fp16 0x7e00 with the NaN's sign; bf16 the float's top half with the quiet bit set.
 * Max and Min keep their C form x > y ? x : y (maxps/minps return the second operand when either is NaN, as the
 * comparison does).
 *
 * Compiled for baseline x86-64: the functions carry their own target and run only where the processor reports
 * AVX2 and F16C (simd16_available).
 */
#include "core/reduce_simd16.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

#define VCCL_SIMD16 __attribute__((target("avx2,f16c")))

namespace vccl {

namespace {

struct Half {
    static VCCL_SIMD16 __m256 widen(const uint16_t* p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    static VCCL_SIMD16 void narrow(uint16_t* p, __m256 f) {
        __m128i h = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        // NaN: magnitude above 0x7c00 (a signed compare is right: magnitudes are below 0x8000).
        const __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7fff)), _mm_set1_epi16(0x7c00));
        const __m128i quiet = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16(int16_t(0x8000))), _mm_set1_epi16(0x7e00));
        h = _mm_blendv_epi8(h, quiet, nan);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h);
    }
};

struct Bf16 {
    static VCCL_SIMD16 __m256 widen(const uint16_t* p) {
        const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
    }
    static VCCL_SIMD16 void narrow(uint16_t* p, __m256 f) {
        const __m256i u = _mm256_castps_si256(f);
        const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
        const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
        // NaN: magnitude above 0x7f800000 (signed compare of values below 2^31); kept, made quiet.
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                               _mm256_set1_epi32(0x7f800000));
        const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
        const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
        // Eight 32-bit values below 2^16 to eight 16-bit ones (packus saturates nothing here).
        const __m128i h = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h);
    }
};

/* The operations, as functors with the target of their instructions (a lambda cannot carry it). */
struct Add {
    VCCL_SIMD16 __m256 operator()(__m256 x, __m256 y) const { return _mm256_add_ps(x, y); }
};
struct Mul {
    VCCL_SIMD16 __m256 operator()(__m256 x, __m256 y) const { return _mm256_mul_ps(x, y); }
};
/* x > y ? x : y and x < y ? x : y, operand order included. */
struct Max {
    VCCL_SIMD16 __m256 operator()(__m256 x, __m256 y) const { return _mm256_max_ps(x, y); }
};
struct Min {
    VCCL_SIMD16 __m256 operator()(__m256 x, __m256 y) const { return _mm256_min_ps(x, y); }
};
struct DivideBy {
    __m256 d;
    VCCL_SIMD16 __m256 operator()(__m256 x, __m256) const { return _mm256_div_ps(x, d); }
};
struct MultiplyBy {
    __m256 s;
    VCCL_SIMD16 __m256 operator()(__m256 x, __m256) const { return _mm256_mul_ps(x, s); }
};

/* dst = f(a, b) (b NULL: f(a, anything)) in blocks of eight; the tail goes through a zero-padded block, so it is
 * computed exactly as the rest (the padding's results are dropped). Each block reads its inputs before it writes. */
template <typename Codec, typename F>
VCCL_SIMD16 void blocks_of_eight(uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t count, F f) {
    size_t i = 0;
    if (b != nullptr) {
        for (; i + 8 <= count; i += 8) Codec::narrow(dst + i, f(Codec::widen(a + i), Codec::widen(b + i)));
    } else {
        for (; i + 8 <= count; i += 8) Codec::narrow(dst + i, f(Codec::widen(a + i), _mm256_setzero_ps()));
    }
    if (i == count) return;
    uint16_t ta[8] = {}, tb[8] = {}, td[8];
    const size_t n = count - i;
    for (size_t j = 0; j < n; ++j) {
        ta[j] = a[i + j];
        if (b != nullptr) tb[j] = b[i + j];
    }
    Codec::narrow(td, f(Codec::widen(ta), Codec::widen(tb)));
    for (size_t j = 0; j < n; ++j) dst[i + j] = td[j];
}

template <typename F>
VCCL_SIMD16 void run(vcclDataType_t type, uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t count, F f) {
    if (type == vcclBfloat16) {
        blocks_of_eight<Bf16>(dst, a, b, count, f);
    } else {
        blocks_of_eight<Half>(dst, a, b, count, f);
    }
}

} // namespace

bool simd16_available() {
    // F16C from CPUID leaf 1 (ECX bit 29): not every compiler's __builtin_cpu_supports knows "f16c".
    static const bool available = [] {
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
        return f16c && __builtin_cpu_supports("avx2");
    }();
    return available;
}

void reduce_simd16(vcclDataType_t type, uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t count,
                   vcclRedOp_t op) {
    switch (op) {
    case vcclProd: run(type, dst, a, b, count, Mul{}); break;
    case vcclMax: run(type, dst, a, b, count, Max{}); break;
    case vcclMin: run(type, dst, a, b, count, Min{}); break;
    default: run(type, dst, a, b, count, Add{}); break; // Sum, and Avg before its division
    }
}

VCCL_SIMD16 void divide_simd16(vcclDataType_t type, uint16_t* buf, size_t count, float divisor) {
    run(type, buf, buf, nullptr, count, DivideBy{_mm256_set1_ps(divisor)});
}

VCCL_SIMD16 void multiply_simd16(vcclDataType_t type, uint16_t* dst, const uint16_t* src, size_t count, float scalar) {
    run(type, dst, src, nullptr, count, MultiplyBy{_mm256_set1_ps(scalar)});
}

} // namespace vccl

#else // no vector path for this processor: the portable one runs

namespace vccl {
bool simd16_available() { return false; }
void reduce_simd16(vcclDataType_t, uint16_t*, const uint16_t*, const uint16_t*, size_t, vcclRedOp_t) {}
void divide_simd16(vcclDataType_t, uint16_t*, size_t, float) {}
void multiply_simd16(vcclDataType_t, uint16_t*, const uint16_t*, size_t, float) {}
} // namespace vccl

#endif
