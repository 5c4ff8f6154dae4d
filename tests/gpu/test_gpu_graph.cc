/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA graph capture of vccl calls (vccl.h, "CUDA graphs"):
 *  - calls that cannot be captured (on host buffers, collectives over the low-latency limit) return vcclInvalidUsage,
 *    say why, and leave the capture empty and valid; the communicator works afterwards;
 *  - every collective captured (AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, AlltoAll), counts 1, odd,
 *    not divisible by the ranks and the largest the kernel takes, in place and out of place, in the global,
 *    thread-local and relaxed capture modes, replayed with new inputs each time and eager calls in between, every
 *    output checked against a reference computed here, with guard zones;
 *  - a small AllReduce replayed 1,000 times, each result checked;
 *  - two graphs on two streams, replayed in turn (ordered by events), while eager calls run on a third stream;
 *  - a replay after vcclCommDestroy, vcclCommAbort or vcclCommRevoke does nothing and does not hang; the graph
 *    outlives the communicator and is destroyed afterwards.
 * The captures need the low-latency kernel: where it is off (ranks share a GPU and VCCL_ALLREDUCE_LL_BYTES is not set,
 * as in np2_shared_gpu.sh) the replay tests skip and say so; np2_shared_gpu_ll.sh and np2_gpu.sh run them.
 */
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "mpi_gtest_main.h"
#include "test_util.h"

using namespace vtest;
using namespace vgpu;

namespace {

/* The largest count of 4-byte elements a rank may send each peer on the low-latency kernel (0: the kernel is off),
 * found the way a user would: a capture of that size is accepted, one unit more is refused. */
size_t ll_max_count(vcclComm_t comm) {
    const int n = world_size();
    size_t setting = env_size("VCCL_ALLREDUCE_LL_BYTES");
    if (setting == 0 && !gpu_shared()) setting = 2u << 20; // the default
    // Off where the library says so: ranks sharing a GPU without the setting, also when they share it because the
    // machine has fewer GPUs than ranks (np2_gpu.sh on one GPU).
    if (vccl::testing::ll_bytes(comm) <= 0) return 0;
    const size_t per_peer = n > 1 ? setting / size_t(n - 1) / 8 * 8 : setting;
    return std::min<size_t>(per_peer, 1u << 20) / 4; // AlltoAll's kernel takes at most 1 MiB a peer
}

/* The value rank r puts at element i of its input in replay k: small integers, so every sum is exact. */
int32_t input_value(int r, size_t i, int k) { return int32_t((r * 7 + int(i % 1013) * 3 + k * 5) % 61) - 30; }

std::vector<int32_t> input_of(int r, size_t n, int k) {
    std::vector<int32_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = input_value(r, i, k);
    return v;
}

void upload(const DevBuf& b, const std::vector<int32_t>& v, cudaStream_t s) {
    cudaMemcpyAsync(b.ptr(), v.data(), v.size() * 4, cudaMemcpyHostToDevice, s);
    cudaStreamSynchronize(s); // the host vector may go after this
}

std::vector<int32_t> download(const DevBuf& b, size_t n) {
    std::vector<int32_t> v(n);
    cudaMemcpy(v.data(), b.ptr(), n * 4, cudaMemcpyDeviceToHost);
    return v;
}

std::string compare(const std::vector<int32_t>& got, const std::vector<int32_t>& want, const std::string& what) {
    for (size_t i = 0; i < want.size(); ++i) {
        if (got[i] != want[i]) {
            return what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
                   std::to_string(want[i]);
        }
    }
    return "";
}

/* An eager AllReduce of `count` int32 elements on `s` (its own buffers; in place or not), checked. */
std::string eager_allreduce(vcclComm_t comm, cudaStream_t s, size_t count, bool in_place, int k) {
    DevBuf in(count * 4), out(count * 4);
    if (in.base == nullptr || out.base == nullptr) return "cudaMalloc failed";
    upload(in, input_of(world_rank(), count, k + 50), s);
    vcclResult_t r = vcclAllReduce(in.ptr(), in_place ? in.ptr() : out.ptr(), count, vcclInt32, vcclSum, comm, s);
    if (r != vcclSuccess) return call_failure(comm, {r});
    cudaError_t e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) return cuda_str(e);
    std::vector<int32_t> want(count, 0);
    for (int q = 0; q < world_size(); ++q) {
        for (size_t i = 0; i < count; ++i) want[i] += input_value(q, i, k + 50);
    }
    return compare(download(in_place ? in : out, count), want, "eager AllReduce");
}

/* One graph holding the six collectives on `count` int32 elements (per rank where the call counts so), and their
 * buffers. In place: each output is its own input buffer (AllGather and ReduceScatter at the rank's block). */
struct SixCollectives {
    size_t count;
    bool in_place;
    int n, rank, root;
    DevBuf ar_in, ar_out, rs_in, rs_out, ag_in, ag_out, bc_buf, bc_out, rd_in, rd_out, aa_in, aa_out;
    SixCollectives(size_t c, bool ip)
        : count(c), in_place(ip), n(world_size()), rank(world_rank()), root(1 % world_size()), ar_in(c * 4),
          ar_out(c * 4), rs_in(c * 4 * size_t(world_size())), rs_out(c * 4), ag_in(c * 4),
          ag_out(c * 4 * size_t(world_size())), bc_buf(c * 4), bc_out(c * 4), rd_in(c * 4), rd_out(c * 4),
          aa_in(c * 4 * size_t(world_size())), aa_out(c * 4 * size_t(world_size())) {}

    bool ok() const { return ar_in.base && ar_out.base && rs_in.base && ag_out.base && aa_in.base && aa_out.base; }

    /* The calls, as captured (any failure returned with its text). */
    std::string enqueue(vcclComm_t comm, cudaStream_t s) {
        const size_t c = count;
        char* rs_recv = in_place ? rs_in.ptr() + size_t(rank) * c * 4 : rs_out.ptr();
        const char* ag_send = in_place ? ag_out.ptr() + size_t(rank) * c * 4 : ag_in.ptr();
        std::vector<vcclResult_t> r;
        r.push_back(vcclAllReduce(ar_in.ptr(), in_place ? ar_in.ptr() : ar_out.ptr(), c, vcclInt32, vcclSum, comm, s));
        r.push_back(vcclReduceScatter(rs_in.ptr(), rs_recv, c, vcclInt32, vcclSum, comm, s));
        r.push_back(vcclAllGather(ag_send, ag_out.ptr(), c, vcclInt32, comm, s));
        r.push_back(vcclBroadcast(bc_buf.ptr(), in_place ? bc_buf.ptr() : bc_out.ptr(), c, vcclInt32, root, comm, s));
        r.push_back(vcclReduce(rd_in.ptr(), in_place ? rd_in.ptr() : rd_out.ptr(), c, vcclInt32, vcclMax, 0, comm, s));
        r.push_back(vcclAlltoAll(aa_in.ptr(), in_place ? aa_in.ptr() : aa_out.ptr(), c, vcclInt32, comm, s));
        return call_failure(comm, r);
    }

    /* Inputs of replay k (on every buffer an in-place call overwrites too). */
    void set_inputs(int k, cudaStream_t s) {
        const size_t c = count;
        upload(ar_in, input_of(rank, c, k), s);
        upload(rs_in, input_of(rank, c * size_t(n), k + 1), s);
        std::vector<int32_t> ag(c * size_t(n), -99);
        std::vector<int32_t> mine = input_of(rank, c, k + 2);
        if (in_place) {
            std::copy(mine.begin(), mine.end(), ag.begin() + long(size_t(rank) * c));
            upload(ag_out, ag, s);
        } else {
            upload(ag_in, mine, s);
        }
        upload(bc_buf, input_of(rank, c, k + 3), s);
        upload(rd_in, input_of(rank, c, k + 4), s);
        upload(aa_in, input_of(rank, c * size_t(n), k + 5), s);
    }

    /* Every output of replay k against the reference. */
    std::string check(int k) const {
        const size_t c = count;
        std::vector<int32_t> want(c, 0);
        for (int r = 0; r < n; ++r) {
            std::vector<int32_t> v = input_of(r, c, k);
            for (size_t i = 0; i < c; ++i) want[i] += v[i];
        }
        std::string why = compare(download(in_place ? ar_in : ar_out, c), want, "AllReduce");
        if (!why.empty()) return why;
        std::vector<int32_t> rs_want(c, 0);
        for (int r = 0; r < n; ++r) {
            std::vector<int32_t> v = input_of(r, c * size_t(n), k + 1);
            for (size_t i = 0; i < c; ++i) rs_want[i] += v[size_t(rank) * c + i];
        }
        std::vector<int32_t> rs_got = download(in_place ? rs_in : rs_out, in_place ? c * size_t(n) : c);
        if (in_place) rs_got.erase(rs_got.begin(), rs_got.begin() + long(size_t(rank) * c));
        why = compare(rs_got, rs_want, "ReduceScatter");
        if (!why.empty()) return why;
        std::vector<int32_t> ag_want;
        for (int r = 0; r < n; ++r) {
            std::vector<int32_t> v = input_of(r, c, k + 2);
            ag_want.insert(ag_want.end(), v.begin(), v.end());
        }
        why = compare(download(ag_out, c * size_t(n)), ag_want, "AllGather");
        if (!why.empty()) return why;
        why = compare(download(in_place ? bc_buf : bc_out, c), input_of(root, c, k + 3), "Broadcast");
        if (!why.empty()) return why;
        if (rank == 0) {
            std::vector<int32_t> rd_want = input_of(0, c, k + 4);
            for (int r = 1; r < n; ++r) {
                std::vector<int32_t> v = input_of(r, c, k + 4);
                for (size_t i = 0; i < c; ++i) rd_want[i] = std::max(rd_want[i], v[i]);
            }
            why = compare(download(in_place ? rd_in : rd_out, c), rd_want, "Reduce");
            if (!why.empty()) return why;
        }
        std::vector<int32_t> aa_want;
        for (int r = 0; r < n; ++r) {
            std::vector<int32_t> v = input_of(r, c * size_t(n), k + 5);
            aa_want.insert(aa_want.end(), v.begin() + long(size_t(rank) * c), v.begin() + long(size_t(rank + 1) * c));
        }
        why = compare(download(in_place ? aa_in : aa_out, c * size_t(n)), aa_want, "AlltoAll");
        if (!why.empty()) return why;
        for (const DevBuf* b : {&ar_in, &ar_out, &rs_in, &rs_out, &ag_in, &ag_out, &bc_buf, &bc_out, &rd_in, &rd_out,
                                &aa_in, &aa_out}) {
            if (!b->guards_intact()) return "a guard zone was overwritten";
        }
        return "";
    }
};

#define SKIP_WITHOUT_LL(comm)                                                                                      \
    do {                                                                                                            \
        if (ll_max_count(comm) == 0) {                                                                              \
            GTEST_SKIP() << "the low-latency kernel is off (ranks share a GPU and VCCL_ALLREDUCE_LL_BYTES is not "  \
                            "set): nothing can be captured; np2_shared_gpu_ll.sh runs this";                        \
        }                                                                                                           \
    } while (0)

TEST(GpuGraph, RefusedCallsEnqueueNothing) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    Stream s;
    const size_t limit = ll_max_count(comm);
    const size_t too_many = limit > 0 ? limit + 2 : 1024; // one unit past the kernel's limit, or any when it is off
    DevBuf a(too_many * 4), b(too_many * 4);
    std::string why;
    if (cudaStreamBeginCapture(s.s, cudaStreamCaptureModeGlobal) != cudaSuccess) why = "cudaStreamBeginCapture failed";
    vcclResult_t r1 = vcclAllReduce(a.ptr(), b.ptr(), too_many, vcclInt32, vcclSum, comm, s.s);
    std::string msg1 = vcclGetLastError(comm);
    std::vector<char> host_send(16, 1), host_recv(16, 0); // send/recv on host buffers cannot be captured
    vcclResult_t r2 = vcclSend(host_send.data(), 16, vcclUint8, (world_rank() + 1) % world_size(), comm, s.s);
    std::string msg2 = vcclGetLastError(comm);
    vcclGroupStart();
    vcclResult_t r3 = vcclRecv(host_recv.data(), 16, vcclUint8, (world_rank() + world_size() - 1) % world_size(), comm,
                               s.s);
    vcclResult_t r4 = vcclGroupEnd();
    cudaGraph_t graph = nullptr;
    cudaError_t end = cudaStreamEndCapture(s.s, &graph);
    size_t nodes = 0;
    if (graph != nullptr) {
        cudaGraphGetNodes(graph, nullptr, &nodes);
        cudaGraphDestroy(graph);
    }
    if (why.empty() && (r1 != vcclInvalidUsage || r2 != vcclInvalidUsage || r3 != vcclInvalidUsage)) {
        why = "calls on a capturing stream returned " + result_str(r1) + ", " + result_str(r2) + " and " +
              result_str(r3);
    }
    if (why.empty() && r4 != vcclSuccess) why = "the empty group's end returned " + result_str(r4);
    if (why.empty() && (msg1.find("graph") == std::string::npos || msg2.find("graph") == std::string::npos)) {
        why = "an error message does not mention the graph: " + msg1 + " / " + msg2;
    }
    if (why.empty() && limit > 0 && msg1.find("VCCL_ALLREDUCE_LL_BYTES") == std::string::npos) {
        why = "the refusal of a large collective does not name the limit: " + msg1;
    }
    if (why.empty() && (end != cudaSuccess || nodes != 0)) {
        why = "the capture was disturbed: " + cuda_str(end) + ", " + std::to_string(nodes) + " nodes";
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    // The communicator still works afterwards.
    std::string after = eager_allreduce(comm, s.s, 1031, false, 0);
    EXPECT_ALL_RANKS_WHY(after.empty(), after);
}

TEST(GpuGraph, EveryCollectiveReplaysWithEagerCallsBetween) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    SKIP_WITHOUT_LL(comm);
    const size_t limit = ll_max_count(comm);
    const int n = world_size();
    Stream s;
    Sweep sweep;
    const cudaStreamCaptureMode modes[] = {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                                           cudaStreamCaptureModeRelaxed};
    int which = 0;
    for (size_t count : {size_t(1), size_t(7), size_t(n) * 4 + 1, size_t(1031), limit}) {
        if (count > limit) continue;
        for (bool in_place : {false, true}) {
            const cudaStreamCaptureMode mode = modes[which++ % 3];
            const std::string label = "count " + std::to_string(count) + (in_place ? " in place" : "") + ", mode " +
                                      std::to_string(int(mode));
            sweep.run(label, [&]() -> std::string {
                SixCollectives six(count, in_place);
                if (!six.ok()) return "cudaMalloc failed";
                std::string why;
                cudaGraphExec_t exec = capture(s.s, mode, [&] { return six.enqueue(comm, s.s); }, &why);
                if (exec == nullptr) return why;
                for (int k = 0; k < 6 && why.empty(); ++k) {
                    six.set_inputs(k, s.s);
                    cudaError_t e = cudaGraphLaunch(exec, s.s);
                    // An eager call between replays, on the same stream: its own numbering and words.
                    if (e == cudaSuccess) e = cudaStreamSynchronize(s.s);
                    std::string eager = e == cudaSuccess ? eager_allreduce(comm, s.s, count, k % 2 == 1, k) : "";
                    if (e != cudaSuccess) why = "replay " + std::to_string(k) + ": " + cuda_str(e);
                    else if (!eager.empty()) why = "the eager call after replay " + std::to_string(k) + ": " + eager;
                    else why = six.check(k);
                    if (!why.empty()) why = "replay " + std::to_string(k) + ": " + why;
                }
                cudaGraphExecDestroy(exec);
                return why;
            });
        }
    }
    EXPECT_ALL_RANKS_WHY(sweep.first_failure.empty(), sweep.first_failure) << sweep.cases << " cases";
}

TEST(GpuGraph, ThousandReplaysOfSmallAllReduce) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    SKIP_WITHOUT_LL(comm);
    Stream s;
    const size_t count = 2; // 8 bytes
    DevBuf in(count * 4), out(count * 4);
    std::string why;
    cudaGraphExec_t exec = capture(s.s, cudaStreamCaptureModeThreadLocal, [&] {
        return call_failure(comm, {vcclAllReduce(in.ptr(), out.ptr(), count, vcclInt32, vcclSum, comm, s.s)});
    }, &why);
    for (int k = 0; k < 1000 && exec != nullptr && why.empty(); ++k) {
        upload(in, input_of(world_rank(), count, k), s.s);
        cudaError_t e = cudaGraphLaunch(exec, s.s);
        if (e == cudaSuccess) e = cudaStreamSynchronize(s.s);
        if (e != cudaSuccess) {
            why = "replay " + std::to_string(k) + ": " + cuda_str(e);
            break;
        }
        std::vector<int32_t> want(count, 0);
        for (int r = 0; r < world_size(); ++r) {
            for (size_t i = 0; i < count; ++i) want[i] += input_value(r, i, k);
        }
        why = compare(download(out, count), want, "replay " + std::to_string(k));
    }
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

TEST(GpuGraph, TwoGraphsOnTwoStreamsBesideEagerCalls) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    SKIP_WITHOUT_LL(comm);
    Stream s1, s2, s3;
    const int n = world_size();
    const size_t count = std::min<size_t>(777, ll_max_count(comm));
    DevBuf a_in(count * 4), a_out(count * 4), g_in(count * 4), g_out(count * 4 * size_t(n));
    std::string why;
    cudaGraphExec_t g1 = capture(s1.s, cudaStreamCaptureModeThreadLocal, [&] {
        return call_failure(comm, {vcclAllReduce(a_in.ptr(), a_out.ptr(), count, vcclInt32, vcclSum, comm, s1.s)});
    }, &why);
    cudaGraphExec_t g2 = why.empty() ? capture(s2.s, cudaStreamCaptureModeThreadLocal, [&] {
        return call_failure(comm, {vcclAllGather(g_in.ptr(), g_out.ptr(), count, vcclInt32, comm, s2.s)});
    }, &why) : nullptr;
    cudaEvent_t e1 = nullptr, e2 = nullptr;
    cudaEventCreateWithFlags(&e1, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&e2, cudaEventDisableTiming);
    for (int k = 0; k < 20 && why.empty(); ++k) {
        upload(a_in, input_of(world_rank(), count, k), s1.s);
        upload(g_in, input_of(world_rank(), count, k + 100), s2.s);
        // g1 on s1, then g2 on s2 after it; eager AllReduces on s3 meanwhile, ordered with neither.
        cudaError_t e = cudaGraphLaunch(g1, s1.s);
        if (e == cudaSuccess) e = cudaEventRecord(e1, s1.s);
        if (e == cudaSuccess) e = cudaStreamWaitEvent(s2.s, e1, 0);
        if (e == cudaSuccess) e = cudaGraphLaunch(g2, s2.s);
        if (e == cudaSuccess) e = cudaEventRecord(e2, s2.s);
        if (e == cudaSuccess) e = cudaStreamWaitEvent(s1.s, e2, 0); // the next g1 after this g2
        std::string eager = eager_allreduce(comm, s3.s, 513, k % 2 == 1, k);
        if (e == cudaSuccess) e = cudaStreamSynchronize(s1.s);
        if (e == cudaSuccess) e = cudaStreamSynchronize(s2.s);
        if (e != cudaSuccess) {
            why = "round " + std::to_string(k) + ": " + cuda_str(e);
            break;
        }
        if (!eager.empty()) {
            why = "eager call in round " + std::to_string(k) + ": " + eager;
            break;
        }
        std::vector<int32_t> want(count, 0), gathered;
        for (int r = 0; r < n; ++r) {
            std::vector<int32_t> v = input_of(r, count, k);
            for (size_t i = 0; i < count; ++i) want[i] += v[i];
            std::vector<int32_t> g = input_of(r, count, k + 100);
            gathered.insert(gathered.end(), g.begin(), g.end());
        }
        why = compare(download(a_out, count), want, "AllReduce graph, round " + std::to_string(k));
        if (why.empty()) why = compare(download(g_out, count * size_t(n)), gathered, "AllGather graph, round " + std::to_string(k));
    }
    if (g1 != nullptr) cudaGraphExecDestroy(g1);
    if (g2 != nullptr) cudaGraphExecDestroy(g2);
    cudaEventDestroy(e1);
    cudaEventDestroy(e2);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* A graph replayed after its communicator ended (`end`: destroy, abort or revoke) leaves the output alone and the
 * stream goes on; the graph is destroyed after the communicator. */
std::string replay_after_end(const char* end_name, const std::function<vcclResult_t(vcclComm_t)>& end) {
    vcclComm_t comm = make_comm(CommKind::Mpi);
    if (comm == nullptr) return "no communicator";
    Stream s;
    const size_t count = 5;
    DevBuf in(count * 4), out(count * 4);
    std::string why;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = capture(s.s, cudaStreamCaptureModeGlobal, [&] {
        return call_failure(comm, {vcclAllReduce(in.ptr(), out.ptr(), count, vcclInt32, vcclSum, comm, s.s)});
    }, &why, &graph);
    if (exec == nullptr) {
        vcclCommDestroy(comm);
        return why;
    }
    upload(in, input_of(world_rank(), count, 3), s.s);
    cudaError_t e = cudaGraphLaunch(exec, s.s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s.s);
    std::vector<int32_t> want(count, 0);
    for (int r = 0; r < world_size(); ++r) {
        for (size_t i = 0; i < count; ++i) want[i] += input_value(r, i, 3);
    }
    why = e != cudaSuccess ? "first replay: " + cuda_str(e) : compare(download(out, count), want, "first replay");
    vcclResult_t ended = end(comm);
    if (why.empty() && ended != vcclSuccess) why = std::string(end_name) + " returned " + result_str(ended);
    const bool revoked = std::string(end_name) == "vcclCommRevoke"; // replayed while revoked, destroyed after
    MPI_Barrier(MPI_COMM_WORLD); // every rank's communicator is gone before any replays again
    const std::vector<int32_t> sentinel(count, 12345);
    upload(out, sentinel, s.s);
    e = cudaGraphLaunch(exec, s.s);
    if (why.empty() && e != cudaSuccess) why = "replay after " + std::string(end_name) + ": " + cuda_str(e);
    expect_stream_goes_on(s.s, "a replay after the communicator ended");
    if (why.empty()) why = compare(download(out, count), sentinel, "output after the replay that followed " + std::string(end_name));
    if (revoked) vcclCommDestroy(comm);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph); // the communicator's kernel words go with it, on a thread of their own
    cudaError_t sticky = cudaDeviceSynchronize();
    if (why.empty() && sticky != cudaSuccess) why = "the device failed: " + cuda_str(sticky);
    return why;
}

TEST(GpuGraph, ReplayAfterDestroyAbortOrRevokeDoesNothing) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    SKIP_WITHOUT_LL(comm);
    std::string why = replay_after_end("vcclCommDestroy", [](vcclComm_t c) { return vcclCommDestroy(c); });
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    why = replay_after_end("vcclCommAbort", [](vcclComm_t c) { return vcclCommAbort(c); });
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    why = replay_after_end("vcclCommRevoke", [](vcclComm_t c) { return vcclCommRevoke(c, VCCL_REVOKE_DEFAULT); });
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

} // namespace
