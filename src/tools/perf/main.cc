/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-perf: start-up under MPI, communicator creation and the loop over sizes. See perf.h for the parts. */
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "config.h"
#include "tools/perf/perf.h"

#if __has_include("vccl_mpi.h")
#include "vccl_mpi.h"
#else
/* vccl_mpi.h is not in this tree yet; the declaration libvccl_mpi provides. */
extern "C" vcclResult_t vcclCommInitMPI(vcclComm_t* comm, MPI_Comm mpicomm, const vcclConfig_t* config);
#endif

namespace vperf {
namespace {

int g_rank = 0;

/* A failed vccl or MPI call on one rank leaves the others waiting in a collective: report and abort all. */
[[noreturn]] void die(const char* what, const std::string& detail) {
    fprintf(stderr, "vccl-perf: rank %d: %s: %s\n", g_rank, what, detail.c_str());
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, kExitRuntime);
    exit(kExitRuntime);
}

void check_vccl(vcclResult_t r, const char* what, vcclComm_t comm) {
    if (r == vcclSuccess) return;
    std::string detail = vcclGetErrorString(r);
    const char* last = vcclGetLastError(comm);
    if (last != nullptr && *last != '\0') detail += std::string(" (") + last + ")";
    die(what, detail);
}

void check_mpi(int rc, const char* what) {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    die(what, std::string(text, size_t(len)));
}

/* One line per rank for the header, gathered on rank 0. */
std::vector<std::string> rank_lines(const Options& o, int rank, int nranks, int device) {
    char host[64] = {};
    gethostname(host, sizeof(host) - 1);
    char line[160];
    if (o.memory == Memory::Host)
        snprintf(line, sizeof(line), "#  Rank %3d Pid %7d on %16s memory host", rank, int(getpid()), host);
    else
        snprintf(line, sizeof(line), "#  Rank %3d Pid %7d on %16s memory cuda device %d", rank, int(getpid()), host,
                 device);
    std::vector<char> all(rank == 0 ? sizeof(line) * size_t(nranks) : 1);
    check_mpi(MPI_Gather(line, sizeof(line), MPI_CHAR, all.data(), sizeof(line), MPI_CHAR, 0, MPI_COMM_WORLD),
              "MPI_Gather of the rank list");
    std::vector<std::string> lines;
    if (rank == 0) {
        for (int r = 0; r < nranks; ++r) lines.emplace_back(&all[sizeof(line) * size_t(r)]);
    }
    return lines;
}

/* telemetry: -1 leaves it to VCCL_TELEMETRY, 0/1 sets it for this communicator. */
vcclComm_t create_comm(const Options& o, int rank, int nranks, int telemetry = -1) {
    vcclComm_t comm = nullptr;
    vcclConfig_t config = VCCL_CONFIG_INITIALIZER;
    if (telemetry >= 0) config.telemetry = telemetry;
    if (o.bootstrap == Bootstrap::Mpi) {
        check_vccl(vcclCommInitMPI(&comm, MPI_COMM_WORLD, &config), "vcclCommInitMPI", nullptr);
    } else {
        vcclUniqueId id;
        memset(&id, 0, sizeof(id));
        if (rank == 0) check_vccl(vcclGetUniqueId(&id), "vcclGetUniqueId", nullptr);
        check_mpi(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast of the unique id");
        check_vccl(vcclCommInitRankConfig(&comm, nranks, id, rank, &config), "vcclCommInitRankConfig", nullptr);
    }
    int count = 0, me = 0;
    check_vccl(vcclCommCount(comm, &count), "vcclCommCount", comm);
    check_vccl(vcclCommUserRank(comm, &me), "vcclCommUserRank", comm);
    if (count != nranks || me != rank)
        die("communicator", "vccl reports rank " + std::to_string(me) + " of " + std::to_string(count) +
                                ", MPI rank " + std::to_string(rank) + " of " + std::to_string(nranks));
    return comm;
}

void sync_stream(void* stream) {
    std::string error;
    if (stream != nullptr && !stream_sync(stream, &error)) die("stream", error);
}

/* Seconds per vccl operation on this rank: barrier, then `iters` operations back to back, then wait for
 * the stream (device buffers); with -z 1 each operation is waited for before the next. *call_s (if given): seconds per operation the thread spent in the calls,
 * before the final wait. `cpu` (if given) adds the timed interval's processor time. */
double time_vccl(const Options& o, const Shape& shape, const CallBuffers& cb, vcclComm_t comm, int rank,
                 int nranks, void* stream, double* call_s = nullptr, CpuMeter* cpu = nullptr) {
    const char* what = coll_name(o.coll);
    for (int i = 0; i < o.warmup; ++i) check_vccl(run_vccl(o, shape, cb, comm, rank, nranks, stream), what, comm);
    sync_stream(stream);
    check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    if (cpu != nullptr) cpu->start();
    double t0 = MPI_Wtime();
    for (int i = 0; i < o.iters; ++i) {
        check_vccl(run_vccl(o, shape, cb, comm, rank, nranks, stream), what, comm);
        if (o.blocking) sync_stream(stream);
    }
    if (call_s != nullptr) *call_s = (MPI_Wtime() - t0) / o.iters;
    sync_stream(stream);
    double t = (MPI_Wtime() - t0) / o.iters;
    if (cpu != nullptr) cpu->stop();
    return t;
}

} // namespace

CpuUse mean_over_ranks(const CpuUse& local, MPI_Comm comm) {
    int nranks = 1;
    MPI_Comm_size(comm, &nranks);
    double in[2] = {local.process_pct, local.others_pct}, sum[2] = {0, 0};
    check_mpi(MPI_Allreduce(in, sum, 2, MPI_DOUBLE, MPI_SUM, comm), "MPI_Allreduce");
    CpuUse u;
    u.process_pct = sum[0] / nranks;
    u.others_pct = sum[1] / nranks;
    return u;
}

namespace {

/* The rank among the processes of its node, for the choice of GPU. */
int local_rank() {
    MPI_Comm node;
    check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
              "MPI_Comm_split_type");
    int r = 0;
    MPI_Comm_rank(node, &r);
    MPI_Comm_free(&node);
    return r;
}

/* Picks this rank's GPU for -m cuda. Every rank must succeed, else all exit with a usage error. */
int select_device(const Options& o, int rank, int* device) {
    *device = -1;
    if (o.memory != Memory::Cuda) return -1;
    std::string error;
    int ok = device_select(local_rank(), device, &error) ? 1 : 0, all_ok = 0;
    check_mpi(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
    if (all_ok) return -1;
    if (!ok) fprintf(stderr, "vccl-perf: rank %d: %s\n", rank, error.c_str());
    return kExitUsage;
}

void check_nccl(int rc, const std::string& error) {
    if (rc != 0) die("NCCL baseline", error);
}

/* The communicator of the paired baselines: for telemetry-off a second one, created with telemetry off;
 * for telemetry-paused the measured one itself, its recording paused while the baseline runs; for self the
 * measured one itself, unchanged. */
vcclComm_t g_paired_comm = nullptr;

/* --baseline telemetry-paused: pauses the measured communicator's telemetry for the scope (a no-op for the
 * other baselines). Once per timed block, not per operation, so the pausing itself is not timed. */
class PausedTelemetry {
public:
    explicit PausedTelemetry(const Options& o) : on_(o.baseline == Baseline::TelemetryPaused) {
        if (on_) check_vccl(vcclCommPauseTelemetry(g_paired_comm, 1), "pause telemetry", g_paired_comm);
    }
    ~PausedTelemetry() {
        if (on_) check_vccl(vcclCommPauseTelemetry(g_paired_comm, 0), "resume telemetry", g_paired_comm);
    }
private:
    bool on_;
};

/* The baselines timed in alternating rounds with the measured operation (time_telemetry_pair). */
bool paired_baseline(Baseline b) {
    return b == Baseline::TelemetryOff || b == Baseline::TelemetryPaused || b == Baseline::Self;
}

const char* baseline_label(Baseline b) {
    return b == Baseline::TelemetryOff ? "baseline (telemetry off)"
           : b == Baseline::TelemetryPaused ? "baseline (telemetry paused)" : "baseline (self)";
}

/* One baseline operation (MPI on host buffers, NCCL on the stream, vccl without telemetry or unchanged). */
void run_baseline(const Options& o, const Shape& shape, const CallBuffers& cb, int rank, int nranks, void* stream) {
    if (paired_baseline(o.baseline)) {
        check_vccl(run_vccl(o, shape, cb, g_paired_comm, rank, nranks, stream), baseline_label(o.baseline),
                   g_paired_comm);
    } else if (o.baseline == Baseline::Nccl) {
        std::string error;
        check_nccl(run_nccl(o, shape, cb, rank, nranks, stream, &error), error);
    } else {
        check_mpi(run_mpi(o, shape, cb, MPI_COMM_WORLD, rank, nranks), "MPI baseline");
    }
}

double time_baseline(const Options& o, const Shape& shape, const CallBuffers& cb, int rank, int nranks,
                     void* stream, CpuMeter* cpu = nullptr) {
    PausedTelemetry paused(o);
    for (int i = 0; i < o.warmup; ++i) run_baseline(o, shape, cb, rank, nranks, stream);
    sync_stream(stream);
    check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    if (cpu != nullptr) cpu->start();
    double t0 = MPI_Wtime();
    for (int i = 0; i < o.iters; ++i) {
        run_baseline(o, shape, cb, rank, nranks, stream);
        if (o.blocking) sync_stream(stream);
    }
    sync_stream(stream);
    double t = (MPI_Wtime() - t0) / o.iters;
    if (cpu != nullptr) cpu->stop();
    return t;
}

/* --baseline telemetry-off: telemetry's cost is a few percent at most, well inside the drift of one timed
 * block after another (frequency, the other ranks' scheduling, cache state). So both communicators run in
 * kTelemetryRounds alternating rounds (on-off, off-on, ...: a linear drift cancels), each of iters/rounds
 * operations, and each side's time is its median round. Warm-up only before the first round. */
constexpr int kTelemetryRounds = 9;

void time_telemetry_pair(const Options& o, const Shape& shape, const CallBuffers& cb, vcclComm_t comm, int rank,
                         int nranks, void* stream, double* on_us, double* off_us, CpuMeter* on_cpu,
                         CpuMeter* off_cpu) {
    Options round = o;
    round.iters = std::max(1, o.iters / kTelemetryRounds);
    std::vector<double> on, off;
    for (int r = 0; r < kTelemetryRounds; ++r) {
        round.warmup = r == 0 ? o.warmup : 0;
        for (int side = 0; side < 2; ++side) {
            bool telemetry_on = (side == 0) == (r % 2 == 0);
            double t = telemetry_on ? time_vccl(round, shape, cb, comm, rank, nranks, stream, nullptr, on_cpu)
                                    : time_baseline(round, shape, cb, rank, nranks, stream, off_cpu);
            (telemetry_on ? on : off).push_back(aggregate_time(t * 1e6, o.average, MPI_COMM_WORLD));
        }
    }
    std::sort(on.begin(), on.end());
    std::sort(off.begin(), off.end());
    *on_us = on[on.size() / 2];
    *off_us = off[off.size() / 2];
}

[[maybe_unused]] double time_mpi(const Options& o, const Shape& shape, const CallBuffers& cb, int rank, int nranks) {
    for (int i = 0; i < o.warmup; ++i) check_mpi(run_mpi(o, shape, cb, MPI_COMM_WORLD, rank, nranks), "MPI baseline");
    check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    double t0 = MPI_Wtime();
    for (int i = 0; i < o.iters; ++i) check_mpi(run_mpi(o, shape, cb, MPI_COMM_WORLD, rank, nranks), "MPI baseline");
    return (MPI_Wtime() - t0) / o.iters;
}

/* --concurrent-gemm: the GEMM alone, beside `iters` vccl operations, alone, beside as many baseline ones and
 * alone again (all ranks at once, after a barrier each). Each pass is taken against the mean of the solo runs
 * on either side of it, on the same rank: the GPU's clocks drift with its power draw and temperature over the
 * passes. Fills the row's gemm_* fields. */
void measure_gemm(const Options& o, const Shape& shape, const CallBuffers& cb, vcclComm_t comm, int rank, int nranks,
                  void* stream, bool with_baseline, Row* row) {
    std::string error;
    auto mean = [&](double v) {
        double sum = 0;
        check_mpi(MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
        return sum / nranks;
    };
    auto lowest = [&](double v) {
        double m = 0;
        check_mpi(MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
        return m;
    };
    auto highest = [&](double v) { return -lowest(-v); };
    auto solo_run = [&] {
        double tflops = 0;
        check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        if (!gemm_solo(&tflops, &error)) die("GEMM", error);
        return tflops;
    };
    const int passes = with_baseline ? 2 : 1;
    double solo[3] = {solo_run(), 0, 0};
    for (int pass = 0; pass < passes; ++pass) {
        std::function<void()> transfer = [&] {
            for (int i = 0; i < o.iters; ++i) {
                if (pass == 0) check_vccl(run_vccl(o, shape, cb, comm, rank, nranks, stream), coll_name(o.coll), comm);
                else run_baseline(o, shape, cb, rank, nranks, stream);
            }
        };
        GemmDuring d;
        check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        if (!gemm_during(stream, transfer, &d, &error)) die("GEMM", error);
        solo[pass + 1] = solo_run();
        double beside = (solo[pass] + solo[pass + 1]) / 2;
        GemmFigures& f = pass == 0 ? row->gemm_vccl : row->gemm_base;
        f.tflops = mean(d.tflops);
        f.min_pct = lowest(beside > 0 ? 100.0 * d.tflops / beside : 0);
        f.transfer_ms = highest(d.transfer_ms) / o.iters;
        f.idle_pct = highest(d.idle_pct);
        f.min_pct_with_tail = lowest(beside > 0 ? 100.0 * d.tflops_with_tail / beside : 0);
    }
    for (int i = 0; i <= passes; ++i) row->gemm_solos.push_back(mean(solo[i]));
}

void fill_or_die(Buffers& buf, const Options& o, const Shape& shape, int rank, int nranks, bool in_place) {
    std::string error;
    if (!buf.fill(o, shape, rank, nranks, in_place, &error)) die("filling buffers", error);
}

uint64_t check_or_die(Buffers& buf, const Options& o, const Shape& shape, int rank, int nranks, bool in_place) {
    std::string error;
    uint64_t wrong = 0;
    if (!buf.check(o, shape, rank, nranks, in_place, &wrong, &error)) die("checking results", error);
    return wrong;
}

long long sum_over_ranks(uint64_t local) {
    unsigned long long in = local, out = 0;
    check_mpi(MPI_Allreduce(&in, &out, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    return static_cast<long long>(out);
}

/* Rejects configurations the run cannot honour; prints on rank 0; returns an exit code or -1. */
int validate(const Options& o, int rank, int nranks) {
    const char* error = nullptr;
    std::string msg;
    if (o.baseline == Baseline::Nccl && o.memory != Memory::Cuda) {
        error = "--baseline nccl needs device buffers: add -m cuda";
    } else if (o.device_alloc != DeviceAlloc::Cuda && o.memory != Memory::Cuda) {
        error = "--alloc chooses how device buffers are allocated: add -m cuda";
    } else if (o.high_priority && o.memory != Memory::Cuda) {
        error = "--stream-priority sets the priority of the stream device buffers use: add -m cuda";
    } else if (o.gemm_n > 0 && o.memory != Memory::Cuda) {
        error = "--concurrent-gemm needs device buffers: add -m cuda";
    } else if (coll_has_root(o.coll) && o.root >= nranks) {
        msg = "root " + std::to_string(o.root) + " (-r) is not a rank: the job has " + std::to_string(nranks) +
              " ranks";
        error = msg.c_str();
    }
    if (error == nullptr) return -1;
    if (rank == 0) fprintf(stderr, "vccl-perf: %s\n", error);
    return kExitUsage;
}

/* What one run measures with, for the sizes of its sweep. */
struct Run {
    const Options& o;
    int rank, nranks;
    vcclComm_t comm;
    void* stream;
    Buffers& buf;
    bool baseline;          // a baseline column is printed
    bool compare_telemetry; // the baseline is the same operation with telemetry off or paused
    const char* unsupported; // why the baseline cannot run this configuration (NULL: it can)
};

/* Rank 0's header: the configuration, the NCCL baseline's version, how a telemetry comparison is timed. */
void print_run_header(const Run& r, const std::vector<std::string>& lines) {
    const Options& o = r.o;
    print_header(stdout, o, r.nranks, lines);
    if (o.baseline == Baseline::Nccl && r.unsupported == nullptr)
        printf("# NCCL baseline: version code %d (%s)\n#\n", nccl_baseline_version(),
               nccl_baseline_path().empty() ? "file unknown" : nccl_baseline_path().c_str());
    if (r.compare_telemetry) {
        vcclTelemetryPeer probe;
        int n = 0;
        bool on = vcclCommGetTelemetry(r.comm, &probe, 0, &n) != vcclInvalidUsage;
        bool paused = o.baseline == Baseline::TelemetryPaused, self = o.baseline == Baseline::Self;
        if (paused && !on) die("--baseline telemetry-paused", "telemetry is off (VCCL_TELEMETRY=0): nothing to pause");
        printf("# %s baseline: out-of-place time (telemetry %s%s) and baseline time (%s) are the "
               "medians of %d alternating rounds of %d operations each\n#\n",
               baseline_name(o.baseline), on ? "on" : "OFF", on || self ? "" : ": VCCL_TELEMETRY=0, a control run",
               paused ? "the same communicator, recording paused"
                      : self ? "the same communicator, unchanged: an A/A control" : "off",
               kTelemetryRounds, std::max(1, o.iters / kTelemetryRounds));
    }
    if (r.unsupported != nullptr) printf("# %s baseline: n/a (%s)\n#\n", o.baseline == Baseline::Mpi ? "MPI" : "NCCL", r.unsupported);
}

/* One size of the sweep: vccl out of place and in place (each timed, then verified), the baseline, the GEMM. */
Row measure_size(const Run& r, const Shape& shape, long long* mpi_wrong) {
    const Options& o = r.o;
    const int rank = r.rank, nranks = r.nranks;
    vcclComm_t comm = r.comm;
    void* stream = r.stream;
    Buffers& buf = r.buf;
    const bool baseline = r.baseline, compare_telemetry = r.compare_telemetry;
    const char* unsupported = r.unsupported;
    Row row;
    row.shape = shape;
    double telemetry_off_us = 0; // the paired baseline time (telemetry-off), measured with out-of-place
    CpuMeter paired_cpu;         // and its processor time
    for (int place = 0; place < 2; ++place) {
        bool in_place = place == 1;
        CallBuffers cb = call_buffers(o.coll, buf, shape, rank, in_place);
        if (o.check) fill_or_die(buf, o, shape, rank, nranks, in_place);
        double t = 0, call_us = -1;
        CpuMeter cpu;
        if (compare_telemetry && !in_place) {
            time_telemetry_pair(o, shape, cb, comm, rank, nranks, stream, &t, &telemetry_off_us, &cpu,
                                &paired_cpu);
        } else {
            double call_s = 0;
            t = aggregate_time(time_vccl(o, shape, cb, comm, rank, nranks, stream, &call_s, &cpu) * 1e6,
                               o.average, MPI_COMM_WORLD);
            call_us = aggregate_time(call_s * 1e6, 3, MPI_COMM_WORLD); // the largest rank's
        }
        CpuUse cpu_use = mean_over_ranks(cpu.use(), MPI_COMM_WORLD);
        long long wrong = -1;
        if (o.check) { // a fresh, verified run after the timed ones
            fill_or_die(buf, o, shape, rank, nranks, in_place);
            check_vccl(run_vccl(o, shape, cb, comm, rank, nranks, stream), coll_name(o.coll), comm);
            sync_stream(stream);
            wrong = sum_over_ranks(check_or_die(buf, o, shape, rank, nranks, in_place));
        }
        Measure& m = in_place ? row.in_place : row.out_of_place;
        m = make_measure(o.coll, shape, t, wrong, nranks);
        m.call_us = call_us;
        m.cpu = cpu_use;
    }
    row.has_mpi = baseline;
    row.mpi_supported = baseline && unsupported == nullptr;
    if (row.mpi_supported) {
        CallBuffers cb = call_buffers(o.coll, buf, shape, rank, false);
        if (o.check) fill_or_die(buf, o, shape, rank, nranks, false);
        CpuMeter cpu;
        double t = compare_telemetry
                       ? telemetry_off_us
                       : aggregate_time(time_baseline(o, shape, cb, rank, nranks, stream, &cpu) * 1e6,
                                        o.average, MPI_COMM_WORLD);
        CpuUse cpu_use = mean_over_ranks(compare_telemetry ? paired_cpu.use() : cpu.use(), MPI_COMM_WORLD);
        long long wrong = -1;
        if (o.check) { // the baseline must agree with the expectation too: a self-test of the checker
            fill_or_die(buf, o, shape, rank, nranks, false);
            PausedTelemetry paused(o);
            run_baseline(o, shape, cb, rank, nranks, stream);
            sync_stream(stream);
            wrong = sum_over_ranks(check_or_die(buf, o, shape, rank, nranks, false));
            *mpi_wrong += wrong;
        }
        row.mpi = make_measure(o.coll, shape, t, wrong, nranks);
        row.mpi.cpu = cpu_use;
    }
    if (o.gemm_n > 0) {
        measure_gemm(o, shape, call_buffers(o.coll, buf, shape, rank, false), comm, rank, nranks, stream,
                     o.baseline == Baseline::Nccl && row.mpi_supported, &row);
    }
    return row;
}

int run(int argc, char** argv, int rank, int nranks) {
    Options o;
    int rc = parse_options(argc, argv, rank == 0, &o);
    if (rc >= 0) return rc;
    rc = validate(o, rank, nranks);
    if (rc >= 0) return rc;
    if (!o.emulated_hosts.empty()) {
        std::string error;
        if (!enter_emulated_host(o.emulated_hosts, rank, nranks, &error)) die("--emulated-hosts", error);
    }
    if (o.soak_seconds > 0) return run_soak(o, rank, nranks);
    if (o.baseline == Baseline::Nccl) { // before the GPU is chosen: a wrong library is refused on any machine
        std::string load_error;
        NcclLoad loaded = nccl_baseline_load(o.nccl_lib, &load_error);
        if (loaded == NcclLoad::IsVccl) {
            if (rank == 0) fprintf(stderr, "vccl-perf: --baseline nccl: %s\n", load_error.c_str());
            return kExitUsage;
        }
        if (loaded == NcclLoad::Failed) die("NCCL baseline", load_error);
    }

    int device = -1;
    rc = select_device(o, rank, &device);
    if (rc >= 0) return rc;
    std::vector<std::string> lines = rank_lines(o, rank, nranks, device);
    bool compare_telemetry = paired_baseline(o.baseline);
    // The measured communicator follows VCCL_TELEMETRY (default on): VCCL_TELEMETRY=0 then gives a control
    // run with both off, which shows what the pairing itself contributes (contrib/bench-telemetry.sh).
    vcclComm_t comm = create_comm(o, rank, nranks, -1);
    if (o.baseline == Baseline::TelemetryOff) g_paired_comm = create_comm(o, rank, nranks, 0);
    if (o.baseline == Baseline::TelemetryPaused || o.baseline == Baseline::Self) g_paired_comm = comm;
    void* stream = nullptr;
    std::string error;
    if (o.memory == Memory::Cuda && !stream_create(&stream, o.high_priority, &error)) die("stream", error);

    Shape largest = make_shape(o.coll, o.max_bytes, o.dtype, nranks);
    Buffers buf(o.memory, o.device_alloc, o.dtype);
    if (!buf.allocate(largest.send_elems, largest.recv_elems, &error)) die("buffers", error);
    if (o.gemm_n > 0) {
        int ok = gemm_init(o.gemm_n, &error) ? 1 : 0, all_ok = 0;
        check_mpi(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
        if (!ok) die("GEMM", error);
        if (!all_ok) die("GEMM", "another rank could not set up the GEMM");
    }

    bool baseline = o.baseline != Baseline::None;
    const char* unsupported = !baseline || compare_telemetry ? nullptr
                              : o.baseline == Baseline::Mpi ? mpi_baseline_unsupported(o)
                                                            : nccl_baseline_unsupported(o);
    if (o.baseline == Baseline::Nccl && unsupported == nullptr && !nccl_baseline_init(rank, nranks, &error)) {
        die("NCCL baseline", error);
    }
    Run r{o, rank, nranks, comm, stream, buf, baseline, compare_telemetry, unsupported};
    if (rank == 0) print_run_header(r, lines);

    std::vector<Row> rows;
    long long mpi_wrong = 0;
    size_t last_bytes = size_t(-1);
    for (size_t size = o.min_bytes; size <= o.max_bytes;) {
        Shape shape = make_shape(o.coll, size, o.dtype, nranks);
        if (shape.bytes != last_bytes) { // rounding can map several requested sizes to one
            last_bytes = shape.bytes;
            Row row = measure_size(r, shape, &mpi_wrong);
            if (rank == 0) print_row(stdout, o, row);
            rows.push_back(row);
        }
        size_t next = o.step_bytes ? size + o.step_bytes : size * o.step_factor;
        if (next <= size) next = size + 1; // -b 0 with a factor, or overflow
        if (next < size) break;
        size = next;
    }

    if (rank == 0) {
        print_footer(stdout, o, rows);
        if (mpi_wrong > 0)
            fprintf(stderr, "vccl-perf: warning: the baseline produced %lld values that differ from the "
                            "expected ones; the check itself may be wrong for this configuration\n", mpi_wrong);
    }
    int json_ok = 1;
    if (rank == 0 && !o.json_path.empty() && !write_json(o.json_path, o, nranks, rows, &error)) {
        fprintf(stderr, "vccl-perf: %s\n", error.c_str());
        json_ok = 0;
    }
    check_mpi(MPI_Bcast(&json_ok, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
    nccl_baseline_finalize();
    gemm_finalize();
    if (g_paired_comm != nullptr && g_paired_comm != comm) {
        check_vccl(vcclCommDestroy(g_paired_comm), "vcclCommDestroy", nullptr);
    }
    check_vccl(vcclCommDestroy(comm), "vcclCommDestroy", nullptr);
    stream_destroy(stream);
    if (total_wrong(rows) > 0) return kExitWrong;
    return json_ok ? kExitOk : kExitRuntime;
}

} // namespace
} // namespace vperf

int main(int argc, char** argv) {
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "vccl-perf: MPI_Init failed; start vccl-perf with mpirun\n");
        return vperf::kExitRuntime;
    }
    int rank = 0, nranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    vperf::g_rank = rank;
    int rc = vperf::run(argc, argv, rank, nranks);
    MPI_Finalize();
    return rc;
}
