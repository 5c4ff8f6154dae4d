/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device-memory tests of a peer that fails (part of tests/gpu/test_gpu; test_gpu.cc lists them all): a rank
 * that gives a direct transfer up after the descriptors were exchanged, or in the exchange, tells its peer,
 * whose vcclCommGetAsyncError reports vcclRemoteError and whose later calls are refused; a receiving stream
 * goes on, a sending one is released by vcclCommAbort and, after VCCL_OP_TIMEOUT_MS, by vcclCommDestroy.
 * (GpuFailure.GivenUpSendReleasesAfterEarlierTransfers, which needs a blocked stream, is in test_gpu_async.cc.)
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gpu_test_util.h"
#include "mpi_gtest_main.h"
#include "test_util.h"

using namespace vtest;
using namespace vgpu;

namespace {

/* One rank fails after the descriptors were exchanged, before it enqueues its part (as a failed IPC mapping
 * would); its peer's call has already returned success. The failing rank tells the peer: the peer's
 * vcclCommGetAsyncError reports vcclRemoteError. A failed sender also lets the receiver's stream go on (its
 * data is not valid); a failed receiver cannot (faking its READY would let the copy land in a buffer whose
 * call failed), so the sender's stream waits until vcclCommAbort (after 500 ms) or vcclCommDestroy (after
 * VCCL_OP_TIMEOUT_MS) releases it instead of hanging. Rank 0 receives from rank 1; other ranks only create
 * and end the communicator. */
/* Size of the rendezvous cases: above the FIFO's largest transfer. */
size_t rendezvous_bytes() { return std::max(size_t(1) << 20, fifo_bytes() + 4096); }

/* `count` > 1: that many transfers of `bytes` in one group (the failing rank gives up all of them).
 * `in_exchange`: the failing rank gives up right after the descriptor exchange instead (as a timeout there
 * would), so the peer has enqueued its part before the failing rank enqueues anything. */
std::string failed_peer_case(bool sender_fails, bool abort, int64_t timeout_ms, size_t bytes, int count = 1,
                             bool in_exchange = false) {
    int rank = world_rank();
    vcclComm_t comm = make_comm(CommKind::Mpi);
    if (!all_ranks_ok(comm != nullptr)) return "communicator creation failed";
    Stream s;
    DevBuf buf(bytes);
    const int failing = sender_fails ? 1 : 0, waiting = 1 - failing;
    std::string why;
    if (rank == 0 || rank == 1) {
        if (rank == failing && (in_exchange ? vccl::testing::fail_next_exchange(comm)
                                            : vccl::testing::fail_next_direct(comm, sender_fails ? 1 : 0)) != vcclSuccess) {
            why = "test hook refused";
        }
        vcclResult_t r = count > 1 ? vcclGroupStart() : vcclSuccess;
        for (int k = 0; k < count; ++k) {
            vcclResult_t one = rank == 1 ? vcclSend(buf.ptr(), bytes, vcclUint8, 0, comm, s.s)
                                         : vcclRecv(buf.ptr(), bytes, vcclUint8, 1, comm, s.s);
            if (r == vcclSuccess) r = one;
        }
        if (count > 1) {
            vcclResult_t end = vcclGroupEnd();
            if (r == vcclSuccess) r = end;
        }
        if (rank == failing && r == vcclSuccess && why.empty()) why = "the failing call returned success";
        if (rank == waiting && r != vcclSuccess) why = "the waiting rank's call failed on the host: " + result_str(r);
        if (rank == waiting && why.empty()) {
            vcclResult_t async = vcclSuccess;
            for (int i = 0; i < 200 && async == vcclSuccess; ++i) {
                if (vcclCommGetAsyncError(comm, &async) != vcclSuccess) break;
                if (async == vcclSuccess) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
            if (async != vcclRemoteError) why = "vcclCommGetAsyncError reported " + result_str(async) + ", not vcclRemoteError";
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        cudaError_t q = cudaStreamQuery(s.s);
        if (rank == waiting && why.empty() && sender_fails && q != cudaSuccess) {
            why = "the receiver's stream did not go on after the sender gave up: " + cuda_str(q);
        }
        if (rank == waiting && why.empty() && !sender_fails && q != cudaErrorNotReady) {
            why = "the sender's stream was not waiting (direct path not taken?): nothing to release";
        }
    }
    double t0 = MPI_Wtime();
    vcclResult_t end = abort ? vcclCommAbort(comm) : vcclCommDestroy(comm);
    double took = MPI_Wtime() - t0;
    const char* what = abort ? "abort" : "destroy";
    if (end != vcclSuccess && why.empty()) why = std::string(what) + " failed: " + result_str(end);
    if (rank == waiting && why.empty() && !sender_fails) {
        double low = abort ? 0.4 : double(timeout_ms) / 1000.0 - 0.5, high = abort ? 3.0 : double(timeout_ms) / 1000.0 + 3.0;
        if (took < low || took > high) {
            why = std::string(what) + " took " + std::to_string(took) + " s, expected " + std::to_string(low) + " to " +
                  std::to_string(high) + " s";
        }
    }
    // The stream goes on: poll instead of cudaStreamSynchronize, which would hang the test on failure.
    expect_stream_goes_on(s.s, what);
    MPI_Barrier(MPI_COMM_WORLD); // a released send may still be copying into the peer's buffer: keep it until then
    return why;
}

TEST(GpuFailure, FailedSenderTellsReceiverAndLetsItGoOn) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    std::string why = failed_peer_case(true, true, 0, rendezvous_bytes());
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* A rank that gives a transfer up in the descriptor exchange (a timeout there) after its peer has enqueued its
 * part tells the peer, as one that fails after the exchange does. It did not: the peer's
 * vcclCommGetAsyncError said nothing, and its stream waited until the failing rank aborted. */
TEST(GpuFailure, SenderGivingUpInTheExchangeTellsReceiver) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    std::string why = failed_peer_case(true, true, 0, rendezvous_bytes(), 1, true);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

TEST(GpuFailure, FifoSenderGivingUpInTheExchangeTellsReceiver) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    if (fifo_bytes() < 4096) GTEST_SKIP() << "needs VCCL_P2P_FIFO_BYTES >= 4096";
    std::string why = failed_peer_case(true, true, 0, 4096, 1, true);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

TEST(GpuFailure, ReceiverGivingUpInTheExchangeTellsSender) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    std::string why = failed_peer_case(false, true, 0, rendezvous_bytes(), 1, true);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

TEST(GpuFailure, FailedFifoSenderTellsReceiverAndLetsItGoOn) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    if (fifo_bytes() < 4096) GTEST_SKIP() << "needs VCCL_P2P_FIFO_BYTES >= 4096";
    std::string why = failed_peer_case(true, true, 0, 4096);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* A failed FIFO receiver frees no slot: its sender goes on until the credits are spent (VCCL_P2P_FIFO_SLOTS
 * transfers), then waits; abort releases it. */
TEST(GpuFailure, AbortReleasesFifoSenderOutOfCredits) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    if (fifo_bytes() < 4096) GTEST_SKIP() << "needs VCCL_P2P_FIFO_BYTES >= 4096";
    const char* v = getenv("VCCL_P2P_FIFO_SLOTS");
    int slots = v != nullptr ? atoi(v) : 8;
    std::string why = failed_peer_case(false, true, 0, 4096, slots + 1);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

TEST(GpuFailure, AbortReleasesStreamWaitingForFailedReceiver) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    std::string why = failed_peer_case(false, true, 0, rendezvous_bytes());
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

TEST(GpuFailure, DestroyReleasesSenderAfterOpTimeout) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    const char* t = getenv("VCCL_OP_TIMEOUT_MS");
    int64_t ms = t != nullptr ? atoll(t) : 0;
    if (ms <= 0 || ms > 30000) GTEST_SKIP() << "needs VCCL_OP_TIMEOUT_MS between 1 and 30000 (np2 scripts set it)";
    std::string why = failed_peer_case(false, false, ms, rendezvous_bytes());
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* A rank whose peer gave a transfer up keeps calling without asking vcclCommGetAsyncError, as a program that
 * checks only return codes does: its next calls must be refused with vcclRemoteError naming the peer, so the
 * program learns of it. Before, every call was accepted until vcclCommGetAsyncError was called. The failing
 * rank's send (or receive) fails after the exchange (test hook); its peer then makes a send/recv to itself every
 * 10 ms (a call that needs no peer, so none waits in an exchange), then a collective. A failed sender's peer has
 * received data that is not valid, with success; a failed receiver's peer has its stream waiting for a READY
 * that never comes (until abort), and its own calls queue behind that wait, so the failure must be read on
 * another stream. Other ranks only create and end the communicator. */
std::string refusal_case(bool sender_fails) {
    const int rank = world_rank();
    const int failing = sender_fails ? 1 : 0, waiting = 1 - failing;
    vcclComm_t comm = make_comm(CommKind::Mpi);
    if (!all_ranks_ok(comm != nullptr)) return "communicator creation failed";
    const size_t bytes = rendezvous_bytes();
    Stream s;
    DevBuf buf(bytes), mine(4096), theirs(4096);
    std::string why;
    if (rank == failing && vccl::testing::fail_next_direct(comm, sender_fails ? 1 : 0) != vcclSuccess) {
        why = "test hook refused";
    }
    if (rank == 0 || rank == 1) {
        vcclResult_t r = rank == 1 ? vcclSend(buf.ptr(), bytes, vcclUint8, 0, comm, s.s)
                                   : vcclRecv(buf.ptr(), bytes, vcclUint8, 1, comm, s.s);
        if (rank == failing && r == vcclSuccess && why.empty()) why = "the failing call returned success";
        if (rank == waiting && r != vcclSuccess) why = "the waiting rank's call failed on the host: " + result_str(r);
    }
    if (rank == waiting && why.empty()) {
        const int kTries = 100, kAcceptedAtMost = 10; // polls run every 10 ms: refused within ~20 ms
        int accepted = 0;
        vcclResult_t r = vcclSuccess;
        while (accepted < kTries) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            vcclResult_t g = vcclGroupStart();
            vcclResult_t x = vcclSend(mine.ptr(), 4096, vcclUint8, rank, comm, s.s);
            vcclResult_t y = vcclRecv(theirs.ptr(), 4096, vcclUint8, rank, comm, s.s);
            vcclResult_t e = vcclGroupEnd();
            r = g != vcclSuccess ? g : x != vcclSuccess ? x : y != vcclSuccess ? y : e;
            if (r != vcclSuccess) break;
            ++accepted;
        }
        std::string msg = vcclGetLastError(comm);
        printf("[rank %d] %d call(s) accepted after rank %d gave up, then: %s (%s)\n", rank, accepted, failing,
               result_str(r).c_str(), msg.c_str());
        const std::string peer = "rank " + std::to_string(failing);
        if (r != vcclRemoteError) {
            why = std::to_string(accepted) + " calls were accepted after " + peer + " gave up; the last returned " +
                  result_str(r);
        } else if (msg.find(peer) == std::string::npos) {
            why = "the refusal does not name " + peer + ": " + msg;
        } else if (accepted > kAcceptedAtMost) {
            why = "refused only after " + std::to_string(accepted) + " calls were accepted (10 ms apart)";
        } else {
            vcclResult_t c = vcclAllReduce(buf.ptr(), buf.ptr(), 4, vcclFloat32, vcclSum, comm, s.s);
            if (c != vcclRemoteError) why = "an allreduce after the refusal returned " + result_str(c);
            vcclResult_t async = vcclSuccess;
            if (why.empty() && (vcclCommGetAsyncError(comm, &async) != vcclSuccess || async != vcclRemoteError)) {
                why = "vcclCommGetAsyncError reported " + result_str(async) + " after the refusal";
            }
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    // A failed receiver's peer still waits for its READY: abort releases it (after 500 ms).
    vcclResult_t end = vcclCommAbort(comm);
    if (end != vcclSuccess && why.empty()) why = "abort failed: " + result_str(end);
    expect_stream_goes_on(s.s, "a peer's failure, calls after it and abort");
    MPI_Barrier(MPI_COMM_WORLD);
    return why;
}

TEST(GpuFailure, CallsAfterAPeersFailureAreRefused) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    std::string why = refusal_case(true);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

TEST(GpuFailure, CallsBehindAWaitForAFailedReceiverAreRefused) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    std::string why = refusal_case(false);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* A call with host buffers on a stream must wait for the stream first (documented). When that stream waits for
 * a READY from a receiver that gave up, the wait never ends on its own, and the calling thread cannot abort:
 * the call must stop waiting and return vcclRemoteError. Before, it waited for ever: holding the communicator's
 * lock, not even vcclCommAbort on another thread could end it (a watchdog here ends the job after 5 s). Rank 0's receive fails after the exchange (test hook); rank 1 then makes a send/recv
 * to itself of host buffers on the stream that waits. */
TEST(GpuFailure, HostCallBehindAWaitForAFailedReceiverReturns) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    const int rank = world_rank();
    vcclComm_t comm = make_comm(CommKind::Mpi);
    ASSERT_ALL_RANKS(comm != nullptr);
    const size_t bytes = rendezvous_bytes();
    Stream s;
    DevBuf buf(bytes);
    std::string why;
    if (rank == 0 && vccl::testing::fail_next_direct(comm, 0) != vcclSuccess) why = "test hook refused";
    if (rank == 1) {
        vcclResult_t r = vcclSend(buf.ptr(), bytes, vcclUint8, 0, comm, s.s);
        if (r != vcclSuccess) why = "the send failed on the host: " + result_str(r);
    } else if (rank == 0) {
        vcclResult_t r = vcclRecv(buf.ptr(), bytes, vcclUint8, 1, comm, s.s);
        if (r == vcclSuccess && why.empty()) why = "the failing receive returned success";
    }
    if (rank == 1 && why.empty()) {
        std::atomic<bool> done{false};
        std::thread watchdog([&] {
            for (int i = 0; i < 500 && !done.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            if (!done.load()) { // an abort could not help: the waiting call holds the communicator's lock
                fprintf(stderr, "[rank 1] the host call behind a wait for a failed receiver still waits after 5 s: "
                                "ending the job\n");
                fflush(stderr);
                _exit(1);
            }
        });
        std::vector<char> mine(4096, 7), theirs(4096, 0);
        double t0 = MPI_Wtime();
        vcclResult_t g = vcclGroupStart();
        vcclResult_t x = vcclSend(mine.data(), mine.size(), vcclUint8, 1, comm, s.s);
        vcclResult_t y = vcclRecv(theirs.data(), theirs.size(), vcclUint8, 1, comm, s.s);
        vcclResult_t e = vcclGroupEnd();
        double took = MPI_Wtime() - t0;
        done.store(true);
        watchdog.join();
        vcclResult_t r = g != vcclSuccess ? g : x != vcclSuccess ? x : y != vcclSuccess ? y : e;
        printf("[rank 1] host call behind the wait returned %s after %.3f s\n", result_str(r).c_str(), took);
        if (r != vcclRemoteError) {
            why = "the host call returned " + result_str(r) + ", not vcclRemoteError";
        } else if (std::string(vcclGetLastError(comm)).find("rank 0") == std::string::npos) {
            why = std::string("the error does not name rank 0: ") + vcclGetLastError(comm);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    vcclResult_t end = vcclCommAbort(comm);
    if (end != vcclSuccess && why.empty()) why = "abort failed: " + result_str(end);
    expect_stream_goes_on(s.s, "a host call behind a wait for a failed receiver, and abort");
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

} // namespace
