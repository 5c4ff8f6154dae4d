/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device-memory tests of the direct path's mappings of peers' receive buffers shared by several communicators
 * of one process (part of tests/gpu/test_gpu; test_gpu.cc lists them all). A framework has one communicator
 * per parallel group, and two of them may send into the same buffer of the same peer process. CUDA maps a
 * buffer once per process (opening a handle again counts a reference and returns the same address) and
 * refuses to map a range that is still mapped under another handle.
 */
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "mpi_gtest_main.h"
#include "test_util.h"

using namespace vtest;
using namespace vgpu;

namespace {

/* Rank 1 sends `bytes` of `value` to rank 0 over `comm`; rank 0 receives into `dst`. Empty: delivered right. */
std::string send_one(vcclComm_t comm, void* dst, size_t bytes, char value, cudaStream_t s) {
    const int rank = world_rank();
    std::string why;
    if (rank == 1) {
        DevBuf src(bytes);
        src.upload(std::vector<char>(bytes, value));
        vcclResult_t r = vcclSend(src.ptr(), bytes, vcclUint8, 0, comm, s);
        cudaError_t e = r == vcclSuccess ? cudaStreamSynchronize(s) : cudaSuccess;
        if (r != vcclSuccess) why = "send: " + result_str(r) + " (" + vcclGetLastError(comm) + ")";
        if (e != cudaSuccess) why = "send's stream: " + cuda_str(e);
    } else if (rank == 0) {
        cudaMemset(dst, 0, bytes);
        cudaDeviceSynchronize();
        vcclResult_t r = vcclRecv(dst, bytes, vcclUint8, 1, comm, s);
        cudaError_t e = r == vcclSuccess ? cudaStreamSynchronize(s) : cudaSuccess;
        if (r != vcclSuccess) why = "receive: " + result_str(r) + " (" + vcclGetLastError(comm) + ")";
        if (e != cudaSuccess) why = "receive's stream: " + cuda_str(e);
        if (why.empty()) {
            std::vector<char> got(bytes);
            cudaMemcpy(got.data(), dst, bytes, cudaMemcpyDeviceToHost);
            size_t wrong = 0;
            for (char c : got) wrong += c != value;
            if (wrong > 0) why = std::to_string(wrong) + " of " + std::to_string(bytes) + " bytes wrong";
        }
    }
    return why;
}

/* Two communicators send into one receive buffer of rank 0; rank 0 frees it and makes a new one at the same
 * address (what a caching allocator's empty_cache and the next allocation do); both communicators send into
 * the new one. Rank 1 holds two references to the old buffer's mapping, one per communicator: the first
 * communicator to find it stale must not be refused the new buffer because the other still holds the old. */
TEST(GpuP2p, TwoCommunicatorsSendIntoABufferFreedAndMadeAgain) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    const int rank = world_rank();
    vcclComm_t a = make_comm(CommKind::Mpi), b = make_comm(CommKind::Mpi);
    ASSERT_ALL_RANKS(a != nullptr && b != nullptr);
    const size_t bytes = std::max(size_t(4) << 20, 2 * fifo_bytes()); // a rendezvous transfer, not the FIFO
    Stream s;
    void* first = nullptr;
    if (rank == 0 && cudaMalloc(&first, bytes) != cudaSuccess) first = nullptr;
    ASSERT_ALL_RANKS(rank != 0 || first != nullptr);
    std::string why;
    const long long direct_before = vccl::testing::direct_sends(a) + vccl::testing::direct_sends(b);
    // Both communicators on every rank whatever the first gave (only rank 0 checks the data): a rank that left
    // one out would leave its peer's call waiting.
    for (vcclComm_t c : {a, b}) {
        std::string one = send_one(c, first, bytes, c == a ? 1 : 2, s.s);
        if (why.empty()) why = one;
    }
    const long long direct = vccl::testing::direct_sends(a) + vccl::testing::direct_sends(b) - direct_before;
    int took_direct = rank != 1 || direct == 2 ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &took_direct, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    int same_address = 1;
    void* second = nullptr;
    if (rank == 0) {
        cudaFree(first);
        if (cudaMalloc(&second, bytes) != cudaSuccess) second = nullptr;
        same_address = second != nullptr && second == first ? 1 : 0;
    }
    MPI_Bcast(&same_address, 1, MPI_INT, 0, MPI_COMM_WORLD);
    EXPECT_ALL_RANKS_WHY(why.empty(), "before the buffer was made again: " + why);
    const bool first_ok = all_ranks_ok(why.empty());
    bool ran = false;
    if (first_ok && took_direct && same_address) {
        ran = true;
        for (vcclComm_t c : {a, b}) {
            std::string one = send_one(c, second, bytes, c == a ? 3 : 4, s.s);
            if (why.empty()) why = one;
        }
        EXPECT_ALL_RANKS_WHY(why.empty(), "into the buffer made again at the same address: " + why);
    }
    if (rank == 0 && second != nullptr) cudaFree(second);
    MPI_Barrier(MPI_COMM_WORLD);
    const vcclResult_t end_a = vcclCommDestroy(a), end_b = vcclCommDestroy(b);
    EXPECT_ALL_RANKS(end_a == vcclSuccess && end_b == vcclSuccess);
    if (!ran && !took_direct) GTEST_SKIP() << "the transfers did not take the direct path (nothing is mapped)";
    if (!ran && !same_address) GTEST_SKIP() << "cudaMalloc gave the new buffer another address";
}

} // namespace
