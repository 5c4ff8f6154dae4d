/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Host reductions against a scalar reference (every type x op, fp16/bf16 rounding, integer wrap, integer
 * average), block_range arithmetic, and VCCL_ALGO parsing.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "algo/algo.h"
#include "algo/device/reduce_pieces.h"
#include "transport/staging/staged_pieces.h"
#include "core/dtype.h"
#include "core/reduce.h"

using namespace vccl;

namespace {

template <typename T>
T scalar_op(T a, T b, vcclRedOp_t op) {
    // Reference arithmetic in a wide type, truncated back: wraps for integers, exact enough for floats.
    using W = typename std::conditional<std::is_floating_point<T>::value, double,
                                        typename std::conditional<std::is_signed<T>::value, int64_t, uint64_t>::type>::type;
    switch (op) {
    case vcclSum: case vcclAvg: return T(std::is_integral<T>::value ? W(uint64_t(W(a)) + uint64_t(W(b))) : W(a) + W(b));
    case vcclProd: return T(std::is_integral<T>::value ? W(uint64_t(W(a)) * uint64_t(W(b))) : W(a) * W(b));
    case vcclMax: return a > b ? a : b;
    case vcclMin: return a < b ? a : b;
    default: return T();
    }
}

template <typename T>
void check_type(vcclDataType_t type, const std::vector<T>& a, const std::vector<T>& b) {
    for (vcclRedOp_t op : {vcclSum, vcclProd, vcclMax, vcclMin, vcclAvg}) {
        std::vector<T> dst(a.size());
        reduce_host(dst.data(), a.data(), b.data(), a.size(), type, op);
        for (size_t i = 0; i < a.size(); ++i) {
            T want = scalar_op<T>(a[i], b[i], op);
            EXPECT_EQ(memcmp(&dst[i], &want, sizeof(T)), 0)
                << dtype_name(type) << " " << op_name(op) << " element " << i << ": " << +a[i] << ", " << +b[i]
                << " -> " << +dst[i] << " want " << +want;
        }
        // In place (dst aliases a) gives the same.
        std::vector<T> inplace = a;
        reduce_host(inplace.data(), inplace.data(), b.data(), a.size(), type, op);
        EXPECT_EQ(inplace, dst) << dtype_name(type) << " " << op_name(op);
    }
}

template <typename T>
std::vector<T> pattern(size_t n, uint64_t seed) {
    std::vector<T> v(n);
    uint64_t x = seed;
    for (size_t i = 0; i < n; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        if (std::is_floating_point<T>::value) {
            v[i] = T(double(int64_t(x >> 40) - (1 << 23)) / 4096.0);
        } else {
            v[i] = T(x >> 17); // full range: exercises wrap-around
        }
    }
    return v;
}

TEST(ReduceHost, IntegerAndFloatTypesMatchScalarReference) {
    const size_t n = 1037; // not a multiple of any vector width
    check_type<int8_t>(vcclInt8, pattern<int8_t>(n, 1), pattern<int8_t>(n, 2));
    check_type<uint8_t>(vcclUint8, pattern<uint8_t>(n, 3), pattern<uint8_t>(n, 4));
    check_type<int32_t>(vcclInt32, pattern<int32_t>(n, 5), pattern<int32_t>(n, 6));
    check_type<uint32_t>(vcclUint32, pattern<uint32_t>(n, 7), pattern<uint32_t>(n, 8));
    check_type<int64_t>(vcclInt64, pattern<int64_t>(n, 9), pattern<int64_t>(n, 10));
    check_type<uint64_t>(vcclUint64, pattern<uint64_t>(n, 11), pattern<uint64_t>(n, 12));
    check_type<float>(vcclFloat32, pattern<float>(n, 13), pattern<float>(n, 14));
    check_type<double>(vcclFloat64, pattern<double>(n, 15), pattern<double>(n, 16));
}

TEST(ReduceHost, IntegerOverflowWraps) {
    int32_t a32[2] = {std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()};
    int32_t b32[2] = {1, -1}, d32[2];
    reduce_host(d32, a32, b32, 2, vcclInt32, vcclSum);
    EXPECT_EQ(d32[0], std::numeric_limits<int32_t>::min());
    EXPECT_EQ(d32[1], std::numeric_limits<int32_t>::max());
    uint8_t a8 = 255, b8 = 1, d8;
    reduce_host(&d8, &a8, &b8, 1, vcclUint8, vcclSum);
    EXPECT_EQ(d8, 0);
    int8_t x = 16, y = 16, z;
    reduce_host(&z, &x, &y, 1, vcclInt8, vcclProd);
    EXPECT_EQ(z, 0); // 256 mod 256
    int64_t p = int64_t(1) << 62, q = 4, r;
    reduce_host(&r, &p, &q, 1, vcclInt64, vcclProd);
    EXPECT_EQ(r, 0);
    uint64_t u = ~0ull, v = 2, w;
    reduce_host(&w, &u, &v, 1, vcclUint64, vcclSum);
    EXPECT_EQ(w, 1u);
}

/* fp16/bf16: computed in float, rounded once to nearest even. */
template <uint16_t (*Enc)(float), float (*Dec)(uint16_t)>
void check_16bit(vcclDataType_t type) {
    std::vector<uint16_t> a, b;
    for (int i = -300; i <= 300; ++i) {
        a.push_back(Enc(float(i) * 0.37f));
        b.push_back(Enc(float(i * 7 % 113) * 1.9f));
    }
    a.push_back(Enc(INFINITY));
    b.push_back(Enc(1.0f));
    for (vcclRedOp_t op : {vcclSum, vcclProd, vcclMax, vcclMin, vcclAvg}) {
        std::vector<uint16_t> d(a.size());
        reduce_host(d.data(), a.data(), b.data(), a.size(), type, op);
        for (size_t i = 0; i < a.size(); ++i) {
            float fa = Dec(a[i]), fb = Dec(b[i]);
            float r = op == vcclProd ? fa * fb : op == vcclMax ? (fa > fb ? fa : fb)
                                             : op == vcclMin ? (fa < fb ? fa : fb) : fa + fb;
            EXPECT_EQ(d[i], Enc(r)) << dtype_name(type) << " " << op_name(op) << " " << fa << ", " << fb;
        }
    }
}

TEST(ReduceHost, HalfAndBfloat16RoundOnceToNearestEven) {
    check_16bit<float_to_half, half_to_float>(vcclFloat16);
    check_16bit<float_to_bf16, bf16_to_float>(vcclBfloat16);

    // Ties: 1 + 2^-11 is halfway between 1 and the next fp16 (1 + 2^-10): rounds to even (1).
    uint16_t one = float_to_half(1.0f), tiny = float_to_half(std::ldexp(1.0f, -11)), d;
    reduce_host(&d, &one, &tiny, 1, vcclFloat16, vcclSum);
    EXPECT_EQ(d, one);
    // (1 + 2^-10) + 2^-11 is halfway to 1 + 2^-9: rounds up to the even mantissa.
    uint16_t odd = float_to_half(1.0f + std::ldexp(1.0f, -10));
    reduce_host(&d, &odd, &tiny, 1, vcclFloat16, vcclSum);
    EXPECT_EQ(half_to_float(d), 1.0f + std::ldexp(1.0f, -9));
    // bf16: 256 + 1 is a tie between 256 and 258 -> 256; 258 + 1 -> 260.
    uint16_t b256 = float_to_bf16(256.f), b1 = float_to_bf16(1.f), b258 = float_to_bf16(258.f);
    reduce_host(&d, &b256, &b1, 1, vcclBfloat16, vcclSum);
    EXPECT_EQ(bf16_to_float(d), 256.f);
    reduce_host(&d, &b258, &b1, 1, vcclBfloat16, vcclSum);
    EXPECT_EQ(bf16_to_float(d), 260.f);
    // Overflow to infinity in fp16.
    uint16_t big = float_to_half(60000.f);
    reduce_host(&d, &big, &big, 1, vcclFloat16, vcclSum);
    EXPECT_TRUE(std::isinf(half_to_float(d)));
}

/* The reduction widens and narrows with its own branch-free conversions: they must agree bit for bit with
 * dtype.h's on every input (all 2^16 values against +0, random pairs for the rounding of sums/products,
 * subnormals, overflow and NaN included). */
template <uint16_t (*Enc)(float), float (*Dec)(uint16_t)>
void check_16bit_exhaustive(vcclDataType_t type) {
    std::vector<uint16_t> all(65536), zero(65536, 0), d(65536);
    for (size_t i = 0; i < all.size(); ++i) all[i] = uint16_t(i);
    reduce_host(d.data(), all.data(), zero.data(), all.size(), type, vcclSum);
    size_t bad = 0;
    for (size_t i = 0; i < all.size(); ++i) {
        if (d[i] != Enc(Dec(all[i]) + 0.0f) && bad++ < 5) ADD_FAILURE() << dtype_name(type) << " 0x" << std::hex << i;
    }
    uint64_t x = 12345;
    std::vector<uint16_t> a(1 << 18), b(1 << 18), r(1 << 18);
    for (size_t i = 0; i < a.size(); ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        a[i] = uint16_t(x >> 48);
        b[i] = uint16_t(x >> 32);
    }
    for (vcclRedOp_t op : {vcclSum, vcclProd}) {
        reduce_host(r.data(), a.data(), b.data(), a.size(), type, op);
        for (size_t i = 0; i < a.size(); ++i) {
            float f = op == vcclSum ? Dec(a[i]) + Dec(b[i]) : Dec(a[i]) * Dec(b[i]);
            // NaN + NaN: which operand's sign survives depends on operand order; any NaN is right.
            if (std::isnan(f) && std::isnan(Dec(r[i]))) continue;
            if (r[i] != Enc(f) && bad++ < 10) {
                ADD_FAILURE() << dtype_name(type) << " " << op_name(op) << " 0x" << std::hex << a[i] << ", 0x" << b[i]
                              << " -> 0x" << r[i] << " want 0x" << Enc(f);
            }
        }
    }
    EXPECT_EQ(bad, 0u);
}

TEST(ReduceHost, HalfAndBfloat16ConversionsMatchDtypeExhaustively) {
    check_16bit_exhaustive<float_to_half, half_to_float>(vcclFloat16);
    check_16bit_exhaustive<float_to_bf16, bf16_to_float>(vcclBfloat16);
}

/* reduce_host's vector path (where the processor has one) against its portable loops, bit for bit: every op, both
 * 16-bit types, random codes (NaN, infinity, subnormals included), counts that end inside a vector, in place on
 * either input. Avg's division and PreMulSum's product against the scalar reference, NaN results as NaN. */
template <uint16_t (*Enc)(float), float (*Dec)(uint16_t)>
void check_16bit_vector_path(vcclDataType_t type) {
    uint64_t x = 987654321;
    const size_t n = 4096 + 13;
    std::vector<uint16_t> a(n), b(n);
    for (size_t i = 0; i < n; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        a[i] = uint16_t(x >> 48);
        b[i] = uint16_t(x >> 24);
    }
    size_t bad = 0;
    for (vcclRedOp_t op : {vcclSum, vcclProd, vcclMax, vcclMin, vcclAvg}) {
        for (size_t count : {size_t(1), size_t(7), size_t(8), size_t(9), size_t(1031), n}) {
            std::vector<uint16_t> want(count), got(count), in_a(a.begin(), a.begin() + count), in_b(b.begin(), b.begin() + count);
            reduce_16bit_portable(want.data(), a.data(), b.data(), count, type, op);
            reduce_host(got.data(), a.data(), b.data(), count, type, op);
            reduce_host(in_a.data(), in_a.data(), b.data(), count, type, op);
            reduce_host(in_b.data(), a.data(), in_b.data(), count, type, op);
            for (size_t i = 0; i < count; ++i) {
                if ((got[i] != want[i] || in_a[i] != want[i] || in_b[i] != want[i]) && bad++ < 10) {
                    ADD_FAILURE() << dtype_name(type) << " " << op_name(op) << " count " << count << " 0x" << std::hex
                                  << a[i] << ", 0x" << b[i] << " -> 0x" << got[i] << " / 0x" << in_a[i] << " / 0x"
                                  << in_b[i] << " want 0x" << want[i];
                }
            }
        }
    }
    for (size_t count : {size_t(5), size_t(1031), n}) {
        std::vector<uint16_t> avg(a.begin(), a.begin() + count), pre(count);
        scale_avg_host(avg.data(), count, type, 3);
        const uint16_t scalar = Enc(0.37f);
        premul_host(pre.data(), a.data(), count, type, scalar);
        for (size_t i = 0; i < count; ++i) {
            const float q = Dec(a[i]) / 3.0f, p = Dec(a[i]) * Dec(scalar);
            if (!(std::isnan(q) && std::isnan(Dec(avg[i]))) && avg[i] != Enc(q) && bad++ < 10) {
                ADD_FAILURE() << dtype_name(type) << " avg 0x" << std::hex << a[i] << " -> 0x" << avg[i];
            }
            if (!(std::isnan(p) && std::isnan(Dec(pre[i]))) && pre[i] != Enc(p) && bad++ < 10) {
                ADD_FAILURE() << dtype_name(type) << " premul 0x" << std::hex << a[i] << " -> 0x" << pre[i];
            }
        }
    }
    EXPECT_EQ(bad, 0u);
}

TEST(ReduceHost, HalfAndBfloat16VectorPathMatchesThePortableOne) {
    check_16bit_vector_path<float_to_half, half_to_float>(vcclFloat16);
    check_16bit_vector_path<float_to_bf16, bf16_to_float>(vcclBfloat16);
}

TEST(ReduceHost, AvgScalingIntegerDivision) {
    int32_t i32[4] = {-7, 7, 8, std::numeric_limits<int32_t>::min()};
    scale_avg_host(i32, 4, vcclInt32, 2);
    EXPECT_EQ(i32[0], -3); // truncation toward zero
    EXPECT_EQ(i32[1], 3);
    EXPECT_EQ(i32[2], 4);
    EXPECT_EQ(i32[3], std::numeric_limits<int32_t>::min() / 2);
    uint8_t u8[2] = {255, 7};
    scale_avg_host(u8, 1, vcclUint8, 300); // more ranks than the type can count
    EXPECT_EQ(u8[0], 0);
    scale_avg_host(u8 + 1, 1, vcclUint8, 2);
    EXPECT_EQ(u8[1], 3);
    int8_t i8[2] = {127, -128};
    scale_avg_host(i8, 2, vcclInt8, 100);
    EXPECT_EQ(i8[0], 1);
    EXPECT_EQ(i8[1], -1);
    uint64_t u64 = ~0ull;
    scale_avg_host(&u64, 1, vcclUint64, 3);
    EXPECT_EQ(u64, ~0ull / 3);
    float f = 1.0f;
    scale_avg_host(&f, 1, vcclFloat32, 3);
    EXPECT_EQ(f, 1.0f / 3.0f);
    double dd = 1.0;
    scale_avg_host(&dd, 1, vcclFloat64, 3);
    EXPECT_EQ(dd, 1.0 / 3.0);
    uint16_t h = float_to_half(1.0f);
    scale_avg_host(&h, 1, vcclFloat16, 3);
    EXPECT_EQ(h, float_to_half(1.0f / 3.0f));
    uint16_t b = float_to_bf16(10.0f);
    scale_avg_host(&b, 1, vcclBfloat16, 4);
    EXPECT_EQ(bf16_to_float(b), 2.5f);
    int32_t one = 5;
    scale_avg_host(&one, 1, vcclInt32, 1);
    EXPECT_EQ(one, 5);
}

TEST(ReduceHost, ZeroCountTouchesNothing) {
    int32_t a = 1, b = 2, d = 42;
    reduce_host(&d, &a, &b, 0, vcclInt32, vcclSum);
    EXPECT_EQ(d, 42);
}

// ---------------------------------------------------------------------------------------------------

TEST(BlockRange, CoversCountContiguouslyWithNearlyEqualBlocks) {
    for (size_t count : {size_t(0), size_t(1), size_t(2), size_t(7), size_t(8), size_t(9), size_t(1000),
                         size_t(70001)}) {
        for (int blocks : {1, 2, 3, 5, 8, 64}) {
            size_t expect_begin = 0, base = count / size_t(blocks);
            for (int i = 0; i < blocks; ++i) {
                size_t b, e;
                block_range(count, blocks, i, &b, &e);
                EXPECT_EQ(b, expect_begin) << count << "/" << blocks << " block " << i;
                EXPECT_GE(e, b);
                size_t len = e - b;
                EXPECT_TRUE(len == base || len == base + 1);
                EXPECT_EQ(len == base + 1, size_t(i) < count % size_t(blocks)) << "the first blocks are larger";
                expect_begin = e;
            }
            EXPECT_EQ(expect_begin, count);
        }
    }
    size_t b, e;
    block_range(3, 8, 5, &b, &e); // fewer elements than blocks: empty at the end
    EXPECT_EQ(b, 3u);
    EXPECT_EQ(e, 3u);
}

// ---------------------------------------------------------------------------------------------------

struct Parsed {
    bool ok;
    const Algorithm* chosen[int(CollType::kCount)];
    std::string error;
};

Parsed parse(const char* spec) {
    Parsed p;
    char error[1024] = "";
    p.ok = algo_parse_override(spec, p.chosen, error, sizeof(error));
    p.error = error;
    return p;
}

const char* chosen_name(const Parsed& p, CollType c) {
    return p.chosen[int(c)] == nullptr ? "(none)" : p.chosen[int(c)]->name;
}

TEST(AlgoOverride, ParsesValidSpecs) {
    Parsed p = parse("allreduce:ring,bcast:chain");
    EXPECT_TRUE(p.ok) << p.error;
    EXPECT_STREQ(chosen_name(p, CollType::AllReduce), "ring");
    EXPECT_STREQ(chosen_name(p, CollType::Broadcast), "chain");
    EXPECT_STREQ(chosen_name(p, CollType::Reduce), "(none)");
    EXPECT_EQ(p.chosen[int(CollType::AllReduce)]->coll, CollType::AllReduce);

    p = parse(" AllReduce : recursive_doubling , reduce:binomial,, broadcast:binomial ,reducescatter:ring,"
              "allgather:ring,alltoall:pairwise");
    EXPECT_TRUE(p.ok) << p.error;
    EXPECT_STREQ(chosen_name(p, CollType::AllReduce), "recursive_doubling");
    EXPECT_STREQ(chosen_name(p, CollType::Reduce), "binomial");
    EXPECT_STREQ(chosen_name(p, CollType::Broadcast), "binomial");
    EXPECT_STREQ(chosen_name(p, CollType::AlltoAll), "pairwise");

    p = parse("");
    EXPECT_TRUE(p.ok);
    for (int c = 0; c < int(CollType::kCount); ++c) EXPECT_EQ(p.chosen[c], nullptr);
    p = parse("allreduce:ring,allreduce:recursive_doubling"); // the last one wins
    EXPECT_STREQ(chosen_name(p, CollType::AllReduce), "recursive_doubling");
}

TEST(AlgoOverride, UnknownAlgorithmListsValidNamesAndKeepsTheRest) {
    Parsed p = parse("allreduce:tree,broadcast:chain");
    EXPECT_FALSE(p.ok);
    EXPECT_NE(p.error.find("tree"), std::string::npos) << p.error;
    EXPECT_NE(p.error.find("ring"), std::string::npos) << p.error;
    EXPECT_NE(p.error.find("recursive_doubling"), std::string::npos) << p.error;
    EXPECT_EQ(p.chosen[int(CollType::AllReduce)], nullptr) << "falls back to the default";
    EXPECT_STREQ(chosen_name(p, CollType::Broadcast), "chain");
}

TEST(AlgoOverride, UnknownCollectiveAndMalformedEntries) {
    Parsed p = parse("allscatter:ring");
    EXPECT_FALSE(p.ok);
    EXPECT_NE(p.error.find("allscatter"), std::string::npos) << p.error;
    EXPECT_NE(p.error.find("allreduce"), std::string::npos) << "lists the collectives: " << p.error;
    for (int c = 0; c < int(CollType::kCount); ++c) EXPECT_EQ(p.chosen[c], nullptr);

    p = parse("ring");
    EXPECT_FALSE(p.ok);
    EXPECT_NE(p.error.find("COLLECTIVE:ALGORITHM"), std::string::npos) << p.error;

    p = parse("reduce:ring"); // ring exists, but not for reduce
    EXPECT_FALSE(p.ok);
    EXPECT_NE(p.error.find("chain"), std::string::npos) << p.error;

    char tiny[8];
    const Algorithm* chosen[int(CollType::kCount)];
    EXPECT_FALSE(algo_parse_override("nope:nope", chosen, tiny, sizeof(tiny)));
    EXPECT_EQ(strlen(tiny), sizeof(tiny) - 1) << "truncated, terminated";
}

TEST(AlgoOverride, CollectiveNames) {
    EXPECT_STREQ(coll_name(CollType::AllReduce), "allreduce");
    EXPECT_STREQ(coll_name(CollType::Broadcast), "broadcast");
    EXPECT_STREQ(coll_name(CollType::Reduce), "reduce");
    EXPECT_STREQ(coll_name(CollType::AllGather), "allgather");
    EXPECT_STREQ(coll_name(CollType::ReduceScatter), "reducescatter");
    EXPECT_STREQ(coll_name(CollType::AlltoAll), "alltoall");
}

} // namespace

/* Staged collectives cut into pieces (transport/staging/staged_pieces.h): every element in exactly one piece, in order, no
 * piece over the chunk (unless one element is larger, or the chunk would give over kMaxStagedPieces pieces),
 * and the piece counts a rank's peers compute alike. */
TEST(StagedPieces, CoverEveryElementOnceWithinTheChunk) {
    struct Case {
        size_t count, elem;
        uint64_t chunk;
        size_t pieces;
    };
    const Case cases[] = {
        {0, 4, 4096, 1},                       // empty: one empty piece
        {1, 8, 4096, 1},
        {1024, 4, 4096, 1},                    // exactly one chunk
        {1025, 4, 4096, 2},                    // one element over
        {1000003, 4, 4 << 20, 1},              // under 4 MiB
        {(64u << 20) / 2 + 7, 2, 4 << 20, 17}, // fp16, odd, a short last piece
        {10, 8, 12, 10},                       // chunk not a multiple of the element: 1 element each
        {10, 8, 3, 10},                        // chunk smaller than an element: still 1 element each
        {12345, 8, 0, 1},                      // 0: never cut
        {(256u << 20) / 4, 4, 4 << 20, 64},    // 256 MiB in 4 MiB pieces: exactly the most
        {(256u << 20) / 4 + 1, 4, 4 << 20, 64}, // one more element: larger pieces, still 64
        {(1u << 30) / 4, 4, 4 << 20, 64},      // 1 GiB: 16 MiB pieces
        {1000000, 4, 2048, 64},                // tiny chunk, many elements
        {kMaxStagedPieces * 3 - 1, 1, 1, 64},  // just under 3 elements a piece
    };
    for (const Case& c : cases) {
        std::vector<ElemPiece> pieces = staged_pieces(c.count, c.elem, c.chunk);
        SCOPED_TRACE(std::to_string(c.count) + " x " + std::to_string(c.elem) + " B, chunk " + std::to_string(c.chunk));
        EXPECT_EQ(pieces.size(), c.pieces);
        size_t per_chunk = c.chunk / c.elem > 0 ? size_t(c.chunk / c.elem) : 1;
        size_t per_cap = (c.count + kMaxStagedPieces - 1) / kMaxStagedPieces;
        size_t most = c.chunk == 0 ? c.count : std::max(per_chunk, per_cap);
        size_t next = 0;
        for (const ElemPiece& p : pieces) {
            EXPECT_EQ(p.first, next);
            if (c.count > 0) {
                EXPECT_GE(p.count, 1u);
            }
            EXPECT_LE(p.count, most);
            next += p.count;
        }
        EXPECT_EQ(next, c.count);
    }
}

/* How device reductions are cut into pieces (algo/device/reduce_pieces.h), against the counts worked out by hand from the
 * rules in VCCL_REDUCE_PIPELINE_BYTES and VCCL_REDUCE_SCRATCH_BYTES. */
TEST(ReducePieces, PieceCountsFollowTheSettings) {
    const size_t M = size_t(1) << 20, G = size_t(1) << 30;
    // No limit on the scratch: 1 below twice the piece size, then 2, then one per twice the piece size.
    EXPECT_EQ(vccl::reduce_pieces(63 * M, 2, 32 * M, 8, 0), 1);
    EXPECT_EQ(vccl::reduce_pieces(64 * M, 2, 32 * M, 8, 0), 2);
    EXPECT_EQ(vccl::reduce_pieces(128 * M, 2, 32 * M, 8, 0), 2);
    EXPECT_EQ(vccl::reduce_pieces(256 * M, 2, 32 * M, 8, 0), 4);
    EXPECT_EQ(vccl::reduce_pieces(G, 2, 32 * M, 8, 0), 8);
    EXPECT_EQ(vccl::reduce_pieces(G, 2, 32 * M, 2, 0), 2); // AllReduce's cap
    EXPECT_EQ(vccl::reduce_pieces(64 * G, 2, 32 * M, 8, 0), 8);
    // One piece whatever the limit: pipelining off, one rank, or too small.
    EXPECT_EQ(vccl::reduce_pieces(G, 2, 0, 2, 1), 1);
    EXPECT_EQ(vccl::reduce_pieces(G, 1, 32 * M, 2, 1), 1);
    EXPECT_EQ(vccl::reduce_pieces(10 * M, 8, 32 * M, 2, 1), 1);
    // The default limit (256 MiB) on AllReduce's 2 pieces: 2 ranks, 512 MiB fits (2 x 128 MiB parts), 1 GiB needs
    // 4 pieces (2 x 128 MiB); 8 ranks, 1 GiB: blocks of 128 MiB, 4 pieces make 2 x 32 MiB x 7 = 448 MiB, 8 pieces
    // 224 MiB.
    EXPECT_EQ(vccl::reduce_pieces(512 * M, 2, 32 * M, 2, 256 * M), 2);
    EXPECT_EQ(vccl::reduce_pieces(G, 2, 32 * M, 2, 256 * M), 4);
    EXPECT_EQ(vccl::reduce_pieces(G, 8, 32 * M, 2, 256 * M), 8);
    // Past 8 pieces the limit cannot be kept: 8 pieces, and more scratch than it says.
    EXPECT_EQ(vccl::reduce_pieces(16 * G, 2, 32 * M, 2, 256 * M), 8);
    EXPECT_GT(vccl::reduce_pieces_scratch(16 * G, 2, 8), 256 * M);
}

TEST(ReducePieces, ScratchHoldsTwoHalvesOfTheLargestParts) {
    const size_t M = size_t(1) << 20;
    EXPECT_EQ(vccl::reduce_pieces_scratch(512 * M, 2, 2), 256 * M);     // 2 x 128 MiB x 1 peer
    EXPECT_EQ(vccl::reduce_pieces_scratch(512 * M, 4, 2), 3 * 128 * M); // blocks of 128 MiB: 2 x 64 MiB x 3 peers
    // Uneven sizes round up: 1001 bytes over 3 ranks are blocks of at most 334, parts of at most 84 in 4 pieces.
    EXPECT_EQ(vccl::reduce_pieces_scratch(1001, 3, 4), size_t(2 * 84 * 2));
    EXPECT_EQ(vccl::reduce_pieces_scratch(1001, 1, 4), 0u);
    // Every count the limit picks keeps the scratch within it whenever fewer than 8 pieces are enough.
    for (size_t bytes : {100 * M, 300 * M, 700 * M, 1500 * M, 3000 * M}) {
        for (int n : {2, 3, 4, 8}) {
            const int p = vccl::reduce_pieces(bytes, n, 32 * M, 2, 256 * M);
            if (p > 1 && p < vccl::kReduceMaxPieces) {
                EXPECT_LE(vccl::reduce_pieces_scratch(bytes, n, p), 256 * M) << bytes << " bytes, " << n << " ranks";
            }
            if (p > 2) { // and no fewer would have done
                EXPECT_GT(vccl::reduce_pieces_scratch(bytes, n, p - 1), 256 * M) << bytes << " bytes, " << n << " ranks";
            }
        }
    }
}
