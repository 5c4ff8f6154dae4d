/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Telemetry across ranks: vcclCommGetTelemetry reports the bytes that were sent and received; vccl-telemetry
 * top lists every rank's ring while the job runs; report, on the VCCL_TELEMETRY_DIR files, flags a slowed
 * link and a late rank.
 *
 * The slow link is simulated through the test library (vccl::testing::slow_link), which stretches the recorded
 * duration of one rank's sends; the link shaping tests (tc on rails in network namespaces) are in tests/fault. The late rank is real: it sleeps before each collective.
 */
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <cstdio>
#include <string>
#include <vector>

#include "mpi_gtest_main.h"
#include "test_util.h"

#include "testing/test_hooks.h"

using namespace vtest;

namespace {

std::string tool_path() {
    const char* top = getenv("top_builddir");
    return std::string(top != nullptr && *top ? top : ".") + "/vccl-telemetry";
}

std::string run_capture(const std::string& cmd, int* status) {
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) {
        *status = -1;
        return out;
    }
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    *status = pclose(p);
    return out;
}

std::vector<vcclTelemetryPeer> get_telemetry(vcclComm_t comm, vcclResult_t* rc) {
    int n = -1;
    *rc = vcclCommGetTelemetry(comm, nullptr, 0, &n);
    std::vector<vcclTelemetryPeer> v;
    if (*rc != vcclSuccess || n <= 0) return v;
    v.resize(size_t(n));
    int m = -1;
    *rc = vcclCommGetTelemetry(comm, v.data(), n, &m);
    if (m < n) v.resize(size_t(m < 0 ? 0 : m));
    return v;
}

uint64_t mono_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

uint64_t sum_over_ranks(uint64_t x) {
    uint64_t out = 0;
    MPI_Allreduce(&x, &out, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    return out;
}

TEST(Telemetry, ReportsBytesSentAndReceived) {
    int rank = world_rank(), n = world_size();
    vcclResult_t rc;
    // Every transfer timed, so that every path that moved bytes has a bandwidth (sampled, a path that only
    // carried untimed collectives shows bytes and bandwidth 0: SamplesSmallTransfersCountsAll covers that).
    setenv("VCCL_TELEMETRY_SAMPLE", "1", 1);
    vccl::testing::reload_env();
    vcclComm_t comm = make_comm(CommKind::Mpi, &rc);
    unsetenv("VCCL_TELEMETRY_SAMPLE");
    vccl::testing::reload_env();
    ASSERT_ALL_RANKS(comm != nullptr);
    std::vector<vcclTelemetryPeer> before = get_telemetry(comm, &rc);
    EXPECT_ALL_RANKS(rc == vcclSuccess && before.empty()) << "fresh communicator reports " << before.size() << " paths";
    EXPECT_ALL_RANKS(vcclCommGetTelemetry(comm, nullptr, 0, nullptr) == vcclInvalidArgument);
    EXPECT_ALL_RANKS(vcclCommGetTelemetry(comm, nullptr, 1, &n) == vcclInvalidArgument);

    const size_t counts[] = {2, 1000, 300000}; // small (low-latency algorithm) and large (ring, chunked)
    const int iters = 5;
    for (size_t count : counts) {
        std::vector<float> in(count, 1.0f), out(count);
        for (int i = 0; i < iters; ++i) {
            ASSERT_ALL_RANKS(vcclAllReduce(in.data(), out.data(), count, vcclFloat, vcclSum, comm, nullptr) ==
                             vcclSuccess);
        }
    }
    // Point-to-point: rank 0 sends 12345 bytes to every other rank.
    std::vector<char> buf(12345, 'x');
    vcclGroupStart();
    for (int p = 1; p < n; ++p) {
        if (rank == 0) vcclSend(buf.data(), buf.size(), vcclInt8, p, comm, nullptr);
    }
    if (rank != 0) vcclRecv(buf.data(), buf.size(), vcclInt8, 0, comm, nullptr);
    EXPECT_ALL_RANKS(vcclGroupEnd() == vcclSuccess);

    std::vector<vcclTelemetryPeer> t = get_telemetry(comm, &rc);
    ASSERT_ALL_RANKS(rc == vcclSuccess);
    uint64_t sent = 0, recvd = 0, outstanding = 0;
    bool sane = true;
    for (const vcclTelemetryPeer& p : t) {
        sent += p.bytesSent;
        recvd += p.bytesReceived;
        outstanding += p.outstandingRequests + p.outstandingBytes;
        if (p.peer < 0 || p.peer >= n || p.peer == rank || p.path != 0 || p.state != vcclPathUp || p.failures != 0 ||
            p.completions == 0 || p.lastCompletionNs == 0)
            sane = false;
        if (p.bytesSent > 0 && !(p.sendBandwidth > 0)) sane = false;
        if (p.bytesReceived > 0 && !(p.recvBandwidth > 0)) sane = false;
    }
    EXPECT_ALL_RANKS(sane) << "a path entry is inconsistent";
    EXPECT_ALL_RANKS(outstanding == 0) << outstanding << " outstanding after completion";
    // Every byte sent was received by someone.
    uint64_t all_sent = sum_over_ranks(sent), all_recvd = sum_over_ranks(recvd);
    EXPECT_ALL_RANKS(all_sent == all_recvd && all_sent > 0) << "sent " << all_sent << " received " << all_recvd;
    if (n == 2) {
        // With two ranks every allreduce algorithm sends the whole vector once (whole or two halves).
        uint64_t want = 0;
        for (size_t count : counts) want += uint64_t(iters) * count * sizeof(float);
        uint64_t want_sent = want + (rank == 0 ? 12345 : 0), want_recv = want + (rank == 1 ? 12345 : 0);
        EXPECT_ALL_RANKS(sent == want_sent && recvd == want_recv)
            << "sent " << sent << " (want " << want_sent << ") received " << recvd << " (want " << want_recv << ")";
    }
    EXPECT_ALL_RANKS(vcclCommDestroy(comm) == vcclSuccess);
}

/* vcclCommGetTelemetryPaths: latency percentiles bounded by the calls' own wall time, an element size of the
 * old struct filled exactly (nothing written past it), sizes below it refused. */
TEST(Telemetry, PathsGiveLatencyPercentilesAndKeepOldCallersWorking) {
    vcclResult_t rc;
    setenv("VCCL_TELEMETRY_SAMPLE", "1", 1); // every send timed: the histogram has them all
    vccl::testing::reload_env();
    vcclComm_t comm = make_comm(CommKind::Mpi, &rc);
    unsetenv("VCCL_TELEMETRY_SAMPLE");
    vccl::testing::reload_env();
    ASSERT_ALL_RANKS(comm != nullptr);
    const size_t count = 65536;
    std::vector<float> in(count, 1.0f), out(count);
    uint64_t longest_call_ns = 0;
    for (int i = 0; i < 20; ++i) {
        uint64_t t0 = mono_ns();
        ASSERT_ALL_RANKS(vcclAllReduce(in.data(), out.data(), count, vcclFloat, vcclSum, comm, nullptr) == vcclSuccess);
        longest_call_ns = std::max(longest_call_ns, mono_ns() - t0);
    }
    int n = -1;
    ASSERT_ALL_RANKS(vcclCommGetTelemetryPaths(comm, nullptr, sizeof(vcclTelemetryPath), 0, &n) == vcclSuccess && n > 0);
    std::vector<vcclTelemetryPath> paths(static_cast<size_t>(n));
    int m = -1;
    ASSERT_ALL_RANKS(vcclCommGetTelemetryPaths(comm, paths.data(), sizeof(vcclTelemetryPath), n, &m) == vcclSuccess &&
                     m == n);
    bool sane = true;
    uint64_t samples = 0;
    for (const vcclTelemetryPath& p : paths) {
        if (p.base.bytesSent == 0) continue;
        samples += p.latencySamples;
        // Host memory, NULL stream: every send of a call is posted and completed within it. Interpolation
        // inside a power-of-two bucket can place a percentile at most at twice the longest value.
        if (p.latencySamples == 0 || p.latencyP50Ns == 0 || p.latencyP50Ns > p.latencyP99Ns ||
            p.latencyP99Ns > p.latencyP999Ns || p.latencyP999Ns > 2 * longest_call_ns || p.failovers != 0 ||
            p.failbacks != 0)
            sane = false;
    }
    EXPECT_ALL_RANKS(sane) << "latency fields inconsistent (longest call " << longest_call_ns << " ns)";
    EXPECT_ALL_RANKS(samples >= 20) << samples << " timed sends for 20 allreduces";
    // An element the size of vcclTelemetryPeer, as a caller built against the old header passes it.
    const size_t old = sizeof(vcclTelemetryPeer);
    std::vector<unsigned char> raw(size_t(n) * old + 64, 0xab);
    EXPECT_ALL_RANKS(vcclCommGetTelemetryPaths(comm, raw.data(), old, n, &m) == vcclSuccess && m == n);
    bool same = true;
    for (int i = 0; i < n; ++i) {
        vcclTelemetryPeer e;
        memcpy(&e, raw.data() + size_t(i) * old, old);
        if (e.peer != paths[size_t(i)].base.peer || e.bytesSent != paths[size_t(i)].base.bytesSent) same = false;
    }
    for (size_t k = size_t(n) * old; k < raw.size(); ++k) same = same && raw[k] == 0xab;
    EXPECT_ALL_RANKS(same) << "old-size elements differ, or bytes past them were written";
    EXPECT_ALL_RANKS(vcclCommGetTelemetryPaths(comm, raw.data(), old - 1, n, &m) == vcclInvalidArgument);
    EXPECT_ALL_RANKS(vcclCommGetTelemetryPaths(comm, raw.data(), old, n, nullptr) == vcclInvalidArgument);
    EXPECT_ALL_RANKS(vcclCommGetTelemetryPaths(comm, nullptr, old, 1, &m) == vcclInvalidArgument);
    EXPECT_ALL_RANKS(vcclCommDestroy(comm) == vcclSuccess);
}

uint64_t bytes_sent(vcclComm_t comm) {
    vcclResult_t rc;
    uint64_t sent = 0;
    for (const vcclTelemetryPeer& p : get_telemetry(comm, &rc)) sent += p.bytesSent;
    return sent;
}

/* The measurement hook behind vccl-perf --baseline telemetry-paused: while paused nothing is recorded, after
 * resuming recording goes on; refused where telemetry is off. */
TEST(Telemetry, PausedRecordingCountsNothing) {
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    vcclComm_t comm = make_comm(CommKind::Mpi);
    ASSERT_ALL_RANKS(comm != nullptr);
    std::vector<float> in(3001, 1.0f), out(3001);
    auto allreduce = [&] { return vcclAllReduce(in.data(), out.data(), in.size(), vcclFloat, vcclSum, comm, nullptr); };
    ASSERT_ALL_RANKS(allreduce() == vcclSuccess);
    uint64_t first = bytes_sent(comm);
    EXPECT_ALL_RANKS(first > 0) << "nothing recorded before pausing";
    ASSERT_ALL_RANKS(vcclCommPauseTelemetry(comm, 1) == vcclSuccess);
    for (int i = 0; i < 3; ++i) EXPECT_ALL_RANKS(allreduce() == vcclSuccess && out[7] == float(world_size()));
    uint64_t paused = bytes_sent(comm);
    EXPECT_ALL_RANKS(paused == first) << "paused: " << paused - first << " bytes recorded";
    ASSERT_ALL_RANKS(vcclCommPauseTelemetry(comm, 0) == vcclSuccess);
    ASSERT_ALL_RANKS(allreduce() == vcclSuccess);
    uint64_t resumed = bytes_sent(comm);
    EXPECT_ALL_RANKS(resumed - paused == first) << "resumed: " << resumed - paused << " bytes, want " << first;
    EXPECT_ALL_RANKS(vcclCommDestroy(comm) == vcclSuccess);
    vcclConfig_t off_cfg = VCCL_CONFIG_INITIALIZER;
    off_cfg.telemetry = 0;
    vcclComm_t off = nullptr;
    ASSERT_ALL_RANKS(vcclCommInitMPI(&off, MPI_COMM_WORLD, &off_cfg) == vcclSuccess);
    EXPECT_ALL_RANKS(vcclCommPauseTelemetry(off, 1) == vcclInvalidUsage);
    EXPECT_ALL_RANKS(vcclCommDestroy(off) == vcclSuccess);
}

/* vcclConfig_t.telemetry turns telemetry on or off per communicator, over VCCL_TELEMETRY; bad values are
 * refused; a caller built against the older, smaller struct (no such field) gets the environment's choice. */
TEST(Telemetry, ConfigFieldChoosesPerCommunicator) {
    vcclComm_t on = nullptr, off = nullptr, old_caller = nullptr, bad = nullptr;
    vcclConfig_t c_on = VCCL_CONFIG_INITIALIZER, c_off = VCCL_CONFIG_INITIALIZER, c_bad = VCCL_CONFIG_INITIALIZER;
    c_on.telemetry = 1;
    c_off.telemetry = 0;
    c_bad.telemetry = 2;
    vcclConfig_t c_old = VCCL_CONFIG_INITIALIZER;
    c_old.telemetry = 0;                                          // beyond the size below: must be ignored
    c_old.size = offsetof(vcclConfig_t, splitShare) + sizeof(int); // the struct as older callers know it
    EXPECT_ALL_RANKS(vcclCommInitMPI(&bad, MPI_COMM_WORLD, &c_bad) == vcclInvalidArgument && bad == nullptr);
    ASSERT_ALL_RANKS(vcclCommInitMPI(&on, MPI_COMM_WORLD, &c_on) == vcclSuccess);
    ASSERT_ALL_RANKS(vcclCommInitMPI(&off, MPI_COMM_WORLD, &c_off) == vcclSuccess);
    ASSERT_ALL_RANKS(vcclCommInitMPI(&old_caller, MPI_COMM_WORLD, &c_old) == vcclSuccess);
    float in = 1.0f, out = 0.0f;
    for (vcclComm_t c : {on, off, old_caller}) {
        EXPECT_ALL_RANKS(vcclAllReduce(&in, &out, 1, vcclFloat, vcclSum, c, nullptr) == vcclSuccess &&
                         out == float(world_size()));
    }
    int n = -1;
    EXPECT_ALL_RANKS(vcclCommGetTelemetry(on, nullptr, 0, &n) == vcclSuccess && n >= (world_size() > 1 ? 1 : 0));
    EXPECT_ALL_RANKS(vcclCommGetTelemetry(off, nullptr, 0, &n) == vcclInvalidUsage);
    // This test runs with telemetry on by default (VCCL_TELEMETRY unset): the old caller gets it.
    EXPECT_ALL_RANKS(vcclCommGetTelemetry(old_caller, nullptr, 0, &n) == vcclSuccess);
    for (vcclComm_t c : {on, off, old_caller}) EXPECT_ALL_RANKS(vcclCommDestroy(c) == vcclSuccess);
}

/* A VCCL_TELEMETRY_DIR that one rank cannot write to costs that rank its files, not the job: creation used to
 * fail there, and the other ranks then waited in theirs. */
TEST(Telemetry, UnwritableDirectoryOnOneRankDoesNotFailTheCommunicator) {
    int rank = world_rank(), n = world_size();
    char dir[64] = "/tmp/vccl-telemetry-dir-XXXXXX";
    if (mkdtemp(dir) == nullptr) dir[0] = '\0';
    ASSERT_ALL_RANKS(dir[0] != '\0');
    bool broken = rank == n - 1;
    std::string use = broken ? std::string(dir) + "/missing/deeper" : std::string(dir);
    setenv("VCCL_TELEMETRY_DIR", use.c_str(), 1);
    vccl::testing::reload_env();
    vcclComm_t comm = nullptr;
    vcclResult_t rc = vcclCommInitMPI(&comm, MPI_COMM_WORLD, nullptr);
    unsetenv("VCCL_TELEMETRY_DIR");
    vccl::testing::reload_env();
    ASSERT_ALL_RANKS_WHY(rc == vcclSuccess && comm != nullptr, std::string("vcclCommInitMPI: ") + vcclGetErrorString(rc));
    int64_t in = rank + 1, out = 0;
    EXPECT_ALL_RANKS(vcclAllReduce(&in, &out, 1, vcclInt64, vcclSum, comm, nullptr) == vcclSuccess &&
                     out == int64_t(n) * (n + 1) / 2);
    int peers = -1;
    EXPECT_ALL_RANKS(vcclCommGetTelemetry(comm, nullptr, 0, &peers) == vcclSuccess);
    EXPECT_ALL_RANKS(vcclCommDestroy(comm) == vcclSuccess);
    // The ranks that could write have their files; the broken one has none (and made no directory).
    int status = 0;
    std::string listing = run_capture("ls " + std::string(dir), &status);
    bool files = listing.find(".csv") != std::string::npos && listing.find(".jsonl") != std::string::npos;
    EXPECT_ALL_RANKS_WHY(broken ? !files : files, "rank " + std::to_string(rank) + " files: " + listing);
    run_capture("rm -rf " + std::string(dir), &status);
}

TEST(Telemetry, TopListsRingsAndReportFlagsSlowLinkAndLateRank) {
    int rank = world_rank(), n = world_size();
    // A private directory for the files, and a job name of our own for the rings.
    char dir[64] = "/tmp/vccl-telemetry-test-XXXXXX";
    if (rank == 0 && mkdtemp(dir) == nullptr) dir[0] = '\0';
    MPI_Bcast(dir, sizeof(dir), MPI_CHAR, 0, MPI_COMM_WORLD);
    ASSERT_ALL_RANKS(dir[0] != '\0');
    char jobbuf[64] = {};
    snprintf(jobbuf, sizeof(jobbuf), "vtest%d", rank == 0 ? int(getpid()) : 0);
    MPI_Bcast(jobbuf, sizeof(jobbuf), MPI_CHAR, 0, MPI_COMM_WORLD);
    setenv("VCCL_TELEMETRY_DIR", dir, 1);
    setenv("VCCL_TELEMETRY_JOB", jobbuf, 1);
    // 30 collectives of 1 MiB: sampled (one collective in 64 timed under 4 MiB) only the first would be timed,
    // and it comes before the late rank starts being late. The report's arithmetic is what is under test here.
    setenv("VCCL_TELEMETRY_SAMPLE", "1", 1);
    vccl::testing::reload_env();
    struct UnsetAtExit { // also when an assertion returns early: later tests must not inherit these
        ~UnsetAtExit() {
            unsetenv("VCCL_TELEMETRY_DIR");
            unsetenv("VCCL_TELEMETRY_JOB");
            unsetenv("VCCL_TELEMETRY_SAMPLE");
            vccl::testing::reload_env();
        }
    } unset_at_exit;

    vcclResult_t rc;
    vcclComm_t comm = make_comm(CommKind::Mpi, &rc);
    ASSERT_ALL_RANKS(comm != nullptr);
    // Rank 0's sends to rank 1 are recorded 20x slower; rank n-1 arrives late at every collective.
    if (rank == 0) {
        EXPECT_EQ(vccl::testing::slow_link(comm, 1, 20.0), vcclSuccess);
    }
    const size_t count = 256 * 1024;
    std::vector<float> in(count, 1.0f), out(count);
    for (int i = 0; i < 30; ++i) {
        if (rank == n - 1 && i >= 5) usleep(4000);
        ASSERT_ALL_RANKS(vcclAllReduce(in.data(), out.data(), count, vcclFloat, vcclSum, comm, nullptr) == vcclSuccess);
    }

    // While the communicator lives, top shows one live ring per rank of this job.
    std::vector<int> pids(static_cast<size_t>(n));
    int pid = int(getpid());
    MPI_Allgather(&pid, 1, MPI_INT, pids.data(), 1, MPI_INT, MPI_COMM_WORLD);
    if (rank == 0) {
        int status = 0;
        std::string json = run_capture(tool_path() + " top --json", &status);
        EXPECT_EQ(status, 0) << json;
        for (int r = 0; r < n; ++r) {
            std::string ring = "\"ring\":\"vccl-" + std::string(jobbuf) + "-";
            EXPECT_NE(json.find(ring), std::string::npos) << json;
            EXPECT_NE(json.find("\"pid\":" + std::to_string(pids[size_t(r)]) + ",\"status\":\"live\""),
                      std::string::npos)
                << "rank " << r << " missing from top: " << json;
        }
        // The ring says how its host paths are used (no VCCL_MULTIPATH here: standby).
        EXPECT_NE(json.find("\"multipath\":\"standby\""), std::string::npos) << json;
        std::string text = run_capture(tool_path() + " top --once", &status);
        EXPECT_EQ(status, 0);
        EXPECT_NE(text.find(jobbuf), std::string::npos) << text;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_ALL_RANKS(vcclCommDestroy(comm) == vcclSuccess); // writes the last records to the files
    MPI_Barrier(MPI_COMM_WORLD);

    if (rank == 0) {
        int status = 0;
        std::string glob = std::string(dir) + "/vccl-" + jobbuf + "-*";
        std::string json = run_capture(tool_path() + " report --fraction 0.3 --json " + glob + ".jsonl", &status);
        EXPECT_EQ(status, 0) << json;
        auto has = [&](const std::string& s) { return json.find(s) != std::string::npos; };
        EXPECT_TRUE(has("\"rank\":0,\"peer\":1,\"path\":0,\"dir\":\"send\"")) << json;
        // Exactly the slowed link is flagged.
        size_t slow = 0;
        for (size_t at = json.find("\"slow\":true"); at != std::string::npos; at = json.find("\"slow\":true", at + 1)) ++slow;
        EXPECT_EQ(slow, 1u) << json;
        size_t link0 = json.find("\"rank\":0,\"peer\":1,\"path\":0,\"dir\":\"send\"");
        EXPECT_NE(json.find("\"slow\":true", link0), std::string::npos) << json;
        EXPECT_LT(json.find("\"slow\":true", link0), json.find("}", link0)) << "rank 0 -> 1 not flagged: " << json;
        // The late rank is flagged, and only it.
        std::string late_rank = "{\"rank\":" + std::to_string(n - 1) + ",";
        size_t at = json.find(late_rank, json.find("\"ranks\""));
        ASSERT_NE(at, std::string::npos) << json;
        EXPECT_LT(json.find("\"late\":true", at), json.find("}", at)) << json;
        size_t late = 0;
        for (size_t a = json.find("\"late\":true"); a != std::string::npos; a = json.find("\"late\":true", a + 1)) ++late;
        EXPECT_EQ(late, 1u) << json;
        // The text report and the CSV files agree; the plot is written.
        std::string text = run_capture(tool_path() + " report --fraction 0.3 " + glob + ".csv", &status);
        EXPECT_EQ(status, 0);
        EXPECT_NE(text.find("slow link: rank 0 -> rank 1"), std::string::npos) << text;
        EXPECT_NE(text.find("late rank: rank " + std::to_string(n - 1)), std::string::npos) << text;
        std::string svg = std::string(dir) + "/bw.svg";
        run_capture(tool_path() + " plot -o " + svg + " " + glob + ".jsonl", &status);
        EXPECT_EQ(status, 0);
        EXPECT_EQ(access(svg.c_str(), R_OK), 0);
        run_capture("rm -rf " + std::string(dir), &status);
    }
}

} // namespace
