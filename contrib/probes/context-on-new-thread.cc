/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which CUDA call makes GPU 0's primary context active on a thread that never used CUDA, in a process whose work
 * is on GPU 1. vccl makes its communicator's GPU current on such threads (a watchdog calling
 * vcclCommGetAsyncError, a monitor calling vcclCommGetTelemetry); a context created on GPU 0 there takes memory
 * on GPU 0 and fails where GPUs are in exclusive-process mode. The main thread works on GPU 1; each mode then runs
 * its steps in a new thread and prints, after each step, the thread's current context and whether GPU 0's primary
 * context is active:
 *   getdevice  cudaGetDevice alone
 *   scope      cudaSetDevice(1) and a stream, cuCtxSetCurrent(NULL), then cudaGetDevice and a query of that stream
 *   restore0   cudaGetDevice, cudaSetDevice(1), then the device cudaGetDevice returned set back
 * Its result decides how vccl must leave such a thread (GpuTelemetry.CallsFromAThreadWithoutContextCreateNoneOnGpu0
 * in tests/gpu checks the library itself); it has not yet run on a GPU. Needs 2 GPUs. Not built by make:
 *   nvcc -O1 -std=c++17 -o context-on-new-thread contrib/probes/context-on-new-thread.cc
 *   for m in getdevice scope restore0; do ./context-on-new-thread $m; done
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cstdio>
#include <cstring>
#include <thread>
static CUresult (*get_state)(CUdevice, unsigned*, int*);
static CUresult (*get_cur)(CUcontext*);
static CUresult (*set_cur)(CUcontext);
static int active0() { unsigned f; int a = 0; get_state(0, &f, &a); return a; }
static void load() {
    cudaDriverEntryPointQueryResult q;
    cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", (void**)&get_state, 12000, cudaEnableDefault, &q);
    cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", (void**)&get_cur, 12000, cudaEnableDefault, &q);
    cudaGetDriverEntryPointByVersion("cuCtxSetCurrent", (void**)&set_cur, 12000, cudaEnableDefault, &q);
}
int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "getdevice";
    cudaSetDevice(1); cudaFree(0); load();  // main thread on GPU 1, as a rank on GPU 1
    printf("%s: start: gpu0 active %d\n", mode, active0());
    std::thread([&] {
        CUcontext c = nullptr; get_cur(&c);
        printf("  thread: ctx %p gpu0 %d\n", (void*)c, active0());
        int d = -1;
        if (!strcmp(mode, "getdevice")) { cudaGetDevice(&d); printf("  after cudaGetDevice (%d): gpu0 %d\n", d, active0()); }
        if (!strcmp(mode, "scope")) {
            cudaSetDevice(1); get_cur(&c); printf("  after cudaSetDevice(1): ctx %p gpu0 %d\n", (void*)c, active0());
            cudaStream_t s; cudaStreamCreate(&s); cudaStreamQuery(s);
            set_cur(nullptr); get_cur(&c); printf("  after cuCtxSetCurrent(NULL): ctx %p gpu0 %d\n", (void*)c, active0());
            cudaGetDevice(&d); get_cur(&c); printf("  after cudaGetDevice (%d): ctx %p gpu0 %d\n", d, (void*)c, active0());
            cudaStreamQuery(s); get_cur(&c); printf("  after cudaStreamQuery: ctx %p gpu0 %d\n", (void*)c, active0());
        }
        if (!strcmp(mode, "restore0")) {
            cudaGetDevice(&d); cudaSetDevice(1); cudaSetDevice(d); printf("  after set 1 then back to %d: gpu0 %d\n", d, active0());
        }
    }).join();
    printf("%s: end: gpu0 active %d\n", mode, active0());
}
