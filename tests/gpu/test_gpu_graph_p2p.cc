/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Send/recv captured into CUDA graphs (vccl.h, "CUDA graphs"; transport/cuda_ipc/ipc_p2p.h has the protocol):
 *  - a ring exchange (send to the next rank, receive from the previous, one group) of 0, 1, 1031, 262147 and
 *    4194305 int32 elements, captured in the global, thread-local and relaxed modes, replayed with new inputs each
 *    time and eager send/recv of other buffers between replays; every output and the guard zones checked;
 *  - an 8-byte exchange replayed 1,000 times, each result checked;
 *  - two graphs (forward and backward rings, different sizes) replayed in an order that is the same on every rank
 *    but not alternating;
 *  - a graph replayed after its communicator was destroyed on every rank still moves the data (it holds the flags
 *    and mappings it uses);
 *  - refused: an in-place exchange, a capture matched by an eager transfer (both sides fail and say why), and then
 *    captures out of step with the peer's;
 *  - a capture that fails on one rank after the exchange: the peer's vcclCommGetAsyncError reports vcclRemoteError;
 *  - vcclCommDestroy returns while a replay of its graph waits for the peer's (which comes after the destroy);
 *  - after vcclCommAbort or vcclCommRevoke on one rank, its replays alone end (the peers never replay).
 * The direct path is needed: with VCCL_P2P_DIRECT=0 the captures are refused, which is checked instead.
 */
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gpu_test_util.h"
#include "mpi_gtest_main.h"
#include "test_util.h"

using namespace vtest;
using namespace vgpu;

namespace {

int32_t value(int r, size_t i, int k) { return int32_t((r * 131 + int(i % 977) * 7 + k * 13) % 1999) - 999; }

bool direct_path_off() {
    const char* v = getenv("VCCL_P2P_DIRECT");
    return v != nullptr && std::string(v) == "0";
}

/* Send `count` int32 to rank (rank + step) and receive as many from rank (rank - step), in one group. */
struct Exchange {
    size_t count;
    int to, from;
    DevBuf send, recv;
    Exchange(size_t c, int step)
        : count(c), to((world_rank() + step + world_size()) % world_size()),
          from((world_rank() - step + world_size()) % world_size()), send(c * 4 + 4), recv(c * 4 + 4) {}

    std::string enqueue(vcclComm_t comm, cudaStream_t s) const {
        std::vector<vcclResult_t> r;
        vcclGroupStart();
        r.push_back(vcclSend(send.ptr(), count, vcclInt32, to, comm, s));
        r.push_back(vcclRecv(recv.ptr(), count, vcclInt32, from, comm, s));
        r.push_back(vcclGroupEnd());
        return call_failure(comm, r);
    }
    /* Input of replay k (on the stream, which the replay then follows). */
    void set_input(int k, cudaStream_t s) const {
        std::vector<int32_t> h(count);
        for (size_t i = 0; i < count; ++i) h[i] = value(world_rank(), i, k);
        if (count > 0) cudaMemcpyAsync(send.ptr(), h.data(), count * 4, cudaMemcpyHostToDevice, s);
        cudaStreamSynchronize(s); // the host vector goes
    }
    /* What replay (or eager call) k must have left, after its stream was synchronised. */
    std::string check(int k, const std::string& what) const {
        std::vector<int32_t> h(count);
        if (count > 0) cudaMemcpy(h.data(), recv.ptr(), count * 4, cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < count; ++i) {
            if (h[i] != value(from, i, k)) {
                return what + ", " + std::to_string(count) + " elements: element " + std::to_string(i) + " is " +
                       std::to_string(h[i]) + ", expected " + std::to_string(value(from, i, k));
            }
        }
        if (!recv.guards_intact() || !send.guards_intact()) return what + ": a guard zone was overwritten";
        return "";
    }
};

/* Replays `exec` on `s` with input k and checks it. */
std::string replay(cudaGraphExec_t exec, const Exchange& x, int k, cudaStream_t s, const std::string& what) {
    x.set_input(k, s);
    cudaError_t e = cudaGraphLaunch(exec, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) return what + ": " + cuda_str(e);
    return x.check(k, what);
}

/* An eager exchange of its own buffers, checked (between replays). */
std::string eager(vcclComm_t comm, cudaStream_t s, size_t count, int k) {
    Exchange x(count, 1);
    x.set_input(k, s);
    std::string why = x.enqueue(comm, s);
    if (why.empty()) {
        cudaError_t e = cudaStreamSynchronize(s);
        if (e != cudaSuccess) return cuda_str(e);
    }
    return why.empty() ? x.check(k, "eager exchange") : why;
}

#define SKIP_WITHOUT_DIRECT_PATH()                                                                                 \
    do {                                                                                                            \
        if (direct_path_off()) GTEST_SKIP() << "VCCL_P2P_DIRECT=0: send/recv cannot be captured (checked in "      \
                                               "GpuGraphP2p.RefusedWithoutTheDirectPath)";                          \
    } while (0)

TEST(GpuGraphP2p, RingExchangeReplaysWithEagerTransfersBetween) {
    SKIP_WITHOUT_DIRECT_PATH();
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    Stream s;
    std::string why;
    const cudaStreamCaptureMode modes[] = {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                                           cudaStreamCaptureModeRelaxed};
    for (cudaStreamCaptureMode mode : modes) {
        for (size_t count : {size_t(0), size_t(1), size_t(1031), size_t(262147), size_t(4194305)}) {
            if (!why.empty()) break;
            Exchange x(count, 1);
            const std::string what = "mode " + std::to_string(int(mode)) + ", " + std::to_string(count) + " elements";
            cudaGraphExec_t exec = capture(s.s, mode, [&] { return x.enqueue(comm, s.s); }, &why);
            if (exec == nullptr) {
                why = what + ": " + why;
                break;
            }
            for (int k = 0; k < 5 && why.empty(); ++k) {
                why = replay(exec, x, k, s.s, what + ", replay " + std::to_string(k));
                if (why.empty()) why = eager(comm, s.s, 257 + size_t(k) * 1000, k + 100);
            }
            cudaGraphExecDestroy(exec);
        }
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

TEST(GpuGraphP2p, ThousandReplaysOfSmallExchange) {
    SKIP_WITHOUT_DIRECT_PATH();
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    Stream s;
    Exchange x(2, 1); // 8 bytes
    std::string why;
    cudaGraphExec_t exec = capture(s.s, cudaStreamCaptureModeThreadLocal, [&] { return x.enqueue(comm, s.s); }, &why);
    for (int k = 0; k < 1000 && exec != nullptr && why.empty(); ++k) why = replay(exec, x, k, s.s, "replay " + std::to_string(k));
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

TEST(GpuGraphP2p, TwoGraphsInAnyOrder) {
    SKIP_WITHOUT_DIRECT_PATH();
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    Stream s;
    Exchange forward(1031, 1), backward(4099, -1);
    std::string why;
    cudaGraphExec_t a = capture(s.s, cudaStreamCaptureModeGlobal, [&] { return forward.enqueue(comm, s.s); }, &why);
    cudaGraphExec_t b = a != nullptr ? capture(s.s, cudaStreamCaptureModeGlobal,
                                               [&] { return backward.enqueue(comm, s.s); }, &why)
                                     : nullptr;
    const char order[] = "ABBABAAABBBA";
    for (int k = 0; order[k] != '\0' && b != nullptr && why.empty(); ++k) {
        const bool is_a = order[k] == 'A';
        why = replay(is_a ? a : b, is_a ? forward : backward, k, s.s, std::string("graph ") + order[k] +
                     " at step " + std::to_string(k));
        if (why.empty() && k % 3 == 0) why = eager(comm, s.s, 33, k);
    }
    if (a != nullptr) cudaGraphExecDestroy(a);
    if (b != nullptr) cudaGraphExecDestroy(b);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

TEST(GpuGraphP2p, GraphOutlivesItsCommunicator) {
    SKIP_WITHOUT_DIRECT_PATH();
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    vcclComm_t sub = nullptr;
    ASSERT_ALL_RANKS(vcclCommSplit(comm, 0, world_rank(), &sub, nullptr) == vcclSuccess && sub != nullptr);
    Stream s;
    Exchange x(65537, 1);
    std::string why;
    cudaGraphExec_t exec = capture(s.s, cudaStreamCaptureModeThreadLocal, [&] { return x.enqueue(sub, s.s); }, &why);
    if (exec != nullptr) why = replay(exec, x, 0, s.s, "before destroy");
    EXPECT_EQ(vcclCommDestroy(sub), vcclSuccess);
    MPI_Barrier(MPI_COMM_WORLD); // every rank's communicator is gone before anyone replays
    for (int k = 1; k < 4 && exec != nullptr && why.empty(); ++k) {
        why = replay(exec, x, k, s.s, "replay " + std::to_string(k) + " after destroy");
    }
    MPI_Barrier(MPI_COMM_WORLD); // no rank's graph goes while a peer's replay may still use its flags
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* A capture of `body` that must fail: its result, its message, and the nodes the capture got. */
struct Refusal {
    std::string why; // empty when the capture failed as it should
    std::string message;
};
Refusal refused_capture(vcclComm_t comm, cudaStream_t s, const std::function<vcclResult_t()>& body) {
    Refusal out;
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        out.why = "cudaStreamBeginCapture failed";
        return out;
    }
    vcclResult_t r = body();
    out.message = vcclGetLastError(comm);
    cudaGraph_t graph = nullptr;
    cudaError_t end = cudaStreamEndCapture(s, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (r != vcclInvalidUsage) out.why = "returned " + result_str(r) + " (" + out.message + ")";
    else if (end != cudaSuccess) out.why = "the capture was invalidated: " + cuda_str(end);
    return out;
}

TEST(GpuGraphP2p, InPlaceMismatchedAndOutOfStepCapturesAreRefused) {
    SKIP_WITHOUT_DIRECT_PATH();
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    vcclComm_t sub = nullptr; // its graph numbering goes out of step here
    ASSERT_ALL_RANKS(vcclCommSplit(comm, 0, world_rank(), &sub, nullptr) == vcclSuccess && sub != nullptr);
    Stream s;
    const int rank = world_rank(), n = world_size();
    std::string why;
    // In place: each rank sends the buffer it receives into.
    DevBuf buf(4096);
    Refusal in_place = refused_capture(sub, s.s, [&] {
        vcclGroupStart();
        vcclSend(buf.ptr(), 1024, vcclInt32, (rank + 1) % n, sub, s.s);
        vcclRecv(buf.ptr(), 1024, vcclInt32, (rank + n - 1) % n, sub, s.s);
        return vcclGroupEnd();
    });
    why = in_place.why.empty() && in_place.message.find("in place") == std::string::npos
              ? "the in-place refusal does not say why: " + in_place.message
              : in_place.why.empty() ? "" : "in place: " + in_place.why;
    // Rank 0 captures a send that rank 1 receives eagerly: both fail.
    if (why.empty() && rank < 2) {
        DevBuf data(4096);
        if (rank == 0) {
            Refusal r = refused_capture(sub, s.s, [&] { return vcclSend(data.ptr(), 1024, vcclInt32, 1, sub, s.s); });
            why = r.why.empty() ? "" : "captured send matched by an eager receive: " + r.why;
            if (why.empty() && r.message.find("graph") == std::string::npos) why = "the refusal does not say why: " + r.message;
        } else {
            vcclResult_t r = vcclRecv(data.ptr(), 1024, vcclInt32, 0, sub, s.s);
            std::string message = vcclGetLastError(sub);
            if (r != vcclInvalidUsage || message.find("graph") == std::string::npos) {
                why = "an eager receive matched by a captured send returned " + result_str(r) + ": " + message;
            }
        }
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    // The communicator still moves data eagerly.
    std::string after = eager(sub, s.s, 1031, 7);
    EXPECT_ALL_RANKS_WHY(after.empty(), "eager exchange after the refusals: " + after);
    // Rank 0 numbered one more captured send to rank 1 than rank 1 received: the next capture between them is out
    // of step, and both sides say so.
    if (rank < 2) {
        DevBuf data(4096);
        Refusal r = refused_capture(sub, s.s, [&] {
            return rank == 0 ? vcclSend(data.ptr(), 16, vcclInt32, 1, sub, s.s)
                             : vcclRecv(data.ptr(), 16, vcclInt32, 0, sub, s.s);
        });
        why = r.why.empty() && r.message.find("out of step") == std::string::npos
                  ? "the out-of-step refusal does not say so: " + r.message
                  : r.why;
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), "out of step: " + why);
    EXPECT_EQ(vcclCommDestroy(sub), vcclSuccess);
}

TEST(GpuGraphP2p, CaptureFailingOnOneRankTellsThePeer) {
    SKIP_WITHOUT_DIRECT_PATH();
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    vcclComm_t sub = nullptr; // it fails here
    ASSERT_ALL_RANKS(vcclCommSplit(comm, 0, world_rank(), &sub, nullptr) == vcclSuccess && sub != nullptr);
    Stream s;
    const int rank = world_rank();
    std::string why;
    if (rank < 2) {
        DevBuf data(4096);
        if (rank == 1 && vccl::testing::fail_next_direct(sub, 1) != vcclSuccess) why = "test hook refused";
        cudaGraphExec_t exec = nullptr;
        std::string captured_why;
        exec = capture(s.s, cudaStreamCaptureModeThreadLocal, [&] {
            vcclResult_t r = rank == 1 ? vcclSend(data.ptr(), 1024, vcclInt32, 0, sub, s.s)
                                       : vcclRecv(data.ptr(), 1024, vcclInt32, 1, sub, s.s);
            return call_failure(sub, {r});
        }, &captured_why);
        if (rank == 1 && exec != nullptr && why.empty()) why = "the failing capture succeeded";
        if (rank == 0 && exec == nullptr && why.empty()) why = "the receiving side's capture failed: " + captured_why;
        if (rank == 0 && why.empty()) { // never replayed: it would wait for rank 1 for ever
            vcclResult_t async = vcclSuccess;
            for (int i = 0; i < 200 && async == vcclSuccess; ++i) {
                if (vcclCommGetAsyncError(sub, &async) != vcclSuccess) break;
                if (async == vcclSuccess) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
            if (async != vcclRemoteError) why = "vcclCommGetAsyncError reported " + result_str(async) + ", not vcclRemoteError";
        }
        if (exec != nullptr) cudaGraphExecDestroy(exec);
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    EXPECT_EQ(vcclCommDestroy(sub), vcclSuccess);
}

TEST(GpuGraphP2p, DestroyDoesNotWaitBehindAReplayWaitingForItsPeer) {
    SKIP_WITHOUT_DIRECT_PATH();
    if (world_size() != 2) GTEST_SKIP() << "needs exactly 2 ranks";
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    vcclComm_t sub = nullptr;
    ASSERT_ALL_RANKS(vcclCommSplit(comm, 0, world_rank(), &sub, nullptr) == vcclSuccess && sub != nullptr);
    Stream s;
    Exchange x(1031, 1);
    std::string why;
    cudaGraphExec_t exec = capture(s.s, cudaStreamCaptureModeThreadLocal, [&] { return x.enqueue(sub, s.s); }, &why);
    ASSERT_ALL_RANKS_WHY(exec != nullptr, why);
    x.set_input(1, s.s);
    if (world_rank() == 0) {
        // Rank 0's replay waits for rank 1's, which comes only after rank 0's destroy has returned.
        if (cudaGraphLaunch(exec, s.s) != cudaSuccess) why = "cudaGraphLaunch failed";
        const double t0 = MPI_Wtime();
        vcclResult_t r = vcclCommDestroy(sub);
        const double took = MPI_Wtime() - t0;
        if (why.empty() && (r != vcclSuccess || took > 2.0)) {
            why = "destroy returned " + result_str(r) + " after " + std::to_string(took) + " s";
        }
        MPI_Barrier(MPI_COMM_WORLD);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        if (vcclCommDestroy(sub) != vcclSuccess) why = "destroy failed";
        if (cudaGraphLaunch(exec, s.s) != cudaSuccess && why.empty()) why = "cudaGraphLaunch failed";
    }
    expect_stream_goes_on(s.s, "both replays");
    if (why.empty()) why = x.check(1, "the replays around destroy");
    MPI_Barrier(MPI_COMM_WORLD); // no graph goes while the peer's replay may still use its flags
    cudaGraphExecDestroy(exec);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* Rank 0 ends its communicator with `end` and replays its graph twice alone: both replays must end (their data is
 * not valid). The others never replay theirs. */
std::string lone_replay_after(const std::string& what, const std::function<vcclResult_t(vcclComm_t)>& end) {
    vcclComm_t comm = gpu_comm();
    vcclComm_t sub = nullptr;
    if (vcclCommSplit(comm, 0, world_rank(), &sub, nullptr) != vcclSuccess || sub == nullptr) return "split failed";
    Stream s;
    Exchange x(1031, 1);
    std::string why;
    cudaGraphExec_t exec = capture(s.s, cudaStreamCaptureModeThreadLocal, [&] { return x.enqueue(sub, s.s); }, &why);
    if (exec != nullptr) why = replay(exec, x, 0, s.s, "the replay before " + what);
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) {
        if (end(sub) != vcclSuccess && why.empty()) why = what + " failed";
        for (int k = 1; k <= 2 && exec != nullptr; ++k) {
            if (cudaGraphLaunch(exec, s.s) != cudaSuccess && why.empty()) why = "cudaGraphLaunch failed";
            expect_stream_goes_on(s.s, ("lone replay " + std::to_string(k) + " after " + what).c_str());
        }
        if (what == "vcclCommRevoke" && vcclCommDestroy(sub) != vcclSuccess && why.empty()) why = "destroy failed";
    } else if (vcclCommDestroy(sub) != vcclSuccess) {
        why = "destroy failed";
    }
    MPI_Barrier(MPI_COMM_WORLD); // rank 0's released copies have landed in the peer's receive buffer
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (why.empty()) why = eager(comm, s.s, 1031, 7); // the parent communicator is not affected
    return why;
}

TEST(GpuGraphP2p, LoneReplayAfterAbortOrRevokeEnds) {
    SKIP_WITHOUT_DIRECT_PATH();
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    std::string why = lone_replay_after("vcclCommAbort", [](vcclComm_t c) { return vcclCommAbort(c); });
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    why = lone_replay_after("vcclCommRevoke", [](vcclComm_t c) { return vcclCommRevoke(c, VCCL_REVOKE_DEFAULT); });
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

TEST(GpuGraphP2p, RefusedWithoutTheDirectPath) {
    if (!direct_path_off()) GTEST_SKIP() << "the direct path is on (VCCL_P2P_DIRECT=0 runs this)";
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    Stream s;
    Exchange x(64, 1);
    Refusal r = refused_capture(comm, s.s, [&] { // refused at the send, before the group ends
        vcclGroupStart();
        vcclResult_t sent = vcclSend(x.send.ptr(), x.count, vcclInt32, x.to, comm, s.s);
        vcclResult_t received = vcclRecv(x.recv.ptr(), x.count, vcclInt32, x.from, comm, s.s);
        vcclResult_t ended = vcclGroupEnd();
        return sent != vcclSuccess ? sent : received != vcclSuccess ? received : ended;
    });
    std::string why = r.why.empty() && r.message.find("direct path") == std::string::npos
                          ? "the refusal does not name the direct path: " + r.message
                          : r.why;
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    std::string after = eager(comm, s.s, 1031, 3);
    EXPECT_ALL_RANKS_WHY(after.empty(), after);
}

} // namespace
