/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Collectives across ranks: AllReduce, Broadcast (every root), Reduce (every root), AllGather,
 * ReduceScatter, AlltoAll for every datatype and op, many counts, out-of-place and in-place, on a
 * communicator from vcclCommInitMPI and on one from the TCP unique id (vcclGetUniqueId + vcclCommInitRank).
 *
 * Inputs are small integers (a deterministic function of rank, index and datatype), so every result is
 * exact in every type; the expected value is computed here in int64/double, independently of the library,
 * then wrapped or rounded to the type. Every buffer carries guard zones that must stay untouched; send
 * buffers must stay unchanged; regions a call must not write (Reduce's recvbuff off the root) too.
 *
 * VCCL_TEST_LARGE=0 skips the large (up to 64 MiB) float-sum cases.
 */
#include <algorithm>
#include <cinttypes>
#include <cstdlib>
#include <sstream>
#include <tuple>

#include "mpi_gtest_main.h"
#include "test_util.h"

using namespace vtest;

namespace {

/* ---------------------------------------------------------------------------------------------- */
/* Inputs and reference                                                                             */

/* Reduction input of rank r at global index i: small integers, exact in every type.
 * Prod: mostly 1, sparse 2 (and -1 for signed types), so that the product of 8 ranks is at most 2^8. */
int64_t red_input(int r, size_t i, vcclDataType_t t, vcclRedOp_t op) {
    uint64_t h = uint64_t(r) * 37u + uint64_t(i) * 11u + uint64_t(t) * 5u;
    if (op == vcclProd) {
        if ((h * 7u + uint64_t(r)) % 13u == 0) return 2;
        if (!is_unsigned(t) && (uint64_t(i) + uint64_t(r) * 3u) % 5u == 0) return -1;
        return 1;
    }
    if (is_unsigned(t)) return int64_t(h % 16u);
    // FP8: -1, 0, 1, so that every partial sum of up to 8 ranks is exact (e5m2 holds the integers up to 8).
    if (is_fp8(t)) return int64_t(h % 3u) - 1;
    return int64_t(h % 17u) - 8;
}

/* Reference of element i over ranks 0..n-1, as an exact integer (Sum, Prod, Max, Min, integer Avg). */
int64_t red_expected_int(int n, size_t i, vcclDataType_t t, vcclRedOp_t op) {
    int64_t acc = red_input(0, i, t, op);
    for (int r = 1; r < n; ++r) {
        int64_t v = red_input(r, i, t, op);
        switch (op) {
        case vcclSum: case vcclAvg: acc += v; break;
        case vcclProd: acc *= v; break;
        case vcclMax: acc = std::max(acc, v); break;
        case vcclMin: acc = std::min(acc, v); break;
        default: break;
        }
    }
    if (op == vcclAvg) acc /= n; // integer division (truncation), as C does it
    return acc;
}

uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Data for the collectives that only move data: pseudo-random values that the type holds exactly, a
 * function of (source rank, key, index), so that a misplaced block or element shows. */
void store_copy_value(void* buf, size_t at, vcclDataType_t t, int src, uint64_t key, size_t i) {
    uint64_t h = mix64((uint64_t(src) << 48) ^ (key << 32) ^ uint64_t(i) ^ (uint64_t(t) << 56));
    switch (t) {
    case vcclFloat16: store_int(buf, at, t, int64_t(h % 4097u) - 2048); break;
    case vcclBfloat16: store_int(buf, at, t, int64_t(h % 513u) - 256); break;
    case vcclFloat32: store_int(buf, at, t, int64_t(h % (1u << 25)) - (1 << 24)); break;
    case vcclFloat64: store_int(buf, at, t, int64_t(h % (1ull << 53)) - (1ll << 52)); break;
    case vcclFloat8e4m3: case vcclFloat8e5m2: { // any finite code (NaNs would not compare equal)
        uint8_t code = uint8_t(h);
        if ((code & 0x7c) == 0x7c) code &= 0xbb;
        static_cast<uint8_t*>(buf)[at] = code;
        break;
    }
    default: store_int(buf, at, t, int64_t(h)); break;
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* Checks: each appends a description of what is wrong to *why and returns false.                   */

constexpr int kMaxReported = 4;

std::string at_str(const char* what, size_t count, bool inplace, int root = -1) {
    std::ostringstream os;
    os << what << " count=" << count << (inplace ? " in-place" : " out-of-place");
    if (root >= 0) os << " root=" << root;
    return os.str();
}

/* got[0..count) against the reduction of global indices idx0.. over n ranks. */
bool check_reduced(const void* got, size_t count, size_t idx0, vcclDataType_t t, vcclRedOp_t op, int n,
                   const std::string& where, std::string* why) {
    std::vector<uint8_t> want(type_size(t));
    size_t bad = 0;
    std::ostringstream os;
    for (size_t i = 0; i < count; ++i) {
        double g = load(got, i, t);
        double e;
        bool ok;
        if (op == vcclAvg && is_float(t)) {
            int64_t s = 0;
            for (int r = 0; r < n; ++r) s += red_input(r, idx0 + i, t, op);
            e = double(s) / double(n);
            /* The exact quotient rounded to the type: allow one unit in the last place. */
            ok = (e == 0.0) ? g == 0.0 : std::fabs(g - e) <= type_ulp(t, e);
        } else {
            int64_t ei = red_expected_int(n, idx0 + i, t, op);
            store_int(want.data(), 0, t, ei); // wrap to the type
            e = load(want.data(), 0, t);
            ok = g == e;
        }
        if (!ok) {
            if (bad < kMaxReported) os << " [" << i << "] got " << g << " want " << e << ";";
            ++bad;
        }
    }
    if (bad == 0) return true;
    *why += where + ": " + std::to_string(bad) + " wrong element(s):" + os.str() + "\n";
    return false;
}

bool check_bytes_equal(const void* got, const void* want, size_t bytes, const std::string& where,
                       std::string* why) {
    if (bytes == 0 || memcmp(got, want, bytes) == 0) return true;
    const uint8_t* g = static_cast<const uint8_t*>(got);
    const uint8_t* w = static_cast<const uint8_t*>(want);
    size_t first = 0;
    while (g[first] == w[first]) ++first;
    size_t bad = 0;
    for (size_t i = 0; i < bytes; ++i) bad += g[i] != w[i];
    std::ostringstream os;
    os << where << ": " << bad << " byte(s) differ, first at byte " << first << " (got 0x" << std::hex
       << int(g[first]) << " want 0x" << int(w[first]) << ")\n";
    *why += os.str();
    return false;
}

bool check_unwritten(const void* got, size_t bytes, const std::string& where, std::string* why) {
    std::vector<uint8_t> want(bytes, kUnwrittenByte);
    return check_bytes_equal(got, want.data(), bytes, where + " (must stay unwritten)", why);
}

bool check_guards(const GuardedBuffer& b, const std::string& where, std::string* why) {
    if (b.guards_intact()) return true;
    *why += where + ": bytes beyond the buffer were overwritten (guard zone)\n";
    return false;
}

bool check_rc(vcclResult_t rc, const std::string& where, std::string* why) {
    if (rc == vcclSuccess) return true;
    *why += where + ": returned " + result_str(rc) + ": " + vcclGetLastError(nullptr) + "\n";
    return false;
}

/* The counts of the suites. The unique-id instance repeats everything but the largest count (runtime). */
std::vector<size_t> test_counts(int n, CommKind kind = CommKind::Mpi) {
    std::vector<size_t> c = {0, 1, 2, 3, 7, size_t(n > 1 ? n - 1 : 0), size_t(n + 1), 1023};
    if (kind == CommKind::Mpi) c.push_back(65537);
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
    return c;
}

/* Rooted collectives run every root up to 1023 elements; above, the first and the last root (runtime). */
std::vector<int> test_roots(int n, size_t count) {
    std::vector<int> roots;
    for (int r = 0; r < n; ++r)
        if (count <= 1023 || r == 0 || r == n - 1) roots.push_back(r);
    return roots;
}

bool large_enabled() {
    const char* v = getenv("VCCL_TEST_LARGE");
    return v == nullptr || strcmp(v, "0") != 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* One run of each collective: fills, calls, checks; returns rc ok and data ok separately.          */

struct Outcome {
    bool rc_ok = true, data_ok = true;
    std::string rc_why, data_why;
};

void run_allreduce(vcclComm_t comm, vcclDataType_t t, vcclRedOp_t op, size_t count, bool inplace, Outcome* o) {
    const int rank = world_rank(), n = world_size();
    const size_t es = type_size(t), bytes = count * es;
    const std::string where = at_str("AllReduce", count, inplace);
    GuardedBuffer send(bytes), recv(bytes);
    GuardedBuffer& in = inplace ? recv : send;
    for (size_t i = 0; i < count; ++i) store_int(in.data(), i, t, red_input(rank, i, t, op));
    std::vector<uint8_t> orig(send.data(), send.data() + bytes);
    vcclResult_t rc = vcclAllReduce(in.data(), recv.data(), count, t, op, comm, nullptr);
    if (!check_rc(rc, where, &o->rc_why)) {
        o->rc_ok = false;
        return;
    }
    bool ok = check_reduced(recv.data(), count, 0, t, op, n, where, &o->data_why);
    ok &= check_guards(recv, where + " recvbuff", &o->data_why);
    if (!inplace) {
        ok &= check_bytes_equal(send.data(), orig.data(), bytes, where + " sendbuff changed", &o->data_why);
        ok &= check_guards(send, where + " sendbuff", &o->data_why);
    }
    o->data_ok &= ok;
}

void run_reduce(vcclComm_t comm, vcclDataType_t t, vcclRedOp_t op, size_t count, bool inplace, int root,
                Outcome* o) {
    const int rank = world_rank(), n = world_size();
    const size_t es = type_size(t), bytes = count * es;
    const std::string where = at_str("Reduce", count, inplace, root);
    GuardedBuffer send(bytes), recv(bytes);
    GuardedBuffer& in = inplace ? recv : send;
    for (size_t i = 0; i < count; ++i) store_int(in.data(), i, t, red_input(rank, i, t, op));
    std::vector<uint8_t> orig(in.data(), in.data() + bytes);
    vcclResult_t rc = vcclReduce(in.data(), recv.data(), count, t, op, root, comm, nullptr);
    if (!check_rc(rc, where, &o->rc_why)) {
        o->rc_ok = false;
        return;
    }
    bool ok = true;
    if (rank == root) {
        ok &= check_reduced(recv.data(), count, 0, t, op, n, where, &o->data_why);
    } else if (inplace) {
        ok &= check_bytes_equal(recv.data(), orig.data(), bytes, where + " non-root buffer (sendbuff) changed",
                                &o->data_why);
    } else {
        ok &= check_unwritten(recv.data(), bytes, where + " non-root recvbuff", &o->data_why);
    }
    ok &= check_guards(recv, where + " recvbuff", &o->data_why);
    if (!inplace) {
        ok &= check_bytes_equal(send.data(), orig.data(), bytes, where + " sendbuff changed", &o->data_why);
        ok &= check_guards(send, where + " sendbuff", &o->data_why);
    }
    o->data_ok &= ok;
}

void run_reduce_scatter(vcclComm_t comm, vcclDataType_t t, vcclRedOp_t op, size_t recvcount, bool inplace,
                        Outcome* o) {
    const int rank = world_rank(), n = world_size();
    const size_t es = type_size(t), total = recvcount * size_t(n);
    const std::string where = at_str("ReduceScatter", recvcount, inplace);
    GuardedBuffer send(total * es), recv(recvcount * es);
    for (size_t i = 0; i < total; ++i) store_int(send.data(), i, t, red_input(rank, i, t, op));
    std::vector<uint8_t> orig(send.data(), send.data() + total * es);
    void* out = inplace ? static_cast<void*>(send.data() + size_t(rank) * recvcount * es) : recv.data();
    vcclResult_t rc = vcclReduceScatter(send.data(), out, recvcount, t, op, comm, nullptr);
    if (!check_rc(rc, where, &o->rc_why)) {
        o->rc_ok = false;
        return;
    }
    bool ok = check_reduced(out, recvcount, size_t(rank) * recvcount, t, op, n, where, &o->data_why);
    ok &= check_guards(send, where + " sendbuff", &o->data_why);
    if (!inplace) {
        ok &= check_guards(recv, where + " recvbuff", &o->data_why);
        ok &= check_bytes_equal(send.data(), orig.data(), total * es, where + " sendbuff changed", &o->data_why);
    }
    o->data_ok &= ok;
}

void run_broadcast(vcclComm_t comm, vcclDataType_t t, size_t count, bool inplace, int root, Outcome* o) {
    const int rank = world_rank();
    const size_t es = type_size(t), bytes = count * es;
    const std::string where = at_str("Broadcast", count, inplace, root);
    GuardedBuffer send(bytes), recv(bytes);
    std::vector<uint8_t> want(bytes);
    for (size_t i = 0; i < count; ++i) store_copy_value(want.data(), i, t, root, 1, i);
    GuardedBuffer& in = inplace ? recv : send;
    if (rank == root && bytes > 0) // want.data() is NULL for count 0: memcpy's arguments must not be
        memcpy(in.data(), want.data(), bytes);
    else if (!inplace) // non-root sendbuff is not used: give it data that must not arrive anywhere
        for (size_t i = 0; i < count; ++i) store_copy_value(send.data(), i, t, rank, 2, i);
    std::vector<uint8_t> orig(send.data(), send.data() + bytes);
    vcclResult_t rc = vcclBroadcast(in.data(), recv.data(), count, t, root, comm, nullptr);
    if (!check_rc(rc, where, &o->rc_why)) {
        o->rc_ok = false;
        return;
    }
    bool ok = check_bytes_equal(recv.data(), want.data(), bytes, where + " recvbuff", &o->data_why);
    ok &= check_guards(recv, where + " recvbuff", &o->data_why);
    if (!inplace) {
        ok &= check_bytes_equal(send.data(), orig.data(), bytes, where + " sendbuff changed", &o->data_why);
        ok &= check_guards(send, where + " sendbuff", &o->data_why);
    }
    o->data_ok &= ok;
}

void run_allgather(vcclComm_t comm, vcclDataType_t t, size_t count, bool inplace, Outcome* o) {
    const int rank = world_rank(), n = world_size();
    const size_t es = type_size(t), total = count * size_t(n);
    const std::string where = at_str("AllGather", count, inplace);
    GuardedBuffer send(count * es), recv(total * es);
    std::vector<uint8_t> want(total * es);
    for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) store_copy_value(want.data(), size_t(r) * count + i, t, r, 3, i);
    uint8_t* mine = inplace ? recv.data() + size_t(rank) * count * es : send.data();
    if (count > 0) // want.data() is NULL for count 0
        memcpy(mine, want.data() + size_t(rank) * count * es, count * es);
    vcclResult_t rc = vcclAllGather(mine, recv.data(), count, t, comm, nullptr);
    if (!check_rc(rc, where, &o->rc_why)) {
        o->rc_ok = false;
        return;
    }
    bool ok = check_bytes_equal(recv.data(), want.data(), total * es, where + " recvbuff", &o->data_why);
    ok &= check_guards(recv, where + " recvbuff", &o->data_why);
    if (!inplace) {
        ok &= check_bytes_equal(send.data(), want.data() + size_t(rank) * count * es, count * es,
                                where + " sendbuff changed", &o->data_why);
        ok &= check_guards(send, where + " sendbuff", &o->data_why);
    }
    o->data_ok &= ok;
}

void run_alltoall(vcclComm_t comm, vcclDataType_t t, size_t count, bool inplace, Outcome* o) {
    const int rank = world_rank(), n = world_size();
    const size_t es = type_size(t), total = count * size_t(n);
    const std::string where = at_str("AlltoAll", count, inplace);
    GuardedBuffer send(total * es), recv(total * es);
    std::vector<uint8_t> want(total * es);
    GuardedBuffer& in = inplace ? recv : send;
    /* Block j of rank r's sendbuff goes to rank j: value(src=r, key=j, i). */
    for (int j = 0; j < n; ++j)
        for (size_t i = 0; i < count; ++i) {
            store_copy_value(in.data(), size_t(j) * count + i, t, rank, uint64_t(j) + 16, i);
            store_copy_value(want.data(), size_t(j) * count + i, t, j, uint64_t(rank) + 16, i);
        }
    std::vector<uint8_t> orig(send.data(), send.data() + total * es);
    vcclResult_t rc = vcclAlltoAll(in.data(), recv.data(), count, t, comm, nullptr);
    if (!check_rc(rc, where, &o->rc_why)) {
        o->rc_ok = false;
        return;
    }
    bool ok = check_bytes_equal(recv.data(), want.data(), total * es, where + " recvbuff", &o->data_why);
    ok &= check_guards(recv, where + " recvbuff", &o->data_why);
    if (!inplace) {
        ok &= check_bytes_equal(send.data(), orig.data(), total * es, where + " sendbuff changed", &o->data_why);
        ok &= check_guards(send, where + " sendbuff", &o->data_why);
    }
    o->data_ok &= ok;
}

/* ---------------------------------------------------------------------------------------------- */
/* Parameterised suites                                                                             */

using RedParam = std::tuple<CommKind, vcclDataType_t, vcclRedOp_t>;
using CopyParam = std::tuple<CommKind, vcclDataType_t>;

std::string red_param_name(const ::testing::TestParamInfo<RedParam>& info) {
    return std::string(comm_kind_name(std::get<0>(info.param))) + "_" + type_name(std::get<1>(info.param)) +
           "_" + op_name(std::get<2>(info.param));
}
std::string copy_param_name(const ::testing::TestParamInfo<CopyParam>& info) {
    return std::string(comm_kind_name(std::get<0>(info.param))) + "_" + type_name(std::get<1>(info.param));
}

/* Runs body(count, inplace, &outcome) for every count and both modes; one collective verdict per count:
 * a failed call stops the test (the ranks may disagree on what happened next), a wrong result does not. */
template <typename Body>
void for_counts(const std::vector<size_t>& counts, Body body) {
    for (size_t count : counts) {
        Outcome o;
        for (bool inplace : {false, true}) {
            body(count, inplace, &o);
            if (!o.rc_ok) break;
        }
        ASSERT_ALL_RANKS_WHY(o.rc_ok, o.rc_why) << "count " << count;
        EXPECT_ALL_RANKS_WHY(o.data_ok, o.data_why) << "count " << count;
    }
}

class RedTest : public ::testing::TestWithParam<RedParam> {
protected:
    void SetUp() override {
        comm_ = shared_comm(std::get<0>(GetParam()));
        type_ = std::get<1>(GetParam());
        op_ = std::get<2>(GetParam());
    }
    std::vector<size_t> counts() const { return test_counts(world_size(), std::get<0>(GetParam())); }
    vcclComm_t comm_ = nullptr;
    vcclDataType_t type_ = vcclInt8;
    vcclRedOp_t op_ = vcclSum;
};

class CopyTest : public ::testing::TestWithParam<CopyParam> {
protected:
    void SetUp() override {
        comm_ = shared_comm(std::get<0>(GetParam()));
        type_ = std::get<1>(GetParam());
    }
    std::vector<size_t> counts() const { return test_counts(world_size(), std::get<0>(GetParam())); }
    vcclComm_t comm_ = nullptr;
    vcclDataType_t type_ = vcclInt8;
};

using AllReduce = RedTest;
using Reduce = RedTest;
using ReduceScatter = RedTest;
using Broadcast = CopyTest;
using AllGather = CopyTest;
using AlltoAll = CopyTest;

TEST_P(AllReduce, Counts) {
    ASSERT_ALL_RANKS(comm_ != nullptr) << "communicator creation failed";
    for_counts(counts(), [&](size_t c, bool ip, Outcome* o) { run_allreduce(comm_, type_, op_, c, ip, o); });
}

TEST_P(Reduce, CountsEveryRoot) {
    ASSERT_ALL_RANKS(comm_ != nullptr) << "communicator creation failed";
    for_counts(counts(), [&](size_t c, bool ip, Outcome* o) {
        for (int root : test_roots(world_size(), c))
            if (o->rc_ok) run_reduce(comm_, type_, op_, c, ip, root, o);
    });
}

TEST_P(ReduceScatter, Counts) {
    ASSERT_ALL_RANKS(comm_ != nullptr) << "communicator creation failed";
    for_counts(counts(),
               [&](size_t c, bool ip, Outcome* o) { run_reduce_scatter(comm_, type_, op_, c, ip, o); });
}

TEST_P(Broadcast, CountsEveryRoot) {
    ASSERT_ALL_RANKS(comm_ != nullptr) << "communicator creation failed";
    for_counts(counts(), [&](size_t c, bool ip, Outcome* o) {
        for (int root : test_roots(world_size(), c))
            if (o->rc_ok) run_broadcast(comm_, type_, c, ip, root, o);
    });
}

TEST_P(AllGather, Counts) {
    ASSERT_ALL_RANKS(comm_ != nullptr) << "communicator creation failed";
    for_counts(counts(), [&](size_t c, bool ip, Outcome* o) { run_allgather(comm_, type_, c, ip, o); });
}

TEST_P(AlltoAll, Counts) {
    ASSERT_ALL_RANKS(comm_ != nullptr) << "communicator creation failed";
    for_counts(counts(), [&](size_t c, bool ip, Outcome* o) { run_alltoall(comm_, type_, c, ip, o); });
}

#define VT_RED_PARAMS                                                                                  \
    ::testing::Combine(::testing::Values(CommKind::Mpi, CommKind::UniqueId), ::testing::ValuesIn(kAllTypes), \
                       ::testing::ValuesIn(kAllOps))
#define VT_COPY_PARAMS \
    ::testing::Combine(::testing::Values(CommKind::Mpi, CommKind::UniqueId), ::testing::ValuesIn(kAllTypes))

INSTANTIATE_TEST_SUITE_P(, AllReduce, VT_RED_PARAMS, red_param_name);
INSTANTIATE_TEST_SUITE_P(, Reduce, VT_RED_PARAMS, red_param_name);
INSTANTIATE_TEST_SUITE_P(, ReduceScatter, VT_RED_PARAMS, red_param_name);
INSTANTIATE_TEST_SUITE_P(, Broadcast, VT_COPY_PARAMS, copy_param_name);
INSTANTIATE_TEST_SUITE_P(, AllGather, VT_COPY_PARAMS, copy_param_name);
INSTANTIATE_TEST_SUITE_P(, AlltoAll, VT_COPY_PARAMS, copy_param_name);

/* ---------------------------------------------------------------------------------------------- */
/* Large buffers (float sum), up to 64 MiB per buffer.                                              */

/* 64 MiB of float; a quarter of that on more than 4 ranks, which share CI's 2 cores: still many pipeline
 * chunks per step, at a volume that keeps the 8-rank run in tens of seconds. */
size_t large_elems() { return (world_size() > 4 ? size_t(16) : size_t(64)) << 20 >> 2; }

class LargeFloatSum : public ::testing::Test {
protected:
    void SetUp() override {
        if (!large_enabled()) GTEST_SKIP() << "VCCL_TEST_LARGE=0";
        comm_ = shared_comm(CommKind::Mpi);
    }
    vcclComm_t comm_ = nullptr;
};

TEST_F(LargeFloatSum, AllReduce) {
    ASSERT_ALL_RANKS(comm_ != nullptr);
    const size_t elems = large_elems();
    for_counts({elems, (elems / 4) + 3},
               [&](size_t c, bool ip, Outcome* o) { if (!ip || c != elems) run_allreduce(comm_, vcclFloat32, vcclSum, c, ip, o); });
}

TEST_F(LargeFloatSum, Reduce) {
    ASSERT_ALL_RANKS(comm_ != nullptr);
    const size_t elems = large_elems();
    for_counts({elems / 2 + 1}, [&](size_t c, bool ip, Outcome* o) {
        if (!ip) run_reduce(comm_, vcclFloat32, vcclSum, c, ip, world_size() - 1, o);
    });
}

TEST_F(LargeFloatSum, ReduceScatter) {
    ASSERT_ALL_RANKS(comm_ != nullptr);
    const size_t elems = large_elems();
    for_counts({elems / size_t(world_size()) - 1},
               [&](size_t c, bool ip, Outcome* o) { if (!ip) run_reduce_scatter(comm_, vcclFloat32, vcclSum, c, ip, o); });
}

TEST_F(LargeFloatSum, Broadcast) {
    ASSERT_ALL_RANKS(comm_ != nullptr);
    const size_t elems = large_elems();
    for_counts({elems - 1}, [&](size_t c, bool ip, Outcome* o) {
        if (!ip) run_broadcast(comm_, vcclFloat32, c, ip, world_size() / 2, o);
    });
}

TEST_F(LargeFloatSum, AllGather) {
    ASSERT_ALL_RANKS(comm_ != nullptr);
    const size_t elems = large_elems();
    for_counts({elems / size_t(world_size()) - 3},
               [&](size_t c, bool ip, Outcome* o) { if (!ip) run_allgather(comm_, vcclFloat32, c, ip, o); });
}

TEST_F(LargeFloatSum, AlltoAll) {
    ASSERT_ALL_RANKS(comm_ != nullptr);
    const size_t elems = large_elems();
    for_counts({elems / size_t(world_size()) - 5},
               [&](size_t c, bool ip, Outcome* o) { if (!ip) run_alltoall(comm_, vcclFloat32, c, ip, o); });
}

/* ---------------------------------------------------------------------------------------------- */
/* Self-checks of the reference: they keep the tests above honest.                                  */

TEST(Reference, HalfAndBf16EncodersAreExactOnSmallIntegers) {
    bool ok = true;
    for (int v = -2048; v <= 2048; ++v) ok &= half_to_double(double_to_half(v)) == v;
    for (int v = -256; v <= 256; ++v) ok &= bf16_to_double(double_to_bf16(v)) == v;
    ok &= double_to_half(1.0) == 0x3c00 && double_to_half(-2.0) == 0xc000 && double_to_half(65504.0) == 0x7bff;
    ok &= double_to_bf16(1.0) == 0x3f80 && double_to_bf16(-2.0) == 0xc000;
    ok &= double_to_half(2049.0) == double_to_half(2048.0); // ties to even
    EXPECT_ALL_RANKS(ok);
}

TEST(Reference, ProdInputsStayExact) {
    /* The product over 8 ranks stays within 2^8 in magnitude, exact in bf16 (8 significant bits). */
    bool ok = true;
    for (vcclDataType_t t : kAllTypes)
        for (size_t i = 0; i < 4096; ++i) {
            int64_t p = 1;
            for (int r = 0; r < 8; ++r) p *= red_input(r, i, t, vcclProd);
            ok &= p != 0 && std::llabs(p) <= 256;
        }
    EXPECT_ALL_RANKS(ok);
}

TEST(Reference, GuardedBufferDetectsOverrun) {
    GuardedBuffer b(10);
    bool before = b.guards_intact();
    b.data()[10] = 0;
    bool after = b.guards_intact();
    GuardedBuffer c(10);
    c.data()[-1] = 0;
    EXPECT_ALL_RANKS(before && !after && !c.guards_intact());
}

} // namespace
