/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ending operations that cannot finish: the per-communicator operation timeout (vcclConfig_t.opTimeoutMs over
 * VCCL_OP_TIMEOUT_MS) and vcclCommRevoke; and growing a communicator (vcclCommGrow). Host memory, run at 3 ranks
 * (needs at least 2; Grow needs 3), and the Grow cases again at 4 ranks (2 -> 3 -> 4).
 *
 * The last rank withholds its part of a collective; every other rank must end with vcclTimeout after the
 * communicator's limit (not the environment's), record it for vcclCommGetAsyncError, and every rank must then
 * abort within a second. VCCL_OP_TIMEOUT_MS is set to 2000 before the first communicator (it is read once per
 * process), so a limit of 300 ms that takes effect is told apart from the environment's.
 */
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <atomic>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "mpi_gtest_main.h"
#include "test_util.h"

using namespace vtest;

namespace {

constexpr int kEnvTimeoutMs = 2000;
constexpr int kConfigTimeoutMs = 300;

const bool g_env_set = [] {
    setenv("VCCL_OP_TIMEOUT_MS", "2000", 1);
    setenv("VCCL_BOOTSTRAP_TIMEOUT", "10", 0);
    return true;
}();

const char* rc_name(vcclResult_t r) { return vcclGetErrorString(r); }

/* Collects "call: got X, want Y" lines for every mismatch. */
struct Expected {
    std::string why;
    void operator()(const char* what, vcclResult_t got, vcclResult_t want) {
        if (got != want) why += std::string(what) + ": got " + rc_name(got) + ", want " + rc_name(want) + "\n";
    }
};

enum class Coll { AllReduce, AllGather, ReduceScatter, AlltoAll };

const char* coll_name(Coll c) {
    switch (c) {
    case Coll::AllReduce: return "AllReduce";
    case Coll::AllGather: return "AllGather";
    case Coll::ReduceScatter: return "ReduceScatter";
    case Coll::AlltoAll: return "AlltoAll";
    }
    return "?";
}

/* Runs one collective of `count` int32 elements per block; every rank's output depends on every rank's input,
 * so no rank can finish while one withholds. Inputs: rank r, element i holds r * 1000 + i. On success `out`
 * is checked against a reference computed here. */
vcclResult_t run_coll(Coll c, vcclComm_t comm, size_t count, std::string* wrong) {
    const int n = world_size(), me = world_rank();
    const size_t total = count * size_t(n);
    std::vector<int32_t> in(c == Coll::AllReduce ? count : total), out(c == Coll::AllGather || c == Coll::AlltoAll ? total : count);
    for (size_t i = 0; i < in.size(); ++i) in[i] = int32_t(me * 1000 + int(i % 997));
    vcclResult_t rc = vcclInternalError;
    switch (c) {
    case Coll::AllReduce: rc = vcclAllReduce(in.data(), out.data(), count, vcclInt32, vcclSum, comm, nullptr); break;
    case Coll::AllGather: rc = vcclAllGather(in.data(), out.data(), count, vcclInt32, comm, nullptr); break;
    case Coll::ReduceScatter:
        rc = vcclReduceScatter(in.data(), out.data(), count, vcclInt32, vcclSum, comm, nullptr);
        break;
    case Coll::AlltoAll: rc = vcclAlltoAll(in.data(), out.data(), count, vcclInt32, comm, nullptr); break;
    }
    if (rc != vcclSuccess || wrong == nullptr) return rc;
    size_t bad = 0;
    const int64_t rank_sum = int64_t(n) * (n - 1) / 2 * 1000;
    for (size_t i = 0; i < out.size(); ++i) {
        int64_t want = 0;
        switch (c) {
        case Coll::AllReduce: want = rank_sum + int64_t(n) * int64_t(i % 997); break;
        case Coll::AllGather: want = int64_t(i / count) * 1000 + int64_t((i % count) % 997); break;
        case Coll::ReduceScatter: want = rank_sum + int64_t(n) * int64_t((size_t(me) * count + i) % 997); break;
        case Coll::AlltoAll: want = int64_t(i / count) * 1000 + int64_t((size_t(me) * count + i % count) % 997); break;
        }
        if (out[i] != int32_t(want)) ++bad;
    }
    if (bad != 0) *wrong += std::string(coll_name(c)) + ": " + std::to_string(bad) + " wrong elements\n";
    return rc;
}

vcclConfig_t config_with_timeout(int ms) {
    vcclConfig_t cfg = VCCL_CONFIG_INITIALIZER;
    cfg.opTimeoutMs = ms;
    return cfg;
}

struct Withheld {
    vcclResult_t rc = vcclSuccess;       // the collective's result (ranks that took part)
    vcclResult_t async = vcclSuccess;    // vcclCommGetAsyncError afterwards
    vcclResult_t abort_rc = vcclSuccess; // vcclCommAbort
    double op_s = 0, abort_s = 0;
};

/* The last rank creates `comm` with the others but never calls the collective; the others call it and must
 * fail. Then every rank aborts, timed. */
Withheld withhold_last(vcclComm_t comm, Coll c, size_t count) {
    Withheld w;
    const bool withholds = world_rank() == world_size() - 1;
    if (!withholds) {
        double t0 = now_s();
        w.rc = run_coll(c, comm, count, nullptr);
        w.op_s = now_s() - t0;
        vcclCommGetAsyncError(comm, &w.async);
    }
    MPI_Barrier(MPI_COMM_WORLD); // the withholding rank keeps its communicator until the others have given up
    double t0 = now_s();
    w.abort_rc = vcclCommAbort(comm);
    w.abort_s = now_s() - t0;
    return w;
}

std::string describe(const Withheld& w, const char* what) {
    std::ostringstream os;
    os << what << ": returned " << rc_name(w.rc) << " after " << w.op_s << " s, async error " << rc_name(w.async)
       << ", abort " << rc_name(w.abort_rc) << " in " << w.abort_s << " s";
    return os.str();
}

/* Abort measures about 0.5 s on an idle 2-core machine (its connections get 500 ms to close); with two busy loops
 * beside the 3 ranks it took up to 1.2 s. */
constexpr double kAbortLimitS = 1.5;

bool withheld_ok(const Withheld& w, double min_s, double max_s) {
    if (w.abort_rc != vcclSuccess || w.abort_s >= kAbortLimitS) return false;
    if (world_rank() == world_size() - 1) return true;
    return w.rc == vcclTimeout && w.async == vcclTimeout && w.op_s >= min_s && w.op_s < max_s;
}

class OpTimeout : public ::testing::Test {
protected:
    void SetUp() override {
        if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    }
};

TEST_F(OpTimeout, EnvironmentIsInEffect) {
    const char* v = getenv("VCCL_OP_TIMEOUT_MS");
    EXPECT_ALL_RANKS(g_env_set && v != nullptr && atoi(v) == kEnvTimeoutMs) << (v ? v : "(unset)");
}

/* The configured limit ends each collective on every rank that took part, small (latency algorithms) and
 * large (pipelined ones), and the communicator then aborts in under a second everywhere. */
TEST_F(OpTimeout, ConfiguredLimitEndsWithheldCollectiveOnEveryRank) {
    const Coll colls[] = {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::AlltoAll};
    const size_t counts[] = {1, 300007};
    double worst_op = 0, worst_abort = 0;
    for (Coll c : colls) {
        for (size_t count : counts) {
            vcclConfig_t cfg = config_with_timeout(kConfigTimeoutMs);
            vcclComm_t comm = nullptr;
            vcclResult_t rc = vcclCommInitMPI(&comm, MPI_COMM_WORLD, &cfg);
            ASSERT_ALL_RANKS(rc == vcclSuccess) << rc_name(rc);
            Withheld w = withhold_last(comm, c, count);
            std::string what = std::string(coll_name(c)) + " of " + std::to_string(count);
            // Well under the environment's 2 s: the configured limit is the one in effect.
            EXPECT_ALL_RANKS_WHY(withheld_ok(w, kConfigTimeoutMs * 0.9e-3, 1.5), describe(w, what.c_str()));
            if (w.op_s > worst_op) worst_op = w.op_s;
            if (w.abort_s > worst_abort) worst_abort = w.abort_s;
        }
    }
    double worst[2] = {worst_op, worst_abort}, all[2];
    MPI_Reduce(worst, all, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (world_rank() == 0) {
        printf("# opTimeoutMs=%d: slowest timed-out collective %.3f s, slowest abort %.3f s\n", kConfigTimeoutMs,
               all[0], all[1]);
    }
}

/* Without the field (NULL config) the environment's limit applies. */
TEST_F(OpTimeout, EnvironmentLimitAppliesWithoutConfig) {
    vcclComm_t comm = nullptr;
    vcclResult_t rc = vcclCommInitMPI(&comm, MPI_COMM_WORLD, nullptr);
    ASSERT_ALL_RANKS(rc == vcclSuccess) << rc_name(rc);
    Withheld w = withhold_last(comm, Coll::AllReduce, 1);
    EXPECT_ALL_RANKS_WHY(withheld_ok(w, kEnvTimeoutMs * 0.95e-3, 6.0), describe(w, "AllReduce, NULL config"));
}

/* A caller built against a header without opTimeoutMs passes a smaller size: whatever lies where the field
 * would be is not read, and the environment's limit applies. */
TEST_F(OpTimeout, OlderConfigSizeGetsEnvironmentLimit) {
    vcclConfig_t cfg = config_with_timeout(1); // would end the call at once if it were read
    cfg.size = offsetof(vcclConfig_t, opTimeoutMs);
    vcclComm_t comm = nullptr;
    vcclResult_t rc = vcclCommInitMPI(&comm, MPI_COMM_WORLD, &cfg);
    ASSERT_ALL_RANKS(rc == vcclSuccess) << rc_name(rc);
    Withheld w = withhold_last(comm, Coll::AllReduce, 1);
    EXPECT_ALL_RANKS_WHY(withheld_ok(w, kEnvTimeoutMs * 0.95e-3, 6.0), describe(w, "AllReduce, older config size"));
}

/* 0 is no limit: a rank that joins after the environment's limit has passed still completes the collective,
 * with the right result on every rank. */
TEST_F(OpTimeout, ZeroMeansNoLimit) {
    vcclConfig_t cfg = config_with_timeout(0);
    vcclComm_t comm = nullptr;
    vcclResult_t rc = vcclCommInitMPI(&comm, MPI_COMM_WORLD, &cfg);
    ASSERT_ALL_RANKS(rc == vcclSuccess) << rc_name(rc);
    if (world_rank() == world_size() - 1) usleep((kEnvTimeoutMs + 500) * 1000);
    std::string wrong;
    double t0 = now_s();
    rc = run_coll(Coll::AllReduce, comm, 1001, &wrong);
    double s = now_s() - t0;
    std::ostringstream os;
    os << "AllReduce with opTimeoutMs=0 returned " << rc_name(rc) << " after " << s << " s " << wrong;
    EXPECT_ALL_RANKS_WHY(rc == vcclSuccess && wrong.empty(), os.str());
    EXPECT_ALL_RANKS(vcclCommDestroy(comm) == vcclSuccess);
}

/* A split with a NULL config inherits its parent's limit; a negative limit is refused before any rank waits. */
TEST_F(OpTimeout, SplitInheritsAndNegativeIsRefused) {
    vcclConfig_t cfg = config_with_timeout(kConfigTimeoutMs);
    vcclComm_t parent = nullptr, child = nullptr;
    vcclResult_t rc = vcclCommInitMPI(&parent, MPI_COMM_WORLD, &cfg);
    ASSERT_ALL_RANKS(rc == vcclSuccess) << rc_name(rc);
    rc = vcclCommSplit(parent, 0, world_rank(), &child, nullptr);
    ASSERT_ALL_RANKS(rc == vcclSuccess && child != nullptr) << rc_name(rc);
    Withheld w = withhold_last(child, Coll::AllReduce, 1);
    EXPECT_ALL_RANKS_WHY(withheld_ok(w, kConfigTimeoutMs * 0.9e-3, 1.5), describe(w, "AllReduce on a split"));
    EXPECT_ALL_RANKS(vcclCommDestroy(parent) == vcclSuccess);

    vcclConfig_t bad = config_with_timeout(-5);
    vcclComm_t none = nullptr;
    double t0 = now_s();
    rc = vcclCommInitMPI(&none, MPI_COMM_WORLD, &bad);
    double s = now_s() - t0;
    std::string why = vcclGetLastError(nullptr);
    // Well under VCCL_BOOTSTRAP_TIMEOUT (10 s): MPI's own creation of the bootstrap may wait for a slow rank.
    EXPECT_ALL_RANKS_WHY(rc == vcclInvalidArgument && none == nullptr && s < 5.0 &&
                             why.find("opTimeoutMs") != std::string::npos,
                         std::string(rc_name(rc)) + ": " + why);
}

/* ---------------------------------------------------------------------------------------------- */
/* Revoke                                                                                           */

/* An operation run on a thread of its own (as a training loop's would be while a watchdog revokes). */
class InFlight {
public:
    template <typename F>
    explicit InFlight(F fn) : thread_([this, fn] {
          rc_ = fn();
          end_s_ = now_s();
      }) {}
    /* Joins; the seconds from `since` to the operation's return. */
    double join(double since) {
        thread_.join();
        return end_s_ - since;
    }
    vcclResult_t rc() const { return rc_; }

private:
    vcclResult_t rc_ = vcclInternalError;
    double end_s_ = 0;
    std::thread thread_;
};

struct Revoked {
    vcclResult_t in_flight = vcclSuccess; // what the operation in flight returned (ranks that had one)
    double end_s = 0;                     // from the revoke call to that return
    vcclResult_t revoke = vcclInternalError;
    double revoke_s = 0;
};

/* Every rank revokes `comm` 300 ms after `in_flight` (NULL: nothing in flight on this rank) started. */
Revoked revoke_during(vcclComm_t comm, const std::function<vcclResult_t()>& in_flight) {
    Revoked r;
    std::unique_ptr<InFlight> op;
    std::atomic<bool> calling{false};
    if (in_flight) {
        op = std::make_unique<InFlight>([&calling, in_flight] {
            calling.store(true);
            return in_flight();
        });
    }
    while (op && !calling.load()) usleep(1000);
    usleep(300 * 1000); // into the call's wait (a loaded machine may take longer: see revoked_ok)
    MPI_Barrier(MPI_COMM_WORLD); // the operations are stuck: nothing they wait for will come
    double t0 = now_s();
    r.revoke = vcclCommRevoke(comm, VCCL_REVOKE_DEFAULT);
    r.revoke_s = now_s() - t0;
    if (op) {
        r.end_s = op->join(t0);
        r.in_flight = op->rc();
    }
    return r;
}

std::string describe(const Revoked& r, bool had_op) {
    std::ostringstream os;
    os << "revoke " << rc_name(r.revoke) << " in " << r.revoke_s << " s";
    if (had_op) os << "; the operation in flight returned " << rc_name(r.in_flight) << " " << r.end_s << " s after it";
    return os.str();
}

/* The operation ends with vcclRemoteError when it was waiting, or vcclInvalidUsage when the revoke came before its
 * thread reached the communicator (seen once with busy loops beside the ranks); either way within a second. */
bool revoked_ok(const Revoked& r, bool had_op) {
    if (r.revoke != vcclSuccess || r.revoke_s >= 1.0) return false;
    return !had_op || ((r.in_flight == vcclRemoteError || r.in_flight == vcclInvalidUsage) && r.end_s < 1.0);
}

/* What a revoked communicator refuses, and what it still answers. */
std::string refusals_after_revoke(vcclComm_t comm) {
    Expected e;
    int32_t x = 1, y = 0;
    e("AllReduce", vcclAllReduce(&x, &y, 1, vcclInt32, vcclSum, comm, nullptr), vcclInvalidUsage);
    e("Send", vcclSend(&x, 1, vcclInt32, 0, comm, nullptr), vcclInvalidUsage);
    vcclComm_t child = nullptr;
    e("Split", vcclCommSplit(comm, 0, 0, &child, nullptr), vcclInvalidUsage);
    e("Revoke with flags 5", vcclCommRevoke(comm, 5), vcclInvalidArgument);
    e("Revoke again", vcclCommRevoke(comm, VCCL_REVOKE_DEFAULT), vcclSuccess);
    vcclUniqueId id;
    e("GetUniqueId (grow)", vcclCommGetUniqueId(comm, &id), vcclInvalidUsage);
    int n = 0;
    e("Count", vcclCommCount(comm, &n), vcclSuccess);
    if (child != nullptr) e.why += "Split wrote a communicator\n";
    if (n != world_size()) e.why += "Count gave " + std::to_string(n) + "\n";
    return e.why;
}

class Revoke : public OpTimeout {};

/* Every rank waits in a receive nobody matches (no limit): each rank's revoke ends its own within a second;
 * afterwards the communicator refuses work, and destroy does not wait for the peers. */
TEST_F(Revoke, EndsUnmatchedReceivesOnEveryRankThenDestroy) {
    vcclConfig_t cfg = config_with_timeout(0);
    vcclComm_t comm = nullptr;
    vcclResult_t rc = vcclCommInitMPI(&comm, MPI_COMM_WORLD, &cfg);
    ASSERT_ALL_RANKS(rc == vcclSuccess) << rc_name(rc);
    std::vector<int32_t> buf(4099);
    const int from = (world_rank() + 1) % world_size();
    Revoked r = revoke_during(comm, [&] {
        return vcclRecv(buf.data(), buf.size(), vcclInt32, from, comm, nullptr);
    });
    EXPECT_ALL_RANKS_WHY(revoked_ok(r, true), describe(r, true));
    std::string why = refusals_after_revoke(comm);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    double t0 = now_s();
    rc = vcclCommDestroy(comm);
    double s = now_s() - t0;
    EXPECT_ALL_RANKS_WHY(rc == vcclSuccess && s < 1.0,
                         std::string("destroy ") + rc_name(rc) + " in " + std::to_string(s) + " s");
    if (world_rank() == 0) printf("# revoke: receive ended %.3f s after, revoke %.3f s, destroy %.3f s\n", r.end_s,
                                  r.revoke_s, s);
}

/* A collective the last rank withholds: the others' calls end at their revoke; then abort works. */
TEST_F(Revoke, EndsWithheldCollectiveThenAbort) {
    vcclConfig_t cfg = config_with_timeout(0);
    vcclComm_t comm = nullptr;
    vcclResult_t rc = vcclCommInitMPI(&comm, MPI_COMM_WORLD, &cfg);
    ASSERT_ALL_RANKS(rc == vcclSuccess) << rc_name(rc);
    const bool had_op = world_rank() != world_size() - 1;
    std::function<vcclResult_t()> op;
    if (had_op) op = [comm] { return run_coll(Coll::AllReduce, comm, 300007, nullptr); };
    Revoked r = revoke_during(comm, op);
    EXPECT_ALL_RANKS_WHY(revoked_ok(r, had_op), describe(r, had_op));
    double t0 = now_s();
    rc = vcclCommAbort(comm);
    double s = now_s() - t0;
    EXPECT_ALL_RANKS_WHY(rc == vcclSuccess && s < kAbortLimitS,
                         std::string("abort ") + rc_name(rc) + " in " + std::to_string(s) + " s");
}

/* The recovery NCCL's revoke is for: revoke, shrink the failed rank away, go on with the survivors. The shrunk
 * communicator's results are checked at several sizes; the excluded rank only destroys its revoked one. */
TEST_F(Revoke, ThenShrinkExcludingTheWithholdingRank) {
    if (world_size() < 3) GTEST_SKIP() << "needs 3 ranks (2 survivors)";
    vcclConfig_t cfg = config_with_timeout(0);
    vcclComm_t comm = nullptr;
    vcclResult_t rc = vcclCommInitMPI(&comm, MPI_COMM_WORLD, &cfg);
    ASSERT_ALL_RANKS(rc == vcclSuccess) << rc_name(rc);
    const int last = world_size() - 1;
    const bool survivor = world_rank() != last;
    std::function<vcclResult_t()> op;
    if (survivor) op = [comm] { return run_coll(Coll::AllGather, comm, 65537, nullptr); };
    Revoked r = revoke_during(comm, op);
    EXPECT_ALL_RANKS_WHY(revoked_ok(r, survivor), describe(r, survivor));
    std::string why;
    if (survivor) {
        vcclComm_t shrunk = nullptr;
        int exclude = last;
        rc = vcclCommShrink(comm, &exclude, 1, &shrunk, nullptr, VCCL_SHRINK_DEFAULT);
        if (rc != vcclSuccess || shrunk == nullptr) {
            why = std::string("shrink: ") + rc_name(rc) + " " + vcclGetLastError(nullptr);
        } else {
            int n = 0;
            vcclCommCount(shrunk, &n);
            if (n != last) why += "shrunk communicator has " + std::to_string(n) + " ranks\n";
            for (size_t count : {size_t(0), size_t(1), size_t(1001), size_t(262147)}) {
                std::vector<double> in(count), out(count, -1.0);
                for (size_t i = 0; i < count; ++i) in[i] = double(world_rank() + 1) * 0.5 + double(i % 89);
                rc = vcclAllReduce(in.data(), out.data(), count, vcclFloat64, vcclSum, shrunk, nullptr);
                size_t bad = 0;
                for (size_t i = 0; i < count; ++i) {
                    // Survivors are ranks 0..last-1: sum of (r+1)/2 plus last times i % 89, exact in binary.
                    double want = double(last) * double(last + 1) / 4.0 + double(last) * double(i % 89);
                    if (out[i] != want) ++bad;
                }
                if (rc != vcclSuccess || bad != 0) {
                    why += "AllReduce of " + std::to_string(count) + " on the shrunk communicator: " + rc_name(rc) +
                           ", " + std::to_string(bad) + " wrong\n";
                }
            }
            if (vcclCommDestroy(shrunk) != vcclSuccess) why += "destroy of the shrunk communicator failed\n";
        }
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    EXPECT_ALL_RANKS(vcclCommDestroy(comm) == vcclSuccess);
}

/* ---------------------------------------------------------------------------------------------- */
/* Grow                                                                                             */

/* Collectives on `comm` (n ranks, this one `me`) against references computed here: AllReduce at counts 0, 1, odd
 * and large, in place, AllGather, Broadcast from the last rank, ReduceScatter. Returns what was wrong. */
std::string check_collectives(vcclComm_t comm, int n, int me) {
    std::string why;
    auto note = [&](const std::string& what, vcclResult_t rc, size_t bad) {
        if (rc != vcclSuccess || bad != 0) {
            why += what + ": " + rc_name(rc) + ", " + std::to_string(bad) + " wrong elements\n";
        }
    };
    for (size_t count : {size_t(0), size_t(1), size_t(1001), size_t(65539)}) {
        std::vector<int32_t> in(count), out(count, -1);
        for (size_t i = 0; i < count; ++i) in[i] = int32_t(me * 7 + int(i % 101));
        vcclResult_t rc = vcclAllReduce(in.data(), out.data(), count, vcclInt32, vcclSum, comm, nullptr);
        size_t bad = 0;
        for (size_t i = 0; i < count; ++i) bad += out[i] != int32_t(7 * n * (n - 1) / 2 + n * int(i % 101));
        note("AllReduce int32 sum of " + std::to_string(count), rc, bad);
    }
    {
        std::vector<double> buf(333);
        for (size_t i = 0; i < buf.size(); ++i) buf[i] = double(me) * 3.0 + double(i);
        vcclResult_t rc = vcclAllReduce(buf.data(), buf.data(), buf.size(), vcclFloat64, vcclMax, comm, nullptr);
        size_t bad = 0;
        for (size_t i = 0; i < buf.size(); ++i) bad += buf[i] != double(n - 1) * 3.0 + double(i);
        note("AllReduce float64 max in place", rc, bad);
    }
    {
        const size_t count = 257;
        std::vector<int64_t> in(count), out(count * size_t(n), -1);
        for (size_t i = 0; i < count; ++i) in[i] = int64_t(me) * 100000 + int64_t(i);
        vcclResult_t rc = vcclAllGather(in.data(), out.data(), count, vcclInt64, comm, nullptr);
        size_t bad = 0;
        for (size_t i = 0; i < out.size(); ++i) bad += out[i] != int64_t(i / count) * 100000 + int64_t(i % count);
        note("AllGather int64", rc, bad);
    }
    {
        std::vector<uint8_t> buf(4097, 0);
        if (me == n - 1) {
            for (size_t i = 0; i < buf.size(); ++i) buf[i] = uint8_t(i * 7 + 3);
        }
        vcclResult_t rc = vcclBroadcast(buf.data(), buf.data(), buf.size(), vcclUint8, n - 1, comm, nullptr);
        size_t bad = 0;
        for (size_t i = 0; i < buf.size(); ++i) bad += buf[i] != uint8_t(i * 7 + 3);
        note("Broadcast uint8 from the last rank", rc, bad);
    }
    {
        const size_t rc_count = 129;
        std::vector<float> in(rc_count * size_t(n)), out(rc_count, -1.0f);
        for (size_t j = 0; j < in.size(); ++j) in[j] = float(me) + float(j % 13);
        vcclResult_t rc = vcclReduceScatter(in.data(), out.data(), rc_count, vcclFloat32, vcclSum, comm, nullptr);
        size_t bad = 0;
        for (size_t i = 0; i < rc_count; ++i) {
            bad += out[i] != float(n * (n - 1) / 2) + float(n) * float((size_t(me) * rc_count + i) % 13);
        }
        note("ReduceScatter float32 sum", rc, bad);
    }
    return why;
}

constexpr int kGrowTimeoutMs = 60000;

/* A communicator of world ranks 0 and 1 (NULL on the others), by a unique id. */
vcclComm_t make_pair_comm(vcclResult_t* rc) {
    vcclUniqueId id;
    memset(&id, 0, sizeof id);
    *rc = vcclSuccess;
    if (world_rank() == 0) *rc = vcclGetUniqueId(&id);
    MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, MPI_COMM_WORLD);
    vcclComm_t c = nullptr;
    // The program's 2 s limit is for the timeout cases; on a loaded machine a new communicator's first
    // collectives took longer. The grown ones inherit this (ranks of the parent) or are given it (new ranks).
    vcclConfig_t cfg = config_with_timeout(kGrowTimeoutMs);
    if (world_rank() < 2) *rc = vcclCommInitRankConfig(&c, 2, id, world_rank(), &cfg);
    return c;
}

/* Grows `*comm` (world ranks 0..from-1; NULL elsewhere) by world rank `from`, with `coordinator` making the id.
 * Checks the grown communicator and the parent, frees the parent, and leaves the grown one in *comm. */
std::string grow_by_one(vcclComm_t* comm, int from, int coordinator) {
    const int me = world_rank();
    std::string why;
    struct {
        int ok;
        vcclUniqueId id;
    } shared;
    memset(&shared, 0, sizeof shared);
    if (me == coordinator) shared.ok = vcclCommGetUniqueId(*comm, &shared.id) == vcclSuccess;
    MPI_Bcast(&shared, int(sizeof shared), MPI_BYTE, coordinator, MPI_COMM_WORLD);
    if (!shared.ok) return "vcclCommGetUniqueId failed on rank " + std::to_string(coordinator) + "\n";
    vcclComm_t grown = nullptr;
    vcclResult_t rc = vcclSuccess;
    double t0 = now_s();
    if (me < from) {
        rc = vcclCommGrow(*comm, from + 1, me == coordinator ? &shared.id : nullptr, -1, &grown, nullptr);
    } else if (me == from) {
        vcclConfig_t cfg = config_with_timeout(kGrowTimeoutMs);
        rc = vcclCommGrow(nullptr, from + 1, &shared.id, from, &grown, &cfg);
    }
    double grow_s = now_s() - t0;
    if (me <= from && (rc != vcclSuccess || grown == nullptr)) {
        why += std::string("grow to ") + std::to_string(from + 1) + ": " + rc_name(rc) + " " +
               vcclGetLastError(nullptr) + "\n";
    } else if (me <= from) {
        int n = 0, r = -1;
        vcclCommCount(grown, &n);
        vcclCommUserRank(grown, &r);
        if (n != from + 1 || r != me) {
            why += "grown communicator: " + std::to_string(n) + " ranks, rank " + std::to_string(r) + "\n";
        }
        std::string wrong = check_collectives(grown, from + 1, me);
        if (!wrong.empty()) why += "after growing to " + std::to_string(from + 1) + ":\n" + wrong;
    }
    if (me < from) {
        // The parent is left as it was.
        std::string wrong = check_collectives(*comm, from, me);
        if (!wrong.empty()) why += "the parent of " + std::to_string(from) + " after the grow:\n" + wrong;
        if (vcclCommDestroy(*comm) != vcclSuccess) why += "destroy of the parent failed\n";
    }
    double worst = grow_s, all = 0;
    MPI_Reduce(&worst, &all, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (me == 0) printf("# grow %d -> %d: %.3f s\n", from, from + 1, all);
    *comm = me <= from ? grown : nullptr;
    return why;
}

class Grow : public ::testing::Test {
protected:
    void SetUp() override {
        if (world_size() < 3) GTEST_SKIP() << "needs 3 ranks";
    }
};

/* 2 -> 3 (-> 4 ...) ranks one at a time, up to the world's size, with collectives checked after each step; the
 * coordinator is the parent's rank 0 on the first step and its last rank after. */
TEST_F(Grow, OneRankAtATimeWithCollectivesCheckedAfterEachStep) {
    vcclResult_t rc;
    vcclComm_t comm = make_pair_comm(&rc);
    ASSERT_ALL_RANKS(rc == vcclSuccess) << rc_name(rc);
    std::string why = world_rank() < 2 ? check_collectives(comm, 2, world_rank()) : std::string();
    EXPECT_ALL_RANKS_WHY(why.empty(), "the first two ranks: " + why);
    for (int from = 2; from < world_size(); ++from) {
        why = grow_by_one(&comm, from, from == 2 ? 0 : from - 1);
        bool ok = why.empty();
        EXPECT_ALL_RANKS_WHY(ok, why);
        if (!all_ranks_ok(ok)) break;
    }
    if (comm != nullptr) {
        EXPECT_EQ(vcclCommDestroy(comm), vcclSuccess);
    }
}

/* Bad grows are refused with vcclInvalidArgument: locally where one rank's arguments show it, and on every rank
 * of the communicator (without waiting for new ranks) when no rank passes the id. */
TEST_F(Grow, BadArgumentsAreRefused) {
    vcclComm_t comm = shared_comm(CommKind::Mpi);
    ASSERT_ALL_RANKS(comm != nullptr);
    const int n = world_size();
    Expected e;
    vcclUniqueId id;
    memset(&id, 0, sizeof id);
    vcclComm_t out = nullptr;
    e("nRanks not larger", vcclCommGrow(comm, n, &id, -1, &out, nullptr), vcclInvalidArgument);
    e("a rank of comm naming a rank", vcclCommGrow(comm, n + 1, &id, 0, &out, nullptr), vcclInvalidArgument);
    e("newcomm NULL", vcclCommGrow(comm, n + 1, &id, -1, nullptr, nullptr), vcclInvalidArgument);
    e("a new rank without the id", vcclCommGrow(nullptr, n + 1, nullptr, n, &out, nullptr), vcclInvalidArgument);
    e("a new rank out of range", vcclCommGrow(nullptr, n + 1, &id, n + 1, &out, nullptr), vcclInvalidArgument);
    e("GetUniqueId into NULL", vcclCommGetUniqueId(comm, nullptr), vcclInvalidArgument);
    double t0 = now_s();
    e("no rank passes the id", vcclCommGrow(comm, n + 1, nullptr, -1, &out, nullptr), vcclInvalidArgument);
    double s = now_s() - t0;
    // The ranks' votes are gathered first, so a loaded machine's slowest rank sets the time; a rank waiting for new
    // ranks would wait VCCL_BOOTSTRAP_TIMEOUT (10 s).
    if (s > 5.0) e.why += "the refusal took " + std::to_string(s) + " s\n";
    if (out != nullptr) e.why += "*newcomm written on failure\n";
    EXPECT_ALL_RANKS_WHY(e.why.empty(), e.why);
    // The communicator still works.
    std::string wrong = check_collectives(comm, n, world_rank());
    EXPECT_ALL_RANKS_WHY(wrong.empty(), wrong);
}

} // namespace
