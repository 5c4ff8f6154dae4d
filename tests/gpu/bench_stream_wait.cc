/* SPDX-License-Identifier: BSD-3-Clause */
/* How late a call that waits for its stream returns (src/device/memory.cc, stream_synchronize_watching): a
 * kernel keeps the stream busy for T (plus 0-100 us chosen at random each time, so that where the kernel ends
 * between two polls varies), then a host-memory allreduce on that stream (which waits for the stream before it
 * runs, as documented) is timed against cudaStreamSynchronize plus the same allreduce on a stream already idle.
 * The difference is what the wait adds after the kernel ends; cudaStreamSynchronize itself is a few us late, so
 * small negative figures mean "as soon as it". One rank, GPU 0; prints the median and the 90th percentile of the
 * difference, and fails only if a call fails or its output is not its input (a sum on one rank, out of place).
 * Built by make check, run by hand on a GPU machine:
 *   tests/gpu/bench_stream_wait [REPS]        (REPS per kernel length, default 41) */
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "gpu_kernels.h"
#include "vccl.h"

namespace {

double now_us() {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

bool cuda_ok(cudaError_t e, const char* what) {
    if (e != cudaSuccess) printf("FAIL: %s: %s\n", what, cudaGetErrorString(e));
    return e == cudaSuccess;
}

} // namespace

int main(int argc, char** argv) {
    const int reps = argc > 1 ? std::max(1, atoi(argv[1])) : 41;
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) {
        printf("SKIP: no usable CUDA device\n");
        return 77;
    }
    vcclUniqueId id;
    vcclComm_t comm = nullptr;
    cudaStream_t s = nullptr;
    uint32_t* scratch = nullptr;
    if (!cuda_ok(cudaSetDevice(0), "cudaSetDevice") ||
        !cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate") ||
        !cuda_ok(cudaMalloc(reinterpret_cast<void**>(&scratch), 4096), "cudaMalloc")) {
        return 1;
    }
    if (vcclGetUniqueId(&id) != vcclSuccess || vcclCommInitRank(&comm, 1, id, 0) != vcclSuccess) {
        printf("FAIL: communicator: %s\n", vcclGetLastError(nullptr));
        return 1;
    }
    std::mt19937 rng(12345);
    int wrong = 0;
    // The call to time: one rank's sum out of place, so the output shows that it ran.
    auto call = [&](double in) {
        double out = -1;
        vcclResult_t r = vcclAllReduce(&in, &out, 1, vcclFloat64, vcclSum, comm, s);
        if (r != vcclSuccess || out != in) {
            if (wrong++ == 0) printf("FAIL: allreduce returned %s, output %g for input %g\n", vcclGetErrorString(r), out, in);
        }
    };
    printf("%10s %14s %14s %12s %12s\n", "kernel_us", "sync+call_us", "waiting_us", "added_p50", "added_p90");
    for (unsigned spin_us : {200u, 800u, 1500u, 3000u, 10000u, 30000u}) {
        std::vector<double> reference, waiting, added;
        for (int rep = 0; rep < reps + 2; ++rep) {
            const unsigned jitter = unsigned(rng() % 100);
            // cudaStreamSynchronize, then the call on an idle stream.
            if (!cuda_ok(vt_slow_fill(scratch, 1, 1, spin_us + jitter, s), "kernel launch")) return 1;
            double t0 = now_us();
            if (!cuda_ok(cudaStreamSynchronize(s), "cudaStreamSynchronize")) return 1;
            call(1.5 + rep);
            double t1 = now_us();
            // The call waits for the same kernel itself.
            if (!cuda_ok(vt_slow_fill(scratch, 1, 1, spin_us + jitter, s), "kernel launch")) return 1;
            double t2 = now_us();
            call(2.5 + rep);
            double t3 = now_us();
            if (rep >= 2) { // two warm-up rounds
                reference.push_back(t1 - t0);
                waiting.push_back(t3 - t2);
                added.push_back((t3 - t2) - (t1 - t0));
            }
        }
        printf("%10u %14.1f %14.1f %12.1f %12.1f\n", spin_us, percentile(reference, 0.5), percentile(waiting, 0.5),
               percentile(added, 0.5), percentile(added, 0.9));
    }
    vcclCommDestroy(comm);
    cudaFree(scratch);
    cudaStreamDestroy(s);
    if (wrong != 0) printf("FAIL: %d allreduce calls failed or were wrong\n", wrong);
    return wrong != 0;
}
