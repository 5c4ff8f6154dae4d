/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-perf --concurrent-gemm: how much a transfer slows a GEMM that runs beside it on the same GPU.
 *
 * Training overlaps gradient communication with compute; a communication library that takes SMs (NCCL's
 * copy kernels) or memory bandwidth away from the GEMM costs step time even when the transfer itself is
 * hidden. We measure it directly: a square bf16 GEMM (cuBLAS, fp32 accumulate) runs back to back on a
 * stream of its own, once alone and once while the transfer runs on the benchmark's stream. Every GEMM
 * and both ends of the transfer are bracketed by CUDA events, so the GEMM work done inside the transfer's
 * window is known exactly (a GEMM that straddles an end counts with the fraction that overlaps, assuming
 * it progresses evenly). cuBLAS is loaded with dlopen: vccl-perf does not link it and runs without it
 * unless this option is given.
 */
#include "config.h"
#include "tools/perf/perf.h"
#include "tools/perf/gemm_inputs.h"
#include "tools/perf/gemm_window.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#if VCCL_HAVE_CUDA && __has_include(<cublas_v2.h>)
#define VPERF_HAVE_CUBLAS_HEADER 1
#include <cublas_v2.h>
#include <cuda_runtime.h>
#else
#define VPERF_HAVE_CUBLAS_HEADER 0
#endif

namespace vperf {

#if VPERF_HAVE_CUBLAS_HEADER

namespace {

/* GEMMs in flight on the GEMM stream at once: enough that the GPU never idles between two of them
 * while this thread polls, few enough that the GEMM stops soon after the transfer does. */
constexpr int kInFlight = 3;
/* A solo run: GEMMs back to back for kSoloWarmMs untimed, then for at least kSoloMs and kSoloGemms timed.
 * The warm-up matters: a cold H200 runs an 8192^3 GEMM at about 780 TFLOP/s for its first 20 GEMMs and
 * at about 655 once its power cap holds the clocks down, so a solo figure taken cold makes every
 * transfer look 15% costlier than it is. */
constexpr int kSoloGemms = 20;
constexpr int kSoloWarmMs = 200;
constexpr int kSoloMs = 300;
/* After the transfer the GEMM runs on this long, timed too. A GPU at its power cap lets a short burst of
 * copies draw more for a moment and then holds the clocks down to pay it back: beside 20 back-to-back 1 GiB
 * send/recv (55 ms) the GEMM kept 101% inside the window, and the solo run started right after it ran 7%
 * slower (2x H200; docs/PERFORMANCE.md, "A GEMM beside send/recv"). Counting the 500 ms after the window catches
 * that repayment. */
constexpr int kTailMs = 500;
/* A window holds at most this many GEMMs (their events are created once). */
constexpr int kMaxGemms = 4096;

struct Cublas {
    void* lib = nullptr;
    decltype(&cublasCreate_v2) create = nullptr;
    decltype(&cublasDestroy_v2) destroy = nullptr;
    decltype(&cublasSetStream_v2) set_stream = nullptr;
    /* spelled out: the C++ header overloads cublasGemmEx */
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                              const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                              cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
};

struct GemmState {
    Cublas blas;
    cublasHandle_t handle = nullptr;
    cudaStream_t stream = nullptr;
    int n = 0;
    void* a = nullptr;
    void* b = nullptr;
    void* c = nullptr;
    std::vector<cudaEvent_t> begin, end; // per GEMM of a window
    cudaEvent_t origin = nullptr, transfer_begin = nullptr, transfer_end = nullptr;
} g;

bool cuda_ok(cudaError_t e, const char* what, std::string* error) {
    if (e == cudaSuccess) return true;
    *error = std::string("--concurrent-gemm: ") + what + ": " + cudaGetErrorString(e);
    return false;
}

bool load_cublas(std::string* error) {
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
        g.blas.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (g.blas.lib != nullptr) break;
    }
    if (g.blas.lib == nullptr) {
        *error = "--concurrent-gemm: cuBLAS not found (libcublas.so.13/.12); put the CUDA toolkit's lib64 on "
                 "LD_LIBRARY_PATH";
        return false;
    }
    g.blas.create = reinterpret_cast<decltype(g.blas.create)>(dlsym(g.blas.lib, "cublasCreate_v2"));
    g.blas.destroy = reinterpret_cast<decltype(g.blas.destroy)>(dlsym(g.blas.lib, "cublasDestroy_v2"));
    g.blas.set_stream = reinterpret_cast<decltype(g.blas.set_stream)>(dlsym(g.blas.lib, "cublasSetStream_v2"));
    g.blas.gemm_ex = reinterpret_cast<decltype(g.blas.gemm_ex)>(dlsym(g.blas.lib, "cublasGemmEx"));
    if (!g.blas.create || !g.blas.destroy || !g.blas.set_stream || !g.blas.gemm_ex) {
        *error = "--concurrent-gemm: the cuBLAS found lacks cublasCreate_v2/cublasSetStream_v2/cublasGemmEx";
        return false;
    }
    return true;
}

bool enqueue_gemm(int i, std::string* error) {
    const float alpha = 1.0f, beta = 0.0f;
    if (!cuda_ok(cudaEventRecord(g.begin[size_t(i)], g.stream), "cudaEventRecord", error)) return false;
    cublasStatus_t s = g.blas.gemm_ex(g.handle, CUBLAS_OP_N, CUBLAS_OP_N, g.n, g.n, g.n, &alpha, g.a, CUDA_R_16BF,
                                      g.n, g.b, CUDA_R_16BF, g.n, &beta, g.c, CUDA_R_16BF, g.n, CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) {
        *error = "--concurrent-gemm: cublasGemmEx failed with status " + std::to_string(int(s));
        return false;
    }
    return cuda_ok(cudaEventRecord(g.end[size_t(i)], g.stream), "cudaEventRecord", error);
}

/* Milliseconds from the window's origin event to `e`. */
double at_ms(cudaEvent_t e) {
    float ms = 0;
    cudaEventElapsedTime(&ms, g.origin, e);
    return ms;
}

double flops_per_gemm() { return 2.0 * double(g.n) * double(g.n) * double(g.n); }

/* Waits (polling, so `done` can be watched meanwhile) until GEMM `i` has finished or `done` completes.
 * Returns true when GEMM `i` finished. */
bool wait_gemm_or(int i, cudaEvent_t done) {
    for (;;) {
        if (cudaEventQuery(g.end[size_t(i)]) == cudaSuccess) return true;
        if (done != nullptr && cudaEventQuery(done) == cudaSuccess) return false;
        usleep(20);
    }
}

} // namespace

bool gemm_init(int n, std::string* error) {
    if (!load_cublas(error)) return false;
    g.n = n;
    size_t bytes = size_t(n) * size_t(n) * 2;
    if (!cuda_ok(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking), "cudaStreamCreate", error)) return false;
    if (!cuda_ok(cudaMalloc(&g.a, bytes), "cudaMalloc", error) || !cuda_ok(cudaMalloc(&g.b, bytes), "cudaMalloc", error) ||
        !cuda_ok(cudaMalloc(&g.c, bytes), "cudaMalloc", error))
        return false;
    const std::vector<uint16_t> host = gemm_bf16_inputs(n);
    if (!cuda_ok(cudaMemcpy(g.a, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy", error) ||
        !cuda_ok(cudaMemcpy(g.b, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy", error))
        return false;
    if (g.blas.create(&g.handle) != CUBLAS_STATUS_SUCCESS || g.blas.set_stream(g.handle, g.stream) != CUBLAS_STATUS_SUCCESS) {
        *error = "--concurrent-gemm: cublasCreate/cublasSetStream failed";
        return false;
    }
    g.begin.resize(kMaxGemms);
    g.end.resize(kMaxGemms);
    for (int i = 0; i < kMaxGemms; ++i) {
        if (!cuda_ok(cudaEventCreate(&g.begin[size_t(i)]), "cudaEventCreate", error) ||
            !cuda_ok(cudaEventCreate(&g.end[size_t(i)]), "cudaEventCreate", error))
            return false;
    }
    for (cudaEvent_t* e : {&g.origin, &g.transfer_begin, &g.transfer_end}) {
        if (!cuda_ok(cudaEventCreate(e), "cudaEventCreate", error)) return false;
    }
    /* Warm-up: cuBLAS picks its kernel and loads it on the first call. */
    for (int i = 0; i < 3; ++i) {
        if (!enqueue_gemm(i, error)) return false;
    }
    return cuda_ok(cudaStreamSynchronize(g.stream), "cudaStreamSynchronize", error);
}

bool gemm_solo(double* tflops, std::string* error) {
    using clock = std::chrono::steady_clock;
    long issued = 0;
    /* Keeps kInFlight GEMMs queued until `until` has passed and at least `at_least` more were issued. The
     * per-GEMM events are reused round the ring: only the last kInFlight are ever waited on. */
    auto feed = [&](clock::time_point until, long at_least) {
        for (long start = issued; clock::now() < until || issued - start < at_least;) {
            if (issued >= kInFlight && cudaEventQuery(g.end[size_t((issued - kInFlight) % kMaxGemms)]) != cudaSuccess) {
                usleep(20);
                continue;
            }
            if (!enqueue_gemm(int(issued % kMaxGemms), error)) return false;
            issued += 1;
        }
        return true;
    };
    if (!feed(clock::now() + std::chrono::milliseconds(kSoloWarmMs), kInFlight)) return false;
    /* Fires when the warm-up's GEMMs still queued have finished: the timed ones start there. */
    if (!cuda_ok(cudaEventRecord(g.transfer_begin, g.stream), "cudaEventRecord", error)) return false;
    long first = issued;
    if (!feed(clock::now() + std::chrono::milliseconds(kSoloMs), kSoloGemms)) return false;
    if (!cuda_ok(cudaEventRecord(g.transfer_end, g.stream), "cudaEventRecord", error) ||
        !cuda_ok(cudaStreamSynchronize(g.stream), "cudaStreamSynchronize", error))
        return false;
    float ms = 0;
    if (!cuda_ok(cudaEventElapsedTime(&ms, g.transfer_begin, g.transfer_end), "cudaEventElapsedTime", error))
        return false;
    *tflops = ms > 0 ? flops_per_gemm() * double(issued - first) / (double(ms) * 1e-3) / 1e12 : 0;
    return true;
}

bool gemm_during(void* transfer_stream, const std::function<void()>& enqueue_transfer, GemmDuring* out,
                 std::string* error) {
    cudaStream_t ts = static_cast<cudaStream_t>(transfer_stream);
    int device = 0;
    if (!cuda_ok(cudaGetDevice(&device), "cudaGetDevice", error)) return false;
    if (!cuda_ok(cudaEventRecord(g.origin, g.stream), "cudaEventRecord", error)) return false;
    int issued = 0;
    /* The GEMM is running before the transfer starts, so the whole window sees it. */
    for (; issued < kInFlight; ++issued) {
        if (!enqueue_gemm(issued, error)) return false;
    }
    if (!cuda_ok(cudaEventRecord(g.transfer_begin, ts), "cudaEventRecord", error)) return false;
    /* A thread of its own keeps kInFlight GEMMs queued until the transfer has finished. Fed from this thread,
     * the GEMM stream would run dry whenever the library's calls held the caller for longer than kInFlight
     * GEMMs take (a full stream queue, a wait for the peer), and that idle time would count as slowdown
     * (GemmDuring::idle_pct shows what is left of it). */
    std::atomic<bool> transfer_enqueued{false};
    std::string feeder_error;
    bool feeder_ok = true;
    /* Any answer but "done" or "not yet" (a sticky error after a failed kernel) ends the feeder with an error:
     * polling on would spin forever and leave the other ranks waiting. */
    auto done = [&](cudaEvent_t e, bool* finished) {
        cudaError_t q = cudaEventQuery(e);
        *finished = q == cudaSuccess;
        if (q == cudaSuccess || q == cudaErrorNotReady) return true;
        feeder_ok = false;
        feeder_error = std::string("--concurrent-gemm: cudaEventQuery: ") + cudaGetErrorString(q);
        return false;
    };
    std::thread feeder([&] {
        if (cudaSetDevice(device) != cudaSuccess) {
            feeder_ok = false;
            feeder_error = "--concurrent-gemm: cudaSetDevice in the GEMM thread failed";
            return;
        }
        bool in_tail = false; // the transfer has finished: GEMMs go on until tail_until
        std::chrono::steady_clock::time_point tail_until;
        for (;;) {
            if (in_tail && std::chrono::steady_clock::now() >= tail_until) return;
            bool finished = false;
            if (!done(g.end[size_t(issued - kInFlight)], &finished)) return;
            if (finished) {
                if (issued == kMaxGemms) return;
                if (!enqueue_gemm(issued, &feeder_error)) {
                    feeder_ok = false;
                    return;
                }
                issued += 1;
                continue;
            }
            /* transfer_end is only queried once recorded: an event never recorded reports complete. */
            if (!in_tail && transfer_enqueued.load()) {
                if (!done(g.transfer_end, &finished)) return;
                if (finished) {
                    in_tail = true;
                    tail_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kTailMs);
                }
            }
            usleep(20);
        }
    });
    /* Joins the feeder on every way out of this scope, an exception from the transfer's calls included. */
    struct JoinFeeder {
        std::thread& t;
        std::atomic<bool>& enqueued;
        ~JoinFeeder() {
            enqueued.store(true);
            if (t.joinable()) t.join();
        }
    } join_feeder{feeder, transfer_enqueued};
    enqueue_transfer();
    bool recorded = cuda_ok(cudaEventRecord(g.transfer_end, ts), "cudaEventRecord", error);
    if (!recorded) cudaEventRecord(g.transfer_end, nullptr); // lets the feeder stop on a legacy-stream event
    transfer_enqueued.store(true);
    feeder.join();
    if (!recorded) return false;
    if (!feeder_ok) {
        *error = feeder_error;
        return false;
    }
    if (!cuda_ok(cudaEventSynchronize(g.transfer_end), "cudaEventSynchronize", error) ||
        !cuda_ok(cudaStreamSynchronize(g.stream), "cudaStreamSynchronize", error))
        return false;
    double t0 = at_ms(g.transfer_begin), t1 = at_ms(g.transfer_end);
    if (issued == kMaxGemms && at_ms(g.end[kMaxGemms - 1]) < t1) {
        *error = "--concurrent-gemm: the transfer outlasted " + std::to_string(kMaxGemms) +
                 " GEMMs; use fewer iterations (-n) or a larger GEMM (--concurrent-gemm=N)";
        return false;
    }
    const double t2 = at_ms(g.end[size_t(issued) - 1]); // the tail's end
    std::vector<double> begins(size_t(issued), 0.0), ends(size_t(issued), 0.0);
    for (int i = 0; i < issued; ++i) {
        begins[size_t(i)] = at_ms(g.begin[size_t(i)]);
        ends[size_t(i)] = at_ms(g.end[size_t(i)]);
    }
    const GemmWindow w = gemm_window(begins, ends, t0, t1, t2);
    const double work = w.work, work_to_t2 = w.work_to_t2, idle = w.idle_ms;
    double window = t1 - t0;
    out->transfer_ms = window;
    out->tflops = window > 0 ? work * flops_per_gemm() / (window * 1e-3) / 1e12 : 0;
    out->idle_pct = window > 0 ? 100.0 * idle / window : 0;
    out->tail_ms = t2 > t1 ? t2 - t1 : 0;
    out->tflops_with_tail = t2 > t0 ? work_to_t2 * flops_per_gemm() / ((t2 - t0) * 1e-3) / 1e12 : 0;
    return true;
}

void gemm_finalize() {
    if (g.stream != nullptr) cudaStreamSynchronize(g.stream);
    for (cudaEvent_t e : g.begin) cudaEventDestroy(e);
    for (cudaEvent_t e : g.end) cudaEventDestroy(e);
    for (cudaEvent_t e : {g.origin, g.transfer_begin, g.transfer_end}) {
        if (e != nullptr) cudaEventDestroy(e);
    }
    if (g.handle != nullptr) g.blas.destroy(g.handle);
    for (void* p : {g.a, g.b, g.c}) {
        if (p != nullptr) cudaFree(p);
    }
    if (g.stream != nullptr) cudaStreamDestroy(g.stream);
    g = GemmState();
}

#else // no CUDA or no cuBLAS header at build time

bool gemm_init(int, std::string* error) {
    *error = "--concurrent-gemm: vccl-perf was built without CUDA (or without cublas_v2.h)";
    return false;
}
bool gemm_solo(double*, std::string* error) {
    *error = "--concurrent-gemm: not available";
    return false;
}
bool gemm_during(void*, const std::function<void()>&, GemmDuring*, std::string* error) {
    *error = "--concurrent-gemm: not available";
    return false;
}
void gemm_finalize() {}

#endif

} // namespace vperf
