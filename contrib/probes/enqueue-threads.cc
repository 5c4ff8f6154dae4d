/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Whether the host cost of enqueuing small copies scales with threads: if T threads, each on its own stream,
 * enqueue T times as many copies in the same time, helper threads could take the copies of small send/recv off
 * the calling thread. Copies of 8 B and 4 KiB from GPU 0 to GPU 1 (peer access on, as into a peer's IPC-mapped
 * buffer) and, for comparison, within GPU 0; then T threads each enqueuing stream memory operations
 * (cuStreamWriteValue32). 2000 calls per thread per round, 5 rounds, the streams synchronised between rounds;
 * host time per call = wall time / (T x calls), the median of the rounds, for T = 1, 2, 4, 8. Needs 2 GPUs.
 *
 * Found on the 2x H200 host (32 cores, CUDA 13.0), 2026-11-28: 1 thread 2.64 us per 8 B copy to the peer GPU,
 * 5.53 us within GPU 0, 1.40 us per memory operation; 8 threads 1.72, 1.44 and 1.34 us. Copies from several
 * threads overlap in the driver, memory operations do not (docs/PERFORMANCE.md, "Device send/recv").
 * Not built by make:
 *   nvcc -O2 -std=c++17 -o enqueue-threads contrib/probes/enqueue-threads.cc -lcuda -lpthread && ./enqueue-threads
 */
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

namespace {

constexpr int kCalls = 2000;
constexpr int kRounds = 5;

/* Median over rounds of wall time / (threads x calls), in us; fn(thread, stream) makes one call. */
double aggregate_us(int threads, const std::vector<cudaStream_t>& streams, const std::function<bool(int, cudaStream_t)>& fn) {
    std::vector<double> per_call;
    for (int round = 0; round < kRounds + 1; ++round) { // round 0 warms up
        std::atomic<int> ready{0};
        std::atomic<bool> go{false}, ok{true};
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; ++t) {
            pool.emplace_back([&, t] {
                cudaSetDevice(0);
                ready.fetch_add(1);
                while (!go.load()) {
                }
                for (int i = 0; i < kCalls; ++i) {
                    if (!fn(t, streams[t])) ok.store(false);
                }
            });
        }
        while (ready.load() < threads) {
        }
        auto t0 = std::chrono::steady_clock::now();
        go.store(true);
        for (auto& th : pool) th.join();
        double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        for (int t = 0; t < threads; ++t) cudaStreamSynchronize(streams[t]);
        if (!ok.load()) return -1;
        if (round > 0) per_call.push_back(us / (double(threads) * kCalls));
    }
    std::sort(per_call.begin(), per_call.end());
    return per_call[per_call.size() / 2];
}

} // namespace

int main() {
    int ndev = 0;
    cudaGetDeviceCount(&ndev);
    if (ndev < 1) {
        printf("no GPU\n");
        return 1;
    }
    int peer = ndev > 1 ? 1 : 0;
    cudaSetDevice(0);
    if (peer != 0 && cudaDeviceEnablePeerAccess(peer, 0) != cudaSuccess) {
        printf("no peer access from GPU 0 to GPU %d\n", peer);
        return 1;
    }
    const int max_threads = 8;
    std::vector<void*> src(max_threads), local(max_threads), remote(max_threads);
    std::vector<uint32_t*> flags(max_threads);
    std::vector<cudaStream_t> streams(max_threads);
    for (int t = 0; t < max_threads; ++t) {
        cudaMalloc(&src[t], 1 << 16);
        cudaMalloc(&local[t], 1 << 16);
        cudaMalloc(reinterpret_cast<void**>(&flags[t]), 4096);
        cudaStreamCreateWithFlags(&streams[t], cudaStreamNonBlocking);
    }
    cudaSetDevice(peer);
    for (int t = 0; t < max_threads; ++t) cudaMalloc(&remote[t], 1 << 16);
    cudaSetDevice(0);
    printf("GPU 0 -> GPU %d; host us per call, all threads together (wall / calls), median of %d rounds\n", peer, kRounds);
    printf("%-40s %8s %8s %8s %8s\n", "call", "1 thr", "2 thr", "4 thr", "8 thr");
    for (size_t bytes : {size_t(8), size_t(4096)}) {
        for (bool to_peer : {true, false}) {
            char name[64];
            snprintf(name, sizeof(name), "cudaMemcpyAsync %zu B %s", bytes, to_peer ? "to the peer GPU" : "within GPU 0");
            printf("%-40s", name);
            for (int threads : {1, 2, 4, 8}) {
                double us = aggregate_us(threads, streams, [&](int t, cudaStream_t s) {
                    void* dst = to_peer ? remote[t] : local[t];
                    return cudaMemcpyAsync(dst, src[t], bytes, cudaMemcpyDeviceToDevice, s) == cudaSuccess;
                });
                printf(" %8.2f", us);
            }
            printf("\n");
        }
    }
    printf("%-40s", "cuStreamWriteValue32");
    std::vector<uint32_t> v(max_threads, 0);
    for (int threads : {1, 2, 4, 8}) {
        double us = aggregate_us(threads, streams, [&](int t, cudaStream_t s) {
            return cuStreamWriteValue32(reinterpret_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(flags[t]), ++v[t], 0) ==
                   CUDA_SUCCESS;
        });
        printf(" %8.2f", us);
    }
    printf("\n");
    return 0;
}
