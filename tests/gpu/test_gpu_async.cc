/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device-memory tests of the calling thread never waiting for the device (part of tests/gpu/test_gpu;
 * test_gpu.cc lists them all): with a kernel blocking the stream on a host flag every call returns at once, on
 * the direct path and through host staging (np2_shared_gpu_staged.sh), with a small staging pool, many receive
 * buffers, a host-memory call behind, sequence numbers that wrap, and vcclCommAbort (also of a FIFO receive
 * into host memory, which must not land after the error).
 */
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "gpu_kernels.h"
#include "gpu_test_util.h"
#include "mpi_gtest_main.h"
#include "test_util.h"

using namespace vtest;
using namespace vgpu;

namespace {

/* One ring exchange of `bytes` on `comm` and `s` (send to the next rank, receive from the previous one): empty when
 * every call succeeded, else call_failure's account. */
std::string ring_exchange(vcclComm_t comm, const void* send, void* recv, size_t bytes, cudaStream_t s) {
    const int rank = world_rank(), n = world_size();
    vcclResult_t g = vcclGroupStart();
    vcclResult_t x = vcclSend(send, bytes, vcclUint8, (rank + 1) % n, comm, s);
    vcclResult_t y = vcclRecv(recv, bytes, vcclUint8, (rank + n - 1) % n, comm, s);
    vcclResult_t e = vcclGroupEnd();
    return call_failure(comm, {g, x, y, e});
}

/* Seed of round k's data on rank r in the GpuAsync tests. */
uint32_t async_seed(int k, int r, size_t elems) { return uint32_t(1000 * k + 10 * r + elems % 7 + 1); }

/* `rounds` AllReduces and ring send/recv pairs of `elems` uint32 on s, each after a kernel writes its input. */
std::string enqueue_async_rounds(vcclComm_t comm, cudaStream_t s, int rounds, size_t elems, uint32_t* send,
                                 uint32_t* sum, uint32_t* ring) {
    int rank = world_rank(), n = world_size();
    for (int k = 0; k < rounds; ++k) {
        size_t at = size_t(k) * elems;
        cudaError_t ce = vt_slow_fill(send + at, elems, async_seed(k, rank, elems), 0, s);
        if (ce != cudaSuccess) return "kernel launch: " + cuda_str(ce);
        vcclResult_t a = vcclAllReduce(send + at, sum + at, elems, vcclUint32, vcclSum, comm, s);
        vcclResult_t g = vcclGroupStart();
        vcclResult_t x = vcclSend(send + at, elems, vcclUint32, (rank + 1) % n, comm, s);
        vcclResult_t y = vcclRecv(ring + at, elems, vcclUint32, (rank + n - 1) % n, comm, s);
        vcclResult_t e = vcclGroupEnd();
        std::string why = call_failure(comm, {a, g, x, y, e});
        if (!why.empty()) return "round " + std::to_string(k) + ": " + why;
    }
    return "";
}

std::string check_async_rounds(int rounds, size_t elems, const DevBuf& sum, const DevBuf& ring) {
    int rank = world_rank(), n = world_size(), prev = (rank + n - 1) % n;
    std::vector<char> got_sum = sum.download(), got_ring = ring.download();
    const auto* gs = reinterpret_cast<const uint32_t*>(got_sum.data());
    const auto* gr = reinterpret_cast<const uint32_t*>(got_ring.data());
    for (int k = 0; k < rounds; ++k) {
        for (size_t i = 0; i < elems; ++i) {
            uint32_t want = 0;
            for (int r = 0; r < n; ++r) want += vt_pattern(i, async_seed(k, r, elems));
            size_t at = size_t(k) * elems + i;
            if (gs[at] != want) {
                return "round " + std::to_string(k) + " allreduce element " + std::to_string(i) + " is " +
                       std::to_string(gs[at]) + ", want " + std::to_string(want);
            }
            if (gr[at] != vt_pattern(i, async_seed(k, prev, elems))) {
                return "round " + std::to_string(k) + " received element " + std::to_string(i) + " is wrong";
            }
        }
    }
    return "";
}

/* Blocks `s` with a kernel waiting on `gate`, runs `calls` (which enqueue work on s and return "" or why
 * they failed), checks that they returned while the stream was still blocked (a timer opens the gate after
 * `timer_ms`, so a call that waits for the stream fails the test instead of hanging it), then opens the gate
 * and waits for the stream. "" or why not. */
template <typename Calls>
std::string calls_behind_blocked_stream(Gate* gate, cudaStream_t s, int timer_ms, Calls&& calls) {
    std::string why;
    bool timer_fired = false, blocked_after_calls = false;
    gate->close();
    {
        GateTimer timer(gate, timer_ms);
        cudaError_t ce = vt_wait_flag(gate->dev, s);
        if (ce != cudaSuccess) why = "kernel launch: " + cuda_str(ce);
        if (why.empty()) why = calls();
        blocked_after_calls = cudaStreamQuery(s) == cudaErrorNotReady;
        timer.disarm();
        timer_fired = timer.fired();
        gate->open();
    }
    cudaError_t ce = cudaStreamSynchronize(s);
    if (why.empty() && timer_fired) {
        why = "a call waited for the blocked stream (the gate was opened by the " + std::to_string(timer_ms / 1000) + " s timer)";
    }
    if (why.empty() && !blocked_after_calls) why = "the stream was not blocked when the calls returned";
    if (why.empty() && ce != cudaSuccess) why = "stream: " + cuda_str(ce);
    return why;
}

/* The calling thread never waits for device work: with the stream blocked by a kernel waiting on the host,
 * every call (AllReduce, grouped send/recv; several rounds, each after a kernel that writes its input)
 * returns while the stream is still blocked; then the results are right. Run on every path: direct
 * (np2_shared_gpu.sh) and host-staged through the proxy (np2_shared_gpu_staged.sh, VCCL_P2P_DIRECT=0). */
TEST(GpuAsync, CallsReturnWhileTheStreamIsBlocked) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    Stream s;
    Gate gate;
    ASSERT_ALL_RANKS(gate.dev != nullptr);
    const int rounds = 4;
    std::string first_failure;
    for (size_t elems : {size_t(1), size_t(1031), size_t(1 << 20) + 3}) {
        size_t bytes = elems * 4 * rounds;
        DevBuf send(bytes), sum(bytes), ring(bytes);
        ASSERT_ALL_RANKS(send.base != nullptr && sum.base != nullptr && ring.base != nullptr);
        auto* sp = reinterpret_cast<uint32_t*>(send.ptr());
        auto* up = reinterpret_cast<uint32_t*>(sum.ptr());
        auto* rp = reinterpret_cast<uint32_t*>(ring.ptr());
        // Once unblocked: the direct path waits for the stream when its reduction scratch grows (documented).
        std::string why = enqueue_async_rounds(comm, s.s, 1, elems * rounds, sp, up, rp);
        if (why.empty() && cudaStreamSynchronize(s.s) != cudaSuccess) why = "warm-up stream failed";
        MPI_Barrier(MPI_COMM_WORLD);
        if (why.empty()) {
            why = calls_behind_blocked_stream(&gate, s.s, 10000,
                                              [&] { return enqueue_async_rounds(comm, s.s, rounds, elems, sp, up, rp); });
        }
        if (why.empty()) why = check_async_rounds(rounds, elems, sum, ring);
        if (!why.empty() && first_failure.empty()) first_failure = std::to_string(elems) + " elements: " + why;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    EXPECT_ALL_RANKS_WHY(first_failure.empty(), first_failure);
}

/* More receive buffers from one peer than the direct path keeps mapped, behind a blocked stream: two rounds
 * over 70 buffers, the first unblocked, the second while a kernel blocks the stream; every call must return at
 * once, and both rounds' data are checked in every buffer. The staged path passes (its pinned pool holds the 70
 * transfers), and so does the direct path when VCCL_P2P_MAX_MAPPINGS keeps all 70 mapped. With fewer (the
 * default 64) the first round checks that the sender lets mappings go and still delivers, and the second is
 * skipped: cudaIpcCloseMemHandle waits for the whole device, also holding up this process's cudaMemcpyAsync on
 * other threads (docs/RELIABILITY.md). A communicator of its own, so earlier tests' mappings do not count. */
TEST(GpuAsync, ManyReceiveBuffersWhileTheStreamIsBlocked) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    vcclComm_t comm = make_comm(CommKind::Mpi);
    ASSERT_ALL_RANKS(comm != nullptr);
    const char* mappings_env = getenv("VCCL_P2P_MAX_MAPPINGS");
    long long kept = mappings_env != nullptr ? atoll(mappings_env) : 64;
    if (kept < 1 || kept > 65536) kept = 64; // vccl's default, which it also takes for a value out of range
    int rank = world_rank(), n = world_size(), prev = (rank + n - 1) % n;
    const int buffers = 70;
    const size_t elems = (size_t(256) << 10) / 4 + 3, bytes = elems * 4; // within the staging pool 70 times over
    Stream s;
    Gate gate;
    ASSERT_ALL_RANKS(gate.dev != nullptr);
    DevBuf send(bytes);
    // Over 2 MiB each, so every buffer is an allocation (and a CUDA IPC mapping) of its own.
    std::vector<std::unique_ptr<DevBuf>> recv;
    for (int k = 0; k < buffers; ++k) recv.emplace_back(new DevBuf((size_t(2) << 20) + 4096));
    bool allocated = send.base != nullptr;
    for (auto& r : recv) allocated = allocated && r->base != nullptr;
    ASSERT_ALL_RANKS(allocated);
    auto seed = [](int round, int k, int r) { return uint32_t(100000 * round + 100 * k + r + 1); };
    auto one_round = [&](int round) -> std::string {
        for (int k = 0; k < buffers; ++k) {
            cudaError_t ce = vt_slow_fill(reinterpret_cast<uint32_t*>(send.ptr()), elems, seed(round, k, rank), 0, s.s);
            if (ce != cudaSuccess) return "kernel launch: " + cuda_str(ce);
            std::string why = ring_exchange(comm, send.ptr(), recv[size_t(k)]->ptr(), bytes, s.s);
            if (!why.empty()) return "buffer " + std::to_string(k) + ": " + why;
        }
        return "";
    };
    auto check_round = [&](int round) -> std::string {
        for (int k = 0; k < buffers; ++k) {
            std::vector<char> got = recv[size_t(k)]->download();
            const auto* g = reinterpret_cast<const uint32_t*>(got.data());
            for (size_t i = 0; i < elems; ++i) {
                if (g[i] != vt_pattern(i, seed(round, k, prev))) {
                    return "round " + std::to_string(round) + " buffer " + std::to_string(k) + " element " +
                           std::to_string(i) + " is wrong";
                }
            }
            if (!recv[size_t(k)]->guards_intact()) return "buffer " + std::to_string(k) + ": a guard zone was written";
        }
        return "";
    };
    std::string why = one_round(1);
    if (why.empty() && cudaStreamSynchronize(s.s) != cudaSuccess) why = "first round: stream failed";
    if (why.empty()) why = check_round(1);
    // The direct path where it was taken (not with VCCL_P2P_DIRECT=0, nor between GPUs it cannot map).
    const bool direct = vccl::testing::direct_sends(comm) > 0;
    const bool evicting_here = direct && kept < buffers;
    const bool evicting = !all_ranks_ok(!evicting_here); // the blocked round runs on every rank or on none
    long long evictions = vccl::testing::ipc_evictions(comm);
    if (why.empty() && evicting_here && evictions < buffers - kept) {
        why = std::to_string(evictions) + " mappings let go for " + std::to_string(buffers) + " buffers with " +
              std::to_string(kept) + " kept: the test did not reach the eviction it is about";
    }
    if (why.empty() && !evicting_here && evictions != 0) {
        why = std::to_string(evictions) + " mappings let go although all " + std::to_string(buffers) + " fit";
    }
    // Every rank runs the blocked round or none does: one that skipped it would leave its peers' calls waiting
    // for its descriptors.
    const bool blocked_round = all_ranks_ok(why.empty()) && !evicting;
    if (blocked_round) why = calls_behind_blocked_stream(&gate, s.s, 20000, [&] { return one_round(2); });
    if (blocked_round && why.empty()) why = check_round(2);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    MPI_Barrier(MPI_COMM_WORLD);
    vcclCommDestroy(comm);
    if (evicting) {
        GTEST_SKIP() << "first round right with " << evictions << " mappings let go; the blocked round is a known gap "
                        "of the direct path with fewer than " << buffers << " mappings kept (letting one go, "
                        "cudaIpcCloseMemHandle, waits for the whole device): it runs with VCCL_P2P_MAX_MAPPINGS >= "
                     << buffers << " (np2_shared_gpu_mappings.sh) and VCCL_P2P_DIRECT=0";
    }
}

/* Small receive buffers in one 2 MiB region of the receiver's memory, received into in turn. A review feared
 * that CUDA opens an exported block only once per process, so that the sender would close a mapping and open
 * the next buffer's on every transfer (each close waits for the whole device). Checks every result and guard
 * zone, and that no mapping was closed to open another (the ipc_block_reopens hook counts the fallback that
 * does so); prints the time per transfer. On the H100 with CUDA 13 (2 ranks sharing it) each buffer's handle
 * opened on its own: 0 reopens, also before any change. */
TEST(GpuP2p, SmallBuffersOfOneBlockAreMappedOnce) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    const char* direct = getenv("VCCL_P2P_DIRECT");
    if (direct != nullptr && strcmp(direct, "0") == 0) GTEST_SKIP() << "the direct path is off";
    const int kBuffers = 6, kRounds = 60;
    const size_t elems = 10003, bytes = elems * 4; // odd, small: cudaMalloc places such buffers in shared blocks
    if (fifo_bytes() >= bytes) GTEST_SKIP() << "transfers of this size take the FIFO";
    int rank = world_rank(), n = world_size(), prev = (rank + n - 1) % n;
    Stream s;
    DevBuf send(bytes);
    std::vector<std::unique_ptr<DevBuf>> recv;
    for (int k = 0; k < kBuffers; ++k) recv.emplace_back(new DevBuf(bytes));
    bool allocated = send.base != nullptr;
    for (auto& r : recv) allocated = allocated && r->base != nullptr;
    ASSERT_ALL_RANKS(allocated);
    int sharing = 0; // receive buffers in the 2 MiB region of the first one
    for (auto& r : recv) sharing += (uintptr_t(r->base) >> 21) == (uintptr_t(recv[0]->base) >> 21) ? 1 : 0;
    int least = 0;
    MPI_Allreduce(&sharing, &least, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (least < 2) GTEST_SKIP() << "cudaMalloc put no two receive buffers in one 2 MiB region here";
    auto seed = [](int round, int r) { return uint32_t(7919 * round + r + 11); };
    long long reopens_before = vccl::testing::ipc_block_reopens(comm);
    std::string why;
    auto t0 = std::chrono::steady_clock::now();
    for (int round = 0; round < kRounds && why.empty(); ++round) {
        DevBuf& into = *recv[size_t(round % kBuffers)];
        cudaError_t ce = vt_slow_fill(reinterpret_cast<uint32_t*>(send.ptr()), elems, seed(round, rank), 0, s.s);
        if (ce != cudaSuccess) {
            why = "kernel launch: " + cuda_str(ce);
            break;
        }
        why = ring_exchange(comm, send.ptr(), into.ptr(), bytes, s.s);
        if (!why.empty()) break;
        if (cudaStreamSynchronize(s.s) != cudaSuccess) {
            why = "round " + std::to_string(round) + ": stream failed";
            break;
        }
        std::vector<char> got = into.download();
        const auto* v = reinterpret_cast<const uint32_t*>(got.data());
        for (size_t i = 0; i < elems; ++i) {
            if (v[i] != vt_pattern(i, seed(round, prev))) {
                why = "round " + std::to_string(round) + " element " + std::to_string(i) + " is wrong";
                break;
            }
        }
        if (why.empty() && !into.guards_intact()) why = "round " + std::to_string(round) + ": a guard zone was written";
    }
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kRounds;
    long long reopened = vccl::testing::ipc_block_reopens(comm) - reopens_before;
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    EXPECT_ALL_RANKS_WHY(reopened == 0, "rank " + std::to_string(rank) + " closed and reopened a mapping " +
                                            std::to_string(reopened) + " times in " + std::to_string(kRounds) +
                                            " transfers");
    if (rank == 0) {
        printf("# small buffers of one block: %d buffers (%d in one 2 MiB region), %.1f us per transfer and check, "
               "%lld reopened mappings\n", kBuffers, sharing, us, reopened);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Two communicators of the same ranks receive into small buffers, several in one 2 MiB block, which the receiver
 * frees all at the end of each round and makes anew in the next; the communicators take the first turn
 * alternately. Their mappings are shared (transport/cuda_ipc/ipc_handles.h). Checks every result and guard zone. (This
 * sequence passes with a mapping per communicator too; the one that needs shared mappings is the next test's.) */
TEST(GpuP2p, TwoCommunicatorsSendIntoSmallBuffersOfOneBlock) {
    vcclComm_t first = gpu_comm();
    ASSERT_ALL_RANKS(first != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    const char* direct = getenv("VCCL_P2P_DIRECT");
    if (direct != nullptr && strcmp(direct, "0") == 0) GTEST_SKIP() << "the direct path is off";
    const size_t elems = 10003, bytes = elems * 4; // odd, small: cudaMalloc places such buffers in shared blocks
    if (fifo_bytes() >= bytes) GTEST_SKIP() << "transfers of this size take the FIFO";
    vcclComm_t second = comm_with_env({});
    ASSERT_ALL_RANKS(second != nullptr);
    const int rank = world_rank(), n = world_size(), prev = (rank + n - 1) % n;
    Stream s;
    DevBuf send(size_t(4) << 20); // a block of its own, so that the small buffers' block empties between rounds
    ASSERT_ALL_RANKS(send.base != nullptr);
    auto seed = [](int round, int turn, int r) { return uint32_t(104729 * round + 131 * turn + r + 5); };
    const int kBuffers = 3, kRounds = 8;
    std::string why;
    for (int round = 0; round < kRounds && why.empty(); ++round) {
        std::vector<std::unique_ptr<DevBuf>> recv;
        for (int k = 0; k < kBuffers; ++k) recv.emplace_back(new DevBuf(bytes));
        for (auto& r : recv) {
            if (r->base == nullptr) why = "cudaMalloc failed";
        }
        // Turn t: communicator (round + t) % 2 receives into buffer t % kBuffers.
        for (int turn = 0; turn < 2 * kBuffers && why.empty(); ++turn) {
            vcclComm_t comm = (round + turn) % 2 == 0 ? first : second;
            DevBuf& into = *recv[size_t(turn % kBuffers)];
            std::string where = "round " + std::to_string(round) + ", turn " + std::to_string(turn) + ": ";
            cudaError_t ce = vt_slow_fill(reinterpret_cast<uint32_t*>(send.ptr()), elems, seed(round, turn, rank), 0, s.s);
            if (ce != cudaSuccess) {
                why = where + "kernel launch: " + cuda_str(ce);
                break;
            }
            why = ring_exchange(comm, send.ptr(), into.ptr(), bytes, s.s);
            if (!why.empty()) {
                why = where + why;
                break;
            }
            if (cudaStreamSynchronize(s.s) != cudaSuccess) {
                why = where + "stream failed";
                break;
            }
            std::vector<char> got = into.download();
            const auto* v = reinterpret_cast<const uint32_t*>(got.data());
            for (size_t i = 0; i < elems && why.empty(); ++i) {
                if (v[i] != vt_pattern(i, seed(round, turn, prev))) why = where + "element " + std::to_string(i) + " is wrong";
            }
            if (why.empty() && !into.guards_intact()) why = where + "a guard zone was written";
        }
        // Every rank ends the round here (a receiver frees its buffers only after its senders are done with them),
        // and all stop together when one failed.
        int failed = why.empty() ? 0 : 1, any = 0;
        MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (any != 0 && why.empty()) why = "round " + std::to_string(round) + ": another rank failed";
    }
    vcclCommDestroy(second);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* The sequence that needs the communicators to share their mappings (2 ranks sharing one H200): the suite's
 * communicator receives into small buffers of one 2 MiB block, which are then freed; a new communicator's first
 * AllReduce (copy engines) sends into new buffers of the peer there. With a mapping per communicator CUDA refuses
 * the new communicator's handle (cudaErrorAlreadyMapped) while the first still holds its mappings of the old block:
 * this test then fails inside np2_shared_gpu_fifo.sh, after the suite's earlier tests, and passes alone (which of
 * the earlier mappings CUDA objects to is not known). */
TEST(GpuP2p, NewCommunicatorSendsWhereFreedBuffersWereMapped) {
    vcclComm_t first = gpu_comm();
    ASSERT_ALL_RANKS(first != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    const char* direct = getenv("VCCL_P2P_DIRECT");
    if (direct != nullptr && strcmp(direct, "0") == 0) GTEST_SKIP() << "the direct path is off";
    const size_t elems = 10003, bytes = elems * 4;
    if (fifo_bytes() >= bytes) GTEST_SKIP() << "transfers of this size take the FIFO";
    const int rank = world_rank(), n = world_size();
    Stream s;
    std::string why;
    {
        DevBuf send(bytes);
        std::vector<std::unique_ptr<DevBuf>> recv;
        for (int k = 0; k < 6; ++k) recv.emplace_back(new DevBuf(bytes));
        for (int k = 0; k < 6 && why.empty(); ++k) {
            why = ring_exchange(first, send.ptr(), recv[size_t(k)]->ptr(), bytes, s.s);
        }
        if (cudaStreamSynchronize(s.s) != cudaSuccess && why.empty()) why = "stream failed";
        MPI_Barrier(MPI_COMM_WORLD); // the buffers are freed here, after every sender is done with them
    }
    ASSERT_ALL_RANKS_WHY(why.empty(), "the first communicator: " + why);
    vcclComm_t second = comm_with_env({{"VCCL_ALLREDUCE_LL_BYTES", "0"}, {"VCCL_ALLREDUCE_KERNEL_BYTES", "0"}});
    ASSERT_ALL_RANKS(second != nullptr);
    const size_t count = 65537;
    DevBuf buf(count * 4);
    ASSERT_ALL_RANKS(buf.base != nullptr);
    auto* bp = reinterpret_cast<uint32_t*>(buf.ptr());
    cudaError_t ce = vt_slow_fill(bp, count, uint32_t(rank + 1), 0, s.s);
    vcclResult_t r = vcclAllReduce(bp, bp, count, vcclUint32, vcclSum, second, s.s);
    if (ce != cudaSuccess) why = "kernel launch: " + cuda_str(ce);
    if (r != vcclSuccess && why.empty()) why = std::string("AllReduce failed: ") + result_str(r) + ": " + vcclGetLastError(second);
    if (cudaStreamSynchronize(s.s) != cudaSuccess && why.empty()) why = "stream failed";
    if (why.empty()) {
        std::vector<char> got = buf.download();
        const auto* v = reinterpret_cast<const uint32_t*>(got.data());
        for (size_t i = 0; i < count && why.empty(); ++i) {
            uint32_t want = 0;
            for (int q = 0; q < n; ++q) want += vt_pattern(i, uint32_t(q + 1));
            if (v[i] != want) why = "element " + std::to_string(i) + " is wrong";
        }
    }
    vcclCommDestroy(second);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* A direct send given up right after an earlier send to the same peer that is still queued behind the
 * stream's own work (a kernel waiting on the host): the release that lets the receiver's stream go on (DONE)
 * must come after the earlier transfer's data. Written at once on a private stream, it would let the
 * receiver's waits pass while the earlier transfer had not even started, and its buffer would hold old bytes.
 * Rank 0 sends, rank 1 receives; the gate stays closed until the receiver has looked. */
TEST(GpuFailure, GivenUpSendReleasesAfterEarlierTransfers) {
    if (world_size() != 2) GTEST_SKIP() << "needs exactly 2 ranks";
    const char* direct = getenv("VCCL_P2P_DIRECT");
    if (direct != nullptr && strcmp(direct, "0") == 0) GTEST_SKIP() << "the direct path is off";
    const size_t elems = (size_t(1) << 18) + 5, bytes = elems * 4;
    if (fifo_bytes() >= bytes) GTEST_SKIP() << "transfers of this size take the FIFO";
    int rank = world_rank();
    vcclComm_t comm = make_comm(CommKind::Mpi);
    ASSERT_ALL_RANKS(comm != nullptr);
    const uint32_t seed = 4242;
    Stream s;
    DevBuf first(bytes), second(bytes);
    Gate gate;
    ASSERT_ALL_RANKS(first.base != nullptr && second.base != nullptr && gate.dev != nullptr);
    std::string why;
    if (rank == 0) {
        gate.close();
        GateTimer timer(&gate, 20000);
        cudaError_t ce = vt_wait_flag(gate.dev, s.s);
        if (ce == cudaSuccess) ce = vt_slow_fill(reinterpret_cast<uint32_t*>(first.ptr()), elems, seed, 0, s.s);
        if (ce != cudaSuccess) why = "kernel launch: " + cuda_str(ce);
        vcclResult_t r1 = vcclSend(first.ptr(), bytes, vcclUint8, 1, comm, s.s);
        if (r1 != vcclSuccess && why.empty()) why = "the first send failed: " + result_str(r1);
        if (vccl::testing::fail_next_direct(comm, 1) != vcclSuccess && why.empty()) why = "test hook refused";
        vcclResult_t r2 = vcclSend(second.ptr(), bytes, vcclUint8, 1, comm, s.s);
        if (r2 == vcclSuccess && why.empty()) why = "the send given up returned success";
        int verdict = 0;
        MPI_Recv(&verdict, 1, MPI_INT, 1, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        timer.disarm();
        if (timer.fired() && why.empty()) why = "the gate timer fired";
        gate.open();
        cudaStreamSynchronize(s.s);
    } else {
        vcclResult_t r1 = vcclRecv(first.ptr(), bytes, vcclUint8, 0, comm, s.s);
        vcclResult_t r2 = vcclRecv(second.ptr(), bytes, vcclUint8, 0, comm, s.s);
        if (r1 != vcclSuccess || r2 != vcclSuccess) why = "a receive failed on the host: " + result_str(r1) + ", " + result_str(r2);
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        if (why.empty() && cudaStreamQuery(s.s) == cudaSuccess) {
            why = "the receiving stream went on while the sender's earlier transfer was still held back (the given-up "
                  "send's release was not ordered after it)";
        }
        int verdict = why.empty() ? 1 : 0;
        MPI_Send(&verdict, 1, MPI_INT, 0, 77, MPI_COMM_WORLD);
        cudaError_t ce = cudaStreamSynchronize(s.s);
        if (why.empty() && ce != cudaSuccess) why = "stream: " + cuda_str(ce);
        std::vector<char> got = first.download();
        const auto* v = reinterpret_cast<const uint32_t*>(got.data());
        for (size_t i = 0; i < elems && why.empty(); ++i) {
            if (v[i] != vt_pattern(i, seed)) why = "the earlier transfer's element " + std::to_string(i) + " is wrong";
        }
        vcclResult_t async = vcclSuccess;
        for (int i = 0; i < 200 && async == vcclSuccess; ++i) { // read at most once per millisecond
            if (vcclCommGetAsyncError(comm, &async) != vcclSuccess) break;
            if (async == vcclSuccess) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        if (why.empty() && async != vcclRemoteError) why = "vcclCommGetAsyncError said " + result_str(async);
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    MPI_Barrier(MPI_COMM_WORLD);
    vcclCommAbort(comm);
}

/* Blocks `s` with a kernel (a 6 s timer opens it at the latest), has another thread abort `comm` after 200 ms,
 * and runs `call` (`what` names it) meanwhile: the call must return an error, and both it and the abort within
 * 2 s. Leaves the gate open. Returns why not (empty: as expected); *result is the call's result, *aborted
 * whether the abort ran. */
std::string call_beside_abort(vcclComm_t comm, Gate* gate, cudaStream_t s, const char* what,
                              const std::function<vcclResult_t()>& call, vcclResult_t* result, bool* aborted) {
    std::string why;
    double call_took = 0, abort_took = 0;
    vcclResult_t r = vcclSuccess, end = vcclSuccess;
    GateTimer opener(gate, 6000);
    cudaError_t ce = vt_wait_flag(gate->dev, s);
    if (ce != cudaSuccess) why = "kernel launch: " + cuda_str(ce);
    if (why.empty()) {
        std::thread aborter([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            auto t0 = std::chrono::steady_clock::now(); // not MPI: this thread may not call it
            end = vcclCommAbort(comm);
            abort_took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        });
        double t0 = MPI_Wtime();
        r = call();
        call_took = MPI_Wtime() - t0;
        aborter.join();
        *aborted = true;
    }
    printf("[rank %d] %s returned %s after %.3f s; abort returned %s after %.3f s%s\n", world_rank(), what,
           result_str(r).c_str(), call_took, result_str(end).c_str(), abort_took,
           opener.fired() ? " (the gate timer fired)" : "");
    if (why.empty() && opener.fired()) {
        why = std::string("the ") + what + " and the abort waited for the blocked stream until the 6 s timer opened it";
    } else if (why.empty() && r == vcclSuccess) {
        why = std::string("the ") + what + " behind the blocked stream returned success though the communicator "
              "was aborted";
    } else if (why.empty() && (call_took > 2.0 || abort_took > 2.0)) {
        why = std::string(what) + " " + std::to_string(call_took) + " s, abort " + std::to_string(abort_took) + " s";
    } else if (why.empty() && end != vcclSuccess) {
        why = "abort failed: " + result_str(end);
    }
    opener.disarm();
    gate->open();
    *result = r;
    return why;
}

/* A watchdog thread aborts a communicator whose call waits for a stream that will not move (host buffers on a
 * stream blocked by other work, as a hung peer would block it): the call must give up and return an error,
 * and the abort must return, both within a second or two. Before, the call waited in the driver holding the
 * communicator's lock, and vcclCommAbort waited for that lock: neither returned until the stream moved (here
 * a 6 s timer opens the gate, so the test fails instead of hanging). Each rank sends to itself. */
TEST(GpuAsync, AbortFromAnotherThreadEndsAHostCallWaitingForTheStream) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    const char* direct = getenv("VCCL_P2P_DIRECT");
    if (direct != nullptr && strcmp(direct, "0") == 0) GTEST_SKIP() << "host buffers on a stream: the direct path's";
    vcclComm_t comm = make_comm(CommKind::Mpi);
    ASSERT_ALL_RANKS(comm != nullptr);
    const int rank = world_rank();
    Stream s;
    Gate gate;
    ASSERT_ALL_RANKS(gate.dev != nullptr);
    std::vector<char> mine(4096, 7), theirs(4096, 0);
    vcclResult_t r = vcclSuccess;
    bool aborted = false;
    std::string why = call_beside_abort(comm, &gate, s.s, "host call", [&] {
        vcclResult_t g = vcclGroupStart();
        vcclResult_t x = vcclSend(mine.data(), mine.size(), vcclUint8, rank, comm, s.s);
        vcclResult_t y = vcclRecv(theirs.data(), theirs.size(), vcclUint8, rank, comm, s.s);
        vcclResult_t e = vcclGroupEnd();
        return g != vcclSuccess ? g : x != vcclSuccess ? x : y != vcclSuccess ? y : e;
    }, &r, &aborted);
    expect_stream_goes_on(s.s, "an abort from another thread");
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A receive into host memory through the staging FIFO, on a stream a kernel blocks, and vcclCommAbort from
 * another thread: the call returns vcclRemoteError, and when the stream moves on later, the copy it had
 * enqueued must not land in the caller's buffer (the call failed; the buffer may be freed by then). A copy
 * straight into the caller's buffer would not do: cudaMemcpyAsync into its pageable memory waits for the
 * blocked stream itself (the call, and the abort behind its lock, wait for the 6 s timer), and the data then
 * lands after the error. Rank 0 sends 4 KiB from device memory (through the FIFO: its call returns at once);
 * rank 1 receives into a std::vector. Run by np2_shared_gpu_fifo.sh (the FIFO is off by default). No hook
 * shows the FIFO was taken; a library that copies straight into the caller's buffer fails here
 * (docs/RELIABILITY.md, "Staging FIFO"), which shows it is. */
TEST(GpuFailure, AbortedFifoReceiveIntoHostMemoryLeavesTheBufferAlone) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    if (fifo_bytes() < 4096) GTEST_SKIP() << "needs VCCL_P2P_FIFO_BYTES >= 4096 (np2_shared_gpu_fifo.sh)";
    const char* direct = getenv("VCCL_P2P_DIRECT");
    if (direct != nullptr && strcmp(direct, "0") == 0) GTEST_SKIP() << "the staging FIFO is the direct path's";
    vcclComm_t comm = make_comm(CommKind::Mpi);
    ASSERT_ALL_RANKS(comm != nullptr);
    const int rank = world_rank();
    const size_t bytes = 4096;
    const char kUntouched = 0x5a;
    Stream s;
    Gate gate;
    ASSERT_ALL_RANKS(gate.dev != nullptr);
    DevBuf src(bytes);
    std::vector<char> pattern(bytes), theirs(bytes, kUntouched);
    for (size_t i = 0; i < bytes; ++i) pattern[i] = char(i * 7 + 1);
    src.upload(pattern);
    std::string why;
    bool aborted = false;
    MPI_Barrier(MPI_COMM_WORLD); // rank 0 sends at once, so rank 1's abort finds its receive past the exchange
    if (rank == 0) {
        vcclResult_t r = vcclSend(src.ptr(), bytes, vcclUint8, 1, comm, s.s);
        if (r != vcclSuccess) why = "the send failed: " + result_str(r);
    } else if (rank == 1) {
        vcclResult_t r = vcclSuccess;
        why = call_beside_abort(comm, &gate, s.s, "FIFO receive into host memory",
                                [&] { return vcclRecv(theirs.data(), bytes, vcclUint8, 0, comm, s.s); }, &r, &aborted);
        expect_stream_goes_on(s.s, "an aborted FIFO receive into host memory");
        size_t landed = 0;
        for (size_t i = 0; i < bytes; ++i) landed += theirs[i] != kUntouched;
        if (why.empty() && landed > 0) {
            why = std::to_string(landed) + " bytes of the failed receive's buffer were written after it returned " +
                  result_str(r);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (!aborted) {
        vcclResult_t end = vcclCommAbort(comm);
        if (why.empty() && end != vcclSuccess) why = "abort failed: " + result_str(end);
        expect_stream_goes_on(s.s, "a FIFO send to an aborted peer");
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A call on host buffers after device work that is still waiting for its stream: it runs after that work
 * (on the staged path it waits for the queue), and both results are right. */
TEST(GpuAsync, HostCallAfterBlockedDeviceWork) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    int rank = world_rank(), n = world_size();
    Stream s;
    Gate gate;
    ASSERT_ALL_RANKS(gate.dev != nullptr);
    const size_t elems = 4099;
    DevBuf send(elems * 4), sum(elems * 4), ring(elems * 4);
    ASSERT_ALL_RANKS(send.base != nullptr && sum.base != nullptr && ring.base != nullptr);
    MPI_Barrier(MPI_COMM_WORLD);
    std::string why;
    std::vector<int64_t> host_in(333), host_out(333, -1);
    for (size_t i = 0; i < host_in.size(); ++i) host_in[i] = int64_t(i) * (rank + 1);
    {
        // Opens the gate while the host call is in progress. Armed before the device calls: this test is
        // about order and results (CallsReturnWhileTheStreamIsBlocked is the one about not waiting), and the
        // direct path may wait for the device when it replaces a stale mapping of a peer's freed buffer.
        GateTimer opener(&gate, 300);
        cudaError_t ce = vt_wait_flag(gate.dev, s.s);
        if (ce != cudaSuccess) why = "kernel launch: " + cuda_str(ce);
        if (why.empty()) {
            why = enqueue_async_rounds(comm, s.s, 1, elems, reinterpret_cast<uint32_t*>(send.ptr()),
                                       reinterpret_cast<uint32_t*>(sum.ptr()), reinterpret_cast<uint32_t*>(ring.ptr()));
        }
        vcclResult_t r = vcclAllReduce(host_in.data(), host_out.data(), host_in.size(), vcclInt64, vcclSum, comm, nullptr);
        if (why.empty() && r != vcclSuccess) why = std::string("host AllReduce: ") + result_str(r) + ": " + vcclGetLastError(comm);
    }
    gate.open();
    cudaError_t ce = cudaStreamSynchronize(s.s);
    if (why.empty() && ce != cudaSuccess) why = "stream: " + cuda_str(ce);
    int64_t ranks_sum = int64_t(n) * (n + 1) / 2;
    for (size_t i = 0; i < host_out.size() && why.empty(); ++i) {
        if (host_out[i] != int64_t(i) * ranks_sum) why = "host AllReduce element " + std::to_string(i) + " is wrong";
    }
    if (why.empty()) why = check_async_rounds(1, elems, sum, ring);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* Many calls in flight with a staging pool smaller than one of them (VCCL_STAGING_POOL_BYTES=64K): slots are
 * reused only once their results are copied back. On the direct path this is a plain correctness run. */
TEST(GpuAsync, SmallStagingPoolKeepsEveryResult) {
    vcclComm_t comm = comm_with_env({{"VCCL_STAGING_POOL_BYTES", "64K"}});
    ASSERT_ALL_RANKS(comm != nullptr);
    if (world_size() < 2) {
        vcclCommDestroy(comm);
        GTEST_SKIP() << "needs 2 ranks";
    }
    Stream s;
    const int rounds = 12;
    std::string why;
    for (size_t elems : {size_t(7), size_t(65537)}) {
        DevBuf send(elems * 4 * rounds), sum(elems * 4 * rounds), ring(elems * 4 * rounds);
        ASSERT_ALL_RANKS(send.base != nullptr && sum.base != nullptr && ring.base != nullptr);
        if (why.empty()) {
            why = enqueue_async_rounds(comm, s.s, rounds, elems, reinterpret_cast<uint32_t*>(send.ptr()),
                                       reinterpret_cast<uint32_t*>(sum.ptr()), reinterpret_cast<uint32_t*>(ring.ptr()));
        }
        cudaError_t ce = cudaStreamSynchronize(s.s);
        if (why.empty() && ce != cudaSuccess) why = "stream: " + cuda_str(ce);
        if (why.empty()) why = check_async_rounds(rounds, elems, sum, ring);
        if (!why.empty()) why = std::to_string(elems) + " elements: " + why;
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    vcclCommDestroy(comm);
}

/* Send/recv messages over VCCL_STAGING_CHUNK_BYTES travel as pieces, each with a tag of its own; a rank whose
 * batch is all device memory (staged: the queue moves piece k of every message, then piece k + 1) must match a
 * rank on host memory (every piece of every message posted at once). Even ranks use device buffers, odd ranks
 * host buffers; a ring in one group of several messages each way whose piece counts differ (64 KiB pieces), so
 * that with one tag for every piece a later message's first piece would match an earlier message's second. */
TEST(GpuAsync, SendRecvPiecesMatchHostBuffers) {
    vcclComm_t comm = comm_with_env({{"VCCL_STAGING_CHUNK_BYTES", "64K"}});
    ASSERT_ALL_RANKS(comm != nullptr);
    if (world_size() < 2) {
        vcclCommDestroy(comm);
        GTEST_SKIP() << "needs 2 ranks";
    }
    const int rank = world_rank(), n = world_size(), next = (rank + 1) % n, prev = (rank + n - 1) % n;
    const bool device = rank % 2 == 0 && !(n % 2 == 1 && rank == n - 1); // odd n: the last rank on host too
    const std::vector<size_t> sizes = {200001, 5, 65537, 0, 3 * 65536, 1};
    auto byte = [](int src, size_t m, size_t i) {
        return char((src * 37 + int(m) * 101 + int(i % 253) * 3 + int(i / 253)) & 0xff);
    };
    Stream s;
    std::vector<std::unique_ptr<DevBuf>> dsend, drecv;
    std::vector<std::vector<char>> hsend, hrecv;
    for (size_t m = 0; m < sizes.size(); ++m) {
        std::vector<char> data(sizes[m]);
        for (size_t i = 0; i < data.size(); ++i) data[i] = byte(rank, m, i);
        hsend.push_back(data);
        hrecv.emplace_back(sizes[m] + 1, char(0x5A)); // one guard byte
        if (device) {
            dsend.emplace_back(new DevBuf(sizes[m]));
            drecv.emplace_back(new DevBuf(sizes[m]));
            if (dsend.back()->base != nullptr) dsend.back()->upload(data);
        }
    }
    bool allocated = true;
    for (size_t m = 0; m < dsend.size(); ++m) {
        allocated = allocated && dsend[m]->base != nullptr && drecv[m]->base != nullptr;
    }
    ASSERT_ALL_RANKS(allocated); // on every rank: it is a collective check
    std::string why;
    for (int round = 0; round < 2 && why.empty(); ++round) {
        vcclResult_t r = vcclGroupStart();
        for (size_t m = 0; m < sizes.size() && r == vcclSuccess; ++m) {
            r = vcclRecv(device ? static_cast<void*>(drecv[m]->ptr()) : hrecv[m].data(), sizes[m], vcclUint8, prev, comm,
                         device ? s.s : nullptr);
            if (r == vcclSuccess)
                r = vcclSend(device ? static_cast<const void*>(dsend[m]->ptr()) : hsend[m].data(), sizes[m], vcclUint8, next,
                             comm, device ? s.s : nullptr);
        }
        vcclResult_t e = vcclGroupEnd();
        if (r == vcclSuccess) r = e;
        if (r != vcclSuccess) why = std::string("round ") + std::to_string(round) + ": " + result_str(r) + ": " + vcclGetLastError(comm);
        cudaError_t ce = cudaStreamSynchronize(s.s);
        if (why.empty() && ce != cudaSuccess) why = "stream: " + cuda_str(ce);
        for (size_t m = 0; m < sizes.size() && why.empty(); ++m) {
            std::vector<char> got = device ? drecv[m]->download() : std::vector<char>(hrecv[m].begin(), hrecv[m].end() - 1);
            for (size_t i = 0; i < sizes[m] && why.empty(); ++i) {
                if (got[i] != byte(prev, m, i)) {
                    why = "round " + std::to_string(round) + ": message " + std::to_string(m) + " (" + std::to_string(sizes[m]) +
                          " B) byte " + std::to_string(i) + " wrong";
                }
            }
            if (why.empty() && (device ? !drecv[m]->guards_intact() : hrecv[m].back() != char(0x5A)))
                why = "message " + std::to_string(m) + ": guard written";
        }
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    vcclCommDestroy(comm);
}

/* The staged queue's parts are numbered with 32 bits, and a pinned slot remembered the number of its last
 * part. A slot then left unused while the numbers moved on by 2^31 compared as "not yet reached" and looked
 * busy for good: with the pool full of such slots, the next call waited for pinned memory forever (found in
 * review; about 30 hours of small staged operations). Here two slots are made behind a blocked stream (they
 * fill the 512 KiB pool), one is used again, the numbering is moved on by 2^31 + 1000 (test hook, as if that
 * many parts had run), and further calls must complete with right results. A watchdog aborts the
 * communicator after 20 s, so the old behaviour fails the test instead of hanging it. Staged path only. */
TEST(GpuAsync, StagingSlotsSurviveSequenceWraparound) {
    const char* direct = getenv("VCCL_P2P_DIRECT");
    if (direct == nullptr || strcmp(direct, "0") != 0)
        GTEST_SKIP() << "the staged queue is tested with VCCL_P2P_DIRECT=0 (np2_shared_gpu_staged.sh)";
    vcclComm_t comm = comm_with_env({{"VCCL_STAGING_POOL_BYTES", "512K"}});
    ASSERT_ALL_RANKS(comm != nullptr);
    if (world_size() < 2) {
        vcclCommDestroy(comm);
        GTEST_SKIP() << "needs 2 ranks";
    }
    const int rank = world_rank(), n = world_size();
    const size_t elems = 48 * 1024; // 192 KiB: a 256 KiB slot; two of them fill the pool
    Stream s;
    Gate gate;
    DevBuf a(elems * 4), b(elems * 4), out_a(elems * 4), out_b(elems * 4);
    ASSERT_ALL_RANKS(gate.dev != nullptr && a.base != nullptr && b.base != nullptr && out_a.base != nullptr &&
                     out_b.base != nullptr);
    auto seed = [](int call, int r) { return uint32_t(1000 * call + r + 1); };
    auto allreduce = [&](int call, DevBuf& in, DevBuf& out) -> std::string {
        cudaError_t ce = vt_slow_fill(reinterpret_cast<uint32_t*>(in.ptr()), elems, seed(call, rank), 0, s.s);
        if (ce != cudaSuccess) return "kernel launch: " + cuda_str(ce);
        vcclResult_t r = vcclAllReduce(in.ptr(), out.ptr(), elems, vcclUint32, vcclSum, comm, s.s);
        if (r != vcclSuccess) {
            return "call " + std::to_string(call) + ": " + result_str(r) + ": " + vcclGetLastError(comm);
        }
        return "";
    };
    auto check = [&](int call, DevBuf& out) -> std::string {
        std::vector<char> got = out.download();
        const auto* g = reinterpret_cast<const uint32_t*>(got.data());
        for (size_t i = 0; i < elems; ++i) {
            uint32_t want = 0;
            for (int r = 0; r < n; ++r) want += vt_pattern(i, seed(call, r));
            if (g[i] != want) return "call " + std::to_string(call) + " element " + std::to_string(i) + " is wrong";
        }
        return "";
    };
    auto sync = [&](const char* when) -> std::string {
        cudaError_t ce = cudaStreamSynchronize(s.s);
        return ce == cudaSuccess ? "" : std::string(when) + ": stream: " + cuda_str(ce);
    };
    // Two slots: calls 1 and 2 in flight together behind the gate.
    std::string why = calls_behind_blocked_stream(&gate, s.s, 10000, [&] {
        std::string w = allreduce(1, a, out_a);
        return w.empty() ? allreduce(2, b, out_b) : w;
    });
    if (why.empty()) why = check(1, out_a);
    if (why.empty()) why = check(2, out_b);
    // One of them used again (the queue sees both free), the other left alone; then the numbering jumps.
    if (why.empty()) why = allreduce(3, a, out_a);
    if (why.empty()) why = sync("call 3");
    if (why.empty()) why = check(3, out_a);
    if (why.empty() && vccl::testing::staging_skip_sequence(comm, 0x80000000u + 1000u) != vcclSuccess) {
        why = std::string("staging_skip_sequence: ") + vcclGetLastError(comm);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    std::mutex m;
    std::condition_variable cv;
    bool finished = false;
    std::atomic<bool> aborted{false};
    std::thread watchdog([&] {
        std::unique_lock<std::mutex> lock(m);
        if (!cv.wait_for(lock, std::chrono::seconds(20), [&] { return finished; })) {
            aborted = true;
            vcclCommAbort(comm);
        }
    });
    for (int call = 4; call <= 7 && why.empty(); ++call) {
        why = allreduce(call, call % 2 ? b : a, call % 2 ? out_b : out_a);
        if (why.empty()) why = sync("after the jump");
        if (why.empty()) why = check(call, call % 2 ? out_b : out_a);
    }
    {
        std::lock_guard<std::mutex> lock(m);
        finished = true;
    }
    cv.notify_all();
    watchdog.join();
    if (aborted) why = "calls after the sequence jump waited for pinned memory for 20 s (aborted): " + why;
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    if (!aborted) vcclCommDestroy(comm);
}

/* vcclCommAbort with device work queued behind a blocked stream returns at once on every rank, and the
 * stream goes on once unblocked (the aborted work's data is not valid). */
TEST(GpuAsync, AbortWithBlockedDeviceWork) {
    vcclComm_t comm = make_comm(CommKind::Mpi);
    ASSERT_ALL_RANKS(comm != nullptr);
    if (world_size() < 2) {
        vcclCommDestroy(comm);
        GTEST_SKIP() << "needs 2 ranks";
    }
    Stream s;
    Gate gate;
    ASSERT_ALL_RANKS(gate.dev != nullptr);
    const size_t elems = 100003;
    DevBuf send(elems * 4 * 3), sum(elems * 4 * 3), ring(elems * 4 * 3);
    ASSERT_ALL_RANKS(send.base != nullptr && sum.base != nullptr && ring.base != nullptr);
    // Warm-up (unblocked): the direct path's scratch grows here, not behind the gate.
    std::string why = enqueue_async_rounds(comm, s.s, 1, elems * 3, reinterpret_cast<uint32_t*>(send.ptr()),
                                           reinterpret_cast<uint32_t*>(sum.ptr()), reinterpret_cast<uint32_t*>(ring.ptr()));
    if (why.empty() && cudaStreamSynchronize(s.s) != cudaSuccess) why = "warm-up stream failed";
    MPI_Barrier(MPI_COMM_WORLD);
    double took = 0;
    {
        GateTimer timer(&gate, 10000);
        cudaError_t ce = vt_wait_flag(gate.dev, s.s);
        if (why.empty() && ce != cudaSuccess) why = "kernel launch: " + cuda_str(ce);
        if (why.empty()) {
            why = enqueue_async_rounds(comm, s.s, 3, elems, reinterpret_cast<uint32_t*>(send.ptr()),
                                       reinterpret_cast<uint32_t*>(sum.ptr()), reinterpret_cast<uint32_t*>(ring.ptr()));
        }
        double t0 = MPI_Wtime();
        vcclResult_t r = vcclCommAbort(comm);
        took = MPI_Wtime() - t0;
        if (why.empty() && r != vcclSuccess) why = std::string("abort: ") + result_str(r);
        timer.disarm();
        if (why.empty() && timer.fired()) why = "a call or the abort waited for the blocked stream";
        gate.open();
    }
    // Abort gives a READY wait 0.5 s, then up to 1 s for its released flag writes to land (transport/cuda_ipc/ipc_p2p.h). On a
    // GPU the ranks share, those writes wait for time slices among the spinning gate kernels: 1.50 s once in 5
    // runs on the H100 (2026-11-24), so the bound there is the design's 1.5 s plus margin.
    int mine = my_device();
    std::vector<int> devices(static_cast<size_t>(world_size()), 0);
    MPI_Allgather(&mine, 1, MPI_INT, devices.data(), 1, MPI_INT, MPI_COMM_WORLD); // the tests run on one host
    std::sort(devices.begin(), devices.end());
    const bool shared = std::adjacent_find(devices.begin(), devices.end()) != devices.end();
    const double limit = shared ? 2.0 : 1.0;
    if (why.empty() && took > limit) why = "abort took " + std::to_string(took) + " s";
    expect_stream_goes_on(s.s, "abort");
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}


} // namespace
