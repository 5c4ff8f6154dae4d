/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GoogleTest main for MPI programs (tests/mpi/).
 *
 * - MPI_Init before the tests, MPI_Finalize after; every rank runs every test in the same order.
 * - Only rank 0 prints gtest's progress and writes the XML report (GTEST_OUTPUT / --gtest_output);
 *   other ranks print only failures that are theirs alone, prefixed with "[rank N]".
 * - EXPECT_ALL_RANKS(cond) / ASSERT_ALL_RANKS(cond) are collective: every rank must reach them, every rank
 *   learns whether cond held on all ranks, and rank 0 reports which ranks failed. Never put them inside
 *   a branch that depends on the rank.
 * - A watchdog (alarm) aborts the whole job when one test runs past VCCL_TEST_TIMEOUT_S seconds (default
 *   120), printing which test hung, so that nothing hangs CI.
 */
#ifndef VCCL_TESTS_MPI_GTEST_MAIN_H_
#define VCCL_TESTS_MPI_GTEST_MAIN_H_

#include <mpi.h>

#include <functional>
#include <string>

#include <gtest/gtest.h>

namespace vtest {

int world_rank();
int world_size();

/* Collective over MPI_COMM_WORLD: true when local_ok is true on every rank. */
bool all_ranks_ok(bool local_ok);

/* Collective result of a check: ok on all ranks; on rank 0 detail names the failing ranks and their whys. */
struct RankCheck {
    bool ok;
    std::string detail;
    explicit operator bool() const { return ok; }
};
RankCheck check_all_ranks(bool local_ok, const std::string& why = std::string());

/* Runs fn after the tests, before MPI_Finalize (last registered runs first). Use it to free communicators. */
void on_finalize(std::function<void()> fn);

/* Seconds since an arbitrary point (monotonic). */
double now_s();

/* Re-arms the watchdog for the current phase (e.g. a test that legitimately takes long). */
void watchdog_arm(unsigned seconds, const char* what);

} // namespace vtest

#define VT_ALL_RANKS_IMPL_(cond, why, fail)                                                          \
    GTEST_AMBIGUOUS_ELSE_BLOCKER_                                                                    \
    if (const ::vtest::RankCheck vt_rank_check_ = ::vtest::check_all_ranks(static_cast<bool>(cond), (why))) \
        ;                                                                                            \
    else                                                                                             \
        fail() << "[all-ranks] `" #cond "` is false " << vt_rank_check_.detail << " "

/* Collective EXPECT: fails the test on every rank when cond is false on any rank. Streams like EXPECT_*. */
#define EXPECT_ALL_RANKS(cond) VT_ALL_RANKS_IMPL_(cond, std::string(), ADD_FAILURE)
/* Collective ASSERT: returns from the test on every rank when cond is false on any rank. */
#define ASSERT_ALL_RANKS(cond) VT_ALL_RANKS_IMPL_(cond, std::string(), FAIL)
/* As above, and rank 0's message carries each failing rank's own explanation (a std::string). */
#define EXPECT_ALL_RANKS_WHY(cond, why) VT_ALL_RANKS_IMPL_(cond, why, ADD_FAILURE)
#define ASSERT_ALL_RANKS_WHY(cond, why) VT_ALL_RANKS_IMPL_(cond, why, FAIL)

#endif
