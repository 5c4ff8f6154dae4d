/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An FP8 (OCP E4M3 and E5M2) encoder and decoder for tests, written apart from the library's (src/core/dtype.cc)
 * and by another method: a code is decoded from its fields with ldexp, and a value is encoded by looking up the
 * nearest of the decoded finite codes (ties to the code whose last bit is 0), then saturating as CUDA's
 * __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...) does: past the largest finite magnitude (infinity included)
 * the result is that magnitude with the sign, a NaN is 0x7F. The positive codes 0..max_code grow with their
 * value in both formats, so the nearest code is found by a binary search of their decoded values (a table made
 * once from decode()): the multi-rank tests encode millions of references. Header-only: host tests, MPI tests
 * and GPU tests include it.
 */
#ifndef VCCL_TESTS_COMMON_FP8_REFERENCE_H_
#define VCCL_TESTS_COMMON_FP8_REFERENCE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace fp8ref {

/* One format: mantissa bits, exponent bias, largest finite code, whether the top exponent is infinity/NaN. */
struct Format {
    int mant_bits;
    int bias;
    uint8_t max_code;
    bool ieee_specials; // e5m2: exponent 31 is infinity (mantissa 0) or NaN; e4m3: only S.1111.111 is NaN
};
constexpr Format kE4M3 = {3, 7, 0x7e, false};
constexpr Format kE5M2 = {2, 15, 0x7b, true};

inline double decode(uint8_t code, const Format& f) {
    const int exp_field = (code & 0x7f) >> f.mant_bits;
    const int mant = code & ((1 << f.mant_bits) - 1);
    const double sign = (code & 0x80) ? -1.0 : 1.0;
    const int top = 0x7f >> f.mant_bits;
    if (f.ieee_specials && exp_field == top) return mant == 0 ? sign * INFINITY : NAN;
    if (!f.ieee_specials && (code & 0x7f) == 0x7f) return NAN;
    if (exp_field == 0) return sign * std::ldexp(double(mant), 1 - f.bias - f.mant_bits);
    return sign * std::ldexp(double(mant + (1 << f.mant_bits)), exp_field - f.bias - f.mant_bits);
}

/* The decoded value of every code of a format, made once. */
struct Table {
    double value[256];
    explicit Table(const Format& f) {
        for (int c = 0; c < 256; ++c) value[c] = decode(uint8_t(c), f);
    }
};
inline const Table& table(const Format& f) {
    static const Table e4m3(kE4M3), e5m2(kE5M2);
    return f.ieee_specials ? e5m2 : e4m3;
}

inline uint8_t encode(double v, const Format& f) {
    if (std::isnan(v)) return 0x7f;
    const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
    const double a = std::fabs(v);
    const double* t = table(f).value;
    if (a >= t[f.max_code]) return uint8_t(sign | f.max_code);
    // The first code not below a (one exists: a is below the largest), and the one before it.
    const int hi = int(std::lower_bound(t, t + f.max_code + 1, a) - t);
    if (hi == 0) return sign; // a is 0
    const int lo = hi - 1;
    const double err_lo = a - t[lo], err_hi = t[hi] - a;
    const int best = err_lo < err_hi ? lo : err_hi < err_lo ? hi : ((lo & 1) == 0 ? lo : hi);
    return uint8_t(sign | best);
}

inline double e4m3_to_double(uint8_t c) { return table(kE4M3).value[c]; }
inline double e5m2_to_double(uint8_t c) { return table(kE5M2).value[c]; }
inline uint8_t double_to_e4m3(double v) { return encode(v, kE4M3); }
inline uint8_t double_to_e5m2(double v) { return encode(v, kE5M2); }

} // namespace fp8ref

#endif
