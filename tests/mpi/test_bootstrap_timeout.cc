/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Bootstrap timeout, under mpirun with 3 ranks: rank 0 creates a unique id and MPI_Bcasts it; ranks 0 and 1
 * call vcclCommInitRank(nranks=3) with VCCL_BOOTSTRAP_TIMEOUT=3, rank 2 never does. Ranks 0 and 1 must get
 * vcclTimeout after 3 .. 8 s; then everything finalizes cleanly, and a complete initialisation still works.
 * (With N ranks, the last one stays away; needs N >= 2.)
 *
 * VCCL_BOOTSTRAP_TIMEOUT is read once per process, so it is set before main().
 */
#include <cstdlib>
#include <sstream>

#include "mpi_gtest_main.h"
#include "test_util.h"

using namespace vtest;

namespace {

const bool g_env_set = [] {
    setenv("VCCL_BOOTSTRAP_TIMEOUT", "3", 1);
    return true;
}();

TEST(BootstrapTimeout, MissingRankTimesOut) {
    const int rank = world_rank(), n = world_size();
    if (n < 2) GTEST_SKIP() << "needs at least 2 ranks";
    vcclUniqueId id;
    memset(&id, 0, sizeof id);
    vcclResult_t idrc = vcclSuccess;
    if (rank == 0) idrc = vcclGetUniqueId(&id);
    MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, MPI_COMM_WORLD);
    ASSERT_ALL_RANKS(idrc == vcclSuccess) << "vcclGetUniqueId: " << result_str(idrc);

    const bool joins = rank != n - 1;
    vcclComm_t comm = reinterpret_cast<vcclComm_t>(uintptr_t(0x20)); // must stay unwritten on failure
    vcclResult_t rc = vcclSuccess;
    double elapsed = 0;
    if (joins) {
        double t0 = now_s();
        rc = vcclCommInitRank(&comm, n, id, rank);
        elapsed = now_s() - t0;
    }
    std::ostringstream os;
    os << "vcclCommInitRank returned " << result_str(rc) << " after " << elapsed << " s (want vcclTimeout in 3 .. 8 s)";
    bool ok = !joins || (rc == vcclTimeout && elapsed >= 3.0 && elapsed <= 8.0 &&
                         comm == reinterpret_cast<vcclComm_t>(uintptr_t(0x20)));
    if (joins && rc != vcclTimeout && rc != vcclSuccess) os << " [" << vcclGetLastError(nullptr) << "]";
    if (joins && rc == vcclSuccess) vcclCommAbort(comm);
    EXPECT_ALL_RANKS_WHY(ok, os.str());
}

TEST(BootstrapTimeout, FullInitWorksAfterwards) {
    /* The failed attempt left nothing behind that blocks a new, complete initialisation. */
    const int rank = world_rank(), n = world_size();
    vcclUniqueId id;
    memset(&id, 0, sizeof id);
    vcclResult_t idrc = vcclSuccess;
    if (rank == 0) idrc = vcclGetUniqueId(&id);
    MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, MPI_COMM_WORLD);
    ASSERT_ALL_RANKS(idrc == vcclSuccess);
    vcclComm_t comm = nullptr;
    double t0 = now_s();
    vcclResult_t rc = vcclCommInitRank(&comm, n, id, rank);
    double dt = now_s() - t0;
    ASSERT_ALL_RANKS(rc == vcclSuccess && comm != nullptr) << result_str(rc) << " after " << dt << " s";
    int32_t x = rank, y = -1;
    rc = vcclAllReduce(&x, &y, 1, vcclInt32, vcclMax, comm, nullptr);
    EXPECT_ALL_RANKS(rc == vcclSuccess && y == n - 1);
    EXPECT_ALL_RANKS(vcclCommDestroy(comm) == vcclSuccess);
}

TEST(BootstrapTimeout, EnvironmentIsInEffect) {
    const char* v = getenv("VCCL_BOOTSTRAP_TIMEOUT");
    EXPECT_ALL_RANKS(g_env_set && v != nullptr && atoi(v) == 3);
}

} // namespace
