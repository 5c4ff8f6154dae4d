/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers shared by the device-memory test files (test_gpu.cc, test_gpu_streams.cc, test_gpu_async.cc):
 * buffers with guard zones, streams, this rank's GPU and communicator. Inline, in a named
 * namespace, so that every file shares one communicator (gpu_comm's). */
#ifndef VCCL_TESTS_GPU_GPU_TEST_UTIL_H_
#define VCCL_TESTS_GPU_GPU_TEST_UTIL_H_

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpu_kernels.h"
#include "mpi_gtest_main.h"
#include "test_util.h"
#include "testing/test_hooks.h"


namespace vgpu {

using namespace vtest;

const vcclDataType_t kTypes[] = {vcclInt8,    vcclUint8,    vcclInt32,   vcclUint32,     vcclInt64,
                                 vcclUint64,  vcclFloat16,  vcclBfloat16, vcclFloat32, vcclFloat64,
                                 vcclFloat8e4m3, vcclFloat8e5m2};
const vcclRedOp_t kOps[] = {vcclSum, vcclProd, vcclMax, vcclMin, vcclAvg};
const size_t kCounts[] = {0, 1, 7, 1031, 65537};
const size_t kGuard = 256; // bytes of guard zone on each side of a device buffer
const unsigned char kGuardByte = 0xA5;

/* Whether VCCL_ALGO forces algorithms: tests that check which kernel the default choice takes skip then (the
 * device suites also run with every device algorithm forced, contrib/gpu-suites.sh). */
inline bool algo_forced() {
    const char* v = getenv("VCCL_ALGO");
    return v != nullptr && *v != '\0';
}

/* VTEST_VERBOSE=1: every case is printed before it runs (to find one that hangs). */
inline bool verbose() {
    static const bool v = getenv("VTEST_VERBOSE") != nullptr && atoi(getenv("VTEST_VERBOSE")) != 0;
    return v;
}

/* Bookkeeping of a sweep of cases: counts them, keeps the first failure with its case label, and under
 * VTEST_VERBOSE prints each label before the case runs and each failure at once. */
struct Sweep {
    int cases = 0;
    std::string first_failure;
    template <typename F> void run(const std::string& label, F&& one_case) {
        if (verbose()) fprintf(stderr, "[rank %d] %s\n", world_rank(), label.c_str());
        std::string why = one_case();
        if (verbose() && !why.empty()) fprintf(stderr, "[rank %d]   %s\n", world_rank(), why.c_str());
        ++cases;
        if (!why.empty() && first_failure.empty()) first_failure = label + ": " + why;
    }
};

inline std::string cuda_str(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

/* VTEST_GPU_SHARE=1: every rank on GPU 0. */
inline bool gpu_shared() {
    const char* share = getenv("VTEST_GPU_SHARE");
    return share != nullptr && atoi(share) != 0;
}

/* Picks this rank's GPU once (before any communicator exists). */
inline int my_device() {
    static int device = -1;
    if (device >= 0) return device;
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    int local_rank = 0;
    MPI_Comm_rank(local, &local_rank);
    MPI_Comm_free(&local);
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) count = 1;
    device = gpu_shared() ? 0 : local_rank % count;
    cudaSetDevice(device);
    return device;
}

inline vcclComm_t gpu_comm() {
    static vcclComm_t comm = nullptr;
    static bool tried = false;
    if (!tried) {
        tried = true;
        my_device();
        // Ranks sharing a GPU (VTEST_GPU_SHARE) test the low-latency allreduce too where VCCL_ALLREDUCE_LL_BYTES
        // asks for it (np2_shared_gpu_ll.sh), though it is slow there; elsewhere the default leaves it off on a
        // shared GPU, and the one-shot algorithm is tested.
        vccl::testing::allow_ll_on_shared_gpu(gpu_shared() && getenv("VCCL_ALLREDUCE_LL_BYTES") != nullptr);
        comm = make_comm(CommKind::Mpi);
        if (comm != nullptr) on_finalize([] { vcclCommDestroy(comm); });
    }
    return comm;
}

/* A communicator made with these VCCL_* variables set on this rank (libvccl reads them at creation); the
 * process's environment is restored afterwards. */
inline vcclComm_t comm_with_env(const std::vector<std::pair<const char*, const char*>>& vars) {
    std::vector<std::pair<bool, std::string>> saved; // copied before setenv, which may reuse getenv's storage
    for (const auto& v : vars) {
        const char* old = getenv(v.first);
        saved.push_back({old != nullptr, old != nullptr ? old : ""});
        setenv(v.first, v.second, 1);
    }
    vccl::testing::reload_env();
    vcclComm_t comm = make_comm(CommKind::Mpi);
    for (size_t i = 0; i < vars.size(); ++i) {
        if (saved[i].first) setenv(vars[i].first, saved[i].second.c_str(), 1); else unsetenv(vars[i].first);
    }
    vccl::testing::reload_env();
    return comm;
}

/* A host-mapped word a kernel waits on (vt_wait_flag): the stream stays blocked until the host opens it. */
struct Gate {
    uint32_t* host = nullptr;
    uint32_t* dev = nullptr;
    Gate() {
        if (cudaHostAlloc(reinterpret_cast<void**>(&host), sizeof(uint32_t), cudaHostAllocMapped) != cudaSuccess) {
            host = nullptr;
            return;
        }
        *host = 0;
        if (cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev), host, 0) != cudaSuccess) dev = nullptr;
    }
    ~Gate() {
        if (host != nullptr) cudaFreeHost(host);
    }
    Gate(const Gate&) = delete;
    Gate& operator=(const Gate&) = delete;
    void close() { __atomic_store_n(host, 0u, __ATOMIC_RELEASE); }
    void open() { __atomic_store_n(host, 1u, __ATOMIC_RELEASE); }
};

/* Opens the gate after `ms` unless disarmed first, so a call that waits for the blocked stream ends the test
 * with a failure instead of hanging it; fired() tells whether it had to. */
class GateTimer {
public:
    GateTimer(Gate* gate, int ms) : thread_([this, gate, ms] {
        std::unique_lock<std::mutex> lock(m_);
        if (!cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return disarmed_; })) {
            fired_ = true;
            gate->open();
        }
    }) {}
    ~GateTimer() { disarm(); }
    void disarm() {
        {
            std::lock_guard<std::mutex> lock(m_);
            disarmed_ = true;
        }
        cv_.notify_all();
        if (thread_.joinable()) thread_.join();
    }
    bool fired() const { return fired_; }
private:
    std::mutex m_;
    std::condition_variable cv_;
    bool disarmed_ = false;
    std::atomic<bool> fired_{false};
    std::thread thread_;
};

/* A device buffer of `bytes` between two guard zones. */
struct DevBuf {
    char* base = nullptr;
    size_t bytes = 0;
    explicit DevBuf(size_t n) : bytes(n) {
        if (cudaMalloc(reinterpret_cast<void**>(&base), n + 2 * kGuard) != cudaSuccess) base = nullptr;
        if (base != nullptr) cudaMemset(base, kGuardByte, n + 2 * kGuard);
        cudaDeviceSynchronize(); // the memset runs on the legacy stream, which the test's stream does not wait for
    }
    ~DevBuf() {
        if (base != nullptr) cudaFree(base);
    }
    DevBuf(const DevBuf&) = delete;
    DevBuf& operator=(const DevBuf&) = delete;
    char* ptr() const { return base + kGuard; }
    /* cudaMemcpy from pageable memory may return before its DMA has landed (CUDA's "API synchronization
     * behavior"), and the test's non-blocking stream does not wait for the legacy stream that DMA runs on:
     * wait for the device, as an application writing with cudaMemcpy must before using another stream. */
    void upload(const std::vector<char>& h) const {
        cudaMemcpy(ptr(), h.data(), h.size(), cudaMemcpyHostToDevice);
        cudaDeviceSynchronize();
    }
    std::vector<char> download() const {
        std::vector<char> h(bytes);
        cudaMemcpy(h.data(), ptr(), bytes, cudaMemcpyDeviceToHost);
        return h;
    }
    bool guards_intact() const {
        std::vector<unsigned char> g(kGuard);
        for (size_t off : {size_t(0), kGuard + bytes}) {
            cudaMemcpy(g.data(), base + off, kGuard, cudaMemcpyDeviceToHost);
            for (unsigned char c : g) {
                if (c != kGuardByte) return false;
            }
        }
        return true;
    }
};

struct Stream {
    cudaStream_t s = nullptr;
    Stream() { cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); }
    ~Stream() {
        if (s != nullptr) cudaStreamDestroy(s);
    }
};


/* Polls the stream for up to 5 s; a stream still blocked ends the process (anything else would hang). */
inline void expect_stream_goes_on(cudaStream_t s, const char* after) {
    cudaError_t q = cudaErrorNotReady;
    for (int i = 0; i < 500 && q == cudaErrorNotReady; ++i) {
        q = cudaStreamQuery(s);
        if (q == cudaErrorNotReady) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (q != cudaSuccess) {
        fprintf(stderr, "rank %d: the stream is still blocked 5 s after %s (%s); exiting without cleanup\n",
                world_rank(), after, cuda_str(q).c_str());
        fflush(stderr);
        _exit(1); // freeing anything now would wait for the blocked stream
    }
}

/* "call failed: ..." for the first result that is not vcclSuccess, or an empty string. */
inline std::string call_failure(vcclComm_t comm, const std::vector<vcclResult_t>& results) {
    for (vcclResult_t r : results) {
        if (r != vcclSuccess) return std::string("call failed: ") + result_str(r) + ": " + vcclGetLastError(comm);
    }
    return "";
}


/* A size variable of the environment as the library reads it (plain, K or M suffix); 0 when unset. */
inline size_t env_size(const char* name) {
    const char* v = getenv(name);
    if (v == nullptr) return 0;
    char* end = nullptr;
    unsigned long long x = strtoull(v, &end, 10);
    if (end != nullptr && (*end == 'K' || *end == 'k')) x <<= 10;
    if (end != nullptr && (*end == 'M' || *end == 'm')) x <<= 20;
    return size_t(x);
}

/* A graph captured on `s` in `mode` from `body`; nullptr and *why on failure. */
inline cudaGraphExec_t capture(cudaStream_t s, cudaStreamCaptureMode mode, const std::function<std::string()>& body,
                        std::string* why, cudaGraph_t* graph_out = nullptr) {
    if (cudaStreamBeginCapture(s, mode) != cudaSuccess) {
        *why = "cudaStreamBeginCapture failed";
        return nullptr;
    }
    std::string body_why = body();
    cudaGraph_t graph = nullptr;
    cudaError_t end = cudaStreamEndCapture(s, &graph);
    if (!body_why.empty()) {
        *why = body_why;
        if (graph != nullptr) cudaGraphDestroy(graph);
        return nullptr;
    }
    if (end != cudaSuccess || graph == nullptr) {
        *why = "the capture failed: " + cuda_str(end);
        return nullptr;
    }
    cudaGraphExec_t exec = nullptr;
    cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    if (graph_out != nullptr) *graph_out = graph;
    else cudaGraphDestroy(graph); // the instance keeps what it needs
    if (inst != cudaSuccess) {
        *why = "cudaGraphInstantiate failed: " + cuda_str(inst);
        return nullptr;
    }
    return exec;
}

/* VCCL_P2P_FIFO_BYTES as this process sees it (the FIFO's largest transfer; off by default). */
inline size_t fifo_bytes() { return env_size("VCCL_P2P_FIFO_BYTES"); }

} // namespace vgpu

#endif
