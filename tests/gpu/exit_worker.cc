/* SPDX-License-Identifier: BSD-3-Clause */
/* One job of the exit test (tests/gpu/np2_shared_gpu_exit.sh): each rank aborts its communicator with device
 * work still queued behind a blocked stream, so that the abort hands the communicator's GPU state (peer
 * mappings, flag memory, scratch) to a teardown thread that waits for that work. The process then exits while
 * that thread waits for the stream (DELAY_US < 0: the stream stays blocked), or soon after the stream was let go
 * (DELAY_US >= 0: the thread may be freeing as the process exits). The process must exit with status 0 and
 * neither crash nor hang, racing CUDA's own teardown at exit (docs/RELIABILITY.md, "Abort, destroy and process exit").
 * Usage: exit_worker DELAY_US [HOLD_MS]. HOLD_MS: the teardown threads hold that long once they begin freeing
 * (libvccl's test hook, looked up at run time so that a library without it can still be tested; "hook: none"
 * when it has none), so that the exit surely finds them freeing; the library says on stderr when each one has
 * finished. Exit status: 0, or 1 with a line saying what failed before the exit. */
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "gpu_kernels.h"
#include "vccl.h"
#include "testing/test_hooks.h"
#include "vccl_mpi.h"

namespace {

int rank = 0;

bool ok(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return true;
    fprintf(stderr, "[rank %d] %s: %s\n", rank, what, cudaGetErrorString(e));
    return false;
}

bool ok(vcclResult_t r, const char* what) {
    if (r == vcclSuccess) return true;
    fprintf(stderr, "[rank %d] %s: %s (%s)\n", rank, what, vcclGetErrorString(r), vcclGetLastError(nullptr));
    return false;
}

/* Both ranks send `bytes` to each other on `s` in one group. */
bool exchange(vcclComm_t comm, const void* send, void* recv, size_t bytes, int peer, cudaStream_t s) {
    vcclResult_t g = vcclGroupStart();
    vcclResult_t x = vcclSend(send, bytes, vcclUint8, peer, comm, s);
    vcclResult_t y = vcclRecv(recv, bytes, vcclUint8, peer, comm, s);
    vcclResult_t e = vcclGroupEnd();
    return ok(g, "vcclGroupStart") && ok(x, "vcclSend") && ok(y, "vcclRecv") && ok(e, "vcclGroupEnd");
}

} // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const long delay_us = argc > 1 ? atol(argv[1]) : -1;
    const int hold_ms = argc > 2 ? atoi(argv[2]) : 0;
    if (hold_ms > 0) {
        vccl::testing::hold_teardown_ms(hold_ms);
        printf("[rank %d] hook: teardown threads hold\n", rank);
    }
    int devices = 0;
    if (size != 2 || !ok(cudaGetDeviceCount(&devices), "cudaGetDeviceCount") || devices < 1) {
        fprintf(stderr, "[rank %d] needs 2 ranks and a GPU\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const bool share = getenv("VTEST_GPU_SHARE") != nullptr && atoi(getenv("VTEST_GPU_SHARE")) != 0;
    const int peer = 1 - rank;
    const size_t bytes = size_t(1) << 20;
    bool good = ok(cudaSetDevice(share ? 0 : rank % devices), "cudaSetDevice");
    vcclComm_t comm = nullptr;
    good = good && ok(vcclCommInitMPI(&comm, MPI_COMM_WORLD, nullptr), "vcclCommInitMPI");
    cudaStream_t s = nullptr;
    void *send = nullptr, *recv = nullptr;
    unsigned* gate = nullptr;
    unsigned* gate_dev = nullptr;
    good = good && ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate") &&
           ok(cudaMalloc(&send, bytes), "cudaMalloc") && ok(cudaMalloc(&recv, bytes), "cudaMalloc") &&
           ok(cudaMemset(send, rank + 1, bytes), "cudaMemset") &&
           ok(cudaHostAlloc((void**)&gate, sizeof(unsigned), cudaHostAllocMapped), "cudaHostAlloc") &&
           ok(cudaHostGetDevicePointer((void**)&gate_dev, gate, 0), "cudaHostGetDevicePointer");
    // One exchange that completes, so that each rank maps its peer's buffer (the teardown lets it go).
    good = good && exchange(comm, send, recv, bytes, peer, s) && ok(cudaStreamSynchronize(s), "first exchange");
    if (good) {
        std::vector<unsigned char> got(bytes);
        good = ok(cudaMemcpy(got.data(), recv, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
        for (size_t i = 0; good && i < bytes; ++i) {
            if (got[i] != peer + 1) {
                fprintf(stderr, "[rank %d] first exchange: byte %zu is %d, not %d\n", rank, i, got[i], peer + 1);
                good = false;
            }
        }
    }
    if (good) *(volatile unsigned*)gate = 0;
    // The second exchange waits behind the gate: the abort finds its work pending.
    good = good && ok(vt_wait_flag(gate_dev, s), "gate kernel") && exchange(comm, send, recv, bytes, peer, s);
    int all_good = 0, mine = good ? 1 : 0;
    MPI_Allreduce(&mine, &all_good, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (comm != nullptr && !ok(vcclCommAbort(comm), "vcclCommAbort")) all_good = 0;
    if (delay_us >= 0 && gate != nullptr) {
        *(volatile unsigned*)gate = 1; // the kernel ends, the exchange runs, the teardown thread frees
        std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    } else if (gate != nullptr) {
        // Should CUDA's exit wait for the blocked kernel, the job ends 3 s later rather than never.
        std::thread([gate] {
            std::this_thread::sleep_for(std::chrono::seconds(3));
            *(volatile unsigned*)gate = 1;
        }).detach();
    }
    printf("[rank %d] aborted with device work pending; exiting %s\n", rank,
           delay_us < 0 ? "with the stream blocked" : "after letting the stream go");
    fflush(stdout);
    MPI_Finalize();
    // Nothing freed here on purpose: the process's exit is what races the teardown thread. A blocked kernel at
    // exit is CUDA's to end (the process's context goes with it).
    return all_good ? 0 : 1;
}
