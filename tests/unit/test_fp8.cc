/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * FP8 (vcclFloat8e4m3, vcclFloat8e5m2) on the host: the library's encoder and decoder (core/dtype.h) and its
 * reductions (core/reduce.h) against the independent reference of tests/common/fp8_reference.h, which is itself
 * first checked against known bit patterns.
 */
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "../common/fp8_reference.h"
#include "core/dtype.h"
#include "core/names.h"
#include "core/reduce.h"

using namespace vccl;

namespace {

float bits_to_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

bool same_value(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

struct Fmt {
    vcclDataType_t type;
    const fp8ref::Format* ref;
    float (*to_float)(uint8_t);
    uint8_t (*from_float)(float);
    const char* name;
};
const Fmt kFormats[] = {
    {vcclFloat8e4m3, &fp8ref::kE4M3, fp8e4m3_to_float, float_to_fp8e4m3, "e4m3"},
    {vcclFloat8e5m2, &fp8ref::kE5M2, fp8e5m2_to_float, float_to_fp8e5m2, "e5m2"},
};

} // namespace

TEST(Fp8, TypesNamesAndSizes) {
    EXPECT_EQ(int(vcclFloat8e4m3), 10);
    EXPECT_EQ(int(vcclFloat8e5m2), 11);
    EXPECT_TRUE(dtype_valid(vcclFloat8e4m3));
    EXPECT_TRUE(dtype_valid(vcclFloat8e5m2));
    EXPECT_EQ(dtype_size(vcclFloat8e4m3), 1u);
    EXPECT_EQ(dtype_size(vcclFloat8e5m2), 1u);
    EXPECT_STREQ(dtype_name(vcclFloat8e4m3), "f8e4m3");
    EXPECT_STREQ(dtype_name(vcclFloat8e5m2), "f8e5m2");
    EXPECT_FALSE(dtype_valid(vcclNumTypes));
}

/* The reference itself, on the patterns the OCP FP8 specification and CUDA's cuda_fp8.h document. */
TEST(Fp8, ReferenceKnownBitPatterns) {
    using namespace fp8ref;
    EXPECT_EQ(e4m3_to_double(0x7e), 448.0);                   // largest finite e4m3
    EXPECT_EQ(e4m3_to_double(0xfe), -448.0);
    EXPECT_TRUE(std::isnan(e4m3_to_double(0x7f)));            // e4m3's only NaNs: S.1111.111
    EXPECT_TRUE(std::isnan(e4m3_to_double(0xff)));
    EXPECT_EQ(e4m3_to_double(0x78), 256.0);                   // exponent 15 is an ordinary binade in e4m3
    EXPECT_EQ(e4m3_to_double(0x38), 1.0);
    EXPECT_EQ(e4m3_to_double(0x08), std::ldexp(1.0, -6));     // smallest normal
    EXPECT_EQ(e4m3_to_double(0x01), std::ldexp(1.0, -9));     // smallest subnormal
    EXPECT_EQ(e4m3_to_double(0x07), 7 * std::ldexp(1.0, -9)); // largest subnormal
    EXPECT_EQ(e4m3_to_double(0x80), 0.0);
    EXPECT_TRUE(std::signbit(e4m3_to_double(0x80)));
    EXPECT_EQ(e5m2_to_double(0x7b), 57344.0);                 // largest finite e5m2
    EXPECT_EQ(e5m2_to_double(0x7c), INFINITY);
    EXPECT_EQ(e5m2_to_double(0xfc), -INFINITY);
    for (uint8_t nan : {0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff}) EXPECT_TRUE(std::isnan(e5m2_to_double(nan))) << int(nan);
    EXPECT_EQ(e5m2_to_double(0x3c), 1.0);
    EXPECT_EQ(e5m2_to_double(0x04), std::ldexp(1.0, -14));    // smallest normal
    EXPECT_EQ(e5m2_to_double(0x01), std::ldexp(1.0, -16));    // smallest subnormal
    EXPECT_EQ(e5m2_to_double(0x03), 3 * std::ldexp(1.0, -16));
    // Encoding: nearest, ties to even, saturation, NaN.
    EXPECT_EQ(double_to_e4m3(448.0), 0x7e);
    EXPECT_EQ(double_to_e4m3(464.0), 0x7e); // halfway past the largest: saturates
    EXPECT_EQ(double_to_e4m3(1e10), 0x7e);
    EXPECT_EQ(double_to_e4m3(-INFINITY), 0xfe);
    EXPECT_EQ(double_to_e4m3(NAN), 0x7f);
    EXPECT_EQ(double_to_e4m3(1.0625), 0x38); // halfway between 1 and 1.125: to even (1.0)
    EXPECT_EQ(double_to_e4m3(1.1875), 0x3a); // halfway between 1.125 and 1.25: to even (1.25)
    EXPECT_EQ(double_to_e4m3(std::ldexp(1.0, -10)), 0x00); // half the smallest subnormal: to even (zero)
    EXPECT_EQ(double_to_e4m3(std::ldexp(1.5, -10)), 0x01);
    EXPECT_EQ(double_to_e4m3(-std::ldexp(1.0, -12)), 0x80); // underflow keeps the sign
    EXPECT_EQ(double_to_e5m2(57344.0), 0x7b);
    EXPECT_EQ(double_to_e5m2(61440.0), 0x7b);
    EXPECT_EQ(double_to_e5m2(INFINITY), 0x7b);
    EXPECT_EQ(double_to_e5m2(-INFINITY), 0xfb);
    EXPECT_EQ(double_to_e5m2(NAN), 0x7f);
    EXPECT_EQ(double_to_e5m2(1.125), 0x3c); // halfway between 1 and 1.25: to even (1.0)
    EXPECT_EQ(double_to_e5m2(std::ldexp(1.0, -17)), 0x00);
}

TEST(Fp8, DecodeEveryCode) {
    for (const Fmt& f : kFormats) {
        for (int c = 0; c < 256; ++c) {
            const double want = fp8ref::decode(uint8_t(c), *f.ref);
            const float got = f.to_float(uint8_t(c));
            ASSERT_TRUE(same_value(got, want)) << f.name << " code " << c << ": " << got << " vs " << want;
            if (!std::isnan(want)) {
                ASSERT_EQ(std::signbit(got), std::signbit(want)) << f.name << " " << c;
            }
        }
    }
}

/* Every code's value, the midpoints between neighbours and one float ulp either side of them (where rounding
 * decides), the specials, and random floats across the whole range. */
TEST(Fp8, EncodeMatchesTheReference) {
    std::vector<float> probes = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e30f, -1e30f, 1e-30f, -1e-30f,
                                 bits_to_float(1), bits_to_float(0x80000001u), 464.0f, 480.0f, 61440.0f, 65536.0f};
    for (const Fmt& f : kFormats) {
        for (int c = 0; c < 256; ++c) {
            const double v = fp8ref::decode(uint8_t(c), *f.ref);
            if (std::isnan(v) || std::isinf(v)) continue;
            probes.push_back(float(v));
            const double next = fp8ref::decode(uint8_t(c + 1), *f.ref);
            if ((c & 0x7f) == 0x7f || std::isnan(next) || std::isinf(next)) continue;
            const float mid = float((v + next) / 2); // exact: at most 5 significant bits
            probes.push_back(mid);
            probes.push_back(std::nextafter(mid, INFINITY));
            probes.push_back(std::nextafter(mid, -INFINITY));
        }
    }
    std::mt19937 rng(12345);
    for (int i = 0; i < 200000; ++i) {
        uint32_t u = uint32_t(rng());
        probes.push_back(bits_to_float(u));
        // and a magnitude within the fp8 range (exponent field 100..143, about 2^-27 .. 2^16)
        probes.push_back(bits_to_float((u & 0x807fffffu) | (uint32_t(100 + u % 44) << 23)));
    }
    for (const Fmt& f : kFormats) {
        for (float p : probes) {
            const uint8_t want = fp8ref::encode(double(p), *f.ref);
            const uint8_t got = f.from_float(p);
            uint32_t bits;
            memcpy(&bits, &p, sizeof(bits));
            ASSERT_EQ(int(got), int(want)) << f.name << " of " << p << " (bits " << std::hex << bits << ")";
        }
    }
}

TEST(Fp8, EveryFiniteCodeRoundTrips) {
    for (const Fmt& f : kFormats) {
        for (int c = 0; c < 256; ++c) {
            const float v = f.to_float(uint8_t(c));
            if (std::isnan(v) || std::isinf(v)) continue;
            EXPECT_EQ(int(f.from_float(v)), c) << f.name;
        }
    }
}

namespace {

double ref_op(double a, double b, vcclRedOp_t op) {
    switch (op) {
    case vcclProd: return a * b;
    case vcclMax: return std::isnan(b) ? a : (a > b ? a : b); // the library's a > b ? a : b
    case vcclMin: return std::isnan(b) ? a : (a < b ? a : b);
    default: return a + b;
    }
}

/* Random codes, finite ones mostly, with the specials sprinkled in. */
std::vector<uint8_t> random_codes(size_t n, uint32_t seed, bool finite_only) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> v(n);
    for (auto& x : v) {
        x = uint8_t(rng());
        if (finite_only && (x & 0x7c) == 0x7c) x &= 0xbb; // away from e5m2's specials and e4m3's NaN
    }
    return v;
}

} // namespace

/* dst = a op b per element: both decoded exactly, combined (in double here, in float in the library: the sum
 * and product of two fp8 values round the same either way), rounded once to fp8. Sizes 0, 1, odd ones across
 * the library's 256-element blocks; out of place and in place on either input. */
TEST(Fp8, ReduceEveryOpAgainstTheReference) {
    const size_t sizes[] = {0, 1, 3, 255, 256, 257, 1031};
    for (const Fmt& f : kFormats) {
        for (vcclRedOp_t op : {vcclSum, vcclProd, vcclMax, vcclMin, vcclAvg}) {
            for (size_t n : sizes) {
                for (int place = 0; place < 3; ++place) { // 0: out of place, 1: dst == a, 2: dst == b
                    const bool finite = op == vcclMax || op == vcclMin; // a NaN operand's max is order-dependent
                    std::vector<uint8_t> a = random_codes(n, uint32_t(7 * n + op), finite);
                    std::vector<uint8_t> b = random_codes(n, uint32_t(11 * n + op + 1), finite);
                    std::vector<uint8_t> want(n);
                    for (size_t i = 0; i < n; ++i) {
                        want[i] = fp8ref::encode(
                            ref_op(fp8ref::decode(a[i], *f.ref), fp8ref::decode(b[i], *f.ref), op), *f.ref);
                    }
                    std::vector<uint8_t> out(n + 1, 0xa5); // one byte past the end that must stay
                    uint8_t* dst = place == 0 ? out.data() : place == 1 ? a.data() : b.data();
                    reduce_host(dst, a.data(), b.data(), n, f.type, op);
                    for (size_t i = 0; i < n; ++i) {
                        const double w = fp8ref::decode(want[i], *f.ref), g = fp8ref::decode(dst[i], *f.ref);
                        // NaN codes may differ (0x7F is the library's only one); anything else is bit-exact.
                        ASSERT_TRUE(std::isnan(w) ? std::isnan(g) : dst[i] == want[i])
                            << f.name << " " << op_name(op) << " n=" << n << " place=" << place << " i=" << i
                            << ": got 0x" << std::hex << int(dst[i]) << " want 0x" << int(want[i]);
                    }
                    if (place == 0) {
                        EXPECT_EQ(out[n], 0xa5);
                    }
                }
            }
        }
    }
}

/* Every pair of codes, every op, both formats: the library tables an op's 65,536 results, so each entry is
 * checked once against the reference here (Max and Min on pairs without a NaN: a NaN operand's result there
 * depends on the order). */
TEST(Fp8, ReduceEveryPairOfCodes) {
    std::vector<uint8_t> a(65536), b(65536), dst(65536);
    for (size_t i = 0; i < a.size(); ++i) {
        a[i] = uint8_t(i >> 8);
        b[i] = uint8_t(i);
    }
    for (const Fmt& f : kFormats) {
        for (vcclRedOp_t op : {vcclSum, vcclProd, vcclMax, vcclMin}) {
            reduce_host(dst.data(), a.data(), b.data(), a.size(), f.type, op);
            size_t wrong = 0;
            for (size_t i = 0; i < a.size(); ++i) {
                const double x = fp8ref::decode(a[i], *f.ref), y = fp8ref::decode(b[i], *f.ref);
                if ((op == vcclMax || op == vcclMin) && (std::isnan(x) || std::isnan(y))) continue;
                const uint8_t want = fp8ref::encode(ref_op(x, y, op), *f.ref);
                const bool nan = std::isnan(fp8ref::decode(want, *f.ref));
                if (nan ? std::isnan(fp8ref::decode(dst[i], *f.ref)) : dst[i] == want) continue;
                if (wrong++ < 4) {
                    ADD_FAILURE() << f.name << " " << op_name(op) << ": 0x" << std::hex << int(a[i]) << " op 0x"
                                  << int(b[i]) << " gave 0x" << int(dst[i]) << ", want 0x" << int(want);
                }
            }
            EXPECT_EQ(wrong, 0u) << f.name << " " << op_name(op);
        }
    }
}

TEST(Fp8, ReduceSaturatesAndKeepsNaN) {
    uint8_t a, b, d;
    // e4m3: 448 + 448 saturates at 448 (no infinity to overflow to), -448 - 448 at -448.
    a = b = 0x7e;
    reduce_host(&d, &a, &b, 1, vcclFloat8e4m3, vcclSum);
    EXPECT_EQ(d, 0x7e);
    a = b = 0xfe;
    reduce_host(&d, &a, &b, 1, vcclFloat8e4m3, vcclSum);
    EXPECT_EQ(d, 0xfe);
    a = 0x7e, b = 0x40; // 448 * 2
    reduce_host(&d, &a, &b, 1, vcclFloat8e4m3, vcclProd);
    EXPECT_EQ(d, 0x7e);
    a = 0x7f, b = 0x38; // NaN + 1
    reduce_host(&d, &a, &b, 1, vcclFloat8e4m3, vcclSum);
    EXPECT_EQ(d, 0x7f);
    // e5m2: 57344 + 57344 saturates at 57344; an infinity input gives the largest finite value too (CUDA's
    // __NV_SATFINITE conversion of the float sum); NaN stays NaN.
    a = b = 0x7b;
    reduce_host(&d, &a, &b, 1, vcclFloat8e5m2, vcclSum);
    EXPECT_EQ(d, 0x7b);
    a = 0x7c, b = 0x3c; // inf + 1
    reduce_host(&d, &a, &b, 1, vcclFloat8e5m2, vcclSum);
    EXPECT_EQ(d, 0x7b);
    a = 0xfc, b = 0x3c; // -inf + 1
    reduce_host(&d, &a, &b, 1, vcclFloat8e5m2, vcclSum);
    EXPECT_EQ(d, 0xfb);
    a = 0x7c, b = 0xfc; // inf - inf
    reduce_host(&d, &a, &b, 1, vcclFloat8e5m2, vcclSum);
    EXPECT_EQ(d, 0x7f);
    // Subnormal sums: 2^-9 + 2^-9 = 2^-8 exactly in e4m3; 2^-16 + 2^-16 in e5m2.
    a = b = 0x01;
    reduce_host(&d, &a, &b, 1, vcclFloat8e4m3, vcclSum);
    EXPECT_EQ(d, 0x02);
    reduce_host(&d, &a, &b, 1, vcclFloat8e5m2, vcclSum);
    EXPECT_EQ(d, 0x02);
    // 1 + 2^-4 is halfway between e4m3's 1 and 1.125: the float sum rounds once, to even.
    a = 0x38, b = 0x18; // 1.0 and 2^-4
    reduce_host(&d, &a, &b, 1, vcclFloat8e4m3, vcclSum);
    EXPECT_EQ(d, 0x38);
}

/* Sizes below and above the library's threshold for tabling a map's 256 results (512 elements). */
TEST(Fp8, AverageAndPreMulAgainstTheReference) {
    for (const Fmt& f : kFormats) {
        for (int nranks : {1, 2, 3, 7, 64}) {
            for (size_t n : {size_t(0), size_t(1), size_t(257), size_t(1031)}) {
                std::vector<uint8_t> buf = random_codes(n, uint32_t(n + nranks), false), orig = buf;
                scale_avg_host(buf.data(), n, f.type, nranks);
                for (size_t i = 0; i < n; ++i) {
                    const double x = fp8ref::decode(orig[i], *f.ref);
                    const uint8_t want = nranks <= 1 ? orig[i] : fp8ref::encode(x / nranks, *f.ref);
                    ASSERT_TRUE(std::isnan(x) ? std::isnan(fp8ref::decode(buf[i], *f.ref)) : buf[i] == want)
                        << f.name << " /" << nranks << " i=" << i;
                }
            }
        }
        for (uint8_t scalar : {uint8_t(0x38), uint8_t(0x40), uint8_t(0xb0), uint8_t(0x01), uint8_t(0x7b)}) {
            for (size_t n : {size_t(0), size_t(1), size_t(301), size_t(1031)}) {
                std::vector<uint8_t> src = random_codes(n, uint32_t(n * 3 + scalar), false), dst(n, 0);
                premul_host(dst.data(), src.data(), n, f.type, scalar);
                for (size_t i = 0; i < n; ++i) {
                    const double p = fp8ref::decode(src[i], *f.ref) * fp8ref::decode(scalar, *f.ref);
                    ASSERT_TRUE(std::isnan(p) ? std::isnan(fp8ref::decode(dst[i], *f.ref))
                                              : dst[i] == fp8ref::encode(p, *f.ref))
                        << f.name << " scalar 0x" << std::hex << int(scalar) << " i=" << std::dec << i;
                }
                premul_host(src.data(), src.data(), n, f.type, scalar); // in place gives the same
                EXPECT_EQ(src, dst);
            }
        }
    }
}
