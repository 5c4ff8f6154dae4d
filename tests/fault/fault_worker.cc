/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault_worker: the MPI program the link fault tests and contrib/bench-fault.sh run on 2 ranks.
 *
 *   fault_worker --netns-prefix P --dir DIR [--duration S] [--mode mixed|large] [--memory host|cuda]
 *   fault_worker --probe-cuda      exit 0 when built with CUDA and a GPU is visible, else 77 with the reason
 *
 * --memory cuda: the operations run on cudaMalloc buffers and a stream (both ranks on GPU 0; the checks copy
 * the results back). Run it with VCCL_P2P_DIRECT=0, so that device data crosses the rails through vccl's
 * host staging as it would between nodes, instead of the one-host IPC path that needs no network.
 * Each rank enters network namespace P<rank> (made by tests/fault/netns.sh) after MPI_Init, so MPI keeps
 * talking over shared memory while vccl's sockets live on the namespace's rails. Then it alternates
 * allreduce (float sum) and send/recv exchanges for S seconds, checking every element against values computed
 * independently, and timing each operation. A telemetry thread polls vcclCommGetTelemetry every millisecond
 * and notes when the path carrying traffic to a peer changes.
 *
 * Synchronisation with the fault injector (the shell script): rank 0 writes DIR/started once the
 * communicator works; the script injects faults at offsets from then and appends "fault ..."/"repair ..."
 * lines with wall-clock ns to DIR/timeline, and "end" when its schedule is over. Both sides use the wall
 * clock (CLOCK_REALTIME): one host, one clock, and the shell has it (date +%s%N).
 *
 * Output: one JSON line per rank on stdout, prefixed "FAULT_RESULT ", also written to DIR/result.r<rank>.json.
 * Times are ms; -1 means "did not happen". Exit 0 once the result is written (the script judges it),
 * 2 when the setup failed (then every rank is aborted: a half-built communicator would hang the other rank).
 */
#include <fcntl.h>
#include <mpi.h>
#include <sched.h>
#include <sys/mount.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "vccl.h"
#include "vccl_mpi.h"

#if VF_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace {

int64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

double ms(int64_t ns) { return double(ns) / 1e6; }

struct Options {
    std::string netns_prefix;
    std::string dir = ".";
    std::string mode = "mixed";
    std::string memory = "host";
    double duration_s = 8;
};

bool parse_args(int argc, char** argv, Options* o) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (i + 1 >= argc) return false;
        std::string v = argv[++i];
        if (a == "--netns-prefix") o->netns_prefix = v;
        else if (a == "--dir") o->dir = v;
        else if (a == "--duration") o->duration_s = atof(v.c_str());
        else if (a == "--mode") o->mode = v;
        else if (a == "--memory") o->memory = v;
        else return false;
    }
    return o->duration_s > 0 && (o->mode == "mixed" || o->mode == "large") &&
           (o->memory == "host" || o->memory == "cuda");
}

/* Allreduce inputs are small integers stored as floats: any sum of a few of them is exact, so the expected
 * result is computed here with no rounding question and every difference is a real error. */
float ar_value(long it, int rank, size_t j) {
    return float(int64_t((uint64_t(it) * 131 + j * 7 + uint64_t(rank) * 1009) % 2048) - 1024);
}

/* Send/recv payloads: a hash of (iteration, sender, index), so a chunk delivered twice, late or at the wrong
 * offset never matches. */
uint32_t p2p_value(long it, int sender, size_t j) {
    uint64_t x = (uint64_t(it) << 40) ^ (uint64_t(sender) << 32) ^ j;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return uint32_t(x);
}

uint64_t fnv1a(const void* p, size_t n) {
    const unsigned char* b = static_cast<const unsigned char*>(p);
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

std::string json_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\', out += c;
        else if (static_cast<unsigned char>(c) < 0x20) out += ' ';
        else out += c;
    }
    return out;
}

const char* state_name(int s) {
    switch (s) {
    case vcclPathUp: return "up";
    case vcclPathDown: return "down";
    case vcclPathStandby: return "standby";
    default: return "unused";
    }
}

/* Watches path states from its own thread: the main thread may sit inside a stalled operation exactly when
 * the interesting change happens. */
class TelemetryWatch {
  public:
    struct Change {
        int64_t t;
        int peer, from, to; // active path: lowest path index in state up, -1 when none
    };

    explicit TelemetryWatch(vcclComm_t comm) : comm_(comm) {
        int n = 0;
        available_ = vcclCommGetTelemetry(comm, nullptr, 0, &n) == vcclSuccess;
        if (available_) thread_ = std::thread([this] { run(); });
    }
    ~TelemetryWatch() { stop(); }
    void stop() {
        stop_.store(true);
        if (thread_.joinable()) thread_.join();
    }
    bool available() const { return available_; }
    std::vector<Change> changes() {
        std::lock_guard<std::mutex> lock(mutex_);
        return changes_;
    }
    std::string final_states() {
        std::lock_guard<std::mutex> lock(mutex_);
        return final_;
    }
    uint64_t state_changes() const { return state_changes_.load(); }

  private:
    void run() {
        std::vector<vcclTelemetryPeer> peers(64);
        std::vector<int> last_active(1024, 0);   // every peer starts on the primary
        std::vector<int> last_state(1024 * 2, -1);
        while (!stop_.load()) {
            int n = 0;
            if (vcclCommGetTelemetry(comm_, peers.data(), int(peers.size()), &n) == vcclSuccess) {
                int64_t t = now_ns();
                n = std::min(n, int(peers.size()));
                std::vector<int> active(last_active.size(), -1);
                std::vector<bool> seen(last_active.size(), false);
                std::string states;
                for (int i = 0; i < n; ++i) {
                    const vcclTelemetryPeer& p = peers[i];
                    if (p.peer < 0 || p.peer >= int(active.size()) || p.path < 0 || p.path > 1) continue;
                    seen[p.peer] = true;
                    if (p.state == vcclPathUp && (active[p.peer] < 0 || p.path < active[p.peer])) active[p.peer] = p.path;
                    int& ls = last_state[p.peer * 2 + p.path];
                    if (ls != -1 && ls != p.state) state_changes_.fetch_add(1);
                    ls = p.state;
                    char buf[64];
                    snprintf(buf, sizeof buf, "%s%d.%d=%s", states.empty() ? "" : ",", p.peer, p.path,
                             state_name(p.state));
                    states += buf;
                }
                std::lock_guard<std::mutex> lock(mutex_);
                final_ = states;
                for (size_t peer = 0; peer < active.size(); ++peer) {
                    if (!seen[peer] || active[peer] == last_active[peer]) continue;
                    changes_.push_back({t, int(peer), last_active[peer], active[peer]});
                    last_active[peer] = active[peer];
                }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    }

    vcclComm_t comm_;
    bool available_ = false;
    std::atomic<bool> stop_{false};
    std::atomic<uint64_t> state_changes_{0};
    std::thread thread_;
    std::mutex mutex_;
    std::vector<Change> changes_;
    std::string final_;
};

struct Op {
    int64_t start, end;
    bool allreduce;
    size_t bytes;
    bool ok; // a failed operation still ends a stall; it carries no bandwidth
};

/* The injector's timeline: "fault NAME DEV T", "repair NAME DEV T", "end T" (T: wall-clock ns). */
struct Timeline {
    std::vector<int64_t> faults, repairs;
    bool ended = false;
};

Timeline read_timeline(const std::string& path) {
    Timeline tl;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream words(line);
        std::string first, w, last;
        words >> first;
        while (words >> w) last = w;
        int64_t t = strtoll(last.c_str(), nullptr, 10);
        if (first == "fault") tl.faults.push_back(t);
        else if (first == "repair") tl.repairs.push_back(t);
        else if (first == "end") tl.ended = true;
    }
    return tl;
}

double median(std::vector<double> v) {
    if (v.empty()) return -1;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/* Algorithm bandwidth (GB/s, 1e9) of the large allreduces inside [from, to). */
double window_bw(const std::vector<Op>& ops, size_t min_bytes, int64_t from, int64_t to) {
    double bytes = 0, secs = 0;
    for (const Op& op : ops) {
        if (!op.ok || !op.allreduce || op.bytes < min_bytes || op.start < from || op.end > to) continue;
        bytes += double(op.bytes);
        secs += double(op.end - op.start) / 1e9;
    }
    return secs > 0 ? bytes / secs / 1e9 : -1;
}

/* Moves the calling thread into network namespace NAME, the way `ip netns exec` does. Only this thread
 * moves; threads started later (vccl's proxy, UCX's) inherit its namespaces, MPI's existing ones stay out.
 * Sockets alone would work after setns, but UCX and hwloc find network devices in /sys/class/net, which
 * shows the namespace sysfs was mounted in: so also a private mount namespace with a fresh sysfs. */
std::string enter_netns(const std::string& name) {
    std::string path = "/var/run/netns/" + name;
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "cannot open " + path + ": " + strerror(errno);
    int rc = setns(fd, CLONE_NEWNET);
    int err = errno;
    close(fd);
    if (rc != 0) return "setns(" + path + "): " + strerror(err);
    if (unshare(CLONE_NEWNS) != 0) return std::string("unshare(CLONE_NEWNS): ") + strerror(errno);
    // Slave first, so that replacing /sys here never propagates back to the host's mount namespace.
    if (mount(nullptr, "/", nullptr, MS_SLAVE | MS_REC, nullptr) != 0)
        return std::string("making / a slave mount: ") + strerror(errno);
    umount2("/sys", MNT_DETACH); // may not be a mount point of its own; mounting over it works then too
    if (mount(name.c_str(), "/sys", "sysfs", 0, nullptr) != 0)
        return std::string("mounting sysfs for the namespace: ") + strerror(errno);
    return "";
}

/* --memory cuda: device copies of the operation buffers and the stream the operations run on. */
struct DeviceBuffers {
    bool on = false;
    void* ar_send = nullptr;
    void* ar_recv = nullptr;
    void* p2p_send = nullptr;
    void* p2p_recv = nullptr;
    void* stream = nullptr;

#if VF_HAVE_CUDA
    static std::string cuda_error(const char* what, cudaError_t e) {
        return std::string(what) + ": " + cudaGetErrorString(e);
    }
    /* Empty on success, else why not. */
    std::string init(size_t bytes) {
        cudaError_t e = cudaSetDevice(0);
        if (e != cudaSuccess) return cuda_error("cudaSetDevice(0)", e);
        for (void** b : {&ar_send, &ar_recv, &p2p_send, &p2p_recv}) {
            if ((e = cudaMalloc(b, bytes)) != cudaSuccess) return cuda_error("cudaMalloc", e);
        }
        cudaStream_t st = nullptr;
        if ((e = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking)) != cudaSuccess)
            return cuda_error("cudaStreamCreate", e);
        stream = st;
        on = true;
        return std::string();
    }
    /* On the operations' stream: a plain cudaMemcpy from pageable memory may return before its DMA lands,
     * and it is not ordered with a non-blocking stream (the operation would read stale data). */
    std::string upload(void* dst, const void* src, size_t bytes) {
        cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream));
        return e == cudaSuccess ? std::string() : cuda_error("cudaMemcpyAsync to the GPU", e);
    }
    std::string download(void* dst, const void* src, size_t bytes) {
        cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
        return e == cudaSuccess ? std::string() : cuda_error("cudaMemcpy from the GPU", e);
    }
    /* The operations are stream-ordered: they are done once the stream is. */
    std::string sync() {
        cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
        return e == cudaSuccess ? std::string() : cuda_error("cudaStreamSynchronize", e);
    }
#else
    std::string init(size_t) { return "fault_worker was built without CUDA"; }
    std::string upload(void*, const void*, size_t) { return "no CUDA"; }
    std::string download(void*, const void*, size_t) { return "no CUDA"; }
    std::string sync() { return "no CUDA"; }
#endif
};

/* --probe-cuda: can --memory cuda run here? */
int probe_cuda() {
#if VF_HAVE_CUDA
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("no usable GPU: %s\n", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
        return 77;
    }
    printf("%d GPU(s)\n", n);
    return 0;
#else
    printf("fault_worker was built without CUDA\n");
    return 77;
#endif
}

[[noreturn]] void setup_failed(const Options& o, int rank, const std::string& why) {
    char line[1024];
    snprintf(line, sizeof line, "{\"rank\":%d,\"setup_error\":\"%s\"}", rank, json_escape(why).c_str());
    printf("FAULT_RESULT %s\n", line);
    fflush(stdout);
    std::ofstream(o.dir + "/result.r" + std::to_string(rank) + ".json") << line << "\n";
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

} // namespace

int main(int argc, char** argv) {
    if (argc == 2 && strcmp(argv[1], "--probe-cuda") == 0) return probe_cuda(); // no MPI needed
    MPI_Init(&argc, &argv);
    int rank = 0, nranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    Options opt;
    if (!parse_args(argc, argv, &opt)) {
        if (rank == 0)
            fprintf(stderr, "usage: %s --netns-prefix P --dir DIR [--duration S] [--mode mixed|large] [--memory host|cuda]\n",
                    argv[0]);
        MPI_Finalize();
        return 2;
    }
    if (nranks < 2) setup_failed(opt, rank, "needs at least 2 ranks");

    if (!opt.netns_prefix.empty()) {
        std::string why = enter_netns(opt.netns_prefix + std::to_string(rank));
        if (!why.empty()) setup_failed(opt, rank, why);
    }

    vcclComm_t comm = nullptr;
    vcclResult_t rc = vcclCommInitMPI(&comm, MPI_COMM_WORLD, nullptr);
    if (rc != vcclSuccess) setup_failed(opt, rank, std::string("vcclCommInitMPI: ") + vcclGetLastError(nullptr));

    const std::vector<size_t> sizes = opt.mode == "large"
                                          ? std::vector<size_t>{1 << 20}
                                          : std::vector<size_t>{1, 3, 1000, 4097, 65535, 262147, 1048575, 1 << 20};
    const size_t max_count = *std::max_element(sizes.begin(), sizes.end());
    const size_t large_bytes = (max_count - 1) * sizeof(float); // "large": the 4 MiB sizes, odd one included
    std::vector<float> ar_send(max_count), ar_recv(max_count);
    std::vector<uint32_t> p2p_send(max_count), p2p_recv(max_count), p2p_expect(max_count);
    const int to = (rank + 1) % nranks, from = (rank + nranks - 1) % nranks;
    DeviceBuffers dev;
    if (opt.memory == "cuda") {
        std::string why = dev.init(max_count * sizeof(float));
        if (!why.empty()) setup_failed(opt, rank, "--memory cuda: " + why);
    }

    uint64_t wrong = 0, checksum_mismatches = 0, errors = 0, n_ar = 0, n_p2p = 0;
    int first_error_code = 0;
    int64_t first_error_t = -1;
    std::string first_error;
    std::vector<Op> ops;
    ops.reserve(1 << 16);

    // One operation of the run; `it` numbers operations so that data differs between them. Negative: warm-up.
    // *t0/*t1 get the times around the vccl calls alone: filling and checking buffers is not communication.
    int64_t t0 = 0, t1 = 0;
    auto run_op = [&](long it, bool allreduce, size_t count) -> vcclResult_t {
        vcclResult_t r;
        std::string cuda_failed; // a CUDA call of the test itself failed: counted as an error
        // On device memory the operation is done when its stream is: the sync is part of its time.
        auto finish_on_device = [&](vcclResult_t posted) {
            if (posted == vcclSuccess && dev.on) {
                cuda_failed = dev.sync();
                if (!cuda_failed.empty()) return vcclUnhandledCudaError;
            }
            return posted;
        };
        if (allreduce) {
            for (size_t j = 0; j < count; ++j) ar_send[j] = ar_value(it, rank, j);
            if (dev.on) cuda_failed = dev.upload(dev.ar_send, ar_send.data(), count * sizeof(float));
            t0 = now_ns();
            r = !cuda_failed.empty() ? vcclUnhandledCudaError
                : finish_on_device(vcclAllReduce(dev.on ? dev.ar_send : ar_send.data(), dev.on ? dev.ar_recv : ar_recv.data(),
                                                 count, vcclFloat, vcclSum, comm, dev.stream));
            t1 = now_ns();
            if (r == vcclSuccess && dev.on) {
                cuda_failed = dev.download(ar_recv.data(), dev.ar_recv, count * sizeof(float));
                if (!cuda_failed.empty()) r = vcclUnhandledCudaError;
            }
            if (r == vcclSuccess) {
                for (size_t j = 0; j < count; ++j) {
                    float expect = 0;
                    for (int q = 0; q < nranks; ++q) expect += ar_value(it, q, j);
                    if (ar_recv[j] != expect) ++wrong;
                }
            }
        } else {
            for (size_t j = 0; j < count; ++j) p2p_send[j] = p2p_value(it, rank, j);
            std::fill(p2p_recv.begin(), p2p_recv.begin() + long(count), 0u);
            if (dev.on) {
                cuda_failed = dev.upload(dev.p2p_send, p2p_send.data(), count * 4);
                if (cuda_failed.empty()) cuda_failed = dev.upload(dev.p2p_recv, p2p_recv.data(), count * 4);
            }
            t0 = now_ns();
            if (cuda_failed.empty()) {
                vcclGroupStart();
                vcclSend(dev.on ? dev.p2p_send : p2p_send.data(), count, vcclUint32, to, comm, dev.stream);
                vcclRecv(dev.on ? dev.p2p_recv : p2p_recv.data(), count, vcclUint32, from, comm, dev.stream);
                r = finish_on_device(vcclGroupEnd());
            } else {
                r = vcclUnhandledCudaError;
            }
            t1 = now_ns();
            if (r == vcclSuccess && dev.on) {
                cuda_failed = dev.download(p2p_recv.data(), dev.p2p_recv, count * 4);
                if (!cuda_failed.empty()) r = vcclUnhandledCudaError;
            }
            if (r == vcclSuccess) {
                for (size_t j = 0; j < count; ++j) {
                    p2p_expect[j] = p2p_value(it, from, j);
                    if (p2p_recv[j] != p2p_expect[j]) ++wrong;
                }
                if (fnv1a(p2p_recv.data(), count * 4) != fnv1a(p2p_expect.data(), count * 4)) ++checksum_mismatches;
            }
        }
        if (r != vcclSuccess && errors++ == 0) {
            first_error_code = r;
            first_error_t = now_ns();
            first_error = std::string(vcclGetErrorString(r)) + ": " +
                          (!cuda_failed.empty() ? cuda_failed : std::string(vcclGetLastError(comm)));
        }
        return r;
    };

    // Warm-up proves the rails carry traffic before the injector is told to start.
    bool warm_ok = run_op(-1, true, 1000) == vcclSuccess && run_op(-2, false, 1000) == vcclSuccess;
    int all_ok = warm_ok ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) setup_failed(opt, rank, "warm-up failed: " + first_error);
    wrong = 0;

    TelemetryWatch watch(comm);
    int64_t started = now_ns();
    MPI_Bcast(&started, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        std::string tmp = opt.dir + "/started.tmp";
        std::ofstream(tmp) << started << "\n";
        rename(tmp.c_str(), (opt.dir + "/started").c_str()); // atomic: the script never reads half a file
    }
    const int64_t stop_at = started + int64_t(opt.duration_s * 1e9);

    int any_rank_failed = 0; // from the stop vote: some rank's last operation failed
    for (long it = 0;; ++it) {
        bool allreduce = it % 2 == 0;
        size_t count = sizes[size_t(it / 2) % sizes.size()];
        vcclResult_t r = run_op(it, allreduce, count);
        Op op{t0, t1, allreduce, count * 4, r == vcclSuccess};
        ops.push_back(op);
        if (r == vcclSuccess) allreduce ? ++n_ar : ++n_p2p;
        // Both ranks stop after the same operation (decided over MPI, which faults do not touch): a rank that
        // stopped alone would leave the other waiting in a collective.
        int flags[2] = {op.end >= stop_at, r != vcclSuccess};
        MPI_Allreduce(MPI_IN_PLACE, flags, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        any_rank_failed = flags[1];
        if (flags[0] || flags[1]) break;
    }
    const int64_t finished = now_ns();
    watch.stop();

    // The injector appends "end" when its schedule is over; it normally is by now.
    Timeline tl = read_timeline(opt.dir + "/timeline");
    for (int i = 0; i < 50 && !tl.ended && errors == 0; ++i) {
        usleep(100000);
        tl = read_timeline(opt.dir + "/timeline");
    }

    // --- analysis ---
    std::vector<TelemetryWatch::Change> changes = watch.changes();
    int64_t max_stall = 0, max_stall_start = started, prev = started;
    for (const Op& op : ops) {
        if (op.end - prev > max_stall) max_stall = op.end - prev, max_stall_start = prev;
        prev = op.end;
    }
    const int64_t fault0 = tl.faults.empty() ? -1 : tl.faults.front();

    // The stall that the first fault caused: last completion before it to the first completion after it.
    double stall_at_fault = -1;
    if (fault0 >= 0) {
        int64_t before = started, after = -1;
        for (const Op& op : ops) {
            if (op.end < fault0) before = op.end;
            else if (after < 0) after = op.end;
        }
        if (after >= 0) stall_at_fault = ms(after - before);
    }

    // Per fault event: time until the active path left the primary; per repair: until it came back.
    // An event's window ends at the next event of the other kind (flapping faults come in quick succession).
    std::vector<int64_t> events; // merged, to find each event's successor
    for (int64_t t : tl.faults) events.push_back(t);
    for (int64_t t : tl.repairs) events.push_back(t);
    std::sort(events.begin(), events.end());
    auto next_event = [&](int64_t t) {
        auto it = std::upper_bound(events.begin(), events.end(), t);
        return it == events.end() ? INT64_MAX : *it;
    };
    auto first_change = [&](int64_t from_t, int64_t to_t, bool to_primary) -> int64_t {
        for (const auto& c : changes)
            if (c.t >= from_t && c.t < to_t && ((c.to == 0) == to_primary)) return c.t;
        return -1;
    };
    std::vector<double> detect, failback;
    int64_t detect0 = -1, failback_last = -1;
    for (int64_t f : tl.faults) {
        int64_t t = first_change(f, next_event(f), false);
        if (t >= 0) detect.push_back(ms(t - f));
        if (f == fault0) detect0 = t;
    }
    for (int64_t rp : tl.repairs) {
        int64_t t = first_change(rp, next_event(rp), true);
        if (t >= 0) failback.push_back(ms(t - rp));
        failback_last = t;
    }

    const int64_t repair_last = tl.repairs.empty() ? -1 : tl.repairs.back();
    double bw_healthy = window_bw(ops, large_bytes, started, fault0 >= 0 ? fault0 : INT64_MAX);
    double bw_faulted = -1, bw_repaired = -1;
    if (fault0 >= 0) {
        // On the backup: from the switch (or the fault, when no switch was seen) to the repair.
        int64_t from_t = detect0 >= 0 ? detect0 : fault0;
        bw_faulted = window_bw(ops, large_bytes, from_t, repair_last > fault0 ? repair_last : INT64_MAX);
        if (repair_last > tl.faults.back())
            bw_repaired = window_bw(ops, large_bytes, failback_last >= 0 ? failback_last : repair_last, INT64_MAX);
    }

    char line[4096];
    snprintf(line, sizeof line,
             "{\"rank\":%d,\"nranks\":%d,\"mode\":\"%s\",\"memory\":\"%s\",\"run_ms\":%.1f,\"iterations\":%" PRIu64 ",\"allreduces\":%" PRIu64
             ",\"sendrecvs\":%" PRIu64 ",\"wrong\":%" PRIu64 ",\"checksum_mismatches\":%" PRIu64
             ",\"errors\":%" PRIu64 ",\"first_error_code\":%d,\"first_error\":\"%s\",\"first_error_ms\":%.1f"
             ",\"max_stall_ms\":%.1f,\"max_stall_from_ms\":%.1f,\"stall_at_fault_ms\":%.1f,\"bw_healthy_gbs\":%.3f,\"bw_faulted_gbs\":%.3f"
             ",\"bw_repaired_gbs\":%.3f,\"faults\":%zu,\"repairs\":%zu,\"telemetry\":%s,\"path_switches\":%zu"
             ",\"state_changes\":%" PRIu64 ",\"detected\":%zu,\"detect_ms\":%.1f,\"detect_median_ms\":%.1f"
             ",\"failed_back\":%zu,\"failback_ms\":%.1f,\"failback_median_ms\":%.1f,\"paths\":\"%s\"}",
             rank, nranks, opt.mode.c_str(), opt.memory.c_str(), ms(finished - started), n_ar + n_p2p, n_ar, n_p2p, wrong,
             checksum_mismatches, errors, first_error_code, json_escape(first_error).c_str(),
             first_error_t < 0 ? -1.0 : ms(first_error_t - (fault0 >= 0 ? fault0 : started)), ms(max_stall),
             ms(max_stall_start - started), stall_at_fault, bw_healthy, bw_faulted, bw_repaired, tl.faults.size(), tl.repairs.size(),
             watch.available() ? "true" : "false", changes.size(), watch.state_changes(), detect.size(),
             detect0 >= 0 ? ms(detect0 - fault0) : -1.0, median(detect), failback.size(),
             failback.empty() ? -1.0 : failback.front(), median(failback), watch.final_states().c_str());
    printf("FAULT_RESULT %s\n", line);
    fflush(stdout);
    std::ofstream(opt.dir + "/result.r" + std::to_string(rank) + ".json") << line << "\n";

    // After an error the communicator is not trusted to finish a clean shutdown: abort, which never hangs.
    // Decided by all ranks together: when every path is down, a rank whose last operation completed (its
    // peer's data had all arrived) sees no error while its peer times out waiting for an acknowledgement; a
    // barrier on the error-free rank alone would then wait for a peer that is already aborting and finalising.
    const int64_t close_start = now_ns();
    vcclResult_t close_rc;
    if (errors == 0 && !any_rank_failed) {
        MPI_Barrier(MPI_COMM_WORLD);
        close_rc = vcclCommDestroy(comm);
    } else {
        close_rc = vcclCommAbort(comm);
    }
    printf("fault_worker: rank %d %s in %.1f ms (%s)\n", rank, errors == 0 && !any_rank_failed ? "destroyed" : "aborted",
           ms(now_ns() - close_start), vcclGetErrorString(close_rc));
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
