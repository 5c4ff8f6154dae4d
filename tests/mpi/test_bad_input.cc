/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Bad input gets an exact error code, never a crash or a hang. Run at 2 ranks (works at any count >= 1;
 * the unmatched-send test needs 2).
 *
 * VCCL_OP_TIMEOUT_MS is read once per process (when the first communicator is created), so this program
 * sets it to 2000 before main() unless the caller set it: every communicator here gets a 2 s limit.
 * VCCL_BOOTSTRAP_TIMEOUT is set to 5 likewise, so that a call that should fail at once but waits fails fast.
 */
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <sstream>

#include "mpi_gtest_main.h"
#include "test_util.h"

using namespace vtest;

namespace {

const bool g_env_set = [] {
    setenv("VCCL_OP_TIMEOUT_MS", "2000", 0);
    setenv("VCCL_BOOTSTRAP_TIMEOUT", "5", 0); // a bootstrap that should not wait fails the test in 5 s
    return true;
}();

/* Collects "call: got X, want Y" lines for every mismatch. */
class Expect {
public:
    void operator()(const std::string& what, vcclResult_t got, vcclResult_t want) {
        if (got != want)
            why_ += what + ": got " + result_str(got) + ", want " + result_str(want) + "\n";
    }
    bool ok() const { return why_.empty(); }
    const std::string& why() const { return why_; }

private:
    std::string why_;
};

class BadInput : public ::testing::Test {
protected:
    void SetUp() override { comm_ = shared_comm(CommKind::Mpi); }
    vcclComm_t comm_ = nullptr;
    int rank_ = world_rank(), n_ = world_size();
    int32_t a_[64] = {0};
    int32_t b_[64 * 16] = {0};
};

TEST_F(BadInput, NullBuffersWithCountAreInvalidArgument) {
    ASSERT_ALL_RANKS(comm_ != nullptr);
    Expect e;
    const vcclResult_t IA = vcclInvalidArgument;
    e("AllReduce NULL send", vcclAllReduce(nullptr, b_, 4, vcclInt32, vcclSum, comm_, nullptr), IA);
    e("AllReduce NULL recv", vcclAllReduce(a_, nullptr, 4, vcclInt32, vcclSum, comm_, nullptr), IA);
    e("AllReduce both NULL", vcclAllReduce(nullptr, nullptr, 4, vcclInt32, vcclSum, comm_, nullptr), IA);
    e("Broadcast NULL recv", vcclBroadcast(a_, nullptr, 4, vcclInt32, 0, comm_, nullptr), IA);
    e("Reduce NULL send", vcclReduce(nullptr, b_, 4, vcclInt32, vcclSum, 0, comm_, nullptr), IA);
    e("AllGather NULL send", vcclAllGather(nullptr, b_, 4, vcclInt32, comm_, nullptr), IA);
    e("AllGather NULL recv", vcclAllGather(a_, nullptr, 4, vcclInt32, comm_, nullptr), IA);
    e("ReduceScatter NULL send", vcclReduceScatter(nullptr, b_, 4, vcclInt32, vcclSum, comm_, nullptr), IA);
    e("ReduceScatter NULL recv", vcclReduceScatter(b_, nullptr, 4, vcclInt32, vcclSum, comm_, nullptr), IA);
    e("AlltoAll NULL send", vcclAlltoAll(nullptr, b_, 4, vcclInt32, comm_, nullptr), IA);
    e("AlltoAll NULL recv", vcclAlltoAll(b_, nullptr, 4, vcclInt32, comm_, nullptr), IA);
    e("Send NULL", vcclSend(nullptr, 4, vcclInt32, (rank_ + 1) % n_, comm_, nullptr), IA);
    e("Recv NULL", vcclRecv(nullptr, 4, vcclInt32, (rank_ + 1) % n_, comm_, nullptr), IA);
    EXPECT_ALL_RANKS_WHY(e.ok(), e.why());
}

TEST_F(BadInput, RootNullBuffersAreInvalidArgument) {
    /* Only the root would object, and the other ranks would wait for it: test on a communicator of one
     * rank (a split with color = rank), where this rank is the root. */
    ASSERT_ALL_RANKS(comm_ != nullptr);
    vcclComm_t self = nullptr;
    vcclResult_t rc = vcclCommSplit(comm_, rank_, 0, &self, nullptr);
    ASSERT_ALL_RANKS(rc == vcclSuccess && self != nullptr) << result_str(rc);
    Expect e;
    const vcclResult_t IA = vcclInvalidArgument;
    e("Broadcast NULL send at the root", vcclBroadcast(nullptr, b_, 4, vcclInt32, 0, self, nullptr), IA);
    e("Reduce NULL recv at the root", vcclReduce(a_, nullptr, 4, vcclInt32, vcclSum, 0, self, nullptr), IA);
    e("Broadcast root 1 of 1", vcclBroadcast(a_, b_, 4, vcclInt32, 1, self, nullptr), IA);
    e("Send to peer 1 of 1", vcclSend(a_, 4, vcclInt32, 1, self, nullptr), IA);
    int32_t x = 5, y = 0;
    e("AllReduce on the single-rank communicator", vcclAllReduce(&x, &y, 1, vcclInt32, vcclSum, self, nullptr), vcclSuccess);
    if (y != 5) e("AllReduce result", vcclInternalError, vcclSuccess);
    e("CommDestroy", vcclCommDestroy(self), vcclSuccess);
    EXPECT_ALL_RANKS_WHY(e.ok(), e.why());
}

TEST_F(BadInput, ZeroCountWithNullBuffersIsSuccess) {
    ASSERT_ALL_RANKS(comm_ != nullptr);
    Expect e;
    const vcclResult_t S = vcclSuccess;
    e("AllReduce", vcclAllReduce(nullptr, nullptr, 0, vcclFloat32, vcclSum, comm_, nullptr), S);
    e("Broadcast", vcclBroadcast(nullptr, nullptr, 0, vcclFloat32, 0, comm_, nullptr), S);
    e("Reduce", vcclReduce(nullptr, nullptr, 0, vcclFloat32, vcclMax, n_ - 1, comm_, nullptr), S);
    e("AllGather", vcclAllGather(nullptr, nullptr, 0, vcclInt8, comm_, nullptr), S);
    e("ReduceScatter", vcclReduceScatter(nullptr, nullptr, 0, vcclInt64, vcclProd, comm_, nullptr), S);
    e("AlltoAll", vcclAlltoAll(nullptr, nullptr, 0, vcclFloat16, comm_, nullptr), S);
    const int next = (rank_ + 1) % n_, prev = (rank_ + n_ - 1) % n_;
    e("GroupStart", vcclGroupStart(), S);
    e("Send 0", vcclSend(nullptr, 0, vcclInt32, next, comm_, nullptr), S);
    e("Recv 0", vcclRecv(nullptr, 0, vcclInt32, prev, comm_, nullptr), S);
    e("GroupEnd", vcclGroupEnd(), S);
    EXPECT_ALL_RANKS_WHY(e.ok(), e.why());
    /* The communicator still works. */
    int32_t x = 1, y = 0;
    vcclResult_t rc = vcclAllReduce(&x, &y, 1, vcclInt32, vcclSum, comm_, nullptr);
    EXPECT_ALL_RANKS(rc == vcclSuccess && y == n_);
}

TEST_F(BadInput, UnusedBuffersMayBeNull) {
    /* Reduce: recvbuff is ignored off the root. Broadcast: sendbuff is only read on the root. */
    ASSERT_ALL_RANKS(comm_ != nullptr);
    const int root = n_ - 1;
    int32_t in[3] = {rank_ + 1, 2 * rank_, -rank_}, out[3] = {-7, -7, -7};
    vcclResult_t r1 = vcclReduce(in, rank_ == root ? out : nullptr, 3, vcclInt32, vcclSum, root, comm_, nullptr);
    int32_t s = n_ * (n_ - 1) / 2;
    bool ok1 = r1 == vcclSuccess && (rank_ != root || (out[0] == s + n_ && out[1] == 2 * s && out[2] == -s));
    EXPECT_ALL_RANKS(ok1) << "Reduce with NULL recvbuff off the root: " << result_str(r1);
    int32_t data[2] = {rank_ == 0 ? 41 : -1, rank_ == 0 ? 42 : -1};
    vcclResult_t r2 = vcclBroadcast(rank_ == 0 ? data : nullptr, data, 2, vcclInt32, 0, comm_, nullptr);
    EXPECT_ALL_RANKS(r2 == vcclSuccess && data[0] == 41 && data[1] == 42)
        << "Broadcast with NULL sendbuff off the root: " << result_str(r2);
}

TEST_F(BadInput, CountTimesTypeSizeOverflowIsInvalidArgument) {
    ASSERT_ALL_RANKS(comm_ != nullptr);
    Expect e;
    const vcclResult_t IA = vcclInvalidArgument;
    const size_t huge4 = SIZE_MAX / 4 + 2;          // * 4 bytes overflows
    const size_t huge_n = SIZE_MAX / (4 * size_t(n_)) + 2; // * nranks * 4 overflows (n == 1: as above)
    e("AllReduce", vcclAllReduce(a_, b_, huge4, vcclFloat32, vcclSum, comm_, nullptr), IA);
    e("AllReduce int64", vcclAllReduce(a_, b_, SIZE_MAX / 8 + 1, vcclInt64, vcclSum, comm_, nullptr), IA);
    e("AllReduce SIZE_MAX", vcclAllReduce(a_, b_, SIZE_MAX, vcclFloat16, vcclSum, comm_, nullptr), IA);
    e("Broadcast", vcclBroadcast(a_, b_, huge4, vcclInt32, 0, comm_, nullptr), IA);
    e("Reduce", vcclReduce(a_, b_, huge4, vcclUint32, vcclMax, 0, comm_, nullptr), IA);
    e("AllGather", vcclAllGather(a_, b_, huge_n, vcclInt32, comm_, nullptr), IA);
    e("ReduceScatter", vcclReduceScatter(b_, a_, huge_n, vcclInt32, vcclSum, comm_, nullptr), IA);
    e("AlltoAll", vcclAlltoAll(b_, a_, huge_n, vcclInt32, comm_, nullptr), IA);
    e("Send", vcclSend(a_, huge4, vcclFloat32, (rank_ + 1) % n_, comm_, nullptr), IA);
    e("Recv", vcclRecv(b_, huge4, vcclFloat32, (rank_ + 1) % n_, comm_, nullptr), IA);
    EXPECT_ALL_RANKS_WHY(e.ok(), e.why());
}

TEST_F(BadInput, BadDatatypeAndOpAreInvalidArgument) {
    ASSERT_ALL_RANKS(comm_ != nullptr);
    Expect e;
    const vcclResult_t IA = vcclInvalidArgument;
    for (int bad : {99, -1, int(vcclNumTypes)}) {
        vcclDataType_t t = vcclDataType_t(bad);
        std::string s = " type " + std::to_string(bad);
        e("AllReduce" + s, vcclAllReduce(a_, b_, 4, t, vcclSum, comm_, nullptr), IA);
        e("Broadcast" + s, vcclBroadcast(a_, b_, 4, t, 0, comm_, nullptr), IA);
        e("Reduce" + s, vcclReduce(a_, b_, 4, t, vcclSum, 0, comm_, nullptr), IA);
        e("AllGather" + s, vcclAllGather(a_, b_, 4, t, comm_, nullptr), IA);
        e("ReduceScatter" + s, vcclReduceScatter(b_, a_, 4, t, vcclSum, comm_, nullptr), IA);
        e("AlltoAll" + s, vcclAlltoAll(b_, a_, 1, t, comm_, nullptr), IA);
        e("Send" + s, vcclSend(a_, 4, t, (rank_ + 1) % n_, comm_, nullptr), IA);
        e("Recv" + s, vcclRecv(b_, 4, t, (rank_ + 1) % n_, comm_, nullptr), IA);
    }
    for (int bad : {99, -1, int(vcclNumOps)}) {
        vcclRedOp_t op = vcclRedOp_t(bad);
        std::string s = " op " + std::to_string(bad);
        e("AllReduce" + s, vcclAllReduce(a_, b_, 4, vcclFloat32, op, comm_, nullptr), IA);
        e("Reduce" + s, vcclReduce(a_, b_, 4, vcclFloat32, op, 0, comm_, nullptr), IA);
        e("ReduceScatter" + s, vcclReduceScatter(b_, a_, 4, vcclFloat32, op, comm_, nullptr), IA);
    }
    EXPECT_ALL_RANKS_WHY(e.ok(), e.why());
}

TEST_F(BadInput, RootAndPeerOutOfRangeAreInvalidArgument) {
    ASSERT_ALL_RANKS(comm_ != nullptr);
    Expect e;
    const vcclResult_t IA = vcclInvalidArgument;
    for (int bad : {n_, n_ + 5, -1, INT_MIN}) {
        std::string s = " " + std::to_string(bad);
        e("Broadcast root" + s, vcclBroadcast(a_, b_, 4, vcclInt32, bad, comm_, nullptr), IA);
        e("Reduce root" + s, vcclReduce(a_, b_, 4, vcclInt32, vcclSum, bad, comm_, nullptr), IA);
        e("Send peer" + s, vcclSend(a_, 4, vcclInt32, bad, comm_, nullptr), IA);
        e("Recv peer" + s, vcclRecv(b_, 4, vcclInt32, bad, comm_, nullptr), IA);
    }
    /* Inside a group: the bad call reports it; the group still ends and the communicator stays usable. */
    e("GroupStart", vcclGroupStart(), vcclSuccess);
    e("Send peer in group", vcclSend(a_, 4, vcclInt32, n_, comm_, nullptr), IA);
    vcclResult_t ge = vcclGroupEnd();
    (void)ge; // NCCL reports the error again here; either way the group must be closed
    EXPECT_ALL_RANKS_WHY(e.ok(), e.why());
    int32_t x = 2, y = 0;
    vcclResult_t rc = vcclAllReduce(&x, &y, 1, vcclInt32, vcclSum, comm_, nullptr);
    EXPECT_ALL_RANKS(rc == vcclSuccess && y == 2 * n_)
        << "after a failed call in a group (GroupEnd returned " << result_str(ge) << "): " << result_str(rc);
}

TEST_F(BadInput, NullCommIsInvalidArgument) {
    Expect e;
    const vcclResult_t IA = vcclInvalidArgument;
    int x = 0;
    vcclResult_t ae;
    vcclComm_t nc = nullptr;
    e("AllReduce", vcclAllReduce(a_, b_, 1, vcclInt32, vcclSum, nullptr, nullptr), IA);
    e("Broadcast", vcclBroadcast(a_, b_, 1, vcclInt32, 0, nullptr, nullptr), IA);
    e("Reduce", vcclReduce(a_, b_, 1, vcclInt32, vcclSum, 0, nullptr, nullptr), IA);
    e("AllGather", vcclAllGather(a_, b_, 1, vcclInt32, nullptr, nullptr), IA);
    e("ReduceScatter", vcclReduceScatter(b_, a_, 1, vcclInt32, vcclSum, nullptr, nullptr), IA);
    e("AlltoAll", vcclAlltoAll(b_, a_, 1, vcclInt32, nullptr, nullptr), IA);
    e("Send", vcclSend(a_, 1, vcclInt32, 0, nullptr, nullptr), IA);
    e("Recv", vcclRecv(b_, 1, vcclInt32, 0, nullptr, nullptr), IA);
    e("CommCount", vcclCommCount(nullptr, &x), IA);
    e("CommUserRank", vcclCommUserRank(nullptr, &x), IA);
    e("CommGetAsyncError", vcclCommGetAsyncError(nullptr, &ae), IA);
    e("CommSplit", vcclCommSplit(nullptr, 0, 0, &nc, nullptr), IA);
    e("CommDestroy", vcclCommDestroy(nullptr), IA);
    e("CommAbort", vcclCommAbort(nullptr), IA);
    EXPECT_ALL_RANKS_WHY(e.ok(), e.why());
}

TEST_F(BadInput, NullOutputPointersAreInvalidArgument) {
    ASSERT_ALL_RANKS(comm_ != nullptr);
    Expect e;
    const vcclResult_t IA = vcclInvalidArgument;
    vcclUniqueId id;
    memset(&id, 0, sizeof id);
    e("CommCount", vcclCommCount(comm_, nullptr), IA);
    e("CommUserRank", vcclCommUserRank(comm_, nullptr), IA);
    e("CommGetAsyncError", vcclCommGetAsyncError(comm_, nullptr), IA);
    e("GetUniqueId", vcclGetUniqueId(nullptr), IA);
    e("GetVersion", vcclGetVersion(nullptr), IA);
    e("CommInitRank NULL comm", vcclCommInitRank(nullptr, n_, id, rank_), IA);
    e("CommInitMPI NULL comm", vcclCommInitMPI(nullptr, MPI_COMM_WORLD, nullptr), IA);
    e("CommSplit NULL newcomm", vcclCommSplit(comm_, 0, 0, nullptr, nullptr), IA);
    EXPECT_ALL_RANKS_WHY(e.ok(), e.why());
}

TEST_F(BadInput, DestroyedCommIsInvalidUsage) {
    vcclResult_t rc;
    vcclComm_t c = make_comm(CommKind::Mpi, &rc);
    ASSERT_ALL_RANKS(c != nullptr) << result_str(rc);
    ASSERT_ALL_RANKS(vcclCommDestroy(c) == vcclSuccess);
    Expect e;
    const vcclResult_t IU = vcclInvalidUsage;
    int x = 0;
    e("AllReduce", vcclAllReduce(a_, b_, 1, vcclInt32, vcclSum, c, nullptr), IU);
    e("Broadcast", vcclBroadcast(a_, b_, 1, vcclInt32, 0, c, nullptr), IU);
    e("Send", vcclSend(a_, 1, vcclInt32, 0, c, nullptr), IU);
    e("CommCount", vcclCommCount(c, &x), IU);
    e("CommDestroy", vcclCommDestroy(c), IU);
    EXPECT_ALL_RANKS_WHY(e.ok(), e.why());
}

TEST_F(BadInput, RegistrationBadArguments) {
    Expect e;
    const vcclResult_t IA = vcclInvalidArgument;
    void* h = nullptr;
    e("Register NULL comm", vcclCommRegister(nullptr, a_, sizeof(a_), &h), IA);
    e("Register NULL handle", vcclCommRegister(comm_, a_, sizeof(a_), nullptr), IA);
    e("Register NULL buffer", vcclCommRegister(comm_, nullptr, 64, &h), IA);
    e("Register wrapping range", vcclCommRegister(comm_, reinterpret_cast<void*>(~uintptr_t(0) - 8), 64, &h), IA);
    e("Deregister NULL comm", vcclCommDeregister(nullptr, &h), IA);
    e("Deregister NULL handle", vcclCommDeregister(comm_, nullptr), IA);
    e("Deregister unknown handle", vcclCommDeregister(comm_, a_), IA);
    // Host memory registers (nothing to cache) and deregisters once; overlapping registrations are allowed.
    void* h1 = nullptr;
    void* h2 = nullptr;
    e("Register host buffer", vcclCommRegister(comm_, a_, sizeof(a_), &h1), vcclSuccess);
    e("Register overlapping", vcclCommRegister(comm_, a_ + 8, 16, &h2), vcclSuccess);
    e("Register zero bytes", vcclCommRegister(comm_, nullptr, 0, &h), vcclSuccess);
    e("Deregister zero bytes", vcclCommDeregister(comm_, h), vcclSuccess);
    e("Deregister", vcclCommDeregister(comm_, h1), vcclSuccess);
    e("Deregister twice", vcclCommDeregister(comm_, h1), IA);
    // A registered host buffer still works in a call.
    for (int i = 0; i < 16; ++i) a_[8 + i] = rank_ + i;
    e("AllReduce on a registered buffer", vcclAllReduce(a_ + 8, b_, 16, vcclInt32, vcclSum, comm_, nullptr), vcclSuccess);
    int32_t want0 = 0;
    for (int r = 0; r < n_; ++r) want0 += r;
    if (b_[0] != want0 || b_[15] != want0 + 15 * n_) e("AllReduce result on a registered buffer", vcclInternalError, vcclSuccess);
    e("Deregister the other", vcclCommDeregister(comm_, h2), vcclSuccess);
    EXPECT_ALL_RANKS_WHY(e.ok(), e.why());
}

TEST_F(BadInput, MemAllocBadArguments) {
    Expect e;
    e("MemAlloc NULL ptr", vcclMemAlloc(nullptr, 64), vcclInvalidArgument);
    void* p = a_;
    e("MemAlloc size 0", vcclMemAlloc(&p, 0), vcclSuccess);
    if (p != nullptr) e("MemAlloc size 0 gives NULL", vcclInternalError, vcclSuccess);
    e("MemFree NULL", vcclMemFree(nullptr), vcclSuccess);
    e("MemFree of other memory", vcclMemFree(a_), vcclInvalidArgument);
    // Without a GPU (CI) the allocation fails with a CUDA error and a message; with one it must work.
    vcclResult_t r = vcclMemAlloc(&p, 1000);
    if (r == vcclSuccess) {
        e("MemFree", vcclMemFree(p), vcclSuccess);
        e("MemFree twice", vcclMemFree(p), vcclInvalidArgument);
    } else {
        e("MemAlloc without a GPU", r, vcclUnhandledCudaError);
        if (std::string(vcclGetLastError(nullptr)).find("vcclMemAlloc") == std::string::npos) {
            e("MemAlloc error message names the call", vcclInternalError, vcclSuccess);
        }
    }
    EXPECT_ALL_RANKS_WHY(e.ok(), e.why());
}

TEST_F(BadInput, RegistrationOfDestroyedCommIsInvalidUsage) {
    vcclResult_t rc;
    vcclComm_t c = make_comm(CommKind::Mpi, &rc);
    ASSERT_ALL_RANKS(c != nullptr) << result_str(rc);
    void* h = nullptr;
    ASSERT_ALL_RANKS(vcclCommRegister(c, a_, sizeof(a_), &h) == vcclSuccess);
    ASSERT_ALL_RANKS(vcclCommDestroy(c) == vcclSuccess); // frees its registrations
    Expect e;
    e("Register", vcclCommRegister(c, a_, sizeof(a_), &h), vcclInvalidUsage);
    e("Deregister", vcclCommDeregister(c, h), vcclInvalidUsage);
    EXPECT_ALL_RANKS_WHY(e.ok(), e.why());
}

TEST_F(BadInput, CommInitRankBadArguments) {
    Expect e;
    const vcclResult_t IA = vcclInvalidArgument;
    vcclUniqueId id;
    vcclResult_t idrc = vcclGetUniqueId(&id); // a local id: these calls must fail before using it
    e("GetUniqueId", idrc, vcclSuccess);
    const vcclComm_t sentinel = reinterpret_cast<vcclComm_t>(uintptr_t(0x10));
    vcclComm_t c = sentinel;
    e("nranks 0", vcclCommInitRank(&c, 0, id, 0), IA);
    e("nranks -1", vcclCommInitRank(&c, -1, id, 0), IA);
    e("rank == nranks", vcclCommInitRank(&c, 2, id, 2), IA);
    e("rank > nranks", vcclCommInitRank(&c, 2, id, 7), IA);
    e("rank -1", vcclCommInitRank(&c, 2, id, -1), IA);
    vcclUniqueId garbage;
    memset(&garbage, 0x5A, sizeof garbage);
    e("garbage id (0x5A)", vcclCommInitRank(&c, n_, garbage, rank_), IA);
    memset(&garbage, 0, sizeof garbage);
    e("all-zero id", vcclCommInitRank(&c, n_, garbage, rank_), IA);
    /* Each config case gets its own id (see RejectedConfigLeavesUniqueIdUsable for why). */
    vcclUniqueId id2, id3;
    e("GetUniqueId", vcclGetUniqueId(&id2), vcclSuccess);
    e("GetUniqueId", vcclGetUniqueId(&id3), vcclSuccess);
    vcclConfig_t cfg = VCCL_CONFIG_INITIALIZER;
    cfg.magic = 0;
    e("config with bad magic", vcclCommInitRankConfig(&c, 1, id2, 0, &cfg), IA);
    vcclConfig_t cfg2 = VCCL_CONFIG_INITIALIZER;
    cfg2.splitShare = 1;
    e("config splitShare=1 (reserved)", vcclCommInitRankConfig(&c, 1, id3, 0, &cfg2), IA);
    e("CommInitMPI on MPI_COMM_NULL", vcclCommInitMPI(&c, MPI_COMM_NULL, nullptr), IA);
    EXPECT_ALL_RANKS_WHY(e.ok() && c == sentinel, e.why() + (c == sentinel ? "" : "*comm written on failure\n"));
}

/* A call rejected for its arguments must not consume the unique id: the same id then initialises a
 * communicator (rejections of nranks/rank already behave so; the config check must too). */
TEST_F(BadInput, RejectedConfigLeavesUniqueIdUsable) {
    Expect e;
    for (int which = 0; which < 3; ++which) {
        vcclUniqueId id;
        e("GetUniqueId", vcclGetUniqueId(&id), vcclSuccess);
        vcclComm_t c = nullptr;
        vcclConfig_t cfg = VCCL_CONFIG_INITIALIZER;
        const char* what = which == 0 ? "nranks 0" : which == 1 ? "config magic 0" : "config splitShare 1";
        if (which == 0) e(what, vcclCommInitRank(&c, 0, id, 0), vcclInvalidArgument);
        if (which == 1) cfg.magic = 0;
        if (which == 2) cfg.splitShare = 1;
        if (which != 0) e(what, vcclCommInitRankConfig(&c, 1, id, 0, &cfg), vcclInvalidArgument);
        double t0 = now_s();
        vcclResult_t rc = vcclCommInitRank(&c, 1, id, 0);
        std::ostringstream os;
        os << "vcclCommInitRank(nranks 1) with the id after a rejected call (" << what << ") after " << now_s() - t0 << " s";
        e(os.str(), rc, vcclSuccess);
        if (rc == vcclSuccess) vcclCommDestroy(c);
    }
    EXPECT_ALL_RANKS_WHY(e.ok(), e.why());
}

TEST_F(BadInput, GroupEndWithoutStartIsInvalidUsage) {
    vcclResult_t rc = vcclGroupEnd();
    EXPECT_ALL_RANKS(rc == vcclInvalidUsage) << "got " << result_str(rc);
    /* Balanced groups still work afterwards. */
    ASSERT_ALL_RANKS(comm_ != nullptr);
    int32_t x = 3, y = 0;
    vcclResult_t r1 = vcclGroupStart();
    vcclResult_t r2 = vcclSend(&x, 1, vcclInt32, rank_, comm_, nullptr);
    vcclResult_t r3 = vcclRecv(&y, 1, vcclInt32, rank_, comm_, nullptr);
    vcclResult_t r4 = vcclGroupEnd();
    EXPECT_ALL_RANKS(r1 == vcclSuccess && r2 == vcclSuccess && r3 == vcclSuccess && r4 == vcclSuccess && y == 3);
}

/* A send whose receive is never posted: the sender's GroupEnd ends with vcclTimeout after
 * VCCL_OP_TIMEOUT_MS (2000 here), the error is recorded on the communicator, and both sides can then free
 * their communicators without hanging. */
void unmatched_send(size_t bytes) {
    const int rank = world_rank(), n = world_size();
    vcclResult_t rc;
    vcclComm_t c = make_comm(CommKind::Mpi, &rc); // a fresh one: this test leaves it broken
    ASSERT_ALL_RANKS(c != nullptr) << result_str(rc);
    std::vector<uint8_t> buf(bytes, 0x42);
    vcclResult_t ge = vcclSuccess, ae = vcclSuccess, aerc = vcclSuccess;
    double elapsed = 0;
    if (rank == 0) {
        double t0 = now_s();
        vcclResult_t r1 = vcclGroupStart();
        vcclResult_t r2 = vcclSend(buf.data(), bytes, vcclUint8, 1, c, nullptr);
        ge = vcclGroupEnd();
        elapsed = now_s() - t0;
        if (r1 != vcclSuccess || r2 != vcclSuccess) ge = vcclInternalError; // reported below
        aerc = vcclCommGetAsyncError(c, &ae);
    }
    MPI_Barrier(MPI_COMM_WORLD); // rank 1 keeps its communicator until the sender is done
    double t0 = now_s();
    vcclResult_t fr = rank == 0 ? vcclCommAbort(c) : vcclCommDestroy(c);
    double free_s = now_s() - t0;
    std::ostringstream os;
    if (rank == 0)
        os << "GroupEnd returned " << result_str(ge) << " after " << elapsed << " s (want vcclTimeout after ~2 s); "
           << "GetAsyncError returned " << result_str(aerc) << " with " << result_str(ae) << " (want vcclTimeout); ";
    os << (rank == 0 ? "Abort" : "Destroy") << " returned " << result_str(fr) << " after " << free_s << " s";
    bool ok = free_s < 5.0 && fr == vcclSuccess;
    if (rank == 0) ok &= ge == vcclTimeout && elapsed >= 1.5 && elapsed < 10.0 && aerc == vcclSuccess && ae == vcclTimeout;
    (void)n;
    EXPECT_ALL_RANKS_WHY(ok, os.str());
}

TEST(BadInputTimeout, UnmatchedSendTimesOutSmall) {
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    unmatched_send(16);
}

TEST(BadInputTimeout, UnmatchedSendTimesOutLarge) {
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    unmatched_send(4 << 20);
}

TEST(BadInputTimeout, EnvironmentIsInEffect) {
    /* Guards against the whole file silently running with the 10-minute default. */
    const char* v = getenv("VCCL_OP_TIMEOUT_MS");
    EXPECT_ALL_RANKS(g_env_set && v != nullptr && atoi(v) > 0 && atoi(v) <= 10000) << (v ? v : "(unset)");
}

} // namespace
