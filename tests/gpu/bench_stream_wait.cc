/* How late a call that waits for its stream returns (src/device/memory.cc, stream_synchronize_watching): a
 * kernel keeps the stream busy for T, then a host-memory allreduce on that stream (which waits for the stream
 * before it runs, as documented) is timed against cudaStreamSynchronize plus the same allreduce on a stream
 * already idle. The difference is what the wait adds after the kernel ends. One rank, GPU 0; prints figures,
 * asserts only the allreduce's result. Built by make check, run by hand on a GPU machine:
 *   tests/gpu/bench_stream_wait [REPS]        (median of REPS, default 41) */
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gpu_kernels.h"
#include "vccl.h"

namespace {

double now_us() {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
    const int reps = argc > 1 ? std::max(1, atoi(argv[1])) : 41;
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) {
        printf("SKIP: no usable CUDA device\n");
        return 77;
    }
    cudaSetDevice(0);
    vcclUniqueId id;
    vcclComm_t comm = nullptr;
    if (vcclGetUniqueId(&id) != vcclSuccess || vcclCommInitRank(&comm, 1, id, 0) != vcclSuccess) {
        printf("communicator: %s\n", vcclGetLastError(nullptr));
        return 1;
    }
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    uint32_t* scratch = nullptr;
    cudaMalloc(reinterpret_cast<void**>(&scratch), 4096);
    double value = 0;
    int wrong = 0;
    printf("%10s %16s %16s %12s\n", "kernel_us", "sync+call_us", "waiting_call_us", "added_us");
    for (unsigned spin_us : {200u, 800u, 1500u, 3000u, 10000u, 30000u}) {
        std::vector<double> reference, waiting;
        for (int rep = 0; rep < reps + 2; ++rep) {
            // cudaStreamSynchronize, then the call on an idle stream.
            vt_slow_fill(scratch, 1, 1, spin_us, s);
            double t0 = now_us();
            cudaStreamSynchronize(s);
            value = 1.5;
            vcclAllReduce(&value, &value, 1, vcclFloat64, vcclSum, comm, s);
            double t1 = now_us();
            wrong += value != 1.5;
            // The call waits for the kernel itself.
            vt_slow_fill(scratch, 1, 1, spin_us, s);
            double t2 = now_us();
            value = 2.5;
            vcclResult_t r = vcclAllReduce(&value, &value, 1, vcclFloat64, vcclSum, comm, s);
            double t3 = now_us();
            wrong += r != vcclSuccess || value != 2.5;
            if (rep >= 2) { // two warm-up rounds
                reference.push_back(t1 - t0);
                waiting.push_back(t3 - t2);
            }
        }
        double a = median(reference), b = median(waiting);
        printf("%10u %16.1f %16.1f %12.1f\n", spin_us, a, b, b - a);
    }
    vcclCommDestroy(comm);
    cudaFree(scratch);
    cudaStreamDestroy(s);
    if (wrong != 0) printf("FAIL: %d allreduce results wrong\n", wrong);
    return wrong != 0;
}
