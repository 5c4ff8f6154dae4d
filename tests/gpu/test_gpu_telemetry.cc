/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device-memory tests (part of tests/gpu/test_gpu) of flow telemetry on the device path (telemetry/device_flows.h), as
 * vcclCommGetTelemetry shows it: path 2 of each peer counts a ring exchange of 1 MiB (copy engines), a small
 * exchange (the staging FIFO where it is on) and an allreduce (the low-latency kernel where it is on, else copy
 * engines), each both ways, with nothing outstanding once the stream is done; an exchange queued behind a blocked
 * stream shows as outstanding until the stream runs it; a receive that a peer which gave up released without data
 * counts as a failure, not as bytes received; the collective counters that vccl-telemetry serve shows count calls on
 * device buffers. VCCL_TELEMETRY_SAMPLE=1 times every transfer, so each waits for
 * its stream's note.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "gpu_test_util.h"
#include "mpi_gtest_main.h"
#include "test_util.h"

using namespace vtest;
using namespace vgpu;

namespace {

struct DevicePath {
    bool found = false;
    unsigned long long sent = 0, received = 0, outstanding = 0, completions = 0, failures = 0;
    double send_bw = 0;
};

/* A communicator whose telemetry times every transfer (so each waits for its stream's note), in private memory. */
vcclComm_t timed_comm() {
    return comm_with_env({{"VCCL_TELEMETRY", "1"}, {"VCCL_TELEMETRY_SAMPLE", "1"}, {"VCCL_TELEMETRY_SHM", "0"}});
}

/* Path 2 (the device path) of `peer` as this rank's telemetry shows it now. */
DevicePath device_path(vcclComm_t comm, int peer) {
    std::vector<vcclTelemetryPeer> peers(256);
    int n = 0;
    DevicePath d;
    if (vcclCommGetTelemetry(comm, peers.data(), int(peers.size()), &n) != vcclSuccess) return d;
    for (int i = 0; i < n && i < int(peers.size()); ++i) {
        if (peers[size_t(i)].peer != peer || peers[size_t(i)].path != 2) continue;
        d.found = true;
        d.sent = peers[size_t(i)].bytesSent;
        d.received = peers[size_t(i)].bytesReceived;
        d.outstanding = peers[size_t(i)].outstandingRequests;
        d.completions = peers[size_t(i)].completions;
        d.failures = peers[size_t(i)].failures;
        d.send_bw = peers[size_t(i)].sendBandwidth;
    }
    return d;
}

std::string describe(const DevicePath& d) {
    std::ostringstream o;
    o << "found " << d.found << " sent " << d.sent << " received " << d.received << " outstanding " << d.outstanding
      << " failures " << d.failures;
    return o.str();
}

/* Sends `bytes` of send to next and receives as many from prev into recv, on s. */
vcclResult_t ring(vcclComm_t comm, const char* send, char* recv, size_t bytes, cudaStream_t s) {
    const int rank = world_rank(), n = world_size();
    vcclResult_t g = vcclGroupStart();
    vcclResult_t x = vcclSend(send, bytes, vcclUint8, (rank + 1) % n, comm, s);
    vcclResult_t y = vcclRecv(recv, bytes, vcclUint8, (rank + n - 1) % n, comm, s);
    vcclResult_t e = vcclGroupEnd();
    for (vcclResult_t r : {g, x, y, e}) {
        if (r != vcclSuccess) return r;
    }
    return vcclSuccess;
}

/* Empty when the device path of next shows at least `sent` more bytes sent and that of prev `received` more
 * bytes received than before, and nothing outstanding on either. */
std::string grew(vcclComm_t comm, const DevicePath& to_before, const DevicePath& from_before, unsigned long long sent,
                 unsigned long long received, const char* what) {
    const int rank = world_rank(), n = world_size();
    DevicePath to, from;
    // The snapshot looks at the notes only when it gets the operation lock (the idle-progress thread may hold it
    // for a moment, and then publishes within a millisecond): a few tries.
    for (int attempt = 0; attempt < 50; ++attempt) {
        to = device_path(comm, (rank + 1) % n);
        from = device_path(comm, (rank + n - 1) % n);
        if (to.outstanding == 0 && from.outstanding == 0 && to.sent >= to_before.sent + sent &&
            from.received >= from_before.received + received)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::string where = std::string(what) + ": to next " + describe(to) + ", from prev " + describe(from);
    if (!to.found || !from.found) return where + ": no device path";
    if (to.sent < to_before.sent + sent) return where + ": sent bytes did not grow by " + std::to_string(sent);
    if (from.received < from_before.received + received) {
        return where + ": received bytes did not grow by " + std::to_string(received);
    }
    if (to.outstanding != 0 || from.outstanding != 0) return where + ": still outstanding after the stream was done";
    return "";
}

TEST(GpuTelemetry, DevicePathShowsTransfersKernelsAndWhatIsStillQueued) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr); // first: it decides whether ranks sharing a GPU use the kernels
    vcclComm_t comm = timed_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    if (world_size() < 2) {
        vcclCommDestroy(comm);
        GTEST_SKIP() << "needs 2 ranks";
    }
    const int rank = world_rank(), n = world_size(), next = (rank + 1) % n, prev = (rank + n - 1) % n;
    Stream s;
    const size_t big = size_t(1) << 20, small = 1000;
    DevBuf send(big), recv(big);
    ASSERT_ALL_RANKS(send.base != nullptr && recv.base != nullptr);
    std::string why;
    auto step = [&](const char* what, size_t sent, size_t received, const std::function<vcclResult_t()>& call) {
        if (!why.empty()) return;
        const DevicePath to = device_path(comm, next), from = device_path(comm, prev);
        vcclResult_t r = call();
        if (r != vcclSuccess) {
            why = std::string(what) + ": " + result_str(r) + ": " + vcclGetLastError(comm);
            return;
        }
        if (cudaStreamSynchronize(s.s) != cudaSuccess) {
            why = std::string(what) + ": stream failed";
            return;
        }
        why = grew(comm, to, from, sent, received, what);
    };
    const long long direct_before = vccl::testing::direct_sends(comm);
    step("ring exchange of 1 MiB", big, big, [&] { return ring(comm, send.ptr(), recv.ptr(), big, s.s); });
    if (why.empty() && vccl::testing::direct_sends(comm) <= direct_before) {
        why = "the 1 MiB exchange did not take the direct path (the test needs it)";
    }
    step("ring exchange of 1000 bytes", small, small, [&] { return ring(comm, send.ptr(), recv.ptr(), small, s.s); });
    step("allreduce of 1024 floats", 4096, 4096, [&] {
        return vcclAllReduce(send.ptr(), recv.ptr(), 1024, vcclFloat32, vcclSum, comm, s.s);
    });
    if (why.empty()) {
        const DevicePath d = device_path(comm, next);
        if (d.send_bw <= 0) why = "no send bandwidth on the device path: " + describe(d);
    }
    // Queued behind a blocked stream: outstanding until the stream gets to it (the note has not been written).
    if (why.empty()) {
        Gate gate;
        GateTimer opener(&gate, 10000);
        const DevicePath to = device_path(comm, next), from = device_path(comm, prev);
        cudaError_t ce = gate.dev != nullptr ? vt_wait_flag(gate.dev, s.s) : cudaErrorMemoryAllocation;
        vcclResult_t r = ce == cudaSuccess ? ring(comm, send.ptr(), recv.ptr(), big, s.s) : vcclUnhandledCudaError;
        const DevicePath queued = device_path(comm, next);
        gate.open();
        opener.disarm();
        if (ce != cudaSuccess || r != vcclSuccess) {
            why = "blocked exchange: could not enqueue";
        } else if (opener.fired()) {
            why = "blocked exchange: the call waited for the blocked stream";
        } else if (queued.outstanding == 0) {
            why = "blocked exchange: not outstanding while its stream was blocked: " + describe(queued);
        } else if (cudaStreamSynchronize(s.s) != cudaSuccess) {
            why = "blocked exchange: stream failed";
        } else {
            why = grew(comm, to, from, big, big, "blocked exchange, once the stream ran it");
        }
    }
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    vcclCommDestroy(comm);
}

/* Rank 1 gives up its send of 1 MiB after the descriptors were exchanged (test hook): it writes its FAIL word in
 * rank 0's flags, then releases rank 0's receive without data, and rank 0's stream goes on and writes the note.
 * Rank 0 then waits 30 ms without a call, so the idle-progress thread sees the note before any call has read the
 * FAIL words. Before, that poll counted the receive as 1 MiB received; now the record waits for a read of the
 * FAIL words that started after it was seen (telemetry/device_flows.h) and is a failure. Other ranks only create and
 * end the communicator. */
TEST(GpuTelemetry, AReceiveReleasedByAPeerThatGaveUpIsAFailure) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    vcclComm_t comm = timed_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    if (world_size() < 2) {
        vcclCommDestroy(comm);
        GTEST_SKIP() << "needs 2 ranks";
    }
    const int rank = world_rank();
    const size_t bytes = std::max(size_t(1) << 20, fifo_bytes() + 4096); // the direct path, not the FIFO
    Stream s;
    DevBuf buf(bytes);
    std::string why;
    if (rank == 1 && vccl::testing::fail_next_direct(comm, 1) != vcclSuccess) why = "test hook refused";
    if (rank == 1 && why.empty() && vcclSend(buf.ptr(), bytes, vcclUint8, 0, comm, s.s) == vcclSuccess) {
        why = "the failing send returned success";
    }
    if (rank == 0) {
        const DevicePath before = device_path(comm, 1);
        if (vcclRecv(buf.ptr(), bytes, vcclUint8, 1, comm, s.s) != vcclSuccess) {
            why = std::string("the receive failed on the host: ") + vcclGetLastError(comm);
        } else if (cudaStreamSynchronize(s.s) != cudaSuccess) {
            why = "the receiving stream failed";
        } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(30));
            DevicePath after;
            for (int attempt = 0; attempt < 50; ++attempt) { // the snapshot needs the operation lock
                after = device_path(comm, 1);
                if (after.outstanding == 0 && after.failures > before.failures) break;
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
            }
            printf("[rank 0] device path from rank 1 after it gave up: %s\n", describe(after).c_str());
            if (!after.found) {
                why = "no device path from rank 1";
            } else if (after.received != before.received) {
                why = "the released receive counted as bytes received: " + describe(after);
            } else if (after.failures <= before.failures) {
                why = "the released receive is not a failure: " + describe(after);
            } else if (after.outstanding != 0) {
                why = "still outstanding: " + describe(after);
            }
            vcclResult_t async = vcclSuccess;
            if (why.empty() && (vcclCommGetAsyncError(comm, &async) != vcclSuccess || async != vcclRemoteError)) {
                why = "vcclCommGetAsyncError reported " + result_str(async);
            }
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    vcclResult_t end = vcclCommAbort(comm);
    if (end != vcclSuccess && why.empty()) why = "abort failed: " + result_str(end);
    expect_stream_goes_on(s.s, "a peer's failure and abort");
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
}

/* vcclCommGetAsyncError and vcclCommGetTelemetry read the FAIL words on the communicator's GPU, from whatever thread
 * calls them (a framework's watchdog or a monitoring thread). Such a thread may never have used CUDA: it reports
 * device 0 with no context. Before, the calls put device 0 back when done, which created a context on GPU 0 in a
 * process that uses another GPU (memory taken there; an error in exclusive-process mode). A rank whose GPU is not 0
 * makes both calls from a new thread after a device AllReduce (so the snapshot has records to confirm), and checks
 * that GPU 0's primary context is still inactive and that the thread is left without a context. */
TEST(GpuTelemetry, CallsFromAThreadWithoutContextCreateNoneOnGpu0) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    vcclComm_t comm = timed_comm();
    ASSERT_ALL_RANKS(comm != nullptr);
    Stream s;
    DevBuf buf(1 << 20);
    std::string why;
    if (vcclAllReduce(buf.ptr(), buf.ptr(), 1 << 18, vcclFloat32, vcclSum, comm, s.s) != vcclSuccess ||
        cudaStreamSynchronize(s.s) != cudaSuccess) {
        why = std::string("the allreduce failed: ") + vcclGetLastError(comm);
    }
    int device = -1;
    cudaGetDevice(&device);
    using GetState = CUresult (*)(CUdevice, unsigned int*, int*);
    using GetCurrent = CUresult (*)(CUcontext*);
    GetState get_state = nullptr;
    GetCurrent get_current = nullptr;
    cudaDriverEntryPointQueryResult q1, q2;
    const bool entries =
        cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", reinterpret_cast<void**>(&get_state), 12000,
                                         cudaEnableDefault, &q1) == cudaSuccess &&
        q1 == cudaDriverEntryPointSuccess &&
        cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", reinterpret_cast<void**>(&get_current), 12000,
                                         cudaEnableDefault, &q2) == cudaSuccess &&
        q2 == cudaDriverEntryPointSuccess;
    auto gpu0_active = [&] {
        unsigned flags = 0;
        int active = 0;
        return get_state(0, &flags, &active) == CUDA_SUCCESS && active != 0;
    };
    std::string skipped;
    if (!why.empty()) {
    } else if (device <= 0) {
        skipped = "this rank's GPU is 0";
    } else if (!entries) {
        why = "cannot load cuDevicePrimaryCtxGetState or cuCtxGetCurrent";
    } else if (gpu0_active()) {
        skipped = "GPU 0 already has a context in this process";
    } else {
        bool left_context = true;
        std::thread([&] {
            vcclResult_t async = vcclSuccess;
            vcclCommGetAsyncError(comm, &async);
            std::vector<vcclTelemetryPeer> peers(64);
            int n = 0;
            vcclCommGetTelemetry(comm, peers.data(), int(peers.size()), &n);
            CUcontext ctx = nullptr;
            left_context = get_current(&ctx) != CUDA_SUCCESS || ctx != nullptr;
        }).join();
        printf("[rank %d] GPU %d: after the calls from a new thread, GPU 0's context is %s; the thread %s a "
               "context\n", world_rank(), device, gpu0_active() ? "active" : "inactive",
               left_context ? "has" : "has no");
        if (gpu0_active()) why = "the calls from a thread without a context created one on GPU 0";
        else if (left_context) why = "the calls left the new thread with a context";
    }
    if (!skipped.empty()) printf("[rank %d] not checked: %s\n", world_rank(), skipped.c_str());
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    vcclCommDestroy(comm);
}

/* The lines of `text` that are not comments and begin with one of `families`, or the first 500 characters when none do. */
std::string metric_lines(const std::string& text, std::initializer_list<const char*> families) {
    std::istringstream in(text);
    std::string line, out;
    while (std::getline(in, line)) {
        for (const char* f : families) {
            if (line.rfind(f, 0) == 0) out += line + "\n";
        }
    }
    return out.empty() ? text.substr(0, 500) : out;
}

/* The value of `family`{...rank="R"...coll="C"} in vccl-telemetry serve --print's text, or -1. */
double coll_metric(const std::string& text, const char* family, int rank, const char* coll) {
    std::istringstream in(text);
    std::string line;
    const std::string rank_label = "rank=\"" + std::to_string(rank) + "\"", coll_label = std::string("coll=\"") + coll + "\"";
    while (std::getline(in, line)) {
        if (line.rfind(std::string(family) + "{", 0) != 0) continue;
        if (line.find(rank_label) == std::string::npos || line.find(coll_label) == std::string::npos) continue;
        return atof(line.c_str() + line.rfind(' ') + 1);
    }
    return -1;
}

/* The collective counters that an operator scrapes (vccl-telemetry serve) count calls on device buffers, whichever path
 * runs them (the GPUs among themselves, or staged through host memory: the suites force each), with their bytes
 * and time (the GPUs' time sampled), and calls on host buffers with their time. Rank 0 reads every rank's ring with the tool built beside this test. */
TEST(GpuTelemetry, CollectiveCountersCountCallsOnDeviceBuffers) {
    ASSERT_ALL_RANKS(gpu_comm() != nullptr);
    int job_pid = int(getpid());
    MPI_Bcast(&job_pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    const std::string job = "vtest_colls_" + std::to_string(job_pid); // letters, digits, . and _ are kept as they are
    vcclComm_t comm = comm_with_env({{"VCCL_TELEMETRY", "1"}, {"VCCL_TELEMETRY_SHM", "1"}, {"VCCL_TELEMETRY_JOB", job.c_str()}});
    ASSERT_ALL_RANKS(comm != nullptr);
    const int n = world_size();
    Stream s;
    const size_t count = 1024, gather = 1000;
    DevBuf send(count * 4), recv(gather * 4 * size_t(n) + count * 4);
    std::vector<float> host_in(10, 1.0f), host_out(10, 0.0f);
    ASSERT_ALL_RANKS(send.base != nullptr && recv.base != nullptr);
    std::string why, skipped;
    // The 9th AllGather is timed where the GPUs run it (one in 64 of each kind, after the first 8); a later call (here
    // the host AllReduce, after the stream is done) adds its time.
    for (int i = 0; i < 10 && why.empty(); ++i) {
        vcclResult_t r = vcclAllGather(send.ptr(), recv.ptr(), gather, vcclInt32, comm, s.s);
        if (r != vcclSuccess) why = std::string("device allgather: ") + result_str(r) + ": " + vcclGetLastError(comm);
    }
    for (int i = 0; i < 3 && why.empty(); ++i) {
        vcclResult_t r = vcclAllReduce(send.ptr(), recv.ptr(), count, vcclFloat32, vcclSum, comm, s.s);
        if (r != vcclSuccess) why = std::string("device allreduce: ") + result_str(r) + ": " + vcclGetLastError(comm);
    }
    if (why.empty() && cudaStreamSynchronize(s.s) != cudaSuccess) why = "stream failed";
    if (why.empty()) {
        vcclResult_t r = vcclAllReduce(host_in.data(), host_out.data(), 10, vcclFloat32, vcclSum, comm, nullptr);
        if (r != vcclSuccess) why = std::string("host allreduce: ") + result_str(r) + ": " + vcclGetLastError(comm);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (why.empty() && world_rank() == 0) {
        char exe[4096] = {};
        const ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        std::string tool = len > 0 ? std::string(exe, size_t(len)) : std::string();
        tool = tool.substr(0, tool.rfind('/')) + "/../../vccl-telemetry"; // build/tests/gpu/test_gpu -> build/
        if (access(tool.c_str(), X_OK) != 0) {
            why = "vccl-telemetry not found at " + tool + " (built with the tests)";
        } else {
            std::string text;
            FILE* p = popen((tool + " serve --print --job " + job + " 2>&1").c_str(), "r");
            char buf[4096];
            size_t got;
            while (p != nullptr && (got = fread(buf, 1, sizeof(buf), p)) > 0) text.append(buf, got);
            const int status = p != nullptr ? pclose(p) : -1;
            if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 127) {
                // The loader could not start it (a library the build machine had, e.g. libmicrohttpd, missing).
                skipped = "vccl-telemetry cannot run here: " + text.substr(0, text.find('\n'));
            }
            for (int r = 0; r < n && why.empty() && skipped.empty(); ++r) {
                const double ar_calls = coll_metric(text, "vccl_coll_calls_total", r, "allreduce");
                const double ar_bytes = coll_metric(text, "vccl_coll_bytes_total", r, "allreduce");
                const double ag_calls = coll_metric(text, "vccl_coll_calls_total", r, "allgather");
                const double ag_bytes = coll_metric(text, "vccl_coll_bytes_total", r, "allgather");
                const double ar_seconds = coll_metric(text, "vccl_coll_seconds_total", r, "allreduce");
                const double ag_seconds = coll_metric(text, "vccl_coll_seconds_total", r, "allgather");
                std::ostringstream o;
                o << "rank " << r << ": allreduce calls " << ar_calls << " bytes " << ar_bytes << " seconds "
                  << ar_seconds << ", allgather calls " << ag_calls << " bytes " << ag_bytes << " seconds " << ag_seconds;
                printf("[rank 0] scraped %s\n", o.str().c_str());
                if (ar_calls != 4 || ar_bytes != 3 * 4096 + 40 || ag_calls != 10 || ag_bytes != 10 * 4000 ||
                    !(ar_seconds > 0) || !(ag_seconds > 0)) {
                    why = "want allreduce calls 4 bytes 12328 seconds > 0, allgather calls 10 bytes 40000 seconds > 0; " +
                          o.str() +
                          "; the tool said:\n" + metric_lines(text, {"vccl_ring_info", "vccl_scrape", "vccl_coll_calls"});
                }
            }
        }
    }
    int skip = skipped.empty() ? 0 : 1;
    MPI_Bcast(&skip, 1, MPI_INT, 0, MPI_COMM_WORLD);
    EXPECT_ALL_RANKS_WHY(why.empty(), why);
    vcclCommDestroy(comm);
    if (skip) GTEST_SKIP() << (world_rank() == 0 ? skipped : std::string("rank 0 could not run vccl-telemetry"));
}

} // namespace
