/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vccl-diag sweep: point-to-point bandwidth of every ordered pair of ranks through vccl (the data path the
 * application uses, not MPI's). Pairs are measured in rounds of disjoint pairs (the circle method of a
 * round-robin tournament), so each link is timed while the others of its round run too, as in a real job,
 * yet no rank serves two partners at once. Each round has two phases, one per direction, so a link that
 * is slow only one way (a shaped or failing transmit side) shows as such.
 */
#include "config.h"
#include "tools/diag/diag.h"

#if VCCL_HAVE_MPI
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tools/common/netns.h"
#include "tools/perf/perf.h" // device_* and stream_* (CUDA runtime, or "missing" without CUDA)
#include "vccl_mpi.h"
#endif

namespace vdiag {

#if VCCL_HAVE_MPI

namespace {

[[noreturn]] void die(const char* what, const std::string& detail) {
    fprintf(stderr, "vccl-diag sweep: rank %d: %s: %s\n", mpi_rank(), what, detail.c_str());
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, kExitError);
    exit(kExitError);
}

void check_vccl(vcclResult_t r, const char* what, vcclComm_t comm) {
    if (r == vcclSuccess) return;
    std::string detail = vcclGetErrorString(r);
    const char* last = vcclGetLastError(comm);
    if (last != nullptr && *last != '\0') detail += std::string(" (") + last + ")";
    die(what, detail);
}

void check_mpi(int rc, const char* what) {
    if (rc != MPI_SUCCESS) die(what, "MPI error " + std::to_string(rc));
}

/* Every rank must succeed, else all stop with the first failing rank's reason on its own stderr. */
void all_ok(bool ok, const std::string& error) {
    int mine = ok ? 1 : 0, all = 0;
    check_mpi(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
    if (all) return;
    if (!ok) fprintf(stderr, "vccl-diag sweep: rank %d: %s\n", mpi_rank(), error.c_str());
    fflush(stderr);
    MPI_Finalize();
    exit(kExitError);
}

/* Partner of `rank` in round k of the circle method over m (even) seats; -1 for a bye (odd nranks). */
int partner(int rank, int k, int nranks) {
    int m = nranks + (nranks % 2);
    int seat_of_last = m - 1;
    auto other = [&](int r) -> int {
        if (r == seat_of_last) return k;
        if (r == k) return seat_of_last;
        return ((2 * k - r) % (m - 1) + (m - 1)) % (m - 1);
    };
    int p = other(rank);
    return p < nranks ? p : -1;
}

struct Buffers {
    void* send = nullptr;
    void* recv = nullptr;
    void* stream = nullptr;
    bool device = false;
};

Buffers alloc(const SweepOptions& o) {
    Buffers b;
    b.device = o.device;
    std::string error;
    bool ok = true;
    if (o.device) {
        int dev = -1;
        MPI_Comm node;
        check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
                  "MPI_Comm_split_type");
        int local = 0;
        MPI_Comm_rank(node, &local);
        MPI_Comm_free(&node);
        const vperf::DeviceAlloc how = vperf::DeviceAlloc::Cuda;
        ok = vperf::device_select(local, &dev, &error) &&
             (b.send = vperf::device_alloc(o.bytes, how, &error)) != nullptr &&
             (b.recv = vperf::device_alloc(o.bytes, how, &error)) != nullptr && vperf::stream_create(&b.stream, false, &error);
    } else {
        b.send = malloc(o.bytes);
        b.recv = malloc(o.bytes);
        ok = b.send != nullptr && b.recv != nullptr;
        if (ok) memset(b.send, 0x5a, o.bytes); // touch the pages before timing
        if (ok) memset(b.recv, 0, o.bytes);
        if (!ok) error = "out of host memory for " + std::to_string(o.bytes) + " byte buffers";
    }
    all_ok(ok, error);
    return b;
}

void release(Buffers* b) {
    if (b->device) {
        vperf::stream_destroy(b->stream);
        vperf::device_free(b->send);
        vperf::device_free(b->recv);
    } else {
        free(b->send);
        free(b->recv);
    }
}

void transfer(const Buffers& b, size_t bytes, int peer, bool sending, vcclComm_t comm) {
    vcclResult_t r = sending ? vcclSend(b.send, bytes, vcclUint8, peer, comm, b.stream)
                             : vcclRecv(b.recv, bytes, vcclUint8, peer, comm, b.stream);
    check_vccl(r, sending ? "vcclSend" : "vcclRecv", comm);
}

void sync(const Buffers& b) {
    std::string error;
    if (b.stream != nullptr && !vperf::stream_sync(b.stream, &error)) die("stream", error);
}

/* One direction of one round: `src` ranks send, their partners receive; returns the receiver's seconds
 * for the timed iterations (0 on senders and idle ranks). Receivers time it: their last byte arriving is
 * when the link has delivered; a sender may finish earlier into buffers. */
double phase(const SweepOptions& o, const Buffers& b, int peer, bool sending, bool active, vcclComm_t comm) {
    // Start the phase together: a sender that posts while its partner still works on the previous phase
    // would wait for it, and telemetry (vccl-telemetry report) would charge that wait to the link.
    check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    for (int i = 0; active && i < o.warmup; ++i) transfer(b, o.bytes, peer, sending, comm);
    if (active) sync(b);
    check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    double t0 = MPI_Wtime();
    for (int i = 0; active && i < o.iters; ++i) transfer(b, o.bytes, peer, sending, comm);
    if (active) sync(b);
    double t = MPI_Wtime() - t0;
    return active && !sending ? t : 0;
}

} // namespace

bool sweep_available() { return true; }

bool mpi_init(int* argc, char*** argv, std::string* error) {
    int rc = MPI_Init(argc, argv);
    if (rc != MPI_SUCCESS) {
        *error = "MPI_Init failed";
        return false;
    }
    return true;
}

void mpi_finalize() {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) MPI_Finalize();
}

int mpi_rank() {
    int init = 0, r = 0;
    MPI_Initialized(&init);
    if (init) MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

int mpi_size() {
    int init = 0, n = 1;
    MPI_Initialized(&init);
    if (init) MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

int mpi_agree_status(int status) {
    int init = 0;
    MPI_Initialized(&init);
    if (init) MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return status;
}

bool run_sweep(const SweepOptions& o, Section* out) {
    int rank = mpi_rank(), n = mpi_size();
    if (!o.netns_prefix.empty()) {
        std::string error;
        // mpirun cannot start ranks in separate network namespaces: each rank enters its own.
        bool ok = vtools::enter_named_netns(o.netns_prefix + std::to_string(rank), false, &error);
        if (!ok) error = "--netns-prefix: " + error;
        all_ok(ok, error);
    }
    Buffers b = alloc(o);
    vcclComm_t comm = nullptr;
    check_vccl(vcclCommInitMPI(&comm, MPI_COMM_WORLD, nullptr), "vcclCommInitMPI", nullptr);

    // in[src]: bandwidth of the link src -> this rank; -1 where not measured.
    std::vector<double> in(size_t(n), -1.0);
    int m = n + (n % 2);
    for (int k = 0; n > 1 && k < m - 1; ++k) {
        int peer = partner(rank, k, n);
        bool active = peer >= 0;
        for (int dir = 0; dir < 2; ++dir) {
            // dir 0: the lower rank of each pair sends; dir 1: the higher one.
            bool sending = active && ((dir == 0) == (rank < peer));
            double t = phase(o, b, peer, sending, active, comm);
            if (active && !sending && t > 0) in[size_t(peer)] = double(o.bytes) * o.iters / t;
        }
    }
    check_vccl(vcclCommDestroy(comm), "vcclCommDestroy", nullptr);
    release(&b);

    std::vector<double> all(rank == 0 ? size_t(n) * size_t(n) : 1);
    check_mpi(MPI_Gather(in.data(), n, MPI_DOUBLE, all.data(), n, MPI_DOUBLE, 0, MPI_COMM_WORLD), "MPI_Gather");
    if (rank != 0) return false;
    std::vector<std::vector<double>> bw(size_t(n), std::vector<double>(size_t(n), -1.0));
    for (int dst = 0; dst < n; ++dst)
        for (int src = 0; src < n; ++src) bw[size_t(src)][size_t(dst)] = all[size_t(dst) * size_t(n) + size_t(src)];
    matrix_section(bw, analyze_matrix(bw, o.fraction), o.bytes, o.iters, o.device, out);
    return true;
}

#else // !VCCL_HAVE_MPI

bool sweep_available() { return false; }
bool mpi_init(int*, char***, std::string* error) {
    *error = "this vccl-diag was built without MPI: sweep is not available";
    return false;
}
void mpi_finalize() {}
int mpi_rank() { return 0; }
int mpi_size() { return 1; }
int mpi_agree_status(int status) { return status; }
bool run_sweep(const SweepOptions&, Section*) { return false; }

#endif

} // namespace vdiag
