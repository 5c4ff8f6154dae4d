/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * PreMulSum (vcclRedOpCreatePreMulSum / vcclRedOpDestroy) on host memory: AllReduce, Reduce (first and last
 * root) and ReduceScatter of every datatype, counts 0 to 65537, in and out of place, every rank with its own
 * scalar; two ops in one group; the scalar read once at creation; the op's life cycle and bad input.
 *
 * Inputs are small integers and the scalars 1, 2, 3 (integers) or 0.5, 1, 1.5 (floating point), so every
 * product and sum is exact in every type: the reference (computed here in int64 and double, from the inputs
 * only) must match bit for bit after wrapping or rounding to the type. The device-memory side runs in
 * tests/gpu (GpuPreMulSum).
 */
#include <sstream>

#include "mpi_gtest_main.h"
#include "test_util.h"

using namespace vtest;

namespace {

int64_t input(int r, size_t i, vcclDataType_t t) {
    uint64_t h = uint64_t(r) * 37u + uint64_t(i) * 11u + uint64_t(t) * 5u;
    // FP8: 1 on at most two ranks of 8 per element (0 elsewhere), so that every partial sum of the products
    // (0.5, 1, 1.5) stays exact, in e5m2 too.
    if (is_fp8(t)) return (i + size_t(r)) % 4 == 0 ? 1 : 0;
    return is_unsigned(t) ? int64_t(h % 16u) : int64_t(h % 17u) - 8;
}

/* Rank r's scalar, doubled (integers: 2, 4, 6 stand for 1, 2, 3; floating point: 1, 2, 3 for 0.5, 1, 1.5). */
int64_t scalar_x2(int r, vcclDataType_t t) { return is_float(t) ? int64_t(r % 3 + 1) : 2 * int64_t(r % 3 + 1); }

/* One element of t holding rank r's scalar, in the low bytes of a uint64. */
uint64_t scalar_bits(int r, vcclDataType_t t) {
    uint64_t bits = 0;
    store_double(&bits, 0, t, double(scalar_x2(r, t)) / 2.0);
    return bits;
}

/* got[0..count) against sum over ranks of scalar_r * input(r, idx0 + i). */
bool check(const void* got, size_t count, size_t idx0, vcclDataType_t t, int n, const std::string& where,
           std::string* why) {
    std::vector<uint8_t> want(type_size(t));
    for (size_t i = 0; i < count; ++i) {
        int64_t sum_x2 = 0; // twice the exact sum: every scalar_x2 * input is even for integers
        for (int r = 0; r < n; ++r) sum_x2 += scalar_x2(r, t) * input(r, idx0 + i, t);
        if (is_float(t)) {
            store_double(want.data(), 0, t, double(sum_x2) / 2.0);
        } else {
            store_int(want.data(), 0, t, sum_x2 / 2); // wraps to the type
        }
        if (memcmp(static_cast<const uint8_t*>(got) + i * type_size(t), want.data(), type_size(t)) != 0) {
            std::ostringstream os;
            os << where << ": element " << i << " got " << load(got, i, t) << " want " << load(want.data(), 0, t);
            *why = os.str();
            return false;
        }
    }
    return true;
}

enum class Coll { AllReduce, Reduce, ReduceScatter };
const char* coll_name(Coll c) {
    return c == Coll::AllReduce ? "AllReduce" : c == Coll::Reduce ? "Reduce" : "ReduceScatter";
}

/* One call with `op` (rank's scalar) on host buffers; empty when right. */
std::string run(vcclComm_t comm, vcclRedOp_t op, Coll coll, vcclDataType_t t, size_t count, bool in_place, int root) {
    const int rank = world_rank(), n = world_size();
    const size_t es = type_size(t);
    const size_t in_count = coll == Coll::ReduceScatter ? count * size_t(n) : count;
    std::ostringstream label;
    label << coll_name(coll) << " " << type_name(t) << " count " << count << (in_place ? " in place" : "")
          << (coll == Coll::Reduce ? " root " + std::to_string(root) : "");
    GuardedBuffer send(in_count * es), recv(count * es);
    for (size_t i = 0; i < in_count; ++i) store_int(send.data(), i, t, input(rank, i, t));
    std::vector<uint8_t> orig(send.data(), send.data() + in_count * es);
    void* out = recv.data();
    if (in_place) out = coll == Coll::ReduceScatter ? send.data() + size_t(rank) * count * es : send.data();
    vcclResult_t rc = coll == Coll::AllReduce ? vcclAllReduce(send.data(), out, count, t, op, comm, nullptr)
                      : coll == Coll::Reduce  ? vcclReduce(send.data(), out, count, t, op, root, comm, nullptr)
                                              : vcclReduceScatter(send.data(), out, count, t, op, comm, nullptr);
    if (rc != vcclSuccess) return label.str() + ": returned " + result_str(rc) + ": " + vcclGetLastError(comm);
    std::string why;
    const size_t idx0 = coll == Coll::ReduceScatter ? size_t(rank) * count : 0;
    if (coll != Coll::Reduce || rank == root) {
        if (!check(out, count, idx0, t, n, label.str(), &why)) return why;
    } else if (in_place && memcmp(send.data(), orig.data(), orig.size()) != 0) {
        return label.str() + ": a non-root rank's buffer changed";
    }
    if (!in_place && memcmp(send.data(), orig.data(), orig.size()) != 0) return label.str() + ": sendbuff changed";
    if (!send.guards_intact() || !recv.guards_intact()) return label.str() + ": a guard zone was written";
    return "";
}

class PreMulSum : public ::testing::TestWithParam<vcclDataType_t> {};

TEST_P(PreMulSum, EveryCollectiveCountAndPlace) {
    vcclComm_t comm = shared_comm(CommKind::Mpi);
    ASSERT_ALL_RANKS(comm != nullptr);
    const vcclDataType_t t = GetParam();
    uint64_t bits = scalar_bits(world_rank(), t);
    vcclRedOp_t op = vcclSum;
    ASSERT_ALL_RANKS(vcclRedOpCreatePreMulSum(&op, &bits, t, vcclScalarHostImmediate, comm) == vcclSuccess);
    EXPECT_ALL_RANKS(int(op) >= int(vcclNumOps));
    std::string why;
    for (Coll coll : {Coll::AllReduce, Coll::Reduce, Coll::ReduceScatter}) {
        for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1023), size_t(65537)}) {
            for (bool in_place : {false, true}) {
                for (int root : {0, world_size() - 1}) {
                    if (coll != Coll::Reduce && root != 0) continue;
                    std::string w = run(comm, op, coll, t, count, in_place, root);
                    if (why.empty()) why = w;
                }
            }
        }
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    EXPECT_ALL_RANKS(vcclRedOpDestroy(op, comm) == vcclSuccess);
}

INSTANTIATE_TEST_SUITE_P(, PreMulSum, ::testing::ValuesIn(kAllTypes),
                         [](const ::testing::TestParamInfo<vcclDataType_t>& i) { return type_name(i.param); });

/* Two ops with different scalars in one group: each call keeps its own; and the host scalar is read once, at
 * creation (changing the variable afterwards changes nothing). */
TEST(PreMulSumOps, TwoOpsInOneGroupAndTheScalarReadAtCreation) {
    vcclComm_t comm = shared_comm(CommKind::Mpi);
    ASSERT_ALL_RANKS(comm != nullptr);
    const int n = world_size();
    float half = 0.5f, triple = 3.0f;
    vcclRedOp_t a = vcclSum, b = vcclSum;
    ASSERT_ALL_RANKS(vcclRedOpCreatePreMulSum(&a, &half, vcclFloat32, vcclScalarHostImmediate, comm) == vcclSuccess);
    ASSERT_ALL_RANKS(vcclRedOpCreatePreMulSum(&b, &triple, vcclFloat32, vcclScalarHostImmediate, comm) == vcclSuccess);
    EXPECT_ALL_RANKS(a != b);
    half = 100.0f; // read at creation: no effect
    const size_t count = 1031;
    std::vector<float> x(count), y1(count), y2(count);
    for (size_t i = 0; i < count; ++i) x[i] = float(int(i % 13) - 6 + world_rank());
    bool ok = vcclGroupStart() == vcclSuccess;
    ok = ok && vcclAllReduce(x.data(), y1.data(), count, vcclFloat32, a, comm, nullptr) == vcclSuccess;
    ok = ok && vcclAllReduce(x.data(), y2.data(), count, vcclFloat32, b, comm, nullptr) == vcclSuccess;
    ok = vcclGroupEnd() == vcclSuccess && ok;
    ASSERT_ALL_RANKS_WHY(ok, vcclGetLastError(comm));
    std::string why;
    for (size_t i = 0; i < count && why.empty(); ++i) {
        double sum = 0;
        for (int r = 0; r < n; ++r) sum += double(int(i % 13) - 6 + r);
        if (double(y1[i]) != 0.5 * sum || double(y2[i]) != 3.0 * sum) {
            why = "element " + std::to_string(i) + ": " + std::to_string(y1[i]) + ", " + std::to_string(y2[i]) +
                  " against " + std::to_string(0.5 * sum) + ", " + std::to_string(3.0 * sum);
        }
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    EXPECT_ALL_RANKS(vcclRedOpDestroy(a, comm) == vcclSuccess);
    EXPECT_ALL_RANKS(vcclRedOpDestroy(b, comm) == vcclSuccess);
}

/* A group runs its collectives in issue order, PreMulSum ones too: a PreMulSum call reading the output of the
 * call before it in the same group sees that output, not the buffer's old contents. */
TEST(PreMulSumOps, AGroupRunsInIssueOrder) {
    vcclComm_t comm = shared_comm(CommKind::Mpi);
    ASSERT_ALL_RANKS(comm != nullptr);
    const int n = world_size();
    double two = 2.0;
    vcclRedOp_t op = vcclSum;
    ASSERT_ALL_RANKS(vcclRedOpCreatePreMulSum(&op, &two, vcclFloat64, vcclScalarHostImmediate, comm) == vcclSuccess);
    const size_t count = 257;
    std::vector<double> x(count), y(count, 0.0), z(count, -1.0);
    for (size_t i = 0; i < count; ++i) x[i] = double(int(i % 9) + world_rank());
    bool ok = vcclGroupStart() == vcclSuccess;
    ok = ok && vcclAllReduce(x.data(), y.data(), count, vcclFloat64, vcclSum, comm, nullptr) == vcclSuccess;
    ok = ok && vcclAllReduce(y.data(), z.data(), count, vcclFloat64, op, comm, nullptr) == vcclSuccess;
    ok = vcclGroupEnd() == vcclSuccess && ok;
    ASSERT_ALL_RANKS_WHY(ok, vcclGetLastError(comm));
    std::string why;
    for (size_t i = 0; i < count && why.empty(); ++i) {
        double sum = 0;
        for (int r = 0; r < n; ++r) sum += double(int(i % 9) + r);
        const double want = 2.0 * double(n) * sum; // every rank's y is the sum
        if (z[i] != want) why = "element " + std::to_string(i) + ": " + std::to_string(z[i]) + " against " + std::to_string(want);
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    EXPECT_ALL_RANKS(vcclRedOpDestroy(op, comm) == vcclSuccess);
}

/* The op's life cycle and bad input: clear errors, never a crash. */
TEST(PreMulSumOps, BadInputAndLifeCycle) {
    vcclComm_t comm = make_comm(CommKind::Mpi);
    ASSERT_ALL_RANKS(comm != nullptr);
    float s = 2.0f, x[4] = {1, 2, 3, 4}, y[4] = {0, 0, 0, 0};
    vcclRedOp_t op = vcclSum;
    EXPECT_EQ(vcclRedOpCreatePreMulSum(nullptr, &s, vcclFloat32, vcclScalarHostImmediate, comm), vcclInvalidArgument);
    EXPECT_EQ(vcclRedOpCreatePreMulSum(&op, nullptr, vcclFloat32, vcclScalarHostImmediate, comm), vcclInvalidArgument);
    EXPECT_EQ(vcclRedOpCreatePreMulSum(&op, &s, vcclDataType_t(99), vcclScalarHostImmediate, comm), vcclInvalidArgument);
    EXPECT_EQ(vcclRedOpCreatePreMulSum(&op, &s, vcclFloat32, vcclScalarResidence_t(7), comm), vcclInvalidArgument);
    EXPECT_EQ(vcclRedOpCreatePreMulSum(&op, &s, vcclFloat32, vcclScalarHostImmediate, nullptr), vcclInvalidArgument);
    // A host address is not a device scalar.
    EXPECT_EQ(vcclRedOpCreatePreMulSum(&op, &s, vcclFloat32, vcclScalarDevice, comm), vcclInvalidArgument);
    EXPECT_NE(std::string(vcclGetLastError(comm)).find("not device memory"), std::string::npos)
        << vcclGetLastError(comm);

    // No op made yet: the first op value is no op of this communicator.
    EXPECT_EQ(vcclAllReduce(x, y, 4, vcclFloat32, vcclNumOps, comm, nullptr), vcclInvalidArgument);
    EXPECT_EQ(vcclRedOpDestroy(vcclSum, comm), vcclInvalidArgument);
    EXPECT_EQ(vcclRedOpDestroy(vcclNumOps, comm), vcclInvalidArgument);

    ASSERT_EQ(vcclRedOpCreatePreMulSum(&op, &s, vcclFloat32, vcclScalarHostImmediate, comm), vcclSuccess);
    // Another datatype than the op's.
    EXPECT_EQ(vcclAllReduce(x, y, 4, vcclFloat64, op, comm, nullptr), vcclInvalidArgument);
    EXPECT_NE(std::string(vcclGetLastError(comm)).find("was made for"), std::string::npos) << vcclGetLastError(comm);
    EXPECT_EQ(vcclRedOpDestroy(op, comm), vcclSuccess);
    EXPECT_EQ(vcclRedOpDestroy(op, comm), vcclInvalidArgument) << "destroyed twice";
    EXPECT_EQ(vcclAllReduce(x, y, 4, vcclFloat32, op, comm, nullptr), vcclInvalidArgument) << "used after destroy";

    // Slots are reused: many create/destroy cycles never run out.
    bool cycles_ok = true;
    vcclRedOp_t first = vcclSum;
    for (int i = 0; i < 1000 && cycles_ok; ++i) {
        vcclRedOp_t o = vcclSum;
        cycles_ok = vcclRedOpCreatePreMulSum(&o, &s, vcclFloat32, vcclScalarHostImmediate, comm) == vcclSuccess &&
                    vcclRedOpDestroy(o, comm) == vcclSuccess;
        if (i == 0) first = o;
        cycles_ok = cycles_ok && o == first;
    }
    EXPECT_TRUE(cycles_ok);

    // An op of another communicator is not this one's.
    vcclComm_t other = make_comm(CommKind::Mpi);
    ASSERT_ALL_RANKS(other != nullptr);
    vcclRedOp_t theirs = vcclSum;
    ASSERT_EQ(vcclRedOpCreatePreMulSum(&theirs, &s, vcclFloat32, vcclScalarHostImmediate, other), vcclSuccess);
    EXPECT_EQ(vcclAllReduce(x, y, 4, vcclFloat32, theirs, comm, nullptr), vcclInvalidArgument);
    EXPECT_EQ(vcclRedOpDestroy(theirs, comm), vcclInvalidArgument);
    EXPECT_EQ(vcclRedOpDestroy(theirs, other), vcclSuccess);
    EXPECT_EQ(vcclCommDestroy(other), vcclSuccess);

    // A destroyed communicator.
    EXPECT_EQ(vcclCommDestroy(comm), vcclSuccess);
    EXPECT_EQ(vcclRedOpCreatePreMulSum(&op, &s, vcclFloat32, vcclScalarHostImmediate, comm), vcclInvalidUsage);
    EXPECT_EQ(vcclRedOpDestroy(op, comm), vcclInvalidUsage);
}

} // namespace
