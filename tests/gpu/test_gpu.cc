/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device-memory tests (run by `make check-gpu` on a GPU machine; tests/gpu/run-gpu-test.sh skips them
 * where no GPU is usable):
 *  - every collective on cudaMalloc'd buffers: every datatype and op for the reductions, counts 0, 1, odd and
 *    not divisible by the number of ranks, in place and out of place, against a reference computed here on
 *    the host, with guard zones around every output that must stay untouched;
 *  - send/recv of odd sizes around a ring, sends posted before receives and after them in one group;
 *  - the staging FIFO of small transfers: many more transfers to one peer in one group than it has slots,
 *    sizes on both sides of VCCL_P2P_FIFO_BYTES in one group, receives into host memory, in-place exchanges,
 *    and mismatched sizes (an error on the receiver, vcclRemoteError on the sender, no stream left blocked);
 *  - stream order: a slow kernel writes the send buffer right before vcclSend on the same stream, and a kernel
 *    reads the receive buffer right after vcclRecv, with no synchronisation in between;
 *  - no kernel launch and no host function during send/recv (CUPTI callbacks on the driver API count them;
 *    the counter is first shown to see the reduction kernel of an AllReduce);
 *  - the calling thread never waits for the device: with a kernel blocking the stream on a host flag, every
 *    call returns at once (direct path, and host staging through the proxy with VCCL_P2P_DIRECT=0:
 *    np2_shared_gpu_staged.sh), also with a small staging pool, many receive buffers, a host-memory call
 *    behind, and vcclCommAbort (a FIFO receive into host memory it ends leaves the caller's buffer alone);
 *  - small receive buffers of one 2 MiB block, received into in turn, are mapped by the sender once;
 *  - two communicators send into one receive buffer, freed and made again at the same address;
 *  - a peer that fails mid-transfer is reported by vcclCommGetAsyncError and refuses the calls after it, a
 *    receiving stream goes on, a sending one is released by vcclCommAbort and, after VCCL_OP_TIMEOUT_MS, by
 *    vcclCommDestroy;
 *  - a communicator created nonblocking (vcclConfig_t.blocking = 0) and its split run device collectives.
 * Ranks use GPU (local rank mod device count); VTEST_GPU_SHARE=1 puts every rank on GPU 0.
 * The stream-order cases (and send/recv to the rank itself, several streams in one group) are in
 * test_gpu_streams.cc, most of the asynchronous ones in test_gpu_async.cc, the failing peers in
 * test_gpu_failure.cc, mappings shared by communicators in test_gpu_mappings.cc, CUDA graph capture in
 * test_gpu_graph.cc, the helpers in gpu_test_util.h.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#if VTEST_HAVE_CUPTI
#include <cupti.h>
#endif

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <map>
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

/* Reduction input of rank r at index i: small integers, exact in every type (Prod: mostly 1, some 2 and -1). */
int64_t red_input(int r, size_t i, vcclDataType_t t, vcclRedOp_t op) {
    uint64_t h = uint64_t(r) * 31u + uint64_t(i) * 7u + uint64_t(t) * 3u;
    if (op == vcclProd) {
        if (h % 11u == 0) return 2;
        if (!is_unsigned(t) && (i + size_t(r)) % 7u == 0) return -1;
        return 1;
    }
    // FP8: -1, 0, 1, so that every partial sum of up to 8 ranks is exact (e5m2 holds the integers up to 8).
    if (is_fp8(t)) return int64_t(h % 3u) - 1;
    return is_unsigned(t) ? int64_t(h % 16u) : int64_t(h % 17u) - 8;
}

/* Expected element i of a reduction over n ranks, as a double (integer division for integer Avg). */
double red_expected(int n, size_t i, vcclDataType_t t, vcclRedOp_t op) {
    int64_t acc = red_input(0, i, t, op);
    for (int r = 1; r < n; ++r) {
        int64_t v = red_input(r, i, t, op);
        if (op == vcclSum || op == vcclAvg) acc += v;
        if (op == vcclProd) acc *= v;
        if (op == vcclMax) acc = std::max(acc, v);
        if (op == vcclMin) acc = std::min(acc, v);
    }
    if (op != vcclAvg) return double(acc);
    if (is_float(t)) return double(acc) / n;
    return double(acc / n);
}

/* Compares element i of buf against the expected value (exact for integers, a few ulps for Avg in floats). */
bool element_ok(const void* buf, size_t i, vcclDataType_t t, double want, std::string* why) {
    std::vector<char> tmp(8);
    store_double(tmp.data(), 0, t, want); // wrap/round the reference to the type first
    double w = load(tmp.data(), 0, t), got = load(buf, i, t);
    double tol = is_float(t) && w != 0 ? 2 * type_ulp(t, w) : 0;
    if (std::fabs(got - w) <= tol) return true;
    std::ostringstream o;
    o << "element " << i << ": got " << got << ", want " << w;
    *why = o.str();
    return false;
}

enum class Red { AllReduce, ReduceScatter, Reduce };
const char* red_name(Red c) {
    return c == Red::AllReduce ? "AllReduce" : c == Red::ReduceScatter ? "ReduceScatter" : "Reduce";
}

/* One reduction collective call on device buffers; returns an empty string when the result is right. */
std::string run_reduction(vcclComm_t comm, cudaStream_t s, Red coll, vcclDataType_t t, vcclRedOp_t op,
                          size_t count, bool in_place, int root) {
    int rank = world_rank(), n = world_size();
    size_t ts = type_size(t);
    // Elements this rank sends and receives.
    size_t in_count = coll == Red::ReduceScatter ? count * size_t(n) : count;
    size_t out_count = count;
    std::vector<char> in(in_count * ts);
    for (size_t i = 0; i < in_count; ++i) store_int(in.data(), i, t, red_input(rank, i, t, op));
    DevBuf send(in.size()), recv(out_count * ts);
    if (send.base == nullptr || recv.base == nullptr) return "cudaMalloc failed";
    send.upload(in);
    const char* sendp = send.ptr();
    char* recvp = recv.ptr();
    if (in_place) {
        // NCCL's in-place forms: the same buffer, and for ReduceScatter the output is this rank's block.
        recvp = send.ptr() + (coll == Red::ReduceScatter ? size_t(rank) * count * ts : 0);
    }
    vcclResult_t rc = coll == Red::AllReduce       ? vcclAllReduce(sendp, recvp, count, t, op, comm, s)
                      : coll == Red::ReduceScatter ? vcclReduceScatter(sendp, recvp, count, t, op, comm, s)
                                                   : vcclReduce(sendp, recvp, count, t, op, root, comm, s);
    if (rc != vcclSuccess) return std::string("call failed: ") + result_str(rc) + ": " + vcclGetLastError(comm);
    cudaError_t ce = cudaStreamSynchronize(s);
    if (ce != cudaSuccess) return "stream: " + cuda_str(ce);
    if (!send.guards_intact() || !recv.guards_intact()) return "a guard zone was written";
    std::vector<char> got = in_place ? send.download() : recv.download();
    size_t base = in_place && coll == Red::ReduceScatter ? size_t(rank) * count : 0;
    bool check = coll != Red::Reduce || rank == root;
    std::string why;
    for (size_t i = 0; check && i < count; ++i) {
        size_t global = coll == Red::ReduceScatter ? size_t(rank) * count + i : i;
        if (!element_ok(got.data(), base + i, t, red_expected(n, global, t, op), &why)) return why;
    }
    if (!in_place) { // the input must be unchanged
        std::vector<char> after = send.download();
        if (after != in) return "the send buffer was modified";
    }
    if (coll == Red::Reduce && rank != root && in_place && got != in) {
        return "Reduce changed the buffer of a non-root rank (in place)";
    }
    if (coll == Red::Reduce && rank != root && !in_place) {
        std::vector<char> untouched = recv.download();
        for (char c : untouched) {
            if (static_cast<unsigned char>(c) != vgpu::kGuardByte) return "Reduce wrote the receive buffer of a non-root rank";
        }
    }
    return "";
}

class GpuReduction : public ::testing::TestWithParam<Red> {};

TEST_P(GpuReduction, EveryTypeOpCountInAndOutOfPlace) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    Stream s;
    Red coll = GetParam();
    std::vector<int> roots = {0};
    if (coll == Red::Reduce && world_size() > 1) roots.push_back(world_size() - 1);
    Sweep sweep;
    for (int root : roots) {
        for (vcclDataType_t t : kTypes) {
            for (vcclRedOp_t op : kOps) {
                for (size_t count : kCounts) {
                    for (bool in_place : {false, true}) {
                        std::ostringstream label;
                        label << red_name(coll) << " " << type_name(t) << " " << op_name(op) << " count " << count
                              << (in_place ? " in place" : " out of place") << " root " << root;
                        sweep.run(label.str(),
                                  [&] { return run_reduction(comm, s.s, coll, t, op, count, in_place, root); });
                    }
                }
            }
        }
    }
    EXPECT_ALL_RANKS_WHY(sweep.first_failure.empty(), sweep.first_failure) << sweep.cases << " cases";
}

INSTANTIATE_TEST_SUITE_P(Colls, GpuReduction, ::testing::Values(Red::AllReduce, Red::ReduceScatter, Red::Reduce),
                         [](const ::testing::TestParamInfo<Red>& i) { return std::string(red_name(i.param)); });

/* FP8 reductions with arbitrary finite values on 2 ranks, where every algorithm combines the two inputs once: the
 * result must be the exact sum (product, max, min) rounded once, to nearest even and saturating, as the reference of
 * tests/common/fp8_reference.h computes it. Avg may divide the rounded sum (a host step) or the exact one (a kernel
 * that reads both inputs): either rounding is accepted. No -0 or NaN inputs, whose max and min depend on the order. */
uint8_t fp8_input(int r, size_t i, vcclDataType_t t) {
    uint64_t h = uint64_t(r) * 0x9e3779b97f4a7c15ull ^ (uint64_t(i) * 0xbf58476d1ce4e5b9ull) ^ uint64_t(t);
    h ^= h >> 29;
    uint8_t code = uint8_t(h * 0x94d049bb133111ebull >> 56);
    if ((code & 0x7c) == 0x7c) code &= 0xbb; // e5m2's infinities and NaNs, e4m3's NaN
    return code == 0x80 ? 0 : code;
}

/* The reference result for every pair of codes, per type and op (the reference encoder searches all codes, too
 * slow to call per element of a 1M-element check): [0] rounded once, [1] avg's other accepted rounding. */
struct Fp8PairTable {
    uint8_t results[65536][2];
};
const Fp8PairTable& fp8_pair_table(vcclDataType_t t, vcclRedOp_t op) {
    static std::map<std::pair<int, int>, std::unique_ptr<Fp8PairTable>> tables;
    std::unique_ptr<Fp8PairTable>& slot = tables[{int(t), int(op)}];
    if (slot) return *slot;
    slot.reset(new Fp8PairTable());
    const fp8ref::Format& f = t == vcclFloat8e4m3 ? fp8ref::kE4M3 : fp8ref::kE5M2;
    for (int ca = 0; ca < 256; ++ca) {
        for (int cb = 0; cb < 256; ++cb) {
            const double a = fp8ref::decode(uint8_t(ca), f), b = fp8ref::decode(uint8_t(cb), f);
            double v = a + b;
            if (op == vcclProd) v = a * b;
            if (op == vcclMax) v = a > b ? a : b;
            if (op == vcclMin) v = a < b ? a : b;
            uint8_t* r = slot->results[ca << 8 | cb];
            r[0] = fp8ref::encode(op == vcclAvg ? v / 2 : v, f);
            r[1] = op == vcclAvg ? fp8ref::encode(fp8ref::decode(fp8ref::encode(v, f), f) / 2, f) : r[0];
        }
    }
    return *slot;
}

std::string run_fp8_pair(vcclComm_t comm, cudaStream_t s, Red coll, vcclDataType_t t, vcclRedOp_t op, size_t count,
                         bool in_place) {
    const int rank = world_rank(), n = world_size();
    const fp8ref::Format& f = t == vcclFloat8e4m3 ? fp8ref::kE4M3 : fp8ref::kE5M2;
    const size_t in_count = coll == Red::ReduceScatter ? count * size_t(n) : count;
    std::vector<char> in(in_count);
    for (size_t i = 0; i < in_count; ++i) in[i] = char(fp8_input(rank, i, t));
    DevBuf send(in.size()), recv(count);
    if (send.base == nullptr || recv.base == nullptr) return "cudaMalloc failed";
    send.upload(in);
    char* recvp = in_place ? send.ptr() + (coll == Red::ReduceScatter ? size_t(rank) * count : 0) : recv.ptr();
    vcclResult_t rc = coll == Red::AllReduce ? vcclAllReduce(send.ptr(), recvp, count, t, op, comm, s)
                                             : vcclReduceScatter(send.ptr(), recvp, count, t, op, comm, s);
    if (rc != vcclSuccess) return std::string("call failed: ") + result_str(rc) + ": " + vcclGetLastError(comm);
    cudaError_t ce = cudaStreamSynchronize(s);
    if (ce != cudaSuccess) return "stream: " + cuda_str(ce);
    if (!send.guards_intact() || !recv.guards_intact()) return "a guard zone was written";
    std::vector<char> got = in_place ? send.download() : recv.download();
    const size_t base = in_place && coll == Red::ReduceScatter ? size_t(rank) * count : 0;
    const Fp8PairTable& want = fp8_pair_table(t, op);
    for (size_t i = 0; i < count; ++i) {
        const size_t g = coll == Red::ReduceScatter ? size_t(rank) * count + i : i;
        const uint8_t ca = fp8_input(0, g, t), cb = fp8_input(1, g, t);
        const uint8_t res = uint8_t(got[base + i]);
        const uint8_t* ok = want.results[size_t(ca) << 8 | cb];
        if (res != ok[0] && res != ok[1]) {
            std::ostringstream o;
            o << "element " << i << ": " << fp8ref::decode(ca, f) << " and " << fp8ref::decode(cb, f) << " gave 0x"
              << std::hex << int(res) << " (" << fp8ref::decode(res, f) << "), want 0x" << int(ok[0]) << " ("
              << fp8ref::decode(ok[0], f) << ")";
            return o.str();
        }
    }
    return "";
}

TEST(GpuFp8, ArbitraryValuesRoundOnceOnTwoRanks) {
    if (world_size() != 2) GTEST_SKIP() << "needs exactly 2 ranks";
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    Stream s;
    Sweep sweep;
    for (Red coll : {Red::AllReduce, Red::ReduceScatter}) {
        for (vcclDataType_t t : {vcclFloat8e4m3, vcclFloat8e5m2}) {
            for (vcclRedOp_t op : kOps) {
                for (size_t count : {size_t(1), size_t(15), size_t(16), size_t(1031), size_t(65537), size_t(1) << 20}) {
                    for (bool in_place : {false, true}) {
                        std::ostringstream label;
                        label << "fp8 pair " << red_name(coll) << " " << type_name(t) << " " << op_name(op) << " count "
                              << count << (in_place ? " in place" : " out of place");
                        sweep.run(label.str(), [&] { return run_fp8_pair(comm, s.s, coll, t, op, count, in_place); });
                    }
                }
            }
        }
    }
    EXPECT_ALL_RANKS_WHY(sweep.first_failure.empty(), sweep.first_failure) << sweep.cases << " cases";
}

/* AllReduce and ReduceScatter in pieces (VCCL_REDUCE_PIPELINE_BYTES), whose kernels run on the communicator's
 * second stream while the next piece moves: tiny pieces so that small counts already take 2 (AllReduce) or up to 8
 * (ReduceScatter) of them, with parts of pieces that are empty (7 elements over 2 ranks in 7 pieces), and 64 KiB
 * pieces; then AllReduce in 8 pieces, which a scratch limit of 1 byte (VCCL_REDUCE_SCRATCH_BYTES) asks for. The
 * one-shot and low-latency algorithms are off so that every count above 0 goes through the pieces. */
TEST(GpuPieces, AllReduceAndReduceScatterInPiecesAreRight) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    Stream s;
    Sweep sweep;
    struct Case {
        const char* piece;
        const char* scratch;
        bool reduce_scatter;
    };
    for (const Case& c : {Case{"4", "0", true}, Case{"64K", "256M", true}, Case{"4", "1", false}}) {
        const char* piece = c.piece;
        vcclComm_t comm = comm_with_env({{"VCCL_REDUCE_PIPELINE_BYTES", piece},
                                         {"VCCL_REDUCE_SCRATCH_BYTES", c.scratch},
                                         {"VCCL_ALLREDUCE_SMALL_BYTES", "0"},
                                         {"VCCL_ALLREDUCE_LL_BYTES", "0"}});
        ASSERT_ALL_RANKS(comm != nullptr);
        for (Red coll : {Red::AllReduce, Red::ReduceScatter}) {
            if (coll == Red::ReduceScatter && !c.reduce_scatter) continue;
            for (vcclDataType_t t : kTypes) {
                for (vcclRedOp_t op : kOps) {
                    for (size_t count : {size_t(1), size_t(7), size_t(1031), size_t(65537), size_t(300007)}) {
                        // 4-byte pieces of a 1-byte type: 75,000 pieces a call. The FP8 types share int8's
                        // paths through the pieces; their largest count in 4-byte pieces would only add minutes.
                        if (is_fp8(t) && count > 65537 && strcmp(piece, "4") == 0) continue;
                        for (bool in_place : {false, true}) {
                            std::ostringstream label;
                            label << "pieces of " << piece << ", scratch limit " << c.scratch << ": " << red_name(coll) << " " << type_name(t) << " "
                                  << op_name(op) << " count " << count << (in_place ? " in place" : " out of place");
                            sweep.run(label.str(),
                                      [&] { return run_reduction(comm, s.s, coll, t, op, count, in_place, 0); });
                        }
                    }
                }
            }
        }
        vcclCommDestroy(comm);
    }
    EXPECT_ALL_RANKS_WHY(sweep.first_failure.empty(), sweep.first_failure) << sweep.cases << " cases";
}

/* Floating-point sums depend on their order: every rank must still get the same bits (replicas of a model
 * would drift apart otherwise), from the one-shot algorithm (small) and the reduce-scatter + all-gather one.
 * Inputs of mixed magnitudes so that a different order changes the rounding; with 2 ranks a + b == b + a, so
 * only 3 or more ranks can catch an order that depends on the rank. Also checked against a double reference. */
TEST(GpuReductionBits, FloatAllReduceIsBitwiseEqualOnEveryRank) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    Stream s;
    int rank = world_rank(), n = world_size();
    std::string failure;
    for (size_t count : {size_t(1), size_t(1031), size_t(300001)}) {
        for (bool in_place : {false, true}) {
            auto value = [](int r, size_t i) {
                uint64_t h = (uint64_t(r) + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t(i) * 0xBF58476D1CE4E5B9ull);
                h ^= h >> 31;
                double mant = double(h % 1000003u) / 1000003.0 - 0.5;
                return float(std::ldexp(mant, int((h >> 20) % 40u) - 20)); // 2^-20 .. 2^19
            };
            std::vector<float> in(count);
            for (size_t i = 0; i < count; ++i) in[i] = value(rank, i);
            std::vector<char> bytes(count * sizeof(float));
            memcpy(bytes.data(), in.data(), bytes.size());
            DevBuf send(bytes.size()), recv(bytes.size());
            ASSERT_ALL_RANKS(send.base != nullptr && recv.base != nullptr);
            send.upload(bytes);
            char* out = in_place ? send.ptr() : recv.ptr();
            vcclResult_t rc = vcclAllReduce(send.ptr(), out, count, vcclFloat32, vcclSum, comm, s.s);
            ASSERT_ALL_RANKS_WHY(rc == vcclSuccess, vcclGetLastError(comm));
            ASSERT_ALL_RANKS(cudaStreamSynchronize(s.s) == cudaSuccess);
            std::vector<char> got = in_place ? send.download() : recv.download();
            std::vector<char> first(got.size());
            if (rank == 0) first = got;
            MPI_Bcast(first.data(), int(first.size()), MPI_BYTE, 0, MPI_COMM_WORLD);
            std::ostringstream where;
            where << "count " << count << (in_place ? " in place" : " out of place") << ": ";
            if (failure.empty() && got != first) failure = where.str() + "rank " + std::to_string(rank) + " differs from rank 0";
            for (size_t i = 0; failure.empty() && i < count; ++i) {
                double want = 0, mag = 0;
                for (int r = 0; r < n; ++r) {
                    want += double(value(r, i));
                    mag += std::fabs(double(value(r, i)));
                }
                float g;
                memcpy(&g, got.data() + i * sizeof(float), sizeof g);
                if (std::fabs(double(g) - want) > mag * 1e-6) {
                    failure = where.str() + "element " + std::to_string(i) + ": got " + std::to_string(g) + ", want " +
                              std::to_string(want);
                }
            }
        }
    }
    EXPECT_ALL_RANKS_WHY(failure.empty(), failure);
}

/* Byte pattern of rank r's data at byte i (data movement collectives). */
char data_byte(int r, size_t i) { return char((r * 131 + int(i % 251) * 7 + int(i / 251)) & 0xff); }

enum class Move { AllGather, Broadcast, AlltoAll };
const char* move_name(Move c) {
    return c == Move::AllGather ? "AllGather" : c == Move::Broadcast ? "Broadcast" : "AlltoAll";
}

std::string run_move(vcclComm_t comm, cudaStream_t s, Move coll, vcclDataType_t t, size_t count, bool in_place,
                     int root) {
    int rank = world_rank(), n = world_size();
    size_t ts = type_size(t), block = count * ts;
    size_t in_bytes = coll == Move::AlltoAll ? block * size_t(n) : block;
    size_t out_bytes = coll == Move::Broadcast ? block : block * size_t(n);
    std::vector<char> in(in_bytes);
    for (size_t i = 0; i < in_bytes; ++i) in[i] = data_byte(rank, i);
    DevBuf recv(out_bytes), send(in_bytes);
    if (send.base == nullptr || recv.base == nullptr) return "cudaMalloc failed";
    const char* sendp = send.ptr();
    if (in_place) {
        // In place: AllGather's input is this rank's block of the output; Broadcast and AlltoAll use one buffer.
        std::vector<char> init(out_bytes, 0);
        size_t at = coll == Move::AllGather ? size_t(rank) * block : 0;
        std::copy(in.begin(), in.end(), init.begin() + ptrdiff_t(at));
        recv.upload(init);
        sendp = recv.ptr() + at;
    } else {
        send.upload(in);
    }
    vcclResult_t rc = coll == Move::AllGather  ? vcclAllGather(sendp, recv.ptr(), count, t, comm, s)
                      : coll == Move::Broadcast ? vcclBroadcast(sendp, recv.ptr(), count, t, root, comm, s)
                                                : vcclAlltoAll(sendp, recv.ptr(), count, t, comm, s);
    if (rc != vcclSuccess) return std::string("call failed: ") + result_str(rc) + ": " + vcclGetLastError(comm);
    cudaError_t ce = cudaStreamSynchronize(s);
    if (ce != cudaSuccess) return "stream: " + cuda_str(ce);
    if (!send.guards_intact() || !recv.guards_intact()) return "a guard zone was written";
    std::vector<char> got = recv.download();
    for (size_t i = 0; i < out_bytes; ++i) {
        char want;
        if (coll == Move::AllGather) want = data_byte(int(i / block), i % block);
        else if (coll == Move::Broadcast) want = data_byte(root, i);
        else want = data_byte(int(i / block), size_t(rank) * block + i % block); // block `rank` of sender i/block
        if (got[i] != want) return "byte " + std::to_string(i) + " differs";
    }
    if (!in_place && send.download() != in) return "the send buffer was modified";
    return "";
}

class GpuMove : public ::testing::TestWithParam<Move> {};

TEST_P(GpuMove, CountsTypesInAndOutOfPlace) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    Stream s;
    Move coll = GetParam();
    std::vector<int> roots = {0};
    if (coll == Move::Broadcast && world_size() > 1) roots.push_back(world_size() - 1);
    Sweep sweep;
    for (int root : roots) {
        for (vcclDataType_t t : {vcclUint8, vcclFloat16, vcclInt32, vcclFloat64}) {
            for (size_t count : kCounts) {
                for (bool in_place : {false, true}) {
                    std::string label = std::string(move_name(coll)) + " " + type_name(t) + " count " +
                                        std::to_string(count) + (in_place ? " in place" : "") + " root " +
                                        std::to_string(root);
                    sweep.run(label, [&] { return run_move(comm, s.s, coll, t, count, in_place, root); });
                }
            }
        }
    }
    EXPECT_ALL_RANKS_WHY(sweep.first_failure.empty(), sweep.first_failure) << sweep.cases << " cases";
}

INSTANTIATE_TEST_SUITE_P(Colls, GpuMove, ::testing::Values(Move::AllGather, Move::Broadcast, Move::AlltoAll),
                         [](const ::testing::TestParamInfo<Move>& i) { return std::string(move_name(i.param)); });

/* Ring exchange of `bytes` inside one group; recv_first posts the receive before the send. */
std::string ring_exchange(vcclComm_t comm, cudaStream_t s, size_t bytes, bool recv_first) {
    int rank = world_rank(), n = world_size();
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    std::vector<char> in(bytes);
    for (size_t i = 0; i < bytes; ++i) in[i] = data_byte(rank, i);
    DevBuf send(bytes), recv(bytes);
    if (send.base == nullptr || recv.base == nullptr) return "cudaMalloc failed";
    send.upload(in);
    vcclResult_t rc = vcclGroupStart();
    vcclResult_t a, b;
    if (recv_first) {
        a = vcclRecv(recv.ptr(), bytes, vcclUint8, prev, comm, s);
        b = vcclSend(send.ptr(), bytes, vcclUint8, next, comm, s);
    } else {
        a = vcclSend(send.ptr(), bytes, vcclUint8, next, comm, s);
        b = vcclRecv(recv.ptr(), bytes, vcclUint8, prev, comm, s);
    }
    vcclResult_t e = vcclGroupEnd();
    for (vcclResult_t r : {rc, a, b, e}) {
        if (r != vcclSuccess) return std::string("call failed: ") + result_str(r) + ": " + vcclGetLastError(comm);
    }
    cudaError_t ce = cudaStreamSynchronize(s);
    if (ce != cudaSuccess) return "stream: " + cuda_str(ce);
    if (!recv.guards_intact()) return "a guard zone was written";
    std::vector<char> got = recv.download();
    for (size_t i = 0; i < bytes; ++i) {
        if (got[i] != data_byte(prev, i)) return "byte " + std::to_string(i) + " differs";
    }
    return "";
}

TEST(GpuP2p, RingOddSizesEitherOrder) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    Stream s;
    std::string first_failure;
    for (size_t bytes : {size_t(0), size_t(1), size_t(7), size_t(4099), size_t(1 << 20) + 3, size_t(16 << 20) + 5}) {
        for (bool recv_first : {false, true}) {
            std::string why = ring_exchange(comm, s.s, bytes, recv_first);
            if (!why.empty() && first_failure.empty()) {
                first_failure = std::to_string(bytes) + " bytes" + (recv_first ? " (receive posted first)" : "") +
                                ": " + why;
            }
        }
    }
    EXPECT_ALL_RANKS_WHY(first_failure.empty(), first_failure);
}

/* vcclMemAlloc memory, registered (whole buffers and an overlapping part) and not: ring send/recv and an
 * allreduce into it give the right bytes, before and after deregistration. */
TEST(GpuMemory, MemAllocAndRegisteredBuffers) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    int rank = world_rank(), n = world_size();
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    Stream s;
    std::string why;
    for (size_t bytes : {size_t(1), size_t(4099), size_t(4 << 20) + 8}) {
        void* send = nullptr;
        void* recv = nullptr;
        vcclResult_t a = vcclMemAlloc(&send, bytes), b = vcclMemAlloc(&recv, bytes);
        ASSERT_ALL_RANKS_WHY(a == vcclSuccess && b == vcclSuccess, vcclGetLastError(nullptr));
        if (recv < send) std::swap(send, recv); // recv is the upper allocation: round 1's span must not use its export
        for (int round = 0; round < 3 && why.empty(); ++round) {
            // round 0: each buffer registered; 1: one range that spans both allocations (its cached export holds
            // for the lower one only) and the upper half of recv, overlapping it; 2: deregistered
            void *hs = nullptr, *hr = nullptr, *hpart = nullptr, *hspan = nullptr;
            char* lo = std::min(static_cast<char*>(send), static_cast<char*>(recv));
            char* hi = std::max(static_cast<char*>(send), static_cast<char*>(recv)) + bytes;
            if (round == 1 && vcclCommRegister(comm, lo, size_t(hi - lo), &hspan) != vcclSuccess) {
                why = std::string("register failed: ") + vcclGetLastError(comm);
                break;
            }
            if (round < 2) {
                if ((round == 0 && (vcclCommRegister(comm, send, bytes, &hs) != vcclSuccess ||
                                    vcclCommRegister(comm, recv, bytes, &hr) != vcclSuccess)) ||
                    (round == 1 && vcclCommRegister(comm, static_cast<char*>(recv) + bytes / 2, bytes - bytes / 2, &hpart) !=
                                       vcclSuccess)) {
                    why = std::string("register failed: ") + vcclGetLastError(comm);
                    break;
                }
            }
            std::vector<char> data(bytes);
            for (size_t i = 0; i < bytes; ++i) data[i] = data_byte(rank + 7 * round, i);
            cudaMemcpy(send, data.data(), bytes, cudaMemcpyHostToDevice);
            cudaMemset(recv, 0, bytes);
            cudaDeviceSynchronize();
            vcclResult_t g = vcclGroupStart();
            vcclResult_t x = vcclSend(send, bytes, vcclUint8, next, comm, s.s);
            vcclResult_t y = vcclRecv(recv, bytes, vcclUint8, prev, comm, s.s);
            vcclResult_t e = vcclGroupEnd();
            std::string f = call_failure(comm, {g, x, y, e});
            if (!f.empty()) why = f;
            if (why.empty() && cudaStreamSynchronize(s.s) != cudaSuccess) why = "stream failed";
            std::vector<char> got(bytes);
            cudaMemcpy(got.data(), recv, bytes, cudaMemcpyDeviceToHost);
            for (size_t i = 0; i < bytes && why.empty(); ++i) {
                if (got[i] != data_byte(prev + 7 * round, i)) why = "send/recv byte " + std::to_string(i) + " wrong";
            }
            // Allreduce of uint8 sums into the registered receive buffer.
            if (why.empty()) {
                f = call_failure(comm, {vcclAllReduce(send, recv, bytes, vcclUint8, vcclSum, comm, s.s)});
                if (!f.empty()) why = f;
            }
            if (why.empty() && cudaStreamSynchronize(s.s) != cudaSuccess) why = "stream failed";
            cudaMemcpy(got.data(), recv, bytes, cudaMemcpyDeviceToHost);
            for (size_t i = 0; i < bytes && why.empty(); ++i) {
                unsigned char want = 0;
                for (int r = 0; r < n; ++r) want = static_cast<unsigned char>(want + data_byte(r + 7 * round, i));
                if (static_cast<unsigned char>(got[i]) != want) why = "allreduce byte " + std::to_string(i) + " wrong";
            }
            for (void* h : {hs, hr, hpart, hspan}) {
                if (h != nullptr && vcclCommDeregister(comm, h) != vcclSuccess && why.empty()) why = "deregister failed";
            }
            if (!why.empty()) why = std::to_string(bytes) + " bytes, round " + std::to_string(round) + ": " + why;
        }
        if (vcclMemFree(send) != vcclSuccess || vcclMemFree(recv) != vcclSuccess) {
            if (why.empty()) why = std::string("vcclMemFree failed: ") + vcclGetLastError(nullptr);
        }
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* One group that sends each sends[k] to the next rank and receives each recvs[k] (bytes each, device memory)
 * from the previous one; the data of buffer k is data_byte(rank * 100 + tag + k, i). "" or what went wrong. */
std::string ring_exchange(vcclComm_t comm, cudaStream_t s, const std::vector<void*>& sends,
                          const std::vector<void*>& recvs, size_t bytes, int tag) {
    int rank = world_rank(), n = world_size();
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    std::vector<char> data(bytes);
    for (size_t k = 0; k < sends.size(); ++k) {
        for (size_t i = 0; i < bytes; ++i) data[i] = data_byte(rank * 100 + tag + int(k), i);
        cudaMemcpy(sends[k], data.data(), bytes, cudaMemcpyHostToDevice);
        cudaMemset(recvs[k], 0, bytes);
    }
    cudaDeviceSynchronize();
    std::vector<vcclResult_t> rc{vcclGroupStart()};
    for (size_t k = 0; k < sends.size(); ++k) {
        rc.push_back(vcclSend(sends[k], bytes, vcclUint8, next, comm, s));
        rc.push_back(vcclRecv(recvs[k], bytes, vcclUint8, prev, comm, s));
    }
    rc.push_back(vcclGroupEnd());
    std::string why = call_failure(comm, rc);
    if (!why.empty()) return why;
    if (cudaStreamSynchronize(s) != cudaSuccess) return "stream failed";
    for (size_t k = 0; k < recvs.size(); ++k) {
        cudaMemcpy(data.data(), recvs[k], bytes, cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < bytes; ++i) {
            if (data[i] != data_byte(prev * 100 + tag + int(k), i)) {
                return "buffer " + std::to_string(k) + ": byte " + std::to_string(i) + " wrong";
            }
        }
    }
    return "";
}

/* vcclMemAlloc memory is CUDA VMM memory (no CUDA IPC handle) and is still received directly: its file
 * descriptor reaches the sender over the descriptor socket. Rounds: plain buffers, the receive buffer freed
 * and allocated again (the sender must map the new one, not the stale one at that address), registered
 * buffers; then one group receiving into more buffers than a datagram queue holds (some fall back to the
 * staged path) must still deliver every byte. */
TEST(GpuMemory, MemAllocIsVmmAndReceivedDirectly) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    const char* vmm_env = getenv("VCCL_MEM_VMM");
    const bool want_vmm = vmm_env == nullptr || strcmp(vmm_env, "0") != 0;
    Stream s;
    std::string why;
    const size_t bytes = (size_t(4) << 20) + 8;
    void* send = nullptr;
    void* recv = nullptr;
    ASSERT_ALL_RANKS_WHY(vcclMemAlloc(&send, bytes) == vcclSuccess && vcclMemAlloc(&recv, bytes) == vcclSuccess,
                         vcclGetLastError(nullptr));
    if (want_vmm) {
        cudaIpcMemHandle_t h;
        bool legacy = cudaIpcGetMemHandle(&h, recv) == cudaSuccess;
        cudaGetLastError();
        if (legacy) why = "vcclMemAlloc gave cudaMalloc memory (a CUDA IPC handle exists), not VMM memory";
    }
    for (int round = 0; round < 3 && why.empty(); ++round) {
        void *hs = nullptr, *hr = nullptr;
        if (round == 1) { // a new receive buffer, likely at the freed one's address
            if (vcclMemFree(recv) != vcclSuccess || vcclMemAlloc(&recv, bytes) != vcclSuccess) {
                why = std::string("free/alloc again failed: ") + vcclGetLastError(nullptr);
                break;
            }
        }
        if (round == 2 && (vcclCommRegister(comm, send, bytes, &hs) != vcclSuccess ||
                           vcclCommRegister(comm, recv, bytes, &hr) != vcclSuccess)) {
            why = std::string("register failed: ") + vcclGetLastError(comm);
            break;
        }
        long long before = vccl::testing::direct_sends(comm);
        why = ring_exchange(comm, s.s, {send}, {recv}, bytes, 11 * round);
        long long after = vccl::testing::direct_sends(comm);
        if (why.empty() && after <= before) why = "the transfer into vcclMemAlloc memory was staged, not direct";
        for (void* h : {hs, hr}) {
            if (h != nullptr && vcclCommDeregister(comm, h) != vcclSuccess && why.empty()) why = "deregister failed";
        }
        if (!why.empty()) why = "round " + std::to_string(round) + ": " + why;
    }
    // Many receive buffers in one group: the sender drains the descriptor socket only when it maps.
    const int kMany = 24;
    const size_t part = size_t(1) << 20;
    std::vector<void*> sends(kMany, nullptr), recvs(kMany, nullptr);
    for (int i = 0; i < kMany && why.empty(); ++i) {
        if (vcclMemAlloc(&sends[i], part) != vcclSuccess || vcclMemAlloc(&recvs[i], part) != vcclSuccess) {
            why = std::string("vcclMemAlloc failed: ") + vcclGetLastError(nullptr);
        }
    }
    for (int pass = 0; pass < 2 && why.empty(); ++pass) {
        why = ring_exchange(comm, s.s, sends, recvs, part, 50 + pass);
        if (!why.empty()) why = "pass " + std::to_string(pass) + ", " + why;
    }
    for (int i = 0; i < kMany; ++i) {
        if ((vcclMemFree(sends[i]) != vcclSuccess || vcclMemFree(recvs[i]) != vcclSuccess) && why.empty()) {
            why = std::string("vcclMemFree failed: ") + vcclGetLastError(nullptr);
        }
    }
    if ((vcclMemFree(send) != vcclSuccess || vcclMemFree(recv) != vcclSuccess) && why.empty()) {
        why = std::string("vcclMemFree failed: ") + vcclGetLastError(nullptr);
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* VMM memory made the way another allocator makes it (PyTorch's expandable segments): physical allocations
 * of units[i] granules mapped side by side into one reserved range, exportable as POSIX file descriptors or
 * not. remap() puts a new physical allocation under piece i, as such an allocator does when it frees and
 * grows a segment again. Driver entry points come through the runtime (the test links no libcuda). */
class ForeignVmm {
public:
    ForeignVmm(const std::vector<size_t>& units, bool exportable) : exportable_(exportable) {
        if (!load()) return;
        cudaGetDevice(&device_);
        CUmemAllocationProp prop = props();
        if (api_.granularity(&granule_, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS) {
            error = "cuMemGetAllocationGranularity failed";
            return;
        }
        for (size_t u : units) sizes_.push_back(u * granule_);
        for (size_t s : sizes_) size += s;
        CUdeviceptr va = 0;
        if (api_.reserve(&va, size, 0, 0, 0) != CUDA_SUCCESS) {
            error = "cuMemAddressReserve failed";
            return;
        }
        base = reinterpret_cast<char*>(va);
        handles_.assign(sizes_.size(), 0);
        for (size_t i = 0; i < sizes_.size() && error.empty(); ++i) map_piece(i);
    }
    ~ForeignVmm() {
        if (base == nullptr) return;
        cudaDeviceSynchronize();
        for (size_t i = 0; i < handles_.size(); ++i) {
            if (handles_[i] == 0) continue;
            api_.unmap(piece(i), sizes_[i]);
            api_.release(handles_[i]);
        }
        api_.address_free(reinterpret_cast<CUdeviceptr>(base), size);
    }
    bool remap(size_t i) {
        cudaDeviceSynchronize();
        api_.unmap(piece(i), sizes_[i]);
        api_.release(handles_[i]);
        handles_[i] = 0;
        map_piece(i);
        return error.empty();
    }
    size_t granule() const { return granule_; }

    char* base = nullptr;
    size_t size = 0;
    std::string error;

private:
    struct Api {
        decltype(&cuMemGetAllocationGranularity) granularity;
        decltype(&cuMemCreate) create;
        decltype(&cuMemRelease) release;
        decltype(&cuMemAddressReserve) reserve;
        decltype(&cuMemAddressFree) address_free;
        decltype(&cuMemMap) map;
        decltype(&cuMemUnmap) unmap;
        decltype(&cuMemSetAccess) set_access;
    };
    template <typename Fn> bool entry(const char* name, Fn* fn) {
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion(name, reinterpret_cast<void**>(fn), 12000, cudaEnableDefault, &q) !=
                cudaSuccess || q != cudaDriverEntryPointSuccess) {
            error = std::string("no driver entry point ") + name;
            return false;
        }
        return true;
    }
    bool load() {
        return entry("cuMemGetAllocationGranularity", &api_.granularity) && entry("cuMemCreate", &api_.create) &&
               entry("cuMemRelease", &api_.release) && entry("cuMemAddressReserve", &api_.reserve) &&
               entry("cuMemAddressFree", &api_.address_free) && entry("cuMemMap", &api_.map) &&
               entry("cuMemUnmap", &api_.unmap) && entry("cuMemSetAccess", &api_.set_access);
    }
    CUmemAllocationProp props() const {
        CUmemAllocationProp prop = {};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = device_;
        prop.requestedHandleTypes = exportable_ ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
        return prop;
    }
    CUdeviceptr piece(size_t i) const {
        size_t offset = 0;
        for (size_t k = 0; k < i; ++k) offset += sizes_[k];
        return reinterpret_cast<CUdeviceptr>(base) + offset;
    }
    void map_piece(size_t i) {
        CUmemAllocationProp prop = props();
        CUmemAccessDesc a = {};
        a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        a.location.id = device_;
        a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        if (api_.create(&handles_[i], sizes_[i], &prop, 0) != CUDA_SUCCESS) {
            handles_[i] = 0;
            error = "cuMemCreate failed";
        } else if (api_.map(piece(i), sizes_[i], 0, handles_[i], 0) != CUDA_SUCCESS) {
            api_.release(handles_[i]);
            handles_[i] = 0;
            error = "cuMemMap failed";
        } else if (api_.set_access(piece(i), sizes_[i], &a, 1) != CUDA_SUCCESS) {
            error = "cuMemSetAccess failed";
        }
    }

    Api api_ = {};
    bool exportable_;
    int device_ = 0;
    size_t granule_ = 0;
    std::vector<size_t> sizes_;
    std::vector<CUmemGenericAllocationHandle> handles_;
};

/* Receive buffers in VMM memory that vccl did not allocate, across the boundaries of the allocations under
 * them, are received directly when those allow file descriptors: plain, again (the peer's mapping reused),
 * after a piece was remapped (a peer writing through its stale mapping would leave the new memory zero),
 * registered with a piece remapped after registration, and two buffers sharing an allocation in one group.
 * Staged, every byte still right, when they do not allow file descriptors or the buffer crosses more
 * allocations than a descriptor set carries. */
TEST(GpuMemory, ForeignVmmIsReceivedDirectly) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    Stream s;
    std::string why;
    ForeignVmm segment({1, 2, 1}, true);
    why = segment.error;
    const size_t skew = 1000;
    const size_t bytes = segment.size - 3 * skew; // from inside piece 0 to inside piece 2
    void* send = nullptr;
    if (why.empty() && cudaMalloc(&send, segment.size) != cudaSuccess) why = "cudaMalloc failed";
    void* recv = segment.base + skew;
    void* reg = nullptr;
    for (int round = 0; round < 4 && why.empty(); ++round) {
        if (round == 2 && !segment.remap(1)) why = "remap: " + segment.error;
        if (round == 3 && (vcclCommRegister(comm, recv, bytes, &reg) != vcclSuccess || !segment.remap(0))) {
            why = std::string("register or remap failed: ") + vcclGetLastError(comm) + segment.error;
        }
        if (!why.empty()) break;
        long long before = vccl::testing::direct_sends(comm);
        why = ring_exchange(comm, s.s, {send}, {recv}, bytes, 7 * round);
        if (why.empty() && vccl::testing::direct_sends(comm) <= before) why = "staged, not direct";
        if (!why.empty()) why = "exportable VMM, round " + std::to_string(round) + ": " + why;
    }
    if (reg != nullptr && vcclCommDeregister(comm, reg) != vcclSuccess && why.empty()) why = "deregister failed";
    // Two live receive buffers of one segment that share its middle allocation, in one group, three times:
    // their spans overlap and both are in use. (A version that dropped the first view when it mapped the
    // second faulted the copy still queued into it; one that then remapped it waited for descriptors the
    // exporter believed the peer still had.)
    if (why.empty()) {
        ForeignVmm shared({10, 10, 10}, true);
        why = shared.error;
        const size_t half = shared.size / 2;
        void* halves[2] = {nullptr, nullptr};
        for (void*& h : halves) {
            if (why.empty() && cudaMalloc(&h, half) != cudaSuccess) why = "cudaMalloc failed";
        }
        for (int round = 0; round < 3 && why.empty(); ++round) {
            long long before = vccl::testing::direct_sends(comm);
            why = ring_exchange(comm, s.s, {halves[0], halves[1]}, {shared.base, shared.base + half}, half, 20 + round);
            if (why.empty() && vccl::testing::direct_sends(comm) < before + 2) why = "staged, not direct";
            if (!why.empty()) why = "two buffers sharing an allocation, round " + std::to_string(round) + ": " + why;
        }
        for (void* h : halves) {
            if (h != nullptr) cudaFree(h);
        }
    }
    struct Staged {
        const char* what;
        std::vector<size_t> units;
        bool exportable;
    };
    const Staged staged[] = {{"VMM without file descriptors", {1, 1}, false},
                             {"VMM over too many allocations", std::vector<size_t>(66, 1), true}};
    for (const Staged& c : staged) {
        if (!why.empty()) break;
        ForeignVmm other(c.units, c.exportable);
        why = other.error;
        void* other_send = nullptr;
        if (why.empty() && cudaMalloc(&other_send, other.size) != cudaSuccess) why = "cudaMalloc failed";
        if (why.empty()) {
            long long before = vccl::testing::direct_sends(comm);
            why = ring_exchange(comm, s.s, {other_send}, {other.base + 1}, other.size - 2, 3);
            if (why.empty() && vccl::testing::direct_sends(comm) != before) why = "went direct, expected staged";
        }
        if (other_send != nullptr) cudaFree(other_send);
        if (!why.empty()) why = std::string(c.what) + ": " + why;
    }
    if (send != nullptr) cudaFree(send);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* One group with `sizes.size()` sends to the next rank and as many receives from the previous one (receives
 * first or last), every buffer checked. With more small transfers than the FIFO has slots, a stream order
 * that sent everything before receiving anything would deadlock. */
std::string ring_group(vcclComm_t comm, cudaStream_t s, const std::vector<size_t>& sizes, bool recv_first) {
    int rank = world_rank(), n = world_size();
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    std::vector<std::unique_ptr<DevBuf>> send, recv;
    for (size_t k = 0; k < sizes.size(); ++k) {
        send.emplace_back(new DevBuf(sizes[k]));
        recv.emplace_back(new DevBuf(sizes[k]));
        if (send.back()->base == nullptr || recv.back()->base == nullptr) return "cudaMalloc failed";
        std::vector<char> in(sizes[k]);
        for (size_t i = 0; i < sizes[k]; ++i) in[i] = data_byte(rank * 64 + int(k), i);
        send.back()->upload(in);
    }
    vcclResult_t first = vcclGroupStart();
    for (int pass = 0; pass < 2; ++pass) {
        bool recvs = (pass == 0) == recv_first;
        for (size_t k = 0; k < sizes.size(); ++k) {
            vcclResult_t r = recvs ? vcclRecv(recv[k]->ptr(), sizes[k], vcclUint8, prev, comm, s)
                                   : vcclSend(send[k]->ptr(), sizes[k], vcclUint8, next, comm, s);
            if (r != vcclSuccess && first == vcclSuccess) first = r;
        }
    }
    vcclResult_t end = vcclGroupEnd();
    if (first != vcclSuccess || end != vcclSuccess) {
        return std::string("call failed: ") + result_str(first != vcclSuccess ? first : end) + ": " +
               vcclGetLastError(comm);
    }
    cudaError_t ce = cudaStreamSynchronize(s);
    if (ce != cudaSuccess) return "stream: " + cuda_str(ce);
    for (size_t k = 0; k < sizes.size(); ++k) {
        if (!recv[k]->guards_intact()) return "transfer " + std::to_string(k) + ": a guard zone was written";
        std::vector<char> got = recv[k]->download();
        for (size_t i = 0; i < sizes[k]; ++i) {
            if (got[i] != data_byte(prev * 64 + int(k), i)) {
                return "transfer " + std::to_string(k) + " (" + std::to_string(sizes[k]) + " bytes): byte " +
                       std::to_string(i) + " differs";
            }
        }
    }
    return "";
}

TEST(GpuFifo, MoreTransfersThanSlotsInOneGroup) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    Stream s;
    size_t f = fifo_bytes();
    std::vector<size_t> many;
    for (size_t k = 0; k < 37; ++k) many.push_back(1 + (k * 977) % (f > 0 ? f : 4096)); // 37 > 4 x 8 slots
    std::vector<size_t> around = {f > 1 ? f - 1 : 1, f > 0 ? f : 1, f + 1, 8, (1 << 20) + 3, 3, f};
    std::string first_failure;
    for (const auto& sizes : {many, around}) {
        for (bool recv_first : {false, true}) {
            for (int rep = 0; rep < 3 && first_failure.empty(); ++rep) {
                std::string why = ring_group(comm, s.s, sizes, recv_first);
                if (!why.empty()) {
                    first_failure = std::to_string(sizes.size()) + " transfers" +
                                    (recv_first ? " (receives posted first)" : "") + ": " + why;
                }
            }
        }
    }
    EXPECT_ALL_RANKS_WHY(first_failure.empty(), first_failure);
}

/* Device buffer on the sending side, host memory (pinned and pageable) on the receiving side: the sender
 * picks the FIFO for small transfers without knowing; the receiver copies out of its slot into host memory
 * and returns with the data there. */
TEST(GpuFifo, ReceiveIntoHostMemory) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    int rank = world_rank(), n = world_size();
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    Stream s;
    std::string first_failure;
    for (bool pinned : {true, false}) {
        for (size_t bytes : {size_t(1), size_t(4099), fifo_bytes(), size_t(1 << 20) + 1}) {
            if (bytes == 0) continue;
            DevBuf send(bytes);
            std::vector<char> in(bytes);
            for (size_t i = 0; i < bytes; ++i) in[i] = data_byte(rank, i);
            send.upload(in);
            char* host = nullptr;
            std::vector<char> pageable;
            if (pinned) {
                if (cudaMallocHost(reinterpret_cast<void**>(&host), bytes) != cudaSuccess) host = nullptr;
            } else {
                pageable.assign(bytes, 0);
                host = pageable.data();
            }
            if (host == nullptr) {
                first_failure = "cudaMallocHost failed";
                break;
            }
            memset(host, 0, bytes);
            vcclGroupStart();
            vcclResult_t a = vcclSend(send.ptr(), bytes, vcclUint8, next, comm, s.s);
            vcclResult_t b = vcclRecv(host, bytes, vcclUint8, prev, comm, s.s);
            vcclResult_t e = vcclGroupEnd();
            std::string why = call_failure(comm, {a, b, e});
            // No synchronisation here: a receive into host memory has its data when the call returns.
            for (size_t i = 0; i < bytes && why.empty(); ++i) {
                if (host[i] != data_byte(prev, i)) why = "byte " + std::to_string(i) + " differs when the call returned";
            }
            cudaStreamSynchronize(s.s);
            if (pinned) cudaFreeHost(host);
            if (!why.empty() && first_failure.empty()) {
                first_failure = std::to_string(bytes) + " bytes into " + (pinned ? "pinned" : "pageable") + " memory: " + why;
            }
        }
    }
    EXPECT_ALL_RANKS_WHY(first_failure.empty(), first_failure);
}

/* Send and receive on one buffer in one group (in place), small (FIFO) and large (direct copy). */
TEST(GpuFifo, InPlaceExchange) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    int rank = world_rank(), n = world_size();
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    Stream s;
    std::string first_failure;
    for (size_t bytes : {size_t(5), size_t(30001), size_t(4 << 20) + 7}) {
        DevBuf buf(bytes);
        std::vector<char> in(bytes);
        for (size_t i = 0; i < bytes; ++i) in[i] = data_byte(rank, i);
        buf.upload(in);
        vcclGroupStart();
        vcclResult_t a = vcclSend(buf.ptr(), bytes, vcclUint8, next, comm, s.s);
        vcclResult_t b = vcclRecv(buf.ptr(), bytes, vcclUint8, prev, comm, s.s);
        vcclResult_t e = vcclGroupEnd();
        std::string why = call_failure(comm, {a, b, e});
        cudaError_t ce = cudaStreamSynchronize(s.s);
        if (ce != cudaSuccess && why.empty()) why = "stream: " + cuda_str(ce);
        if (why.empty() && !buf.guards_intact()) why = "a guard zone was written";
        std::vector<char> got = buf.download();
        for (size_t i = 0; i < bytes && why.empty(); ++i) {
            if (got[i] != data_byte(prev, i)) why = "byte " + std::to_string(i) + " differs";
        }
        if (!why.empty() && first_failure.empty()) first_failure = std::to_string(bytes) + " bytes: " + why;
    }
    EXPECT_ALL_RANKS_WHY(first_failure.empty(), first_failure);
}

/* Rank 1 sends `send_bytes` to rank 0, which posts a receive of `recv_bytes`. Rank 0's call fails with
 * vcclInvalidUsage naming the mismatch; neither stream stays blocked; a FIFO sender (which does not check)
 * learns of it through vcclCommGetAsyncError. On a communicator of its own (the sender's ends up failed). */
std::string mismatch_case(size_t send_bytes, size_t recv_bytes) {
    int rank = world_rank();
    vcclComm_t comm = make_comm(CommKind::Mpi);
    if (!all_ranks_ok(comm != nullptr)) return "communicator creation failed";
    Stream s;
    DevBuf buf(std::max(send_bytes, recv_bytes));
    std::string why;
    bool fifo_send = send_bytes <= fifo_bytes();
    if (rank == 1) {
        vcclResult_t r = vcclSend(buf.ptr(), send_bytes, vcclUint8, 0, comm, s.s);
        if (fifo_send && r != vcclSuccess) why = "the FIFO sender's call failed: " + result_str(r);
        if (!fifo_send && r != vcclInvalidUsage) why = "the rendezvous sender's call returned " + result_str(r);
        if (fifo_send && why.empty()) {
            vcclResult_t async = vcclSuccess;
            for (int i = 0; i < 300 && async == vcclSuccess; ++i) {
                if (vcclCommGetAsyncError(comm, &async) != vcclSuccess) break;
                if (async == vcclSuccess) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
            if (async != vcclRemoteError) why = "the sender's vcclCommGetAsyncError reported " + result_str(async);
        }
    } else if (rank == 0) {
        vcclResult_t r = vcclRecv(buf.ptr(), recv_bytes, vcclUint8, 1, comm, s.s);
        std::string msg = vcclGetLastError(comm);
        if (r != vcclInvalidUsage) why = "the receiver's call returned " + result_str(r);
        else if (msg.find("mismatch") == std::string::npos) why = "the error does not name the mismatch: " + msg;
    }
    expect_stream_goes_on(s.s, "a mismatched transfer");
    vcclResult_t end = vcclCommDestroy(comm);
    if (end != vcclSuccess && why.empty()) why = "destroy failed: " + result_str(end);
    return why;
}

TEST(GpuFifo, MismatchedSizesAreReportedWithoutBlocking) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    size_t f = fifo_bytes();
    std::string first_failure;
    std::vector<std::pair<size_t, size_t>> cases = {{1 << 20, (1 << 20) + 4}};
    if (f >= 200) cases.insert(cases.begin(), {{100, 200}, {200, 100}});
    if (f > 0) cases.push_back({f, f + 1}); // FIFO sender, receiver expecting a rendezvous size
    for (const auto& c : cases) {
        std::string why = mismatch_case(c.first, c.second);
        if (!why.empty() && first_failure.empty()) {
            first_failure = "send " + std::to_string(c.first) + " / receive " + std::to_string(c.second) + ": " + why;
        }
    }
    EXPECT_ALL_RANKS_WHY(first_failure.empty(), first_failure);
}

/* The low-latency allreduce (VCCL_ALLREDUCE_LL_BYTES: on by default where every rank has a GPU of its own;
 * tests/gpu/np2_shared_gpu_ll.sh sets it where they share one): its kernel waits on the GPU for the peers' words,
 * so a peer that never calls must not keep it (or the stream) for ever. Its size as the test communicator has
 * it (the same on every rank). */
size_t ll_bytes() {
    long long b = gpu_comm() != nullptr ? vccl::testing::ll_bytes(gpu_comm()) : 0;
    return b > 0 ? size_t(b) : 0;
}


/* After a kernel call on stream s of comm (every rank, collectively): 300 ms later the stream must still be busy on
 * a rank that `waits` (its kernel waits for what never comes); then vcclCommAbort must return within 3 s and the
 * stream go on. Returns `why` if it is not empty, else what went wrong, each message after `where`. */
std::string abort_releases_waiting_kernel(vcclComm_t comm, cudaStream_t s, bool waits, std::string why,
                                          const std::string& where, const char* waiting_for, const char* after) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    if (waits && why.empty() && cudaStreamQuery(s) != cudaErrorNotReady) {
        why = where + "the stream was not waiting for " + waiting_for;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    const vcclResult_t end = vcclCommAbort(comm);
    const double took = MPI_Wtime() - t0;
    if (end != vcclSuccess && why.empty()) why = where + "abort failed: " + result_str(end);
    if (took > 3.0 && why.empty()) why = where + "abort took " + std::to_string(took) + " s";
    expect_stream_goes_on(s, after);
    MPI_Barrier(MPI_COMM_WORLD);
    return why;
}

/* Rank 0 alone calls an allreduce of `count` floats on comm (low-latency path), the others never do: abort
 * must release its kernel. Returns what went wrong on this rank. */
std::string abort_releases_lone_call(vcclComm_t comm, size_t count) {
    Stream s;
    DevBuf buf(count * 4);
    std::string why;
    if (world_rank() == 0) { // the others never call
        vcclResult_t r = vcclAllReduce(buf.ptr(), buf.ptr(), count, vcclFloat32, vcclSum, comm, s.s);
        if (r != vcclSuccess) why = "the call failed on the host: " + result_str(r);
    }
    return abort_releases_waiting_kernel(comm, s.s, world_rank() == 0, why, "",
                                         "the absent peers (low-latency path not taken?)", "abort");
}

/* A call that does not match the peers' (`call` enqueues it on the stream it is given): it returns, the stream
 * goes on, vcclCommGetAsyncError reports vcclRemoteError; then comm is aborted. Returns what went wrong here. */
template <typename Call> std::string mismatch_reported(vcclComm_t comm, const char* what, Call&& call) {
    Stream s;
    std::string why;
    vcclResult_t r = call(s.s);
    if (r != vcclSuccess) why = "the call failed on the host: " + result_str(r);
    expect_stream_goes_on(s.s, what);
    vcclResult_t async = vcclSuccess;
    if (vcclCommGetAsyncError(comm, &async) != vcclSuccess || async != vcclRemoteError) {
        if (why.empty()) why = "vcclCommGetAsyncError reported " + result_str(async) + ", not vcclRemoteError";
    }
    MPI_Barrier(MPI_COMM_WORLD);
    vcclCommAbort(comm);
    return why;
}

/* An allreduce of `count` floats, a count that differs between ranks. */
std::string mismatch_reported(vcclComm_t comm, size_t count) {
    DevBuf buf(count * 4);
    return mismatch_reported(comm, "an allreduce whose counts differ between ranks", [&](cudaStream_t st) {
        return vcclAllReduce(buf.ptr(), buf.ptr(), count, vcclFloat32, vcclSum, comm, st);
    });
}

TEST(GpuLl, AbortReleasesKernelWaitingForAbsentPeer) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    if (ll_bytes() < 64) GTEST_SKIP() << "needs VCCL_ALLREDUCE_LL_BYTES >= 64";
    vcclComm_t comm = make_comm(CommKind::Mpi);
    ASSERT_ALL_RANKS(comm != nullptr);
    std::string why = abort_releases_lone_call(comm, 16);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* An allreduce of `count` int32 in place whose data differs with `salt` (calls that reuse a word set must not take
 * an earlier call's data): element i of rank r is (r + 1) x salt + i mod 1000. Empty when right. */
std::string salted_allreduce(vcclComm_t comm, cudaStream_t s, size_t count, int salt) {
    std::vector<char> in(count * 4);
    for (size_t i = 0; i < count; ++i) store_int(in.data(), i, vcclInt32, int64_t(world_rank() + 1) * salt + int64_t(i % 1000));
    DevBuf buf(in.size());
    buf.upload(in);
    vcclResult_t rc = vcclAllReduce(buf.ptr(), buf.ptr(), count, vcclInt32, vcclSum, comm, s);
    if (rc != vcclSuccess) return "call failed: " + result_str(rc);
    if (cudaStreamSynchronize(s) != cudaSuccess) return "stream failed";
    std::vector<char> got = buf.download();
    const int64_t n = world_size(), ranks_sum = n * (n + 1) / 2;
    for (size_t i = 0; i < count; ++i) {
        int64_t want = ranks_sum * salt + n * int64_t(i % 1000);
        if (load(got.data(), i, vcclInt32) != double(want)) {
            return "element " + std::to_string(i) + ": got " + std::to_string(load(got.data(), i, vcclInt32)) +
                   ", want " + std::to_string(want);
        }
    }
    return "";
}

/* A float32 allreduce of `count` elements whose input and output start `in_offset` and `out_offset` bytes past a
 * 256-byte boundary (the kernels' byte-wise path where they are not 16-byte aligned). Empty when right. */
std::string misaligned_allreduce(vcclComm_t comm, cudaStream_t s, size_t count, size_t in_offset, size_t out_offset) {
    std::vector<char> in(count * 4);
    for (size_t i = 0; i < count; ++i) store_int(in.data(), i, vcclFloat32, red_input(world_rank(), i, vcclFloat32, vcclSum));
    DevBuf send(in.size() + in_offset), recv(in.size() + out_offset);
    std::vector<char> padded(in_offset, 0);
    padded.insert(padded.end(), in.begin(), in.end());
    send.upload(padded);
    vcclResult_t rc = vcclAllReduce(send.ptr() + in_offset, recv.ptr() + out_offset, count, vcclFloat32, vcclSum, comm, s);
    if (rc != vcclSuccess) return "call failed: " + result_str(rc);
    if (cudaStreamSynchronize(s) != cudaSuccess) return "stream failed";
    if (!recv.guards_intact()) return "a guard zone was written";
    std::vector<char> got = recv.download();
    std::string why;
    for (size_t i = 0; i < count; ++i) {
        if (!element_ok(got.data() + out_offset, i, vcclFloat32, red_expected(world_size(), i, vcclFloat32, vcclSum), &why)) return why;
    }
    return "";
}

/* AllReduce, ReduceScatter and Reduce (root: the last rank; with Sum also rank 0) with every op, then AllGather,
 * AlltoAll and Broadcast (roots 0 and the last rank), of `count` elements of t, in and out of place, against the
 * reference; case labels start with `prefix`. */
void sweep_collectives(Sweep& sweep, vcclComm_t comm, cudaStream_t s, const std::string& prefix, vcclDataType_t t,
                       size_t count) {
    for (bool in_place : {false, true}) {
        std::ostringstream where;
        where << prefix << ": " << type_name(t) << " count " << count << (in_place ? " in place" : " out of place");
        for (Red coll : {Red::AllReduce, Red::ReduceScatter}) {
            for (vcclRedOp_t op : kOps) {
                sweep.run(std::string(red_name(coll)) + " " + op_name(op) + " " + where.str(),
                          [&] { return run_reduction(comm, s, coll, t, op, count, in_place, 0); });
            }
        }
        for (vcclRedOp_t op : kOps) {
            for (int root : {world_size() - 1, 0}) {
                if (root == 0 && op != vcclSum) continue;
                sweep.run("Reduce root " + std::to_string(root) + " " + op_name(op) + " " + where.str(),
                          [&] { return run_reduction(comm, s, Red::Reduce, t, op, count, in_place, root); });
            }
        }
        sweep.run("AllGather " + where.str(), [&] { return run_move(comm, s, Move::AllGather, t, count, in_place, 0); });
        sweep.run("AlltoAll " + where.str(), [&] { return run_move(comm, s, Move::AlltoAll, t, count, in_place, 0); });
        for (int root : {0, world_size() - 1}) {
            sweep.run("Broadcast root " + std::to_string(root) + " " + where.str(),
                      [&] { return run_move(comm, s, Move::Broadcast, t, count, in_place, root); });
        }
    }
}

/* Destroys comm: it waits for the last kernel to stop waiting (kLlDone, written by the last of its blocks), which
 * must not take long. */
void destroy_promptly(Sweep& sweep, vcclComm_t comm, const std::string& prefix) {
    double t0 = MPI_Wtime();
    vcclResult_t end = vcclCommDestroy(comm);
    double took = MPI_Wtime() - t0;
    sweep.run(prefix + ": destroy", [&]() -> std::string {
        if (end != vcclSuccess) return "destroy failed: " + result_str(end);
        return took > 3.0 ? "destroy took " + std::to_string(took) + " s" : "";
    });
}

/* The low-latency collectives on messages of many thread blocks (each block owns a range of the message and waits
 * only for its range), with VCCL_ALLREDUCE_LL_BYTES at 2 MiB: AllReduce, ReduceScatter, Reduce (every op), AllGather,
 * AlltoAll and Broadcast, every type, in and out of place, counts
 * that split unevenly over the blocks (VCCL_MAX_CTAS 3 and 32), against the reference; then a call that only rank 0
 * makes, whose 32 blocks all wait, released by abort; then counts that differ between ranks, reported. */
TEST(GpuLl, ManyBlocksMatchTheReferenceAndFailCleanly) {
    if (vgpu::algo_forced()) GTEST_SKIP() << "VCCL_ALGO forces an algorithm: this test checks the default choice";
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    if (ll_bytes() == 0) GTEST_SKIP() << "the low-latency allreduce is off for this suite";
    Stream s;
    Sweep sweep;
    for (const char* ctas : {"3", "32"}) {
        vcclComm_t comm = comm_with_env({{"VCCL_ALLREDUCE_LL_BYTES", "2M"}, {"VCCL_MAX_CTAS", ctas}});
        ASSERT_ALL_RANKS(comm != nullptr);
        // With n ranks the path takes messages up to 2 MiB / (n - 1).
        const size_t limit = (size_t(2) << 20) / size_t(world_size() - 1) / 8 * 8;
        ASSERT_ALL_RANKS_WHY(vccl::testing::ll_bytes(comm) == (long long)limit, "VCCL_ALLREDUCE_LL_BYTES=2M not taken");
        // 262139 8-byte elements: just under 2 MiB
        const size_t counts[] = {1, 7, 1031, 65537, 262139};
        const std::string prefix = std::string("VCCL_MAX_CTAS ") + ctas;
        for (vcclDataType_t t : kTypes) {
            for (size_t count : counts) {
                if (count * type_size(t) <= limit) sweep_collectives(sweep, comm, s.s, prefix, t, count);
            }
        }
        // Calls k and k + 2 use the same word set: different data in each, so that words left from an earlier
        // call cannot pass for this one's.
        for (size_t count : {size_t(1031), limit / 4 - 1}) {
            for (int call = 0; call < 4; ++call) {
                sweep.run(prefix + ": call " + std::to_string(call) + " of 4, AllReduce int32 count " + std::to_string(count),
                          [&] { return salted_allreduce(comm, s.s, count, call + 1); });
            }
        }
        destroy_promptly(sweep, comm, prefix);
    }
    EXPECT_ALL_RANKS_WHY(sweep.first_failure.empty(), sweep.first_failure) << sweep.cases << " cases";

    vcclComm_t lone = comm_with_env({{"VCCL_ALLREDUCE_LL_BYTES", "2M"}});
    ASSERT_ALL_RANKS(lone != nullptr);
    const size_t floats = size_t(vccl::testing::ll_bytes(lone)) / 4;
    std::string why = abort_releases_lone_call(lone, std::min<size_t>(400000, floats)); // 1.6 MB with 2 ranks: 32 blocks
    EXPECT_ALL_RANKS_WHY(why.empty(), "lone call: " + why);

    vcclComm_t mismatched = comm_with_env({{"VCCL_ALLREDUCE_LL_BYTES", "2M"}});
    ASSERT_ALL_RANKS(mismatched != nullptr);
    why = mismatch_reported(mismatched, floats / size_t(world_size()) * size_t(world_rank() + 1)); // all on this path
    EXPECT_ALL_RANKS_WHY(why.empty(), "mismatched counts: " + why);

    // Different collectives of the same size: the header word carries the kind, so this is a mismatch too.
    vcclComm_t kinds = comm_with_env({{"VCCL_ALLREDUCE_LL_BYTES", "2M"}});
    ASSERT_ALL_RANKS(kinds != nullptr);
    const size_t per_rank = 1024;
    DevBuf in(per_rank * 4), out(per_rank * 4 * size_t(world_size()));
    why = mismatch_reported(kinds, "an allgather on one rank against an allreduce of the same size", [&](cudaStream_t st) {
        return world_rank() == 0 ? vcclAllGather(in.ptr(), out.ptr(), per_rank, vcclFloat32, kinds, st)
                                 : vcclAllReduce(in.ptr(), out.ptr(), per_rank, vcclFloat32, vcclSum, kinds, st);
    });
    EXPECT_ALL_RANKS_WHY(why.empty(), "mismatched collectives: " + why);

    // AlltoAll against AllGather, both sending every peer the same number of bytes.
    vcclComm_t moves = comm_with_env({{"VCCL_ALLREDUCE_LL_BYTES", "2M"}});
    ASSERT_ALL_RANKS(moves != nullptr);
    DevBuf all_in(per_rank * 4 * size_t(world_size()));
    why = mismatch_reported(moves, "an alltoall on one rank against an allgather of the same size", [&](cudaStream_t st) {
        return world_rank() == 0 ? vcclAlltoAll(all_in.ptr(), out.ptr(), per_rank, vcclFloat32, moves, st)
                                 : vcclAllGather(in.ptr(), out.ptr(), per_rank, vcclFloat32, moves, st);
    });
    EXPECT_ALL_RANKS_WHY(why.empty(), "alltoall against allgather: " + why);

    // A broadcast whose root differs between ranks (every rank names itself): reported, not a hang.
    vcclComm_t roots = comm_with_env({{"VCCL_ALLREDUCE_LL_BYTES", "2M"}});
    ASSERT_ALL_RANKS(roots != nullptr);
    why = mismatch_reported(roots, "a broadcast whose root differs between ranks", [&](cudaStream_t st) {
        return vcclBroadcast(in.ptr(), in.ptr(), per_rank, vcclFloat32, world_rank(), roots, st);
    });
    EXPECT_ALL_RANKS_WHY(why.empty(), "broadcast roots: " + why);
    vcclComm_t reduce_roots = comm_with_env({{"VCCL_ALLREDUCE_LL_BYTES", "2M"}});
    ASSERT_ALL_RANKS(reduce_roots != nullptr);
    why = mismatch_reported(reduce_roots, "a reduce whose root differs between ranks", [&](cudaStream_t st) {
        return vcclReduce(in.ptr(), in.ptr(), per_rank, vcclFloat32, vcclSum, world_rank(), reduce_roots, st);
    });
    EXPECT_ALL_RANKS_WHY(why.empty(), "reduce roots: " + why);
}

/* The chunked collectives (device/kernels/chunked_collectives.h: AllReduce and ReduceScatter above the low-latency kernel's
 * limit, up to VCCL_ALLREDUCE_KERNEL_BYTES, in chunks through the same word sets), with small sets
 * (VCCL_ALLREDUCE_LL_BYTES 64K: 8 slots of 16 KiB, reused within a call) and the default 2M (64 KiB chunks),
 * VCCL_MAX_CTAS 3, 32 and different on every rank: AllReduce and ReduceScatter every op, every type, in and out of
 * place, sizes just above the limit, odd ones (a last chunk that is not whole vectors; ReduceScatter then takes the
 * copy path) and a few MiB, against the reference, with AllGather of the same sizes between them (copy path);
 * misaligned buffers; calls alternating with low-latency ones on the same sets; destroy; then a call only rank 0
 * makes, released by abort; counts that differ between ranks, and one rank on the low-latency kernel against the
 * others on this one, reported. Ranks sharing a GPU take turns on it (every wait costs a time slice): there only the
 * small sets and sizes. One test per configuration (each takes 35-45 s on 2x H200, together over the watchdog's
 * 120 s), then the failure cases. */
/* One configuration of the chunked collectives against the reference (the sweep of the comment above). */
void chunked_match_the_reference(const char* ll_limit, const char* ctas) {
    Stream s;
    Sweep sweep;
    const bool shared_gpu = gpu_shared();
    vcclComm_t comm = comm_with_env({{"VCCL_ALLREDUCE_LL_BYTES", ll_limit}, {"VCCL_MAX_CTAS", ctas}});
    ASSERT_ALL_RANKS(comm != nullptr);
    const size_t limit = size_t(vccl::testing::ll_bytes(comm));
    ASSERT_ALL_RANKS_WHY(limit > 0, std::string("VCCL_ALLREDUCE_LL_BYTES=") + ll_limit + " not taken");
    const std::string where0 = std::string("VCCL_ALLREDUCE_LL_BYTES ") + ll_limit + " VCCL_MAX_CTAS " + ctas;
    const long long chunked_before = vccl::testing::chunked_calls(comm);
    for (vcclDataType_t t : kTypes) {
        const size_t ts = type_size(t);
        // Just above the limit with a tail of 3 elements (AllReduce's last chunk is not whole vectors; ReduceScatter
        // takes the copy path), and 3 x the limit + 48 bytes (ReduceScatter's chunked kernel too).
        std::vector<size_t> counts = {limit / ts + 3, (3 * limit + 48) / ts};
        if (!shared_gpu && (t == vcclInt8 || t == vcclFloat32 || t == vcclFloat64)) {
            counts.push_back((size_t(5) << 20) / ts + 16 / ts);
        }
        for (size_t count : counts) sweep_collectives(sweep, comm, s.s, where0, t, count);
    }
    const size_t floats = limit / 4 + 1001;
    for (auto offsets : {std::pair<size_t, size_t>{4, 4}, {0, 8}, {12, 0}, {1, 3}}) {
        sweep.run(where0 + ": float32 allreduce with input at +" + std::to_string(offsets.first) + ", output at +" +
                      std::to_string(offsets.second),
                  [&] { return misaligned_allreduce(comm, s.s, floats, offsets.first, offsets.second); });
    }
    // Low-latency and chunked calls in turn, so that each reuses a set the other kind left.
    for (int call = 0; call < 6; ++call) {
        const size_t count = call % 3 == 1 ? limit / 4 - 3 : limit / 2 + 7; // int32: at the limit and twice it
        sweep.run(where0 + ": call " + std::to_string(call) + " of 6, int32 count " + std::to_string(count),
                  [&] { return salted_allreduce(comm, s.s, count, call + 1); });
    }
    const long long chunked = vccl::testing::chunked_calls(comm) - chunked_before;
    sweep.run(where0 + ": chunked kernel calls", [&]() -> std::string { // AllReduce alone makes 200 or more
        return chunked >= 200 ? "" : "only " + std::to_string(chunked) + " calls took the chunked kernel";
    });
    destroy_promptly(sweep, comm, where0);
    EXPECT_ALL_RANKS_WHY(sweep.first_failure.empty(), sweep.first_failure) << sweep.cases << " cases";
}

TEST(GpuChunked, MatchTheReferenceWithSmallSetsOn3Blocks) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    if (ll_bytes() == 0) GTEST_SKIP() << "the low-latency kernels (and so the chunked ones) are off for this suite";
    chunked_match_the_reference("64K", "3");
}

TEST(GpuChunked, MatchTheReferenceWithDefaultSetsOn32Blocks) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    if (ll_bytes() == 0) GTEST_SKIP() << "the low-latency kernels (and so the chunked ones) are off for this suite";
    if (gpu_shared()) GTEST_SKIP() << "ranks sharing a GPU: only the small sets (every wait costs a time slice)";
    chunked_match_the_reference("2M", "32");
}

TEST(GpuChunked, MatchTheReferenceWithGridsThatDifferBetweenRanks) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    if (ll_bytes() == 0) GTEST_SKIP() << "the low-latency kernels (and so the chunked ones) are off for this suite";
    chunked_match_the_reference("64K", std::to_string(5 + 9 * world_rank()).c_str());
}

TEST(GpuChunked, LoneAndMismatchedCallsFailCleanly) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    if (ll_bytes() == 0) GTEST_SKIP() << "the low-latency kernels (and so the chunked ones) are off for this suite";
    vcclComm_t lone = comm_with_env({{"VCCL_ALLREDUCE_LL_BYTES", "64K"}});
    ASSERT_ALL_RANKS(lone != nullptr);
    const size_t floats = size_t(vccl::testing::ll_bytes(lone)) / 4 * 8; // chunked, many chunks per block
    std::string why = abort_releases_lone_call(lone, floats);
    EXPECT_ALL_RANKS_WHY(why.empty(), "lone call: " + why);

    vcclComm_t mismatched = comm_with_env({{"VCCL_ALLREDUCE_LL_BYTES", "64K"}});
    ASSERT_ALL_RANKS(mismatched != nullptr);
    why = mismatch_reported(mismatched, floats + size_t(world_rank()) * 4096);
    EXPECT_ALL_RANKS_WHY(why.empty(), "mismatched counts: " + why);

    vcclComm_t kinds = comm_with_env({{"VCCL_ALLREDUCE_LL_BYTES", "64K"}});
    ASSERT_ALL_RANKS(kinds != nullptr);
    why = mismatch_reported(kinds, world_rank() == 0 ? size_t(64) : floats); // rank 0 on the low-latency kernel
    EXPECT_ALL_RANKS_WHY(why.empty(), "low-latency against chunked: " + why);
}

/* A rank that stops in the middle of a chunked call (test hook: its kernel moves its first chunks, then ends): the
 * others' kernels wait for the rest, in the middle of their chunks, until vcclCommAbort ends them within seconds and
 * the streams go on. Twice: many chunks per block (1 MiB, so the blocks split into senders and reducers) and few
 * (just above the low-latency limit: one group per block with 2 ranks). The abort case of
 * LoneAndMismatchedCallsFailCleanly ends in the header wait, before any chunk moves. */
TEST(GpuChunked, AbortInTheMiddleOfACallEndsTheKernel) {
    if (vgpu::algo_forced()) GTEST_SKIP() << "VCCL_ALGO forces an algorithm: this test checks the default choice";
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    if (ll_bytes() == 0) GTEST_SKIP() << "the low-latency kernels (and so the chunked ones) are off for this suite";
    const bool stops = world_rank() == world_size() - 1;
    std::string why;
    for (int many = 1; many >= 0; --many) { // both cases on every rank, whatever failed: each is collective
        vcclComm_t comm = comm_with_env({{"VCCL_ALLREDUCE_LL_BYTES", "64K"}, {"VCCL_MAX_CTAS", "3"}});
        ASSERT_ALL_RANKS(comm != nullptr);
        const size_t limit = size_t(vccl::testing::ll_bytes(comm));
        const size_t floats = many ? (size_t(1) << 20) / 4 : limit / 4 + 3;
        const std::string where = std::string(many ? "1 MiB" : "just above the limit") + ", " +
                                  (stops ? "the rank that stops" : "a rank left waiting") + ": ";
        Stream s;
        DevBuf buf(floats * 4);
        if (stops && vccl::testing::stop_next_chunked(comm, many ? 4 : 2) != vcclSuccess && why.empty()) {
            why = where + "hook refused";
        }
        const long long before = vccl::testing::chunked_calls(comm);
        vcclResult_t r = vcclAllReduce(buf.ptr(), buf.ptr(), floats, vcclFloat32, vcclSum, comm, s.s);
        if (r != vcclSuccess && why.empty()) why = where + "the call failed on the host: " + result_str(r);
        if (vccl::testing::chunked_calls(comm) != before + 1 && why.empty()) why = where + "the chunked kernel not taken";
        why = abort_releases_waiting_kernel(comm, s.s, !stops, why, where, "the chunks that never came",
                                            "an abort in the middle of a chunked call");
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* The chunked kernel's data lands where the low-latency kernel's words of the call after next will: words are
 * trusted by their high half (the call's number), so the chunked kernel clears what it received. Call 1 (chunked)
 * sends int32 3s, whose 8-byte words all read as call 3's (3 << 32 | 3); call 2 is any kernel call; call 3 is a
 * low-latency allreduce on the same set, which took those words for its peers' data before the clearing. */
TEST(GpuChunked, LeavesNoWordsThatPassForALaterCall) {
    if (vgpu::algo_forced()) GTEST_SKIP() << "VCCL_ALGO forces an algorithm: this test checks the default choice";
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    if (ll_bytes() == 0) GTEST_SKIP() << "the low-latency kernels (and so the chunked ones) are off for this suite";
    Stream s;
    std::string why;
    for (int round = 0; round < 3 && why.empty(); ++round) {
        vcclComm_t comm = comm_with_env({{"VCCL_ALLREDUCE_LL_BYTES", "2M"}}); // call numbers start at 1
        ASSERT_ALL_RANKS(comm != nullptr);
        const size_t limit = size_t(vccl::testing::ll_bytes(comm));
        const size_t big = 2 * limit / 4 + 64, small = limit / 4 - 64;
        std::vector<char> threes(big * 4);
        for (size_t i = 0; i < big; ++i) store_int(threes.data(), i, vcclInt32, 3);
        DevBuf buf(threes.size());
        buf.upload(threes);
        vcclResult_t rc = vcclAllReduce(buf.ptr(), buf.ptr(), big, vcclInt32, vcclSum, comm, s.s);
        if (rc == vcclSuccess) rc = vcclAllReduce(buf.ptr(), buf.ptr(), 16, vcclInt32, vcclSum, comm, s.s);
        if (rc != vcclSuccess) why = "call failed: " + result_str(rc);
        if (cudaStreamSynchronize(s.s) != cudaSuccess && why.empty()) why = "stream failed";
        std::vector<char> got = buf.download();
        for (size_t i = 16; i < big && why.empty(); ++i) {
            if (load(got.data(), i, vcclInt32) != 3.0 * world_size()) why = "call 1: element " + std::to_string(i) + " wrong";
        }
        if (vccl::testing::chunked_calls(comm) != 1 && why.empty()) why = "call 1 did not take the chunked kernel";
        if (why.empty()) why = salted_allreduce(comm, s.s, small, 5 + round); // call 3
        vcclCommDestroy(comm);
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* The kernel's words start after the staging FIFO's slots, whose size may differ between ranks: then it must be
 * off on every rank (it was not, and ranks wrote into each other's FIFO slots), and allreduce still right. */
TEST(GpuLl, DifferentFifoSizesTurnItOffEverywhere) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    if (ll_bytes() < 64) GTEST_SKIP() << "needs VCCL_ALLREDUCE_LL_BYTES >= 64";
    vcclComm_t comm = comm_with_env({{"VCCL_P2P_FIFO_BYTES", world_rank() == 0 ? "64K" : "0"}});
    ASSERT_ALL_RANKS(comm != nullptr);
    Stream s;
    std::string why;
    for (size_t count : {size_t(1), size_t(16), size_t(1000)}) {
        std::vector<char> in(count * 4);
        for (size_t i = 0; i < count; ++i) store_int(in.data(), i, vcclInt32, int64_t(world_rank() + 1) * int64_t(i + 1));
        DevBuf buf(in.size());
        buf.upload(in);
        vcclResult_t r = vcclAllReduce(buf.ptr(), buf.ptr(), count, vcclInt32, vcclSum, comm, s.s);
        if (r != vcclSuccess && why.empty()) why = "call failed: " + result_str(r);
        expect_stream_goes_on(s.s, "an allreduce with different FIFO sizes");
        std::vector<char> got = buf.download();
        int64_t ranks_sum = int64_t(world_size()) * (world_size() + 1) / 2;
        for (size_t i = 0; i < count && why.empty(); ++i) {
            if (load(got.data(), i, vcclInt32) != double(ranks_sum * int64_t(i + 1)))
                why = "count " + std::to_string(count) + " element " + std::to_string(i) + " wrong";
        }
    }
    vcclCommDestroy(comm);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* `calls` low-latency allreduces in one group, of which rank 0's first fails before its launch (host side): the
 * others' kernels must neither wait for rank 0 nor pair with its next call. Rank 0 then leaves the rest of the
 * group out, which must be given up too (their kernels waited for it), the peers are told and report it, and
 * destroy must not wait for kernels that never ran (it waited VCCL_OP_TIMEOUT_MS for the last call's number,
 * given up). Returns what went wrong on this rank. */
std::string given_up_on_the_host(int calls, size_t count = 16) {
    vcclComm_t comm = make_comm(CommKind::Mpi);
    if (comm == nullptr) return "no communicator";
    Stream s;
    std::vector<std::unique_ptr<DevBuf>> bufs;
    for (int c = 0; c < calls; ++c) bufs.push_back(std::make_unique<DevBuf>(count * 4));
    std::string why;
    const bool failing = world_rank() == 0;
    if (failing && vccl::testing::fail_next_ll(comm) != vcclSuccess) why = "test hook refused";
    vcclGroupStart();
    for (auto& b : bufs) vcclAllReduce(b->ptr(), b->ptr(), count, vcclFloat32, vcclSum, comm, s.s);
    vcclResult_t r = vcclGroupEnd();
    if (failing && r == vcclSuccess && why.empty()) why = "the failing call returned success";
    if (!failing && r != vcclSuccess && why.empty()) why = "the call failed on the host: " + result_str(r);
    expect_stream_goes_on(s.s, "low-latency allreduces that another rank gave up");
    if (!failing && why.empty()) {
        vcclResult_t async = vcclSuccess;
        if (vcclCommGetAsyncError(comm, &async) != vcclSuccess || async != vcclRemoteError) {
            why = "vcclCommGetAsyncError reported " + result_str(async) + ", not vcclRemoteError";
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    vcclResult_t end = vcclCommDestroy(comm);
    double took = MPI_Wtime() - t0;
    if (end != vcclSuccess && why.empty()) why = "destroy failed: " + result_str(end);
    if (took > 3.0 && why.empty()) why = "destroy took " + std::to_string(took) + " s";
    return why;
}

TEST(GpuLl, CallGivenUpOnTheHostTellsThePeers) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    if (ll_bytes() < 64) GTEST_SKIP() << "needs VCCL_ALLREDUCE_LL_BYTES >= 64";
    std::string why = given_up_on_the_host(1);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

TEST(GpuLl, GroupGivenUpOnTheHostTellsThePeersOfEveryCall) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    if (ll_bytes() < 64) GTEST_SKIP() << "needs VCCL_ALLREDUCE_LL_BYTES >= 64";
    std::string why = given_up_on_the_host(2);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* As above with allreduces on the chunked kernel (above VCCL_ALLREDUCE_LL_BYTES). */
TEST(GpuChunked, GroupGivenUpOnTheHostTellsThePeersOfEveryCall) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    if (ll_bytes() < 64) GTEST_SKIP() << "needs VCCL_ALLREDUCE_LL_BYTES >= 64";
    std::string why = given_up_on_the_host(2, ll_bytes() / 4 * 3 + 5);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

TEST(GpuLl, MismatchedCountsAreReportedWithoutBlocking) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    size_t count = 16 * size_t(world_rank() + 1);
    if (ll_bytes() < 64 * size_t(world_size())) GTEST_SKIP() << "needs a larger VCCL_ALLREDUCE_LL_BYTES"; // same on every rank
    vcclComm_t comm = make_comm(CommKind::Mpi);
    ASSERT_ALL_RANKS(comm != nullptr);
    std::string why = mismatch_reported(comm, count);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* CUDA's per-thread "last error" belongs to the application: PyTorch checks it after its own kernel launches.
 * A vccl call must leave none of its own there, and an error the application left (here a launch it never
 * checked) must neither be taken for vccl's own kernel launch failing nor be cleared or replaced. Each size once
 * after a clean state, once after such an error on rank 0. vccl links the CUDA runtime statically, so its last
 * error is not the application's and this holds by construction (the test would pass even if vccl's launches did
 * not report their own errors); the test keeps it so if that ever changes. */
TEST(GpuKernels, CallsLeaveTheApplicationsCudaErrorAlone) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    vcclComm_t comm = make_comm(CommKind::Mpi); // its own: a failure here must not spoil the shared one
    ASSERT_ALL_RANKS(comm != nullptr);
    Stream s;
    std::string why;
    // The low-latency size (when on), one shot, and a ring-sized one.
    for (size_t count : {size_t(16), size_t(16 << 10), size_t(1 << 20)}) {
        for (bool stale : {false, true}) {
            const std::string what = "count " + std::to_string(count) + (stale ? " after an error: " : ": ");
            std::vector<char> in(count * 4);
            for (size_t i = 0; i < count; ++i) store_int(in.data(), i, vcclInt32, int64_t(world_rank() + 1) * int64_t(i % 1000 + 1));
            DevBuf buf(in.size());
            buf.upload(in);
            cudaGetLastError();
            cudaError_t before = cudaSuccess;
            if (stale && world_rank() == 0) {
                before = vt_leave_launch_error(s.s);
                if (before == cudaSuccess && why.empty()) why = "the test's failing launch left no error behind";
            }
            vcclResult_t r = vcclAllReduce(buf.ptr(), buf.ptr(), count, vcclInt32, vcclSum, comm, s.s);
            cudaError_t after = cudaPeekAtLastError();
            if (r != vcclSuccess && why.empty()) why = what + "the call returned " + result_str(r);
            if (after != before && why.empty()) {
                why = what + "CUDA's last error was \"" + cudaGetErrorString(before) + "\" before the call and \"" +
                      cudaGetErrorString(after) + "\" after it";
            }
            cudaGetLastError();
            expect_stream_goes_on(s.s, "an allreduce after an unrelated CUDA error");
            std::vector<char> got = buf.download();
            int64_t ranks_sum = int64_t(world_size()) * (world_size() + 1) / 2;
            for (size_t i = 0; i < count && why.empty(); ++i) {
                if (load(got.data(), i, vcclInt32) != double(ranks_sum * int64_t(i % 1000 + 1)))
                    why = what + "element " + std::to_string(i) + " wrong";
            }
            vcclResult_t async = vcclSuccess;
            if (vcclCommGetAsyncError(comm, &async) != vcclSuccess || async != vcclSuccess) {
                if (why.empty()) why = what + "vcclCommGetAsyncError reported " + result_str(async);
            }
        }
    }
    int ok = why.empty() ? 1 : 0, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all_ok) {
        vcclCommDestroy(comm);
    } else {
        vcclCommAbort(comm); // a peer may wait for a transfer that never comes
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

#if VTEST_HAVE_CUPTI
std::atomic<int> g_launches{0}, g_host_functions{0};

void CUPTIAPI on_driver_call(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void* data) {
    const auto* info = static_cast<const CUpti_CallbackData*>(data);
    if (info->callbackSite != CUPTI_API_ENTER || info->functionName == nullptr) return;
    const char* f = info->functionName;
    if (strncmp(f, "cuLaunchHostFunc", 16) == 0) ++g_host_functions;
    else if (strncmp(f, "cuLaunch", 8) == 0 || strncmp(f, "cuGraphLaunch", 13) == 0) ++g_launches;
}

TEST(GpuP2p, NoKernelNoHostFunctionDuringSendRecv) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    CUpti_SubscriberHandle sub;
    bool subscribed = cuptiSubscribe(&sub, reinterpret_cast<CUpti_CallbackFunc>(on_driver_call), nullptr) ==
                      CUPTI_SUCCESS;
    ASSERT_ALL_RANKS_WHY(subscribed, std::string("cuptiSubscribe failed"));
    cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API);
    Stream s;
    // The counter must see libvccl's own launches: an AllReduce on device memory runs a reduction kernel.
    DevBuf a(4096), b(4096);
    cudaMemset(a.ptr(), 0, 4096);
    cudaDeviceSynchronize();
    g_launches = 0;
    vcclResult_t rc = vcclAllReduce(a.ptr(), b.ptr(), 1024, vcclFloat32, vcclSum, comm, s.s);
    cudaStreamSynchronize(s.s);
    int seen = g_launches.load();
    EXPECT_ALL_RANKS_WHY(rc == vcclSuccess && seen > 0,
                         "AllReduce returned " + result_str(rc) + ", " + std::to_string(seen) + " launches counted")
        << "the launch counter does not see libvccl's kernels, so the check below would prove nothing";
    std::string first_failure;
    for (size_t bytes : {size_t(8), size_t(4096), size_t(1 << 20), size_t(64 << 20)}) {
        DevBuf send(bytes), recv(bytes);
        cudaDeviceSynchronize();
        g_launches = 0;
        g_host_functions = 0;
        int rank = world_rank(), n = world_size();
        for (int it = 0; it < 10; ++it) {
            vcclGroupStart();
            vcclSend(send.ptr(), bytes, vcclUint8, (rank + 1) % n, comm, s.s);
            vcclRecv(recv.ptr(), bytes, vcclUint8, (rank + n - 1) % n, comm, s.s);
            if (vcclGroupEnd() != vcclSuccess && first_failure.empty()) first_failure = "vcclGroupEnd failed";
        }
        cudaStreamSynchronize(s.s);
        if ((g_launches != 0 || g_host_functions != 0) && first_failure.empty()) {
            first_failure = std::to_string(bytes) + " bytes: " + std::to_string(g_launches.load()) + " kernel launches, " +
                            std::to_string(g_host_functions.load()) + " host functions in 10 send/recv";
        }
    }
    cuptiUnsubscribe(sub);
    EXPECT_ALL_RANKS_WHY(first_failure.empty(), first_failure);
}

/* What the device ran, from CUPTI's activity records: the test above counts the launches the host asks for,
 * which would miss a copy the driver itself runs as a kernel (a graph's copy node does: docs/PERFORMANCE.md,
 * "What limits small send/recv"). The staging FIFO's receive copy and a send to oneself are copies within one GPU. */
struct DeviceActivity {
    int kernels = 0, memcpys = 0;
    std::string kernel_names;
    std::vector<uint32_t> kernel_streams;        // CUPTI's stream id of each kernel (CUDA 13 records only)
    std::map<uint32_t, uint32_t> stream_priority; // streams created meanwhile: id -> priority (as CUPTI stores it)
};
std::mutex g_activity_mutex; // CUPTI hands buffers over on its own thread
DeviceActivity g_activity;

void CUPTIAPI activity_buffer_requested(uint8_t** buf, size_t* size, size_t* max_records) {
    *size = size_t(1) << 20;
    *buf = static_cast<uint8_t*>(aligned_alloc(8, *size));
    *max_records = 0;
}

void CUPTIAPI activity_buffer_completed(CUcontext, uint32_t, uint8_t* buf, size_t, size_t valid) {
    CUpti_Activity* rec = nullptr;
    std::lock_guard<std::mutex> lock(g_activity_mutex);
    while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            ++g_activity.kernels;
#if defined(CUPTI_API_VERSION) && CUPTI_API_VERSION >= 130000 // CUpti_ActivityKernel10: the CUDA 13 record
            const char* name = reinterpret_cast<const CUpti_ActivityKernel10*>(rec)->name;
#else
            const char* name = nullptr; // older records differ in layout: count only
#endif
            if (g_activity.kernel_names.size() < 300) g_activity.kernel_names += std::string(" ") + (name ? name : "?");
#if defined(CUPTI_API_VERSION) && CUPTI_API_VERSION >= 130000
            g_activity.kernel_streams.push_back(reinterpret_cast<const CUpti_ActivityKernel10*>(rec)->streamId);
#endif
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            ++g_activity.memcpys;
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_STREAM) {
            const auto* st = reinterpret_cast<const CUpti_ActivityStream*>(rec);
            g_activity.stream_priority[st->streamId] = st->priority;
        }
    }
    free(buf);
}

/* Device activity of `work` (run, then its stream synchronised by the caller): kernels, copies, kernel names. */
DeviceActivity activity_of(const std::function<void()>& work) {
    cuptiActivityFlushAll(1);
    {
        std::lock_guard<std::mutex> lock(g_activity_mutex);
        g_activity = DeviceActivity();
    }
    work();
    cuptiActivityFlushAll(1);
    std::lock_guard<std::mutex> lock(g_activity_mutex);
    return g_activity;
}

/* Once per process: CUPTI takes one pair of buffer callbacks. */
bool activity_callbacks_registered() {
    static bool registered = cuptiActivityRegisterCallbacks(activity_buffer_requested, activity_buffer_completed) ==
                             CUPTI_SUCCESS;
    return registered;
}

/* CUPTI activity records of `kinds` while in scope; disabled and flushed on every way out, an assertion's early
 * return included, so later tests run without them. */
class ActivityRecords {
public:
    explicit ActivityRecords(std::initializer_list<CUpti_ActivityKind> kinds) : kinds_(kinds) {
        for (CUpti_ActivityKind k : kinds_) enabled_ = cuptiActivityEnable(k) == CUPTI_SUCCESS && enabled_;
    }
    ~ActivityRecords() {
        for (CUpti_ActivityKind k : kinds_) cuptiActivityDisable(k);
        cuptiActivityFlushAll(1);
    }
    bool enabled() const { return enabled_; }

private:
    std::vector<CUpti_ActivityKind> kinds_;
    bool enabled_ = true;
};

TEST(GpuP2p, DeviceRunsNoKernelForSendRecv) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    ASSERT_ALL_RANKS_WHY(activity_callbacks_registered(), std::string("cuptiActivityRegisterCallbacks failed"));
    ActivityRecords records({CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY});
    ASSERT_ALL_RANKS_WHY(records.enabled(), std::string("cuptiActivityEnable failed"));
    Stream s;
    const int rank = world_rank(), n = world_size();
    // The records must show libvccl's kernels: an AllReduce on device memory runs one.
    DevBuf a(4096), b(4096);
    cudaMemset(a.ptr(), 0, 4096);
    cudaDeviceSynchronize();
    vcclResult_t rc = vcclInternalError;
    DeviceActivity seen = activity_of([&] {
        rc = vcclAllReduce(a.ptr(), b.ptr(), 1024, vcclFloat32, vcclSum, comm, s.s);
        cudaStreamSynchronize(s.s);
    });
    EXPECT_ALL_RANKS_WHY(rc == vcclSuccess && seen.kernels > 0,
                         "AllReduce returned " + result_str(rc) + ", " + std::to_string(seen.kernels) + " kernel records")
        << "the records do not show libvccl's kernels, so the check below would prove nothing";
    std::string first_failure;
    for (size_t bytes : {size_t(8), size_t(4096), size_t(1 << 20), size_t(64 << 20)}) {
        DevBuf send(bytes), recv(bytes), self_recv(bytes);
        cudaDeviceSynchronize();
        DeviceActivity act = activity_of([&] {
            for (int it = 0; it < 10; ++it) {
                vcclGroupStart();
                vcclSend(send.ptr(), bytes, vcclUint8, (rank + 1) % n, comm, s.s);
                vcclRecv(recv.ptr(), bytes, vcclUint8, (rank + n - 1) % n, comm, s.s);
                vcclSend(send.ptr(), bytes, vcclUint8, rank, comm, s.s); // to oneself: a copy within the GPU
                vcclRecv(self_recv.ptr(), bytes, vcclUint8, rank, comm, s.s);
                if (vcclGroupEnd() != vcclSuccess && first_failure.empty()) first_failure = "vcclGroupEnd failed";
            }
            cudaStreamSynchronize(s.s);
        });
        if (first_failure.empty() && act.kernels != 0) {
            first_failure = std::to_string(bytes) + " bytes: the device ran " + std::to_string(act.kernels) +
                            " kernels in 10 send/recv:" + act.kernel_names;
        } else if (first_failure.empty() && act.memcpys < 10) {
            first_failure = std::to_string(bytes) + " bytes: only " + std::to_string(act.memcpys) +
                            " copy records in 10 send/recv with a send to oneself each (the records miss copies)";
        }
    }
    EXPECT_ALL_RANKS_WHY(first_failure.empty(), first_failure);
}

/* What CUDA runs for replays of captured send/recv (vccl launches no kernel: the graph holds stream memory operations
 * and one copy per transfer; CUDA may run a graph's copy to a peer GPU as a kernel of its own). The results are
 * checked; the records must show every replay's copy as a copy or a kernel; what they show is printed. */
TEST(GpuP2p, CapturedSendRecvReplaysShowTheirCopies) {
    vcclComm_t comm = gpu_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    const char* direct = getenv("VCCL_P2P_DIRECT");
    if (direct != nullptr && std::string(direct) == "0") GTEST_SKIP() << "VCCL_P2P_DIRECT=0: nothing is captured";
    ASSERT_ALL_RANKS_WHY(activity_callbacks_registered(), std::string("cuptiActivityRegisterCallbacks failed"));
    Stream s;
    const int rank = world_rank(), n = world_size();
    std::string why;
    for (size_t bytes : {size_t(8), size_t(32768), size_t(1 << 20)}) {
        DevBuf send(bytes), recv(bytes);
        std::vector<char> mine(bytes);
        for (size_t i = 0; i < bytes; ++i) mine[i] = char((i * 7 + size_t(rank) * 13) & 0x7f);
        send.upload(mine);
        cudaGraphExec_t exec = capture(s.s, cudaStreamCaptureModeThreadLocal, [&] {
            vcclGroupStart();
            vcclResult_t a = vcclSend(send.ptr(), bytes, vcclUint8, (rank + 1) % n, comm, s.s);
            vcclResult_t b = vcclRecv(recv.ptr(), bytes, vcclUint8, (rank + n - 1) % n, comm, s.s);
            return call_failure(comm, {a, b, vcclGroupEnd()});
        }, &why);
        if (exec == nullptr) break;
        DeviceActivity act;
        {
            ActivityRecords records({CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY});
            if (!records.enabled()) why = "cuptiActivityEnable failed";
            act = activity_of([&] {
                for (int it = 0; it < 10; ++it) cudaGraphLaunch(exec, s.s);
                cudaStreamSynchronize(s.s);
            });
        }
        cudaGraphExecDestroy(exec);
        const int from = (rank + n - 1) % n;
        std::vector<char> got = recv.download();
        for (size_t i = 0; i < bytes && why.empty(); ++i) {
            if (got[i] != char((i * 7 + size_t(from) * 13) & 0x7f)) why = std::to_string(bytes) + " bytes: byte " + std::to_string(i) + " wrong";
        }
        if (why.empty() && act.kernels + act.memcpys < 10) {
            why = std::to_string(bytes) + " bytes: 10 replays left " + std::to_string(act.kernels + act.memcpys) +
                  " copy or kernel records (the records miss the copies)";
        }
        if (rank == 0) {
            printf("[rank 0] %zu bytes, 10 replays of a captured send/recv: %d kernel records, %d copy records%s%s\n",
                   bytes, act.kernels, act.memcpys, act.kernels > 0 ? ", kernels:" : "", act.kernel_names.c_str());
        }
        if (!why.empty()) break;
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

#if defined(CUPTI_API_VERSION) && CUPTI_API_VERSION >= 130000
/* A call on a high-priority stream (what PyTorch can give its communication streams) must not run part of its work
 * at the default priority: the reduction kernels of an AllReduce in pieces run on the communicator's second stream
 * (device/side_stream.h), which takes the caller's stream's priority. Beside a GEMM that holds every SM, a kernel
 * at the default priority waits behind the GEMM's queued blocks. CUPTI's records give each kernel's stream and the
 * priority of the streams created while they are on; the communicator is made inside the records, so its second
 * streams are too. Copy engines and pieces of 64 KiB, so the pieces' reductions run there. */
TEST(GpuStreamPriority, SecondStreamTakesTheCallersPriority) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    int least = 0, greatest = 0;
    ASSERT_ALL_RANKS(cudaDeviceGetStreamPriorityRange(&least, &greatest) == cudaSuccess);
    ASSERT_ALL_RANKS(greatest < least); // every GPU since Kepler has more than one priority
    ASSERT_ALL_RANKS_WHY(activity_callbacks_registered(), std::string("cuptiActivityRegisterCallbacks failed"));
    ActivityRecords records({CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_STREAM});
    ASSERT_ALL_RANKS_WHY(records.enabled(), std::string("cuptiActivityEnable failed"));
    const size_t elems = 600000; // 2.4 MB in pieces (VCCL_REDUCE_PIPELINE_BYTES=64K): 2 for an AllReduce
    DevBuf a(elems * 4), b(elems * 4);
    ASSERT_ALL_RANKS(a.base != nullptr && b.base != nullptr);
    cudaMemset(a.ptr(), 0, elems * 4);
    cudaDeviceSynchronize();
    std::string why;
    for (bool high : {true, false}) {
        if (!vtest::all_ranks_ok(why.empty())) break; // every rank leaves together: the loop body is collective
        const int priority = high ? greatest : least;
        cudaStream_t caller = nullptr;
        CUcontext ctx = nullptr;
        uint32_t caller_id = 0;
        decltype(&cuCtxGetCurrent) get_ctx = nullptr; // the test does not link the driver library
        cudaDriverEntryPointQueryResult q;
        bool made = cudaStreamCreateWithPriority(&caller, cudaStreamNonBlocking, priority) == cudaSuccess &&
                    cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", reinterpret_cast<void**>(&get_ctx), 12000,
                                                     cudaEnableDefault, &q) == cudaSuccess &&
                    q == cudaDriverEntryPointSuccess && get_ctx(&ctx) == CUDA_SUCCESS &&
                    cuptiGetStreamIdEx(ctx, caller, 0, &caller_id) == CUPTI_SUCCESS;
        ASSERT_ALL_RANKS_WHY(made, std::string("cannot make a stream of priority ") + std::to_string(priority) +
                                       " or learn CUPTI's id of it");
        vcclResult_t rc = vcclInternalError;
        DeviceActivity act = activity_of([&] {
            vcclComm_t comm = comm_with_env({{"VCCL_ALLREDUCE_LL_BYTES", "0"},
                                             {"VCCL_ALLREDUCE_KERNEL_BYTES", "0"},
                                             {"VCCL_REDUCE_PIPELINE_BYTES", "64K"}});
            if (vtest::all_ranks_ok(comm != nullptr)) { // a rank without one would leave the others waiting
                rc = vcclAllReduce(a.ptr(), b.ptr(), elems, vcclUint32, vcclSum, comm, caller);
                cudaStreamSynchronize(caller);
            }
            if (comm != nullptr) vcclCommDestroy(comm);
        });
        cudaStreamDestroy(caller);
        std::string label = high ? "caller's stream at the greatest priority" : "caller's stream at the default priority";
        int elsewhere = 0;
        for (uint32_t id : act.kernel_streams) {
            if (id == caller_id) continue;
            ++elsewhere;
            auto it = act.stream_priority.find(id);
            if (it == act.stream_priority.end()) {
                why = label + ": a kernel ran on stream " + std::to_string(id) + ", not made during the call";
            } else if (it->second != uint32_t(priority)) {
                why = label + ": a kernel ran on the second stream at priority " + std::to_string(int32_t(it->second)) +
                      ", want " + std::to_string(priority);
            }
        }
        if (why.empty() && rc != vcclSuccess) why = label + ": AllReduce returned " + result_str(rc);
        if (why.empty() && elsewhere == 0)
            why = label + ": no kernel ran beside the caller's stream (" + std::to_string(act.kernel_streams.size()) +
                  " kernels in all), so this test checks nothing";
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}
#else
TEST(GpuStreamPriority, SecondStreamTakesTheCallersPriority) {
    GTEST_SKIP() << "needs CUPTI 13 (CUDA 13) activity records to see each kernel's stream";
}
#endif
#endif

/* Staged collectives larger than VCCL_STAGING_CHUNK_BYTES run as pieces whose copies overlap the network
 * (transport/staging/staged_pieces.h; AllGather, ReduceScatter and AlltoAll by columns of every rank's block,
 * algo/staged_layout.h), and both staging paths must cut them alike: here rank 0 stages
 * synchronously (VCCL_STAGING_ASYNC=0) and the others through the queue, with 64 KiB pieces, at counts below,
 * at and just past piece boundaries, in and out of place, checked against the reference. Cut differently, the
 * ranks would run different collectives (wrong data or a timeout). On the direct path a plain correctness run. */
TEST(GpuAsync, PiecesAgreeBetweenStagingPaths) {
    std::vector<std::pair<const char*, const char*>> vars = {{"VCCL_STAGING_CHUNK_BYTES", "64K"}};
    if (world_rank() == 0) vars.push_back({"VCCL_STAGING_ASYNC", "0"});
    vcclComm_t comm = comm_with_env(vars);
    ASSERT_ALL_RANKS(comm != nullptr);
    Stream s;
    Sweep sweep;
    const int last = world_size() - 1;
    const size_t piece = 16384; // float32 elements in 64 KiB
    for (size_t count : {size_t(0), size_t(1), piece - 1, piece, piece + 1, 3 * piece + 5, size_t(100003)}) {
        for (bool in_place : {false, true}) {
            std::string tail = " count " + std::to_string(count) + (in_place ? " in place" : "");
            sweep.run("AllReduce float32 sum" + tail,
                      [&] { return run_reduction(comm, s.s, Red::AllReduce, vcclFloat32, vcclSum, count, in_place, 0); });
            sweep.run("AllReduce float16 avg" + tail,
                      [&] { return run_reduction(comm, s.s, Red::AllReduce, vcclFloat16, vcclAvg, 2 * count, in_place, 0); });
            sweep.run("Reduce int64 prod root last" + tail,
                      [&] { return run_reduction(comm, s.s, Red::Reduce, vcclInt64, vcclProd, count / 2 + 1, in_place, last); });
            sweep.run("Broadcast uint8 root last" + tail,
                      [&] { return run_move(comm, s.s, Move::Broadcast, vcclUint8, 4 * count + 3, in_place, last); });
            sweep.run("Broadcast float64 root 0" + tail,
                      [&] { return run_move(comm, s.s, Move::Broadcast, vcclFloat64, count / 2, in_place, 0); });
            // Per-rank counts: a piece holds the same elements of every rank's block (n columns of 64 KiB in all).
            size_t per_rank = count / size_t(world_size()) + 1;
            const Red rs = Red::ReduceScatter;
            sweep.run("ReduceScatter int32 max" + tail,
                      [&] { return run_reduction(comm, s.s, rs, vcclInt32, vcclMax, per_rank, in_place, 0); });
            sweep.run("ReduceScatter bfloat16 sum" + tail, [&] {
                return run_reduction(comm, s.s, rs, vcclBfloat16, vcclSum, 2 * per_rank + 1, in_place, 0);
            });
            sweep.run("AllGather uint8" + tail,
                      [&] { return run_move(comm, s.s, Move::AllGather, vcclUint8, 4 * per_rank + 3, in_place, 0); });
            sweep.run("AllGather float64" + tail,
                      [&] { return run_move(comm, s.s, Move::AllGather, vcclFloat64, per_rank / 2, in_place, 0); });
            sweep.run("AlltoAll float16" + tail, [&] { // in place too: vccl.h supports it (NCCL does not)
                return run_move(comm, s.s, Move::AlltoAll, vcclFloat16, 2 * per_rank + 1, in_place, 0);
            });
        }
    }
    EXPECT_ALL_RANKS_WHY(sweep.first_failure.empty(), sweep.first_failure) << sweep.cases << " cases";
    vcclCommDestroy(comm);
}

} // namespace
