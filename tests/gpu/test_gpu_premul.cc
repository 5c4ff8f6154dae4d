/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device-memory tests (part of tests/gpu/test_gpu) of PreMulSum ops, of which collectives take the one-kernel
 * path, and of in-place exchanges queued back to back:
 * - PreMulSum: AllReduce, Reduce and ReduceScatter of every datatype, counts 0 to 2^20 (the low-latency kernel,
 *   the chunked kernel or the copy engines, by size; and, with the kernels off, the copy engines in one piece and in
 *   pieces), in and out of place, every rank with its own scalar, held
 *   on the host (read at creation) or on the device (read when the call runs; the test changes it on the stream
 *   between two calls), and inputs one element off a 16-byte boundary (the scaling's element loop, not its packs).
 *   Inputs and scalars are small, so the reference (int64/double, here) is exact.
 * - A vcclScalarDevice scalar on another GPU than the communicator's is refused when the op is made.
 * - Every kind of collective that the low-latency kernel serves takes it at a small size (vccl::testing::ll_calls
 *   counts), AlltoAll above its 1 MiB cap does not: the sweeps elsewhere would pass on the copy engines too.
 * - In-place ring exchanges of four buffers of different sizes queued without a synchronisation between them:
 *   each sends from a copy in the communicator's scratch, which grows while earlier exchanges still use it.
 */
#include <cuda_runtime_api.h>

#include <cstring>
#include <functional>
#include <memory>
#include <sstream>

#include "gpu_test_util.h"
#include "mpi_gtest_main.h"
#include "test_util.h"

using namespace vtest;
using namespace vgpu;

namespace {

int64_t premul_input(int r, size_t i, vcclDataType_t t) {
    uint64_t h = uint64_t(r) * 37u + uint64_t(i) * 11u + uint64_t(t) * 5u;
    // FP8: 1 on at most two ranks of 8 per element (0 elsewhere), so that every partial sum of the products
    // (0.5, 1, 1.5) stays exact, in e5m2 too.
    if (is_fp8(t)) return (i + size_t(r)) % 4 == 0 ? 1 : 0;
    return is_unsigned(t) ? int64_t(h % 16u) : int64_t(h % 17u) - 8;
}

/* Twice rank r's scalar: integers 1-3 (stored 2-6), floating point 0.5-1.5 (stored 1-3); `salt` adds 1 to it. */
int64_t scalar_x2(int r, vcclDataType_t t, int salt) {
    int64_t s = int64_t((r + salt) % 3 + 1);
    return is_float(t) ? s : 2 * s;
}

enum class PColl { AllReduce, Reduce, ReduceScatter };

/* This rank's scalar for type t (salt 0) as two PreMulSum ops of comm: held on the host, and read from device memory. */
struct ScalarOps {
    std::vector<char> host = std::vector<char>(8, 0);
    std::unique_ptr<DevBuf> dev;
    vcclRedOp_t host_op = vcclSum, dev_op = vcclSum;

    /* False when the device buffer or an op could not be made. */
    bool make(vcclComm_t comm, vcclDataType_t t) {
        const size_t ts = type_size(t);
        store_double(host.data(), 0, t, double(scalar_x2(world_rank(), t, 0)) / 2.0);
        dev = std::make_unique<DevBuf>(ts);
        if (dev->base == nullptr) return false;
        dev->upload(std::vector<char>(host.begin(), host.begin() + ptrdiff_t(ts)));
        return vcclRedOpCreatePreMulSum(&host_op, host.data(), t, vcclScalarHostImmediate, comm) == vcclSuccess &&
               vcclRedOpCreatePreMulSum(&dev_op, dev->ptr(), t, vcclScalarDevice, comm) == vcclSuccess;
    }
};

/* One call; empty when right. `salt` picks the scalars' value. `shifted` (out of place only): the input starts one
 * element past a 16-byte boundary, so the scaling cannot take its 16-byte packs. */
std::string premul_case(vcclComm_t comm, cudaStream_t s, vcclRedOp_t op, PColl coll, vcclDataType_t t, size_t count,
                        bool in_place, int salt, bool shifted = false) {
    const int rank = world_rank(), n = world_size();
    const int root = n - 1;
    const size_t ts = type_size(t), in_count = coll == PColl::ReduceScatter ? count * size_t(n) : count;
    std::vector<char> in(in_count * ts);
    for (size_t i = 0; i < in_count; ++i) store_int(in.data(), i, t, premul_input(rank, i, t));
    const size_t shift = shifted && !in_place ? ts : 0;
    DevBuf send(in.size() + shift), recv(count * ts);
    if (send.base == nullptr || recv.base == nullptr) return "cudaMalloc failed";
    std::vector<char> uploaded(shift, 0);
    uploaded.insert(uploaded.end(), in.begin(), in.end());
    send.upload(uploaded);
    const char* input = send.ptr() + shift;
    char* out = recv.ptr();
    if (in_place) out = coll == PColl::ReduceScatter ? send.ptr() + size_t(rank) * count * ts : send.ptr();
    vcclResult_t rc = coll == PColl::AllReduce ? vcclAllReduce(input, out, count, t, op, comm, s)
                      : coll == PColl::Reduce  ? vcclReduce(input, out, count, t, op, root, comm, s)
                                               : vcclReduceScatter(input, out, count, t, op, comm, s);
    if (rc != vcclSuccess) return "call failed: " + result_str(rc) + ": " + vcclGetLastError(comm);
    if (cudaStreamSynchronize(s) != cudaSuccess) return "stream failed";
    if (!send.guards_intact() || !recv.guards_intact()) return "a guard zone was written";
    std::vector<char> sent = send.download();
    if (coll == PColl::Reduce && rank != root) {
        if (sent != uploaded) return "a non-root rank's send buffer changed";
        if (in_place) return "";
        for (char c : recv.download()) {
            if (static_cast<unsigned char>(c) != vgpu::kGuardByte) return "Reduce wrote a non-root rank's receive buffer";
        }
        return "";
    }
    if (!in_place && sent != uploaded) return "the send buffer changed";
    std::vector<char> got = in_place ? sent : recv.download();
    const size_t base = in_place && coll == PColl::ReduceScatter ? size_t(rank) * count : 0;
    const size_t idx0 = coll == PColl::ReduceScatter ? size_t(rank) * count : 0;
    std::vector<char> want(8);
    for (size_t i = 0; i < count; ++i) {
        int64_t sum_x2 = 0;
        for (int r = 0; r < n; ++r) sum_x2 += scalar_x2(r, t, salt) * premul_input(r, idx0 + i, t);
        if (is_float(t)) {
            store_double(want.data(), 0, t, double(sum_x2) / 2.0);
        } else {
            store_int(want.data(), 0, t, sum_x2 / 2);
        }
        if (memcmp(got.data() + (base + i) * ts, want.data(), ts) != 0) {
            std::ostringstream o;
            o << "element " << i << ": got " << load(got.data(), base + i, t) << ", want " << load(want.data(), 0, t);
            return o.str();
        }
    }
    return "";
}

TEST(GpuPreMulSum, EveryTypeCollectiveAndResidence) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    Stream s;
    Sweep sweep;
    const size_t counts[] = {0, 1, 7, 1031, 65537, 1 << 20};
    for (vcclDataType_t t : kTypes) {
        const size_t ts = type_size(t);
        std::vector<char> next_scalar(8, 0);
        store_double(next_scalar.data(), 0, t, double(scalar_x2(world_rank(), t, 1)) / 2.0);
        ScalarOps ops;
        ASSERT_ALL_RANKS(ops.make(comm, t));
        const vcclRedOp_t host_op = ops.host_op, dev_op = ops.dev_op;
        for (PColl coll : {PColl::AllReduce, PColl::Reduce, PColl::ReduceScatter}) {
            for (size_t count : counts) {
                if (count * ts * (coll == PColl::ReduceScatter ? size_t(world_size()) : 1) > (size_t(8) << 20)) continue;
                for (bool in_place : {false, true}) {
                    std::ostringstream label;
                    label << type_name(t) << " " << int(coll) << " count " << count << (in_place ? " in place" : "");
                    sweep.run(label.str() + " host scalar",
                              [&] { return premul_case(comm, s.s, host_op, coll, t, count, in_place, 0); });
                    sweep.run(label.str() + " device scalar",
                              [&] { return premul_case(comm, s.s, dev_op, coll, t, count, in_place, 0); });
                }
            }
        }
        // The device scalar is read when the call runs: a new value written on the stream counts from there.
        if (cudaMemcpyAsync(ops.dev->ptr(), next_scalar.data(), ts, cudaMemcpyHostToDevice, s.s) != cudaSuccess ||
            cudaStreamSynchronize(s.s) != cudaSuccess) {
            sweep.run("device scalar update", [] { return std::string("cudaMemcpyAsync failed"); });
        }
        sweep.run(std::string(type_name(t)) + " after the device scalar changed",
                  [&] { return premul_case(comm, s.s, dev_op, PColl::AllReduce, t, 1031, false, 1); });
        for (size_t count : {size_t(1031), size_t(65537)}) {
            sweep.run(std::string(type_name(t)) + " input off a 16-byte boundary, count " + std::to_string(count),
                      [&] { return premul_case(comm, s.s, host_op, PColl::AllReduce, t, count, false, 0, true); });
        }
        EXPECT_ALL_RANKS(vcclRedOpDestroy(host_op, comm) == vcclSuccess);
        EXPECT_ALL_RANKS(vcclRedOpDestroy(dev_op, comm) == vcclSuccess);
    }
    EXPECT_ALL_RANKS_WHY(sweep.first_failure.empty(), sweep.first_failure) << sweep.cases << " cases";
}

/* The copy-engine paths of the direct device path (the kernels off), where PreMulSum's AllReduce and ReduceScatter
 * scale the blocks they send in a pass and their own block in the reduction (PreMulPlan::OwnBlock), and the one-shot
 * AllReduce and Reduce read a copy scaled whole: one piece (blocks, the small AllReduce one-shot below 64 KiB), then
 * pieces of 4 bytes on a second stream (every count in 2 or more pieces, some parts empty). */
TEST(GpuPreMulSum, CopyEnginePathsScaleTheirOwnBlockInTheReduction) {
    if (vgpu::algo_forced()) GTEST_SKIP() << "VCCL_ALGO forces an algorithm: this test checks the default choice";
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    Stream s;
    Sweep sweep;
    const std::vector<std::vector<std::pair<const char*, const char*>>> configs = {
        {{"VCCL_ALLREDUCE_LL_BYTES", "0"}, {"VCCL_REDUCE_PIPELINE_BYTES", "0"}},
        {{"VCCL_ALLREDUCE_LL_BYTES", "0"}, {"VCCL_ALLREDUCE_SMALL_BYTES", "0"}, {"VCCL_REDUCE_PIPELINE_BYTES", "4"}},
    };
    for (size_t c = 0; c < configs.size(); ++c) {
        vcclComm_t comm = comm_with_env(configs[c]);
        ASSERT_ALL_RANKS(comm != nullptr);
        for (vcclDataType_t t : kTypes) {
            ScalarOps ops;
            ASSERT_ALL_RANKS(ops.make(comm, t));
            const vcclRedOp_t host_op = ops.host_op, dev_op = ops.dev_op;
            for (PColl coll : {PColl::AllReduce, PColl::Reduce, PColl::ReduceScatter}) {
                for (size_t count : {size_t(7), size_t(1031), size_t(65537)}) {
                    for (bool in_place : {false, true}) {
                        std::ostringstream label;
                        label << "config " << c << ": " << type_name(t) << " " << int(coll) << " count " << count
                              << (in_place ? " in place" : "");
                        sweep.run(label.str() + " host scalar",
                                  [&] { return premul_case(comm, s.s, host_op, coll, t, count, in_place, 0); });
                        sweep.run(label.str() + " device scalar",
                                  [&] { return premul_case(comm, s.s, dev_op, coll, t, count, in_place, 0); });
                    }
                }
            }
            EXPECT_ALL_RANKS(vcclRedOpDestroy(host_op, comm) == vcclSuccess);
            EXPECT_ALL_RANKS(vcclRedOpDestroy(dev_op, comm) == vcclSuccess);
        }
        EXPECT_ALL_RANKS_WHY(vccl::testing::ll_calls(comm) == 0 && vccl::testing::chunked_calls(comm) == 0,
                             "a kernel path was taken with VCCL_ALLREDUCE_LL_BYTES=0");
        vcclCommDestroy(comm);
    }
    EXPECT_ALL_RANKS_WHY(sweep.first_failure.empty(), sweep.first_failure) << sweep.cases << " cases";
}

/* PreMulSum takes the chunked kernel up to VCCL_PREMULSUM_KERNEL_BYTES, beyond VCCL_ALLREDUCE_KERNEL_BYTES, where Sum
 * of the same size takes the copy engines; a PreMulSum limit below Sum's counts as Sum's. Small limits here (the
 * low-latency kernel to 64K; config 0: Sum's chunked kernel to 64K, PreMulSum's to 1M; config 1: Sum's to 1M,
 * PreMulSum's 0), every type, AllReduce and ReduceScatter above 64K per peer, in and out of place, host and device
 * scalars; the kernels' call counters say which path ran. */
TEST(GpuPreMulSum, TakesTheChunkedKernelUpToItsOwnLimit) {
    if (vgpu::algo_forced()) GTEST_SKIP() << "VCCL_ALGO forces an algorithm: this test checks the default choice";
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    const int n = world_size();
    Stream s;
    Sweep sweep;
    std::string path_why;
    for (int config = 0; config < 2; ++config) {
        vcclComm_t comm = comm_with_env({{"VCCL_ALLREDUCE_LL_BYTES", "64K"},
                                         {"VCCL_ALLREDUCE_KERNEL_BYTES", config == 0 ? "64K" : "1M"},
                                         {"VCCL_PREMULSUM_KERNEL_BYTES", config == 0 ? "1M" : "0"}});
        ASSERT_ALL_RANKS(comm != nullptr);
        if (vccl::testing::ll_bytes(comm) <= 0) {
            vcclCommDestroy(comm);
            GTEST_SKIP() << "the kernels are off here (ranks share a GPU, or no direct path)";
        }
        const bool sum_on_kernel = config == 1;
        for (vcclDataType_t t : kTypes) {
            const size_t ts = type_size(t);
            ScalarOps ops;
            ASSERT_ALL_RANKS(ops.make(comm, t));
            for (PColl coll : {PColl::AllReduce, PColl::ReduceScatter}) {
                // Above 64K per peer and at most 1M; ReduceScatter's per-rank block a multiple of 16 bytes.
                const size_t count = coll == PColl::AllReduce ? (size_t(96) << 10) / ts + 3 : (size_t(256) << 10) / ts;
                for (bool in_place : {false, true}) {
                    for (vcclRedOp_t op : {ops.host_op, ops.dev_op}) {
                        std::ostringstream label;
                        label << "config " << config << ": " << type_name(t) << " "
                              << (coll == PColl::AllReduce ? "AllReduce" : "ReduceScatter") << " count " << count
                              << (in_place ? " in place" : "") << (op == ops.host_op ? " host" : " device") << " scalar";
                        const long long before = vccl::testing::chunked_calls(comm);
                        sweep.run(label.str(), [&] { return premul_case(comm, s.s, op, coll, t, count, in_place, 0); });
                        if (n > 1 && vccl::testing::chunked_calls(comm) != before + 1 && path_why.empty()) {
                            path_why = label.str() + ": not on the chunked kernel";
                        }
                    }
                }
                // Sum of the same size: the copy engines in config 0 (its limit is 64K), the kernel in config 1.
                DevBuf a(count * ts * size_t(n)), b(count * ts * size_t(n));
                ASSERT_ALL_RANKS(a.base != nullptr && b.base != nullptr);
                const long long before = vccl::testing::chunked_calls(comm);
                const vcclResult_t r = coll == PColl::AllReduce
                                           ? vcclAllReduce(a.ptr(), b.ptr(), count, t, vcclSum, comm, s.s)
                                           : vcclReduceScatter(a.ptr(), b.ptr(), count, t, vcclSum, comm, s.s);
                if ((r != vcclSuccess || cudaStreamSynchronize(s.s) != cudaSuccess) && path_why.empty()) {
                    path_why = std::string("Sum failed: ") + result_str(r);
                }
                if (n > 1 && (vccl::testing::chunked_calls(comm) != before) != sum_on_kernel && path_why.empty()) {
                    path_why = "config " + std::to_string(config) + ": Sum " + (sum_on_kernel ? "did not take" : "took") +
                               " the chunked kernel (" + type_name(t) + ")";
                }
            }
            EXPECT_ALL_RANKS(vcclRedOpDestroy(ops.host_op, comm) == vcclSuccess);
            EXPECT_ALL_RANKS(vcclRedOpDestroy(ops.dev_op, comm) == vcclSuccess);
        }
        vcclCommDestroy(comm);
    }
    EXPECT_ALL_RANKS_WHY(sweep.first_failure.empty(), sweep.first_failure) << sweep.cases << " cases";
    EXPECT_ALL_RANKS_WHY(path_why.empty(), path_why);
}

/* A vcclScalarDevice scalar in another GPU's memory is refused when the op is made, with a message that names both
 * GPUs: the calls' kernels read it on the communicator's GPU, which may not be able to read another GPU's memory. */
TEST(GpuPreMulSum, DeviceScalarOnAnotherGpuIsRefused) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    int count = 0, mine = -1;
    const bool two = cudaGetDeviceCount(&count) == cudaSuccess && count >= 2 && cudaGetDevice(&mine) == cudaSuccess;
    // Every rank decides alike (the test's verdicts are collective).
    if (!all_ranks_ok(two)) GTEST_SKIP() << "needs 2 GPUs visible to every rank";
    const int other = (mine + 1) % count;
    void* scalar = nullptr;
    const bool made = cudaSetDevice(other) == cudaSuccess && cudaMalloc(&scalar, 8) == cudaSuccess &&
                      cudaMemset(scalar, 0, 8) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess;
    cudaSetDevice(mine);
    ASSERT_ALL_RANKS(made);
    vcclRedOp_t op = vcclSum;
    const vcclResult_t r = vcclRedOpCreatePreMulSum(&op, scalar, vcclFloat32, vcclScalarDevice, comm);
    const std::string why = vcclGetLastError(comm);
    EXPECT_ALL_RANKS_WHY(r == vcclInvalidArgument && why.find("GPU " + std::to_string(other)) != std::string::npos,
                         "got " + result_str(r) + ": " + why);
    if (r == vcclSuccess) vcclRedOpDestroy(op, comm);
    // The same memory on the communicator's own GPU is taken.
    void* own = nullptr;
    ASSERT_ALL_RANKS(cudaMalloc(&own, 8) == cudaSuccess);
    EXPECT_ALL_RANKS(vcclRedOpCreatePreMulSum(&op, own, vcclFloat32, vcclScalarDevice, comm) == vcclSuccess &&
                     vcclRedOpDestroy(op, comm) == vcclSuccess);
    cudaFree(own);
    cudaSetDevice(other);
    cudaFree(scalar);
    cudaSetDevice(mine);
}

/* PreMulSum calls queued back to back with no synchronisation between them: two streams, three sizes (the
 * low-latency kernel, the chunked kernel or copy engines, the copy engines), two ops with host scalars and one
 * with a device scalar, and that scalar changed on the stream between two of the calls (each call must use the
 * value its turn on the stream sees), then a group of two calls on the two streams. Each call has buffers of
 * its own; all are checked once both streams are done. The scaled copies share the communicator's scratch, which
 * grows while earlier calls still read it. */
TEST(GpuPreMulSum, CallsQueuedBackToBackOnTwoStreams) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    const int rank = world_rank(), n = world_size();
    const vcclDataType_t t = vcclFloat32;
    const size_t ts = 4;
    Stream s1, s2;
    // Scalars (times two) per op: host ops with salts 0 and 1, the device op with salt 2, then 0 after the change.
    auto scalar_host = [&](int salt) {
        std::vector<char> v(8, 0);
        store_double(v.data(), 0, t, double(scalar_x2(rank, t, salt)) / 2.0);
        return v;
    };
    std::vector<char> h0 = scalar_host(0), h1 = scalar_host(1), d2 = scalar_host(2), d0 = scalar_host(0);
    DevBuf dev_scalar(ts);
    ASSERT_ALL_RANKS(dev_scalar.base != nullptr);
    dev_scalar.upload(std::vector<char>(d2.begin(), d2.begin() + 4));
    vcclRedOp_t op0 = vcclSum, op1 = vcclSum, opd = vcclSum;
    ASSERT_ALL_RANKS(vcclRedOpCreatePreMulSum(&op0, h0.data(), t, vcclScalarHostImmediate, comm) == vcclSuccess);
    ASSERT_ALL_RANKS(vcclRedOpCreatePreMulSum(&op1, h1.data(), t, vcclScalarHostImmediate, comm) == vcclSuccess);
    ASSERT_ALL_RANKS(vcclRedOpCreatePreMulSum(&opd, dev_scalar.ptr(), t, vcclScalarDevice, comm) == vcclSuccess);
    struct Call {
        size_t count;
        vcclRedOp_t op;
        int salt; // which scalars the result must show
        cudaStream_t st;
        std::unique_ptr<DevBuf> in, out;
    };
    const size_t sizes[] = {1031, (size_t(3) << 20) / 4 + 5, (size_t(12) << 20) / 4 + 1};
    // Calls 0-5 alone, alternating streams; 6 and 7 in one group. Every buffer is made and filled first, so
    // nothing synchronises between the calls.
    std::vector<Call> calls;
    for (int k = 0; k < 8; ++k) {
        const size_t count = k < 6 ? sizes[k % 3] : sizes[k - 6];
        vcclRedOp_t op = k == 6 ? op1 : k == 7 ? op0 : k % 3 == 0 ? op0 : k % 3 == 1 ? op1 : opd;
        const int salt = k == 6 ? 1 : k == 7 ? 0 : k % 3 == 0 ? 0 : k % 3 == 1 ? 1 : (k < 3 ? 2 : 0);
        calls.push_back(Call{count, op, salt, k % 2 == 0 ? s1.s : s2.s, std::make_unique<DevBuf>(count * ts),
                             std::make_unique<DevBuf>(count * ts)});
        ASSERT_ALL_RANKS(calls.back().in->base != nullptr && calls.back().out->base != nullptr);
        std::vector<char> host_in(count * ts);
        for (size_t i = 0; i < count; ++i) store_int(host_in.data(), i, t, premul_input(rank, i + size_t(k) * 7, t));
        calls.back().in->upload(host_in);
    }
    std::string why;
    auto issue = [&](size_t k) {
        const Call& c = calls[k];
        vcclResult_t r = vcclAllReduce(c.in->ptr(), c.out->ptr(), c.count, t, c.op, comm, c.st);
        if (r != vcclSuccess && why.empty()) why = "call " + std::to_string(k) + ": " + result_str(r);
    };
    for (size_t k = 0; k < 6; ++k) {
        if (k == 3) {
            // After call 2 on s1, on s1: call 2 reads the old value; call 5 (on s2) runs after call 4 (on s1, later
            // than this write) because a communicator's calls run in call order across streams.
            if (cudaMemcpyAsync(dev_scalar.ptr(), d0.data(), ts, cudaMemcpyHostToDevice, s1.s) != cudaSuccess &&
                why.empty()) {
                why = "cudaMemcpyAsync of the scalar failed";
            }
        }
        issue(k);
    }
    vcclResult_t g = vcclGroupStart();
    issue(6);
    issue(7);
    vcclResult_t e = vcclGroupEnd();
    if ((g != vcclSuccess || e != vcclSuccess) && why.empty()) why = "group failed";
    if (cudaStreamSynchronize(s1.s) != cudaSuccess || cudaStreamSynchronize(s2.s) != cudaSuccess) {
        if (why.empty()) why = "stream failed";
    }
    for (size_t c = 0; c < calls.size() && why.empty(); ++c) {
        std::vector<char> got = calls[c].out->download();
        const size_t seed = c * 7;
        for (size_t i = 0; i < calls[c].count; ++i) {
            int64_t sum_x2 = 0;
            for (int r = 0; r < n; ++r) sum_x2 += scalar_x2(r, t, calls[c].salt) * premul_input(r, i + seed, t);
            const double want = double(sum_x2) / 2.0;
            if (load(got.data(), i, t) != want) {
                why = "call " + std::to_string(c) + " (count " + std::to_string(calls[c].count) + ") element " +
                      std::to_string(i) + ": got " + std::to_string(load(got.data(), i, t)) + ", want " +
                      std::to_string(want);
                break;
            }
        }
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    EXPECT_ALL_RANKS(vcclRedOpDestroy(op0, comm) == vcclSuccess);
    EXPECT_ALL_RANKS(vcclRedOpDestroy(op1, comm) == vcclSuccess);
    EXPECT_ALL_RANKS(vcclRedOpDestroy(opd, comm) == vcclSuccess);
}

/* Which collectives the low-latency kernel serves, by the counter of calls it took. */
TEST(GpuLl, EveryKindTakesTheKernelAndAlltoAllStopsAtItsCap) {
    if (vgpu::algo_forced()) GTEST_SKIP() << "VCCL_ALGO forces an algorithm: this test checks the default choice";
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    vcclComm_t comm = comm_with_env({{"VCCL_ALLREDUCE_LL_BYTES", "2M"}});
    ASSERT_ALL_RANKS(comm != nullptr);
    if (vccl::testing::ll_bytes(comm) <= 0) {
        vcclCommDestroy(comm);
        GTEST_SKIP() << "the low-latency kernel is off here";
    }
    const int n = world_size();
    Stream s;
    const size_t count = 1031;
    DevBuf a(count * 4 * size_t(n)), b(count * 4 * size_t(n));
    std::string why;
    auto expect_kernel = [&](const char* what, bool kernel, const std::function<vcclResult_t()>& call) {
        long long before = vccl::testing::ll_calls(comm);
        vcclResult_t r = call();
        long long after = vccl::testing::ll_calls(comm);
        if (!why.empty()) return;
        if (r != vcclSuccess) why = std::string(what) + " failed: " + result_str(r);
        else if ((after == before + 1) != kernel)
            why = std::string(what) + (kernel ? " did not take" : " took") + " the low-latency kernel";
    };
    expect_kernel("allreduce", true, [&] { return vcclAllReduce(a.ptr(), b.ptr(), count, vcclFloat32, vcclSum, comm, s.s); });
    expect_kernel("reducescatter", true,
                  [&] { return vcclReduceScatter(a.ptr(), b.ptr(), count, vcclFloat32, vcclSum, comm, s.s); });
    expect_kernel("reduce", true, [&] { return vcclReduce(a.ptr(), b.ptr(), count, vcclFloat32, vcclSum, 0, comm, s.s); });
    expect_kernel("allgather", true, [&] { return vcclAllGather(a.ptr(), b.ptr(), count, vcclFloat32, comm, s.s); });
    expect_kernel("alltoall", true, [&] { return vcclAlltoAll(a.ptr(), b.ptr(), count, vcclFloat32, comm, s.s); });
    expect_kernel("broadcast", true, [&] { return vcclBroadcast(a.ptr(), b.ptr(), count, vcclFloat32, n - 1, comm, s.s); });
    // AlltoAll of just over 1 MiB a peer: the copy engines, though under VCCL_ALLREDUCE_LL_BYTES / (n - 1) for 2 ranks.
    const size_t big = (size_t(1) << 20) / 4 + 4;
    DevBuf c(big * 4 * size_t(n)), d(big * 4 * size_t(n));
    expect_kernel("alltoall of 1 MiB + 16 B a peer", false,
                  [&] { return vcclAlltoAll(c.ptr(), d.ptr(), big, vcclFloat32, comm, s.s); });
    if (cudaStreamSynchronize(s.s) != cudaSuccess && why.empty()) why = "stream failed";
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    EXPECT_ALL_RANKS(vcclCommDestroy(comm) == vcclSuccess);
}

/* Four in-place ring exchanges (send to the next rank, receive from the previous one, the same buffer) of growing
 * sizes, queued with no synchronisation between them, then checked: each must send its own old data. */
TEST(GpuP2p, InPlaceExchangesQueuedBackToBack) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    const int rank = world_rank(), n = world_size(), next = (rank + 1) % n, prev = (rank + n - 1) % n;
    Stream s;
    const size_t sizes[] = {16, size_t(2) << 20, (size_t(64) << 10) + 3, (size_t(5) << 20) + 1};
    auto pattern = [](int r, int k, size_t i) { return char((r * 29 + k * 71 + int(i % 253)) & 0xff); };
    std::vector<std::unique_ptr<DevBuf>> bufs;
    for (int k = 0; k < 4; ++k) {
        bufs.emplace_back(new DevBuf(sizes[k]));
        ASSERT_ALL_RANKS(bufs.back()->base != nullptr);
        std::vector<char> h(sizes[k]);
        for (size_t i = 0; i < h.size(); ++i) h[i] = pattern(rank, k, i);
        bufs.back()->upload(h);
    }
    std::string why;
    for (int k = 0; k < 4 && why.empty(); ++k) {
        vcclResult_t g = vcclGroupStart();
        vcclResult_t a = vcclSend(bufs[size_t(k)]->ptr(), sizes[k], vcclUint8, next, comm, s.s);
        vcclResult_t b = vcclRecv(bufs[size_t(k)]->ptr(), sizes[k], vcclUint8, prev, comm, s.s);
        vcclResult_t e = vcclGroupEnd();
        for (vcclResult_t r : {g, a, b, e}) {
            if (r != vcclSuccess && why.empty()) why = "exchange " + std::to_string(k) + ": " + result_str(r);
        }
    }
    if (cudaStreamSynchronize(s.s) != cudaSuccess && why.empty()) why = "stream failed";
    for (int k = 0; k < 4 && why.empty(); ++k) {
        if (!bufs[size_t(k)]->guards_intact()) why = "exchange " + std::to_string(k) + ": a guard zone was written";
        std::vector<char> got = bufs[size_t(k)]->download();
        for (size_t i = 0; i < got.size() && why.empty(); ++i) {
            if (got[i] != pattern(prev, k, i)) {
                why = "exchange " + std::to_string(k) + " (" + std::to_string(sizes[k]) + " bytes): byte " +
                      std::to_string(i) + " differs";
            }
        }
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

} // namespace
