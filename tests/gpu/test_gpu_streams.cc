/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device-memory tests of stream order (part of tests/gpu/test_gpu; test_gpu.cc lists them all): a slow kernel
 * writes the send buffer right before vcclSend and a kernel reads the receive buffer right after vcclRecv with
 * no synchronisation in between; one communicator used from two streams in turn; several streams in one group
 * call; send/recv to the rank itself; a communicator created nonblocking (vcclConfig_t.blocking = 0, built on a
 * thread of vccl's with the caller's GPU) and its nonblocking split run device collectives and send/recv.
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

/* Element i of the sum over ranks r of the pattern vt_slow_fill writes for seed `seed0 + r + 1`: an AllReduce's
 * result when rank r's input was filled with that seed. */
uint32_t pattern_sum(size_t i, uint32_t seed0) {
    uint32_t sum = 0;
    for (int r = 0; r < world_size(); ++r) sum += vt_pattern(i, seed0 + uint32_t(r) + 1);
    return sum;
}

/* A communicator whose reductions take the copy engines only (both kernels off), in pieces of `pipeline` bytes
 * (VCCL_REDUCE_PIPELINE_BYTES; "0": one piece). */
vcclComm_t copy_engine_comm(const char* pipeline) {
    return comm_with_env({{"VCCL_ALLREDUCE_LL_BYTES", "0"},
                          {"VCCL_ALLREDUCE_KERNEL_BYTES", "0"},
                          {"VCCL_REDUCE_PIPELINE_BYTES", pipeline}});
}

/* A slow kernel fills the send buffer right before vcclSend, a kernel reads the receive buffer right after
 * vcclRecv; nothing synchronises in between. Any ordering gap shows as stale data. */
TEST(GpuStreamOrder, KernelBeforeSendKernelAfterRecv) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    int rank = world_rank(), n = world_size();
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    Stream s;
    const int iters = 6;
    std::string first_failure;
    for (size_t elems : {size_t(1), size_t(4097), size_t(1 << 20) + 1}) {
        size_t bytes = elems * 4;
        DevBuf send(bytes), recv(bytes), out(bytes * iters);
        ASSERT_ALL_RANKS(send.base != nullptr && recv.base != nullptr && out.base != nullptr);
        cudaMemset(recv.ptr(), 0, bytes);
        cudaDeviceSynchronize();
        MPI_Barrier(MPI_COMM_WORLD);
        auto* sp = reinterpret_cast<uint32_t*>(send.ptr());
        auto* rp = reinterpret_cast<uint32_t*>(recv.ptr());
        std::string why;
        for (int it = 0; it < iters && why.empty(); ++it) {
            uint32_t seed = uint32_t(1000 * it + 10 * rank + 1);
            cudaError_t ce = vt_slow_fill(sp, elems, seed, 2000, s.s); // 2 ms before the data is there
            vcclResult_t g = vcclGroupStart();
            vcclResult_t a = vcclSend(sp, elems * 4, vcclUint8, next, comm, s.s);
            vcclResult_t b = vcclRecv(rp, elems * 4, vcclUint8, prev, comm, s.s);
            vcclResult_t e = vcclGroupEnd();
            cudaError_t ce2 = vt_add_one(reinterpret_cast<uint32_t*>(out.ptr()) + size_t(it) * elems, rp, elems, s.s);
            if (ce != cudaSuccess || ce2 != cudaSuccess) why = "kernel launch: " + cuda_str(ce != cudaSuccess ? ce : ce2);
            for (vcclResult_t r : {g, a, b, e}) {
                if (r != vcclSuccess && why.empty()) why = std::string("call failed: ") + result_str(r);
            }
        }
        cudaError_t ce = cudaStreamSynchronize(s.s);
        if (ce != cudaSuccess && why.empty()) why = "stream: " + cuda_str(ce);
        std::vector<char> got = out.download();
        const auto* g = reinterpret_cast<const uint32_t*>(got.data());
        for (int it = 0; it < iters && why.empty(); ++it) {
            uint32_t seed = uint32_t(1000 * it + 10 * prev + 1);
            for (size_t i = 0; i < elems; ++i) {
                if (g[size_t(it) * elems + i] != vt_pattern(i, seed) + 1u) {
                    why = "iteration " + std::to_string(it) + " element " + std::to_string(i) + " is stale";
                    break;
                }
            }
        }
        if (!why.empty() && first_failure.empty()) first_failure = std::to_string(bytes) + " bytes: " + why;
    }
    EXPECT_ALL_RANKS_WHY(first_failure.empty(), first_failure);
}


/* One communicator used from two streams in turn (allowed, as with NCCL): its operations must still run in the
 * order of the calls, since they share the communicator's scratch memory and sequence numbers. Call `it` runs
 * on stream A or B in turn, its input written by a kernel that first spins 2 ms on A, so a later call on B
 * would overtake it if nothing ordered them. issue(it, send, recv, stream) makes the call (an empty string or
 * why it failed); want(it, i) is element i of call it's result. */
template <typename Issue, typename Want>
std::string alternating_streams_case(size_t elems, Issue&& issue, Want&& want) {
    const int iters = 6;
    Stream a, b;
    std::string why;
    std::vector<std::unique_ptr<DevBuf>> send, recv;
    for (int it = 0; it < iters; ++it) {
        send.emplace_back(new DevBuf(elems * 4));
        recv.emplace_back(new DevBuf(elems * 4));
    }
    cudaDeviceSynchronize();
    MPI_Barrier(MPI_COMM_WORLD);
    for (int it = 0; it < iters && why.empty(); ++it) {
        cudaStream_t s = it % 2 == 0 ? a.s : b.s;
        auto* sp = reinterpret_cast<uint32_t*>(send[it]->ptr());
        cudaError_t ce = vt_slow_fill(sp, elems, uint32_t(100 * it + world_rank() + 1), it % 2 == 0 ? 2000 : 0, s);
        if (ce != cudaSuccess) why = "kernel launch: " + cuda_str(ce);
        std::string f = issue(it, sp, reinterpret_cast<uint32_t*>(recv[it]->ptr()), s);
        if (!f.empty() && why.empty()) why = f;
    }
    for (cudaStream_t s : {a.s, b.s}) {
        cudaError_t ce = cudaStreamSynchronize(s);
        if (ce != cudaSuccess && why.empty()) why = "stream: " + cuda_str(ce);
    }
    for (int it = 0; it < iters && why.empty(); ++it) {
        std::vector<char> got = recv[it]->download();
        const auto* g = reinterpret_cast<const uint32_t*>(got.data());
        for (size_t i = 0; i < elems; ++i) {
            uint32_t w = want(it, i);
            if (g[i] != w) {
                why = std::to_string(elems) + " elements, call " + std::to_string(it) + " (stream " +
                      (it % 2 == 0 ? "A" : "B") + "), element " + std::to_string(i) + ": got " + std::to_string(g[i]) +
                      ", want " + std::to_string(w);
                break;
            }
        }
    }
    return why;
}

TEST(GpuStreamOrder, AllReduceAlternatingStreamsKeepsCallOrder) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    std::string why;
    for (size_t elems : {size_t(1031), size_t(300001)}) {
        if (!why.empty()) break;
        why = alternating_streams_case(
            elems,
            [&](int, uint32_t* send, uint32_t* recv, cudaStream_t s) {
                vcclResult_t r = vcclAllReduce(send, recv, elems, vcclUint32, vcclSum, comm, s);
                return r == vcclSuccess ? std::string() : std::string("call failed: ") + result_str(r);
            },
            [&](int it, size_t i) { return pattern_sum(i, uint32_t(100 * it)); });
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* The same through the communicator's second stream (device/side_stream.h): AllReduce in 64 KiB pieces, whose
 * kernels run there, and AllGather and Broadcast of blocks of 1 MiB or more, whose local copy runs there. Each
 * call writes a temporary buffer that a kernel reads right after it on the same stream (adding 1), so work left
 * on the second stream past the call's end would show as stale data. */
TEST(GpuStreamOrder, SecondStreamWorkKeepsCallOrder) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    vcclComm_t comm = comm_with_env({{"VCCL_REDUCE_PIPELINE_BYTES", "64K"}});
    ASSERT_ALL_RANKS(comm != nullptr);
    const int n = world_size();
    const size_t elems = 600000; // divisible by 1 to 6 ranks; 2.4 MB
    std::vector<std::unique_ptr<DevBuf>> tmp;
    for (int it = 0; it < 6; ++it) tmp.emplace_back(new DevBuf(elems * 4));
    enum Coll { AllReduce, AllGather, Broadcast };
    std::string why;
    for (Coll coll : {AllReduce, AllGather, Broadcast}) {
        if (!why.empty()) break;
        const size_t block = coll == AllGather ? elems / size_t(n) : elems;
        why = alternating_streams_case(
            elems,
            [&](int it, uint32_t* send, uint32_t* recv, cudaStream_t s) {
                auto* t = reinterpret_cast<uint32_t*>(tmp[it]->ptr());
                vcclResult_t r = coll == AllReduce ? vcclAllReduce(send, t, elems, vcclUint32, vcclSum, comm, s)
                                 : coll == AllGather ? vcclAllGather(send, t, block, vcclUint32, comm, s)
                                                     : vcclBroadcast(send, t, elems, vcclUint32, 0, comm, s);
                if (r != vcclSuccess) return std::string("call failed: ") + result_str(r);
                cudaError_t ce = vt_add_one(recv, t, elems, s);
                return ce == cudaSuccess ? std::string() : "kernel launch: " + cuda_str(ce);
            },
            [&](int it, size_t i) {
                uint32_t v = 0;
                if (coll == AllReduce) {
                    for (int r = 0; r < n; ++r) v += vt_pattern(i, uint32_t(100 * it + r + 1));
                } else if (coll == AllGather) {
                    v = vt_pattern(i % block, uint32_t(100 * it + int(i / block) + 1));
                } else {
                    v = vt_pattern(i, uint32_t(100 * it + 1));
                }
                return v + 1u;
            });
        if (!why.empty()) why = std::string(coll == AllReduce ? "AllReduce" : coll == AllGather ? "AllGather" : "Broadcast") +
                                ": " + why;
    }
    vcclCommDestroy(comm);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* An AllReduce's all-gather copies go into the peers' buffers without waiting for their READY (device_coll.cc,
 * all_gather_send): the peers' earlier work on those buffers must still come first. In place, each rank's stream
 * fills the buffer right before the call, the last rank's after spinning 3 ms; a copy that landed in the slow
 * rank's buffer before its fill would be overwritten by the fill, and that rank's result would be its own input
 * there. Copy engines only (kernels off), in one piece and in pieces of 64 KiB; sizes not divisible by the ranks. */
TEST(GpuStreamOrder, AllReduceGatherWaitsForThePeersEarlierWork) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    const int rank = world_rank(), n = world_size();
    if (n < 2) GTEST_SKIP() << "needs 2 ranks";
    std::string why;
    for (const char* pipeline : {"0", "64K"}) {
        vcclComm_t comm = copy_engine_comm(pipeline);
        ASSERT_ALL_RANKS(comm != nullptr);
        Stream s;
        for (size_t elems : {size_t(65537), size_t(1 << 20) + 3}) {
            const int iters = 4;
            DevBuf buf(elems * 4), out(elems * 4 * iters);
            ASSERT_ALL_RANKS(buf.base != nullptr && out.base != nullptr);
            cudaDeviceSynchronize();
            MPI_Barrier(MPI_COMM_WORLD);
            auto* bp = reinterpret_cast<uint32_t*>(buf.ptr());
            std::string f;
            for (int it = 0; it < iters && f.empty(); ++it) {
                unsigned spin = rank == n - 1 ? 3000 : 0;
                cudaError_t ce = vt_slow_fill(bp, elems, uint32_t(100 * it + rank + 1), spin, s.s);
                vcclResult_t r = vcclAllReduce(bp, bp, elems, vcclUint32, vcclSum, comm, s.s);
                cudaError_t ce2 = vt_add_one(reinterpret_cast<uint32_t*>(out.ptr()) + size_t(it) * elems, bp, elems, s.s);
                if (ce != cudaSuccess || ce2 != cudaSuccess) f = "kernel launch: " + cuda_str(ce != cudaSuccess ? ce : ce2);
                if (r != vcclSuccess && f.empty()) f = std::string("call failed: ") + result_str(r);
            }
            cudaError_t ce = cudaStreamSynchronize(s.s);
            if (ce != cudaSuccess && f.empty()) f = "stream: " + cuda_str(ce);
            std::vector<char> got = out.download();
            const auto* g = reinterpret_cast<const uint32_t*>(got.data());
            for (int it = 0; it < iters && f.empty(); ++it) {
                for (size_t i = 0; i < elems; ++i) {
                    const uint32_t want = pattern_sum(i, uint32_t(100 * it)) + 1u;
                    if (g[size_t(it) * elems + i] != want) {
                        f = "call " + std::to_string(it) + " element " + std::to_string(i) + ": got " +
                            std::to_string(g[size_t(it) * elems + i]) + ", want " + std::to_string(want);
                        break;
                    }
                }
            }
            if (!f.empty() && why.empty()) {
                why = std::string("pipeline ") + pipeline + ", " + std::to_string(elems) + " elements: " + f;
            }
        }
        vcclCommDestroy(comm);
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* Copy-engine reductions back to back on one communicator, where a call sends into the peers' reduction scratch
 * without their READY when the call before was a copy-engine AllReduce on the same stream (algo/device/registry.cc,
 * take_peers_scratch_free): AllReduce after AllReduce, ReduceScatter, Reduce and the one-shot AllReduce after one,
 * and the calls that must wait (after a ReduceScatter, a Reduce, a one-shot AllReduce, on another stream). Each
 * call's input is written right before it by a kernel that spins 1 ms on one rank in turn, so the ranks' streams
 * drift apart; every result is checked once all calls ran. In one piece and in pieces of 64 KiB. */
TEST(GpuStreamOrder, ReductionsBackToBackReuseThePeersScratch) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    const int rank = world_rank(), n = world_size();
    if (n < 2) GTEST_SKIP() << "needs 2 ranks";
    enum Kind { AllReduceBig, AllReduceSmall, ReduceScatter, Reduce };
    struct Call {
        Kind kind;
        bool other_stream;
    };
    const std::vector<Call> calls = {{AllReduceBig, false}, {AllReduceBig, false},  {ReduceScatter, false},
                                     {AllReduceBig, false}, {Reduce, false},        {AllReduceSmall, false},
                                     {AllReduceBig, false}, {AllReduceSmall, false}, {AllReduceBig, true},
                                     {AllReduceBig, true},  {ReduceScatter, true},  {AllReduceBig, false}};
    const size_t big = 300001, small = 4001, per_rank = 100003; // small: at most VCCL_ALLREDUCE_SMALL_BYTES (64K)
    auto in_count = [&](Kind k) { return k == AllReduceSmall ? small : k == ReduceScatter ? per_rank * size_t(n) : big; };
    auto out_count = [&](Kind k) { return k == AllReduceSmall ? small : k == ReduceScatter ? per_rank : big; };
    std::string why;
    for (const char* pipeline : {"0", "64K"}) {
        vcclComm_t comm = copy_engine_comm(pipeline);
        ASSERT_ALL_RANKS(comm != nullptr);
        Stream a, b;
        std::vector<std::unique_ptr<DevBuf>> in, out;
        for (const Call& c : calls) {
            in.emplace_back(new DevBuf(in_count(c.kind) * 4));
            out.emplace_back(new DevBuf(out_count(c.kind) * 4));
        }
        cudaDeviceSynchronize();
        MPI_Barrier(MPI_COMM_WORLD);
        std::string f;
        for (size_t i = 0; i < calls.size() && f.empty(); ++i) {
            const Call& c = calls[i];
            cudaStream_t st = c.other_stream ? b.s : a.s;
            auto* ip = reinterpret_cast<uint32_t*>(in[i]->ptr());
            auto* op = reinterpret_cast<uint32_t*>(out[i]->ptr());
            unsigned spin = int(i % size_t(n)) == rank ? 1000 : 0;
            cudaError_t ce = vt_slow_fill(ip, in_count(c.kind), uint32_t(1000 * i + rank + 1), spin, st);
            if (ce != cudaSuccess) f = "kernel launch: " + cuda_str(ce);
            vcclResult_t r = vcclSuccess;
            switch (c.kind) {
            case AllReduceBig:
            case AllReduceSmall: r = vcclAllReduce(ip, op, out_count(c.kind), vcclUint32, vcclSum, comm, st); break;
            case ReduceScatter: r = vcclReduceScatter(ip, op, per_rank, vcclUint32, vcclSum, comm, st); break;
            case Reduce: r = vcclReduce(ip, op, big, vcclUint32, vcclSum, 0, comm, st); break;
            }
            if (r != vcclSuccess && f.empty()) f = "call " + std::to_string(i) + " failed: " + result_str(r);
        }
        for (cudaStream_t st : {a.s, b.s}) {
            if (cudaStreamSynchronize(st) != cudaSuccess && f.empty()) f = "stream failed";
        }
        for (size_t i = 0; i < calls.size() && f.empty(); ++i) {
            const Kind k = calls[i].kind;
            if (k == Reduce && rank != 0) continue;
            std::vector<char> got = out[i]->download();
            const auto* g = reinterpret_cast<const uint32_t*>(got.data());
            const size_t base = k == ReduceScatter ? per_rank * size_t(rank) : 0;
            for (size_t e = 0; e < out_count(k); ++e) {
                const uint32_t want = pattern_sum(base + e, uint32_t(1000 * i));
                if (g[e] != want) {
                    f = "call " + std::to_string(i) + " element " + std::to_string(e) + ": got " + std::to_string(g[e]) +
                        ", want " + std::to_string(want);
                    break;
                }
            }
        }
        if (!f.empty() && why.empty()) why = std::string("pipeline ") + pipeline + ": " + f;
        vcclCommDestroy(comm);
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* The same for send/recv: a ring exchange per call. The receive of a later call must not take the place (the
 * sequence number) of an earlier one. */
TEST(GpuStreamOrder, SendRecvAlternatingStreamsKeepsCallOrder) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    int rank = world_rank(), n = world_size();
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    std::string why;
    for (size_t elems : {size_t(3), size_t(262147)}) {
        if (!why.empty()) break;
        why = alternating_streams_case(
            elems,
            [&](int, uint32_t* send, uint32_t* recv, cudaStream_t s) {
                vcclResult_t g = vcclGroupStart();
                vcclResult_t x = vcclSend(send, elems, vcclUint32, next, comm, s);
                vcclResult_t y = vcclRecv(recv, elems, vcclUint32, prev, comm, s);
                vcclResult_t e = vcclGroupEnd();
                return call_failure(comm, {g, x, y, e});
            },
            [&](int it, size_t i) { return vt_pattern(i, uint32_t(100 * it + prev + 1)); });
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* Several streams in one group call: on each rank, x goes to the next rank on stream A (written by a kernel that
 * spins 3 ms first), y on stream B (ready at once); a and b come from the previous rank on streams C and D, and a
 * kernel reads each right after the group, on its own stream. The direct path tells the two transfers apart by
 * sequence numbers waited for as "at least": run on different streams, y's flags could satisfy x's waits, and C
 * would read `a` before x's data arrived (stale bytes). */
TEST(GpuStreamOrder, SeveralStreamsInOneGroup) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    int rank = world_rank(), n = world_size();
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    Stream sa, sb, sc, sd;
    std::string first_failure;
    for (size_t elems : {size_t(1), size_t(4097), size_t(1 << 20) + 1}) {
        size_t bytes = elems * 4;
        DevBuf x(bytes), y(bytes), a(bytes), b(bytes), outa(bytes), outb(bytes);
        ASSERT_ALL_RANKS(x.base && y.base && a.base && b.base && outa.base && outb.base);
        std::string why;
        for (int it = 0; it < 4 && why.empty(); ++it) {
            cudaMemset(a.ptr(), 0, bytes);
            cudaMemset(b.ptr(), 0, bytes);
            cudaDeviceSynchronize();
            MPI_Barrier(MPI_COMM_WORLD);
            uint32_t xs = uint32_t(1000 * it + 10 * rank + 1), ys = xs + 5;
            auto* xp = reinterpret_cast<uint32_t*>(x.ptr());
            auto* yp = reinterpret_cast<uint32_t*>(y.ptr());
            auto* ap = reinterpret_cast<uint32_t*>(a.ptr());
            auto* bp = reinterpret_cast<uint32_t*>(b.ptr());
            cudaError_t c1 = vt_slow_fill(xp, elems, xs, 3000, sa.s);
            cudaError_t c2 = vt_slow_fill(yp, elems, ys, 0, sb.s);
            vcclResult_t g = vcclGroupStart();
            vcclResult_t r1 = vcclSend(xp, elems, vcclUint32, next, comm, sa.s);
            vcclResult_t r2 = vcclSend(yp, elems, vcclUint32, next, comm, sb.s);
            vcclResult_t r3 = vcclRecv(ap, elems, vcclUint32, prev, comm, sc.s);
            vcclResult_t r4 = vcclRecv(bp, elems, vcclUint32, prev, comm, sd.s);
            vcclResult_t e = vcclGroupEnd();
            cudaError_t c3 = vt_add_one(reinterpret_cast<uint32_t*>(outa.ptr()), ap, elems, sc.s);
            cudaError_t c4 = vt_add_one(reinterpret_cast<uint32_t*>(outb.ptr()), bp, elems, sd.s);
            why = call_failure(comm, {g, r1, r2, r3, r4, e});
            for (cudaError_t c : {c1, c2, c3, c4}) {
                if (c != cudaSuccess && why.empty()) why = "kernel launch: " + cuda_str(c);
            }
            for (cudaStream_t s : {sa.s, sb.s, sc.s, sd.s}) {
                cudaError_t c = cudaStreamSynchronize(s);
                if (c != cudaSuccess && why.empty()) why = "stream: " + cuda_str(c);
            }
            std::vector<char> ga = outa.download(), gb = outb.download();
            const auto* pa = reinterpret_cast<const uint32_t*>(ga.data());
            const auto* pb = reinterpret_cast<const uint32_t*>(gb.data());
            uint32_t want_x = uint32_t(1000 * it + 10 * prev + 1), want_y = want_x + 5;
            for (size_t i = 0; i < elems && why.empty(); ++i) {
                if (pa[i] != vt_pattern(i, want_x) + 1u) {
                    why = "iteration " + std::to_string(it) + ": the receive on stream C read element " +
                          std::to_string(i) + " before its data arrived (or got the wrong data)";
                } else if (pb[i] != vt_pattern(i, want_y) + 1u) {
                    why = "iteration " + std::to_string(it) + ": element " + std::to_string(i) + " of b is wrong";
                }
            }
        }
        if (!why.empty() && first_failure.empty()) first_failure = std::to_string(bytes) + " bytes: " + why;
    }
    EXPECT_ALL_RANKS_WHY(first_failure.empty(), first_failure);
}

/* Send/recv to the rank itself on cudaMalloc memory (alltoall loops over send/recv include it), alone and in a
 * group with the ring neighbours, receive first or last: the right bytes, and the communicator stays healthy.
 * The direct path must not open this process's own IPC handle, which CUDA refuses: the call would fail and the
 * rank's own FAIL flag would leave the communicator failed. */
TEST(GpuP2p, SendRecvToSelf) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    int rank = world_rank(), n = world_size();
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    Stream s;
    std::string first_failure;
    for (size_t elems : {size_t(1), size_t(4097), size_t(1 << 20) + 1}) {
        size_t bytes = elems * 4;
        for (int variant = 0; variant < 4 && first_failure.empty(); ++variant) {
            bool recv_first = variant & 1, with_ring = (variant & 2) != 0 && n > 1;
            DevBuf self_send(bytes), self_recv(bytes), ring_send(bytes), ring_recv(bytes);
            ASSERT_ALL_RANKS(self_send.base && self_recv.base && ring_send.base && ring_recv.base);
            uint32_t seed = uint32_t(77 * variant + 10 * rank + 3);
            vt_slow_fill(reinterpret_cast<uint32_t*>(self_send.ptr()), elems, seed, 0, s.s);
            vt_slow_fill(reinterpret_cast<uint32_t*>(ring_send.ptr()), elems, seed + 1, 0, s.s);
            cudaStreamSynchronize(s.s);
            MPI_Barrier(MPI_COMM_WORLD);
            std::vector<vcclResult_t> rs;
            rs.push_back(vcclGroupStart());
            auto self_pair = [&] {
                if (recv_first) rs.push_back(vcclRecv(self_recv.ptr(), elems, vcclUint32, rank, comm, s.s));
                rs.push_back(vcclSend(self_send.ptr(), elems, vcclUint32, rank, comm, s.s));
                if (!recv_first) rs.push_back(vcclRecv(self_recv.ptr(), elems, vcclUint32, rank, comm, s.s));
            };
            self_pair();
            if (with_ring) {
                rs.push_back(vcclSend(ring_send.ptr(), elems, vcclUint32, next, comm, s.s));
                rs.push_back(vcclRecv(ring_recv.ptr(), elems, vcclUint32, prev, comm, s.s));
            }
            rs.push_back(vcclGroupEnd());
            std::string why = call_failure(comm, rs);
            cudaError_t c = cudaStreamSynchronize(s.s);
            if (c != cudaSuccess && why.empty()) why = "stream: " + cuda_str(c);
            std::vector<char> got = self_recv.download();
            const auto* g = reinterpret_cast<const uint32_t*>(got.data());
            for (size_t i = 0; i < elems && why.empty(); ++i) {
                if (g[i] != vt_pattern(i, seed)) why = "element " + std::to_string(i) + " from itself is wrong";
            }
            if (with_ring && why.empty()) {
                std::vector<char> r = ring_recv.download();
                const auto* q = reinterpret_cast<const uint32_t*>(r.data());
                uint32_t want = uint32_t(77 * variant + 10 * prev + 3) + 1;
                for (size_t i = 0; i < elems && why.empty(); ++i) {
                    if (q[i] != vt_pattern(i, want)) why = "element " + std::to_string(i) + " from the previous rank is wrong";
                }
            }
            if (why.empty() && (!self_recv.guards_intact() || !ring_recv.guards_intact())) why = "a guard zone was written";
            vcclResult_t async = vcclSuccess;
            vcclCommGetAsyncError(comm, &async);
            if (why.empty() && async != vcclSuccess) why = std::string("vcclCommGetAsyncError: ") + result_str(async);
            if (!why.empty()) {
                first_failure = std::to_string(bytes) + " bytes, receive " + (recv_first ? "first" : "last") +
                                (with_ring ? ", with the ring" : "") + ": " + why;
            }
        }
    }
    EXPECT_ALL_RANKS_WHY(first_failure.empty(), first_failure);
}

/* Device AllReduce of `elems` int32 (rank r's element i: r * 1000 + i % 977) and a ring send/recv of them on comm,
 * checked: empty when right. */
std::string device_sum_and_ring(vcclComm_t comm, int rank, int n, size_t elems) {
    std::vector<int32_t> in(elems);
    for (size_t i = 0; i < elems; ++i) in[i] = int32_t(rank * 1000 + int(i % 977));
    std::vector<char> bytes(elems * 4);
    memcpy(bytes.data(), in.data(), bytes.size());
    DevBuf send(bytes.size()), sum(bytes.size()), ring(bytes.size());
    if (send.base == nullptr || sum.base == nullptr || ring.base == nullptr) return "cudaMalloc failed";
    send.upload(bytes);
    cudaStream_t s = nullptr;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return "cudaStreamCreate failed";
    vcclResult_t a = vcclAllReduce(send.ptr(), sum.ptr(), elems, vcclInt32, vcclSum, comm, s);
    vcclResult_t g = vcclGroupStart();
    vcclResult_t x = vcclSend(send.ptr(), elems, vcclInt32, (rank + 1) % n, comm, s);
    vcclResult_t y = vcclRecv(ring.ptr(), elems, vcclInt32, (rank + n - 1) % n, comm, s);
    vcclResult_t e = vcclGroupEnd();
    std::string why = call_failure(comm, {a, g, x, y, e});
    if (why.empty() && cudaStreamSynchronize(s) != cudaSuccess) why = "cudaStreamSynchronize failed";
    cudaStreamDestroy(s);
    if (!why.empty()) return why;
    std::vector<char> got_sum = sum.download(), got_ring = ring.download();
    const int from = (rank + n - 1) % n;
    for (size_t i = 0; i < elems; ++i) {
        int32_t want = int32_t(n * (n - 1) / 2 * 1000 + n * int(i % 977)), got, got_r;
        memcpy(&got, got_sum.data() + 4 * i, 4);
        memcpy(&got_r, got_ring.data() + 4 * i, 4);
        if (got != want) return "sum element " + std::to_string(i) + ": " + std::to_string(got);
        if (got_r != int32_t(from * 1000 + int(i % 977))) return "ring element " + std::to_string(i);
    }
    if (!sum.guards_intact() || !ring.guards_intact()) return "a guard zone was written";
    return std::string();
}

TEST(GpuComm, NonblockingCreationRunsDeviceCollectives) {
    const int rank = world_rank(), n = world_size();
    my_device();
    vcclUniqueId id;
    memset(&id, 0, sizeof id);
    if (rank == 0 && vcclGetUniqueId(&id) != vcclSuccess) ADD_FAILURE() << vcclGetLastError(nullptr);
    MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, MPI_COMM_WORLD);
    vcclConfig_t cfg = VCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    vcclComm_t comm = nullptr, child = nullptr;
    vcclResult_t rc = vcclCommInitRankConfig(&comm, n, id, rank, &cfg);
    ASSERT_ALL_RANKS_WHY(rc == vcclInProgress && comm != nullptr,
                         std::string("vcclCommInitRankConfig: ") + vcclGetErrorString(rc) + " " + vcclGetLastError(nullptr));
    auto wait_created = [](vcclComm_t c) {
        vcclResult_t state = vcclInProgress;
        for (int i = 0; i < 60000 && state == vcclInProgress; ++i) {
            if (vcclCommGetAsyncError(c, &state) != vcclSuccess) return vcclInternalError;
            if (state == vcclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return state;
    };
    vcclResult_t state = wait_created(comm);
    ASSERT_ALL_RANKS_WHY(state == vcclSuccess, std::string("creation ended with ") + vcclGetErrorString(state));
    for (size_t elems : {size_t(1), size_t(1031), size_t(1) << 20}) {
        std::string why = device_sum_and_ring(comm, rank, n, elems);
        EXPECT_ALL_RANKS_WHY(why.empty(), "communicator, " + std::to_string(elems) + " elements: " + why);
    }
    rc = vcclCommSplit(comm, 0, rank, &child, nullptr); // inherits blocking = 0
    ASSERT_ALL_RANKS_WHY(rc == vcclInProgress && child != nullptr,
                         std::string("vcclCommSplit: ") + vcclGetErrorString(rc) + " " + vcclGetLastError(nullptr));
    state = wait_created(child);
    ASSERT_ALL_RANKS_WHY(state == vcclSuccess, std::string("split ended with ") + vcclGetErrorString(state));
    std::string why = device_sum_and_ring(child, rank, n, 4099);
    EXPECT_ALL_RANKS_WHY(why.empty(), "split: " + why);
    EXPECT_ALL_RANKS(vcclCommDestroy(child) == vcclSuccess && vcclCommDestroy(comm) == vcclSuccess);
}

} // namespace
