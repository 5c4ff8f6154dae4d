/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a copy-engine transfer, which takes no SMs, costs a GEMM running beside it. One process, two GPUs with
 * peer access, a bf16 GEMM (cuBLAS, fp32 accumulate) back to back on GPU 0 for a fixed window while plain
 * cudaMemcpyAsync copies of 1 GiB run in one of several patterns: GPU 0 pushes to GPU 1, GPU 1 pulls from GPU 0,
 * GPU 1 pushes into GPU 0, both push at once (as a 2-rank send/recv ring does), a copy within GPU 0, and paced
 * patterns (64 MiB copies no faster than a set rate). A thread samples GPU 0's SM clock, power draw and
 * clock-event reasons through NVML (loaded with dlopen) every 10 ms. Solo runs come first and last and each
 * pattern is compared with their mean, since the GPU warms up over the run. With "gemm1", GPU 1 runs the same
 * GEMM throughout. The GEMM's inputs come from src/tools/perf/gemm_inputs.h, shared with vccl-perf
 * --concurrent-gemm.
 *
 * Found on 2x H200 (NV18), 2026-11-28, 2 s per pattern: the GEMM alone runs at the 700 W power cap; copies
 * between the GPUs lower the SM clock by 4-6% (1478 to 1392 MHz with both pushing) and the GEMM keeps 94.1-96.1%;
 * paced copies cost the GEMM more work per GB moved, not less; a copy within GPU 0 costs it 18% (memory
 * bandwidth). docs/PERFORMANCE.md ("A GEMM beside send/recv") has the table. Not built by make:
 *   nvcc -O2 -std=c++17 -o gemm-beside-copy contrib/probes/gemm-beside-copy.cc -lcublas -ldl -lpthread
 *   ./gemm-beside-copy [N=8192] [SECONDS_PER_PATTERN=2] [gemm1]
 */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "../../src/tools/perf/gemm_inputs.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

#define CHECK(x)                                                                                        \
    do {                                                                                                \
        cudaError_t e_ = (x);                                                                           \
        if (e_ != cudaSuccess) {                                                                        \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));          \
            exit(1);                                                                                    \
        }                                                                                               \
    } while (0)

/* The few NVML entry points used, by their C signatures (nvml.h is not in the CUDA toolkit here). */
struct Nvml {
    int (*init)() = nullptr;
    int (*by_pci)(const char*, void**) = nullptr;
    int (*clock)(void*, int, unsigned*) = nullptr;     // nvmlDeviceGetClockInfo, type 1 = SM, 2 = memory
    int (*power)(void*, unsigned*) = nullptr;          // milliwatts
    int (*reasons)(void*, unsigned long long*) = nullptr; // clock-event (throttle) reasons bit mask
    void* dev = nullptr;
};

bool load_nvml(Nvml* n, int cuda_device) {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (lib == nullptr) return false;
    n->init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    n->by_pci = reinterpret_cast<int (*)(const char*, void**)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    n->clock = reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    n->power = reinterpret_cast<int (*)(void*, unsigned*)>(dlsym(lib, "nvmlDeviceGetPowerUsage"));
    void* r = dlsym(lib, "nvmlDeviceGetCurrentClocksEventReasons");
    if (r == nullptr) r = dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
    n->reasons = reinterpret_cast<int (*)(void*, unsigned long long*)>(r);
    if (!n->init || !n->by_pci || !n->clock || !n->power || !n->reasons || n->init() != 0) return false;
    char bus[64];
    CHECK(cudaDeviceGetPCIBusId(bus, sizeof(bus), cuda_device));
    return n->by_pci(bus, &n->dev) == 0;
}

struct Samples {
    double sm_mhz = 0, mem_mhz = 0, watts = 0;
    int count = 0, power_capped = 0, thermal = 0; // samples with a software power cap / any thermal slowdown
};

/* Samples GPU 0 every 10 ms while `on`; the caller reads and resets `acc` between patterns. */
void sampler(Nvml* n, std::atomic<bool>* on, std::atomic<bool>* quit, Samples* acc, std::atomic<int>* lock) {
    while (!quit->load()) {
        if (on->load()) {
            unsigned sm = 0, mem = 0, mw = 0;
            unsigned long long why = 0;
            n->clock(n->dev, 1, &sm);
            n->clock(n->dev, 2, &mem);
            n->power(n->dev, &mw);
            n->reasons(n->dev, &why);
            while (lock->exchange(1) != 0) {
            }
            acc->sm_mhz += sm;
            acc->mem_mhz += mem;
            acc->watts += mw / 1000.0;
            acc->count += 1;
            acc->power_capped += (why & 0x4) ? 1 : 0;          // SwPowerCap
            acc->thermal += (why & (0x20 | 0x40 | 0x8)) ? 1 : 0; // Sw/Hw thermal, HW slowdown
            lock->store(0);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

constexpr size_t kCopyBytes = size_t(1) << 30;
constexpr int kCopiesInFlight = 2;
constexpr int kGemmsInFlight = 3;

struct CopyLane {
    int device;          // the GPU whose stream (and copy engine) runs the copy
    void* dst;
    const void* src;
    double pace_gbs = 0; // 0: copies of 1 GiB back to back; else copies of 64 MiB, no faster than this
    cudaStream_t stream = nullptr;
    std::vector<cudaEvent_t> done; // ring of events, one per copy in flight
    long issued = 0;
    double bytes = 0; // issued so far
    std::chrono::steady_clock::time_point start;

    size_t copy_bytes() const { return pace_gbs > 0 ? kCopyBytes / 16 : kCopyBytes; }
};

void issue_copy(CopyLane* l) {
    CHECK(cudaSetDevice(l->device));
    CHECK(cudaMemcpyAsync(l->dst, l->src, l->copy_bytes(), cudaMemcpyDefault, l->stream));
    CHECK(cudaEventRecord(l->done[size_t(l->issued % kCopiesInFlight)], l->stream));
    l->issued += 1;
    l->bytes += double(l->copy_bytes());
}

/* Whether a paced lane may issue its next copy now. */
bool pace_allows(const CopyLane& l) {
    if (l.pace_gbs <= 0) return true;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - l.start).count();
    return l.bytes <= l.pace_gbs * 1e9 * s;
}

} // namespace

int main(int argc, char** argv) {
    int n = argc > 1 ? atoi(argv[1]) : 8192;
    double seconds = argc > 2 ? atof(argv[2]) : 2.0;
    /* "gemm1": GPU 1 runs the same GEMM back to back throughout (untimed), as a 2-rank job's other rank does */
    bool gemm_on_1 = argc > 3 && strcmp(argv[3], "gemm1") == 0;
    int ngpu = 0;
    CHECK(cudaGetDeviceCount(&ngpu));
    if (ngpu < 2) {
        printf("SKIP: needs 2 GPUs (found %d)\n", ngpu);
        return 0;
    }
    CHECK(cudaSetDevice(1));
    CHECK(cudaDeviceEnablePeerAccess(0, 0));
    CHECK(cudaSetDevice(0));
    CHECK(cudaDeviceEnablePeerAccess(1, 0));

    /* GEMM on GPU 0, inputs in [-1, 1) (zeros draw less power and would run at other clocks). */
    size_t bytes = size_t(n) * size_t(n) * 2;
    void *a, *b, *c;
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    CHECK(cudaMalloc(&c, bytes));
    const std::vector<uint16_t> host = vperf::gemm_bf16_inputs(n); // vccl-perf's GEMM inputs
    CHECK(cudaMemcpy(a, host.data(), bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(b, host.data(), bytes, cudaMemcpyHostToDevice));
    cublasHandle_t blas;
    cudaStream_t gemm_stream;
    CHECK(cudaStreamCreateWithFlags(&gemm_stream, cudaStreamNonBlocking));
    if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(blas, gemm_stream) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasCreate failed\n");
        return 1;
    }
    const float alpha = 1.0f, beta = 0.0f;
    auto gemm_on = [&](cublasHandle_t h, const void* ga, const void* gb, void* gc) {
        if (cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, ga, CUDA_R_16BF, n, gb, CUDA_R_16BF, n, &beta, gc,
                         CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
            fprintf(stderr, "cublasGemmEx failed\n");
            exit(1);
        }
    };
    auto gemm = [&] { gemm_on(blas, a, b, c); };
    /* The optional GEMM on GPU 1: its own matrices, handle, stream and one event per GEMM in flight. */
    cublasHandle_t blas1 = nullptr;
    cudaStream_t gemm1_stream = nullptr;
    void *a1 = nullptr, *b1 = nullptr, *c1 = nullptr;
    std::vector<cudaEvent_t> gemm1_done(3);
    long gemms1 = 0;
    if (gemm_on_1) {
        CHECK(cudaSetDevice(1));
        CHECK(cudaMalloc(&a1, bytes));
        CHECK(cudaMalloc(&b1, bytes));
        CHECK(cudaMalloc(&c1, bytes));
        CHECK(cudaMemcpy(a1, host.data(), bytes, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(b1, host.data(), bytes, cudaMemcpyHostToDevice));
        CHECK(cudaStreamCreateWithFlags(&gemm1_stream, cudaStreamNonBlocking));
        if (cublasCreate(&blas1) != CUBLAS_STATUS_SUCCESS || cublasSetStream(blas1, gemm1_stream) != CUBLAS_STATUS_SUCCESS) {
            fprintf(stderr, "cublasCreate on GPU 1 failed\n");
            return 1;
        }
        for (cudaEvent_t& e : gemm1_done) CHECK(cudaEventCreate(&e));
        CHECK(cudaSetDevice(0));
    }
    /* Keeps three GEMMs queued on GPU 1 (when asked for); called from every polling loop. */
    auto keep_gemm1_going = [&] {
        if (!gemm_on_1) return;
        cudaEvent_t& e = gemm1_done[size_t(gemms1 % 3)];
        if (gemms1 >= 3 && cudaEventQuery(e) != cudaSuccess) return;
        CHECK(cudaSetDevice(1));
        gemm_on(blas1, a1, b1, c1);
        CHECK(cudaEventRecord(e, gemm1_stream));
        gemms1 += 1;
        CHECK(cudaSetDevice(0));
    };

    /* Copy buffers: 1 GiB each way on each GPU, plus a local destination on GPU 0. */
    void *out0, *in0, *local0, *out1, *in1;
    CHECK(cudaMalloc(&out0, kCopyBytes));
    CHECK(cudaMalloc(&in0, kCopyBytes));
    CHECK(cudaMalloc(&local0, kCopyBytes));
    CHECK(cudaMemset(out0, 1, kCopyBytes));
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&out1, kCopyBytes));
    CHECK(cudaMalloc(&in1, kCopyBytes));
    CHECK(cudaMemset(out1, 2, kCopyBytes));
    CHECK(cudaSetDevice(0));

    struct Pattern {
        const char* name;
        std::vector<CopyLane> lanes;
    };
    std::vector<Pattern> patterns = {
        {"solo", {}},
        {"push 0->1 (GPU 0's engine)", {{0, in1, out0}}},
        {"pull 0->1 (GPU 1's engine)", {{1, in1, out0}}},
        {"push 1->0 (into GPU 0)", {{1, in0, out1}}},
        {"both push (send/recv ring)", {{0, in1, out0}, {1, in0, out1}}},
        {"local copy within GPU 0", {{0, local0, out0}}},
        {"push 0->1 paced to 200 GB/s", {{0, in1, out0, 200}}},
        {"both push, 200 GB/s each", {{0, in1, out0, 200}, {1, in0, out1, 200}}},
        {"both push, 100 GB/s each", {{0, in1, out0, 100}, {1, in0, out1, 100}}},
        {"solo again", {}},
    };
    for (Pattern& p : patterns) {
        for (CopyLane& l : p.lanes) {
            CHECK(cudaSetDevice(l.device));
            CHECK(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
            l.done.resize(kCopiesInFlight);
            for (cudaEvent_t& e : l.done) CHECK(cudaEventCreate(&e));
        }
    }
    CHECK(cudaSetDevice(0));

    Nvml nvml;
    bool have_nvml = load_nvml(&nvml, 0);
    if (!have_nvml) printf("# NVML not loaded: no clock or power columns\n");
    std::atomic<bool> sampling{false}, quit{false};
    std::atomic<int> lock{0};
    Samples acc;
    std::thread sampler_thread;
    if (have_nvml) sampler_thread = std::thread(sampler, &nvml, &sampling, &quit, &acc, &lock);

    for (int i = 0; i < 5; ++i) gemm(); // cuBLAS picks and loads its kernel
    CHECK(cudaStreamSynchronize(gemm_stream));

    const double flops = 2.0 * double(n) * double(n) * double(n);
    std::vector<cudaEvent_t> gemm_done(kGemmsInFlight);
    for (cudaEvent_t& e : gemm_done) CHECK(cudaEventCreate(&e));
    cudaEvent_t t0, t1;
    CHECK(cudaEventCreate(&t0));
    CHECK(cudaEventCreate(&t1));

    struct Result {
        double tflops, copy_gbs;
        Samples s;
    };
    std::vector<Result> results;
    for (Pattern& p : patterns) {
        /* Copies start first and run 100 ms before the GEMM window opens; t0 fires once the lead's GEMMs are done. */
        for (CopyLane& l : p.lanes) {
            l.issued = 0;
            l.bytes = 0;
            l.start = std::chrono::steady_clock::now();
            for (int i = 0; i < kCopiesInFlight; ++i) issue_copy(&l);
        }
        auto keep_copies_going = [&] {
            for (CopyLane& l : p.lanes) {
                if (cudaEventQuery(l.done[size_t(l.issued % kCopiesInFlight)]) == cudaSuccess && pace_allows(l))
                    issue_copy(&l);
            }
            CHECK(cudaSetDevice(0));
            keep_gemm1_going();
        };
        /* The GEMM runs through the lead too (untimed), so the window does not open on a GPU that idled. */
        auto lead = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
        for (long lead_gemms = 0; std::chrono::steady_clock::now() < lead;) {
            keep_copies_going();
            cudaEvent_t& e = gemm_done[size_t(lead_gemms % kGemmsInFlight)];
            if (lead_gemms < kGemmsInFlight || cudaEventQuery(e) == cudaSuccess) {
                gemm();
                CHECK(cudaEventRecord(e, gemm_stream));
                lead_gemms += 1;
            } else {
                std::this_thread::sleep_for(std::chrono::microseconds(20));
            }
        }
        double bytes_before = 0;
        for (CopyLane& l : p.lanes) bytes_before += l.bytes;
        while (lock.exchange(1) != 0) {
        }
        acc = Samples{};
        lock.store(0);
        sampling.store(true);
        CHECK(cudaEventRecord(t0, gemm_stream));
        long gemms = 0;
        auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        for (; gemms < kGemmsInFlight; ++gemms) {
            gemm();
            CHECK(cudaEventRecord(gemm_done[size_t(gemms % kGemmsInFlight)], gemm_stream));
        }
        while (std::chrono::steady_clock::now() < end) {
            keep_copies_going();
            if (cudaEventQuery(gemm_done[size_t(gemms % kGemmsInFlight)]) == cudaSuccess) {
                gemm();
                CHECK(cudaEventRecord(gemm_done[size_t(gemms % kGemmsInFlight)], gemm_stream));
                gemms += 1;
            } else {
                std::this_thread::sleep_for(std::chrono::microseconds(20));
            }
        }
        CHECK(cudaEventRecord(t1, gemm_stream));
        /* Copies keep running until the last GEMM has finished. */
        while (cudaEventQuery(t1) != cudaSuccess) {
            keep_copies_going();
            std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
        sampling.store(false);
        double bytes_after = 0;
        for (CopyLane& l : p.lanes) bytes_after += l.bytes;
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, t0, t1));
        for (CopyLane& l : p.lanes) {
            CHECK(cudaSetDevice(l.device));
            CHECK(cudaStreamSynchronize(l.stream));
        }
        CHECK(cudaSetDevice(0));
        double tflops = flops * double(gemms) / (ms * 1e-3) / 1e12;
        /* Copies issued during the window, over its length: an estimate (two in flight at each end). */
        double copy_gbs = (bytes_after - bytes_before) / (ms * 1e-3) / 1e9;
        while (lock.exchange(1) != 0) {
        }
        Samples s = acc;
        lock.store(0);
        results.push_back({tflops, copy_gbs, s});
    }
    /* Against the mean of the two solo runs; "lost/GB": the GEMM work lost per GB the copies moved. If the
     * power cap is what slows the GEMM, moving a byte costs a fixed amount of energy and so of GEMM work, and
     * pacing the copies spreads the loss without shrinking it: the column then stays flat. */
    double solo = (results.front().tflops + results.back().tflops) / 2;
    printf("# GEMM %dx%dx%d bf16 on GPU 0%s, %.1f s per pattern; copies of 1 GiB (paced: 64 MiB), %d in flight per "
           "lane; %%solo against the mean of both solo runs (%.1f TFLOP/s)\n", n, n, n,
           gemm_on_1 ? " (and untimed on GPU 1)" : "", seconds, kCopiesInFlight, solo);
    printf("%-30s %9s %7s %9s %11s %8s %8s %7s %6s %6s\n", "pattern", "TFLOP/s", "%solo", "copy GB/s", "TFLOP/GB lost",
           "SM MHz", "mem MHz", "watts", "%pcap", "%therm");
    for (size_t i = 0; i < results.size(); ++i) {
        const Result& r = results[i];
        int k = r.s.count > 0 ? r.s.count : 1;
        char lost[32] = "-";
        if (r.copy_gbs > 0) snprintf(lost, sizeof(lost), "%.3f", (solo - r.tflops) / r.copy_gbs);
        printf("%-30s %9.1f %6.1f%% %9.1f %11s %8.0f %8.0f %7.1f %5.0f%% %5.0f%%\n", patterns[i].name, r.tflops,
               100.0 * r.tflops / solo, r.copy_gbs, lost, r.s.sm_mhz / k, r.s.mem_mhz / k, r.s.watts / k,
               100.0 * r.s.power_capped / k, 100.0 * r.s.thermal / k);
    }
    quit.store(true);
    if (sampler_thread.joinable()) sampler_thread.join();
    return 0;
}
