/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hosts_worker: the MPI program of the emulated-host tests (tests/hosts/hosts-check.sh).
 *
 *   hosts_worker --netns-prefix P --hosts H0,H1,... [--seconds S]
 *
 * Rank r belongs to emulated host H_r: after MPI_Init it enters network namespace P<H_r> (with a fresh sysfs in a
 * mount namespace of its own, as tests/fault/fault_worker.cc does, so UCX lists that namespace's devices) and a UTS
 * namespace of its own whose host name is P<H_r>. Ranks of one emulated host thus share a host name and a network
 * stack, ranks of different ones do not, and vccl groups them into hosts exactly as it would on a cluster. MPI
 * keeps talking over shared memory.
 *
 * It runs every collective (allreduce, allgather, reducescatter, broadcast, reduce, alltoall) over counts 0, 1,
 * odd and non-divisible ones, in and out of place, over several datatypes and ops and every root; each output is
 * compared element by element and by checksum with a reference computed here from the formula that made every
 * rank's input. With --seconds S the whole set runs again, each round followed by a checked AllReduce of 16 MiB,
 * until S seconds have passed (rank 0 decides, so every rank runs the same rounds): the rail-failure tests take
 * rails down and up meanwhile. Prints "HOSTS_CHECK rank R host H cases N wrong W errors E first ..." per rank.
 * Exit 0 when the run finished (the script judges the line), 2 on a setup failure.
 */
#include <fcntl.h>
#include <mpi.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "vccl.h"
#include "vccl_mpi.h"

namespace {

std::vector<long> parse_list(const char* s) {
    std::vector<long> out;
    const char* p = s;
    while (*p != '\0') {
        char* end = nullptr;
        long v = strtol(p, &end, 10);
        if (end == p) return {};
        out.push_back(v);
        p = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0') return {};
    }
    return out;
}

[[noreturn]] void setup_failed(int rank, const std::string& why) {
    fprintf(stderr, "hosts_worker: rank %d: %s\n", rank, why.c_str());
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

/* The network namespace of the emulated host, a fresh sysfs for it, and its host name. */
std::string enter_host(const std::string& name) {
    std::string path = "/var/run/netns/" + name;
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "cannot open " + path + ": " + strerror(errno);
    int rc = setns(fd, CLONE_NEWNET);
    int err = errno;
    close(fd);
    if (rc != 0) return "setns(" + path + "): " + strerror(err);
    if (unshare(CLONE_NEWNS | CLONE_NEWUTS) != 0) return std::string("unshare(mount, uts): ") + strerror(errno);
    // Slave first, so that replacing /sys here never propagates back to the host's mount namespace.
    if (mount(nullptr, "/", nullptr, MS_SLAVE | MS_REC, nullptr) != 0)
        return std::string("making / a slave mount: ") + strerror(errno);
    umount2("/sys", MNT_DETACH);
    if (mount(name.c_str(), "/sys", "sysfs", 0, nullptr) != 0) return std::string("mounting sysfs: ") + strerror(errno);
    if (sethostname(name.c_str(), name.size()) != 0) return std::string("sethostname: ") + strerror(errno);
    return "";
}

// ---- values and references ----

/* Rank k's input element j of case `seed`: small integers, so sums, products and averages are exact in every
 * type used here and the reference is exact. */
int64_t input(uint64_t seed, int k, size_t j, bool prod) {
    uint64_t h = (seed * 0x9e3779b97f4a7c15ull) ^ (uint64_t(k) * 0xbf58476d1ce4e5b9ull) ^ (j * 0x94d049bb133111ebull);
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return prod ? int64_t(1 + h % 2) : int64_t(h % 19) - 9;
}

struct Type {
    vcclDataType_t t;
    size_t size;
    const char* name;
};
const Type kTypes[] = {{vcclFloat32, 4, "float"}, {vcclInt32, 4, "int32"}, {vcclFloat64, 8, "double"},
                       {vcclInt8, 1, "int8"}, {vcclBfloat16, 2, "bfloat16"}};

void store(const Type& t, double v, void* p) {
    switch (t.t) {
    case vcclFloat32: { float f = float(v); memcpy(p, &f, 4); break; }
    case vcclFloat64: memcpy(p, &v, 8); break;
    case vcclInt32: { int32_t i = int32_t(llround(v)); memcpy(p, &i, 4); break; }
    case vcclInt8: { int8_t i = int8_t(llround(v)); memcpy(p, &i, 1); break; }
    default: { float f = float(v); uint32_t b; memcpy(&b, &f, 4); uint16_t h = uint16_t(b >> 16); memcpy(p, &h, 2); }
    }
}

double reduce_ref(vcclRedOp_t op, const std::vector<double>& v, const Type& t) {
    double acc = v[0];
    for (size_t i = 1; i < v.size(); ++i) {
        switch (op) {
        case vcclSum: case vcclAvg: acc += v[i]; break;
        case vcclProd: acc *= v[i]; break;
        case vcclMax: acc = std::max(acc, v[i]); break;
        default: acc = std::min(acc, v[i]); break;
        }
    }
    if (op == vcclAvg) {
        double n = double(v.size());
        if (t.t == vcclInt32 || t.t == vcclInt8) return double(int64_t(acc) / int64_t(n)); // truncates, as C does
        if (t.t == vcclFloat64) return acc / n;
        return double(float(acc) / float(n));
    }
    return acc;
}

uint64_t fnv(const unsigned char* p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

enum Coll { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AlltoAll, kColls };
const char* const kCollNames[] = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall"};

struct Stats {
    long cases = 0, wrong = 0, errors = 0;
    std::string first;
};

/* One collective case on this rank, checked. */
void run_case(vcclComm_t comm, int rank, int n, Coll coll, const Type& t, vcclRedOp_t op, size_t count,
              bool in_place, int root, uint64_t seed, Stats* st) {
    const bool red = coll == AllReduce || coll == ReduceScatter || coll == Reduce;
    const bool prod = red && op == vcclProd;
    const bool multi_in = coll == ReduceScatter || coll == AlltoAll, multi_out = coll == AllGather || coll == AlltoAll;
    const size_t in_elems = multi_in ? size_t(n) * count : count, out_elems = multi_out ? size_t(n) * count : count;
    const size_t ts = t.size;
    std::vector<unsigned char> inbuf(std::max<size_t>(1, in_elems * ts)), outbuf(std::max(in_elems, out_elems) * ts + 1);
    unsigned char* in = in_place ? outbuf.data() : inbuf.data();
    size_t in_off = coll == AllGather && in_place ? size_t(rank) * count : 0;
    for (size_t j = 0; j < in_elems; ++j) store(t, double(input(seed, rank, j, prod)), in + (in_off + j) * ts);
    void* recv = outbuf.data();
    if (in_place && coll == ReduceScatter) recv = outbuf.data() + size_t(rank) * count * ts;
    const void* send = in + in_off * ts;
    vcclResult_t rc = vcclSuccess;
    switch (coll) {
    case AllReduce: rc = vcclAllReduce(send, recv, count, t.t, op, comm, nullptr); break;
    case AllGather: rc = vcclAllGather(send, recv, count, t.t, comm, nullptr); break;
    case ReduceScatter: rc = vcclReduceScatter(send, recv, count, t.t, op, comm, nullptr); break;
    case Broadcast: rc = vcclBroadcast(send, recv, count, t.t, root, comm, nullptr); break;
    case Reduce: rc = vcclReduce(send, recv, count, t.t, op, root, comm, nullptr); break;
    default: rc = vcclAlltoAll(send, recv, count, t.t, comm, nullptr); break;
    }
    ++st->cases;
    char what[160];
    snprintf(what, sizeof(what), "%s %s op %d count %zu %s root %d", kCollNames[coll], t.name, int(op), count,
             in_place ? "in-place" : "out-of-place", root);
    if (rc != vcclSuccess) {
        if (st->errors++ == 0 && st->first.empty()) st->first = std::string(what) + ": " + vcclGetLastError(comm);
        return;
    }
    if (coll == Reduce && rank != root) return;
    // The expected output, built element by element from every rank's input formula.
    std::vector<unsigned char> want(out_elems * ts + 1);
    std::vector<double> vals(static_cast<size_t>(n));
    for (size_t o = 0; o < out_elems; ++o) {
        double v = 0;
        switch (coll) {
        case AllReduce: case Reduce: case ReduceScatter: {
            size_t j = coll == ReduceScatter ? size_t(rank) * count + o : o;
            for (int k = 0; k < n; ++k) vals[size_t(k)] = double(input(seed, k, j, prod));
            v = reduce_ref(op, vals, t);
            break;
        }
        case AllGather: v = double(input(seed, int(o / count), o % count, false)); break;
        case Broadcast: v = double(input(seed, root, o, false)); break;
        default: v = double(input(seed, int(o / count), size_t(rank) * count + o % count, false)); break;
        }
        store(t, v, want.data() + o * ts);
    }
    const unsigned char* got = static_cast<const unsigned char*>(recv);
    if (coll == ReduceScatter && in_place) got = outbuf.data() + size_t(rank) * count * ts;
    long bad = 0;
    for (size_t o = 0; o < out_elems; ++o) bad += memcmp(want.data() + o * ts, got + o * ts, ts) != 0;
    if (fnv(want.data(), out_elems * ts) != fnv(got, out_elems * ts) && bad == 0) bad = 1; // cannot differ; belt
    if (bad > 0) {
        st->wrong += bad;
        if (st->first.empty()) st->first = std::string(what) + ": " + std::to_string(bad) + " wrong elements";
    }
}

Stats run_checks(vcclComm_t comm, int rank, int n) {
    Stats st;
    const size_t counts[] = {0, 1, 7, size_t(n) + 1, 1001, 70001};
    uint64_t seed = 1;
    const vcclRedOp_t ops[] = {vcclSum, vcclProd, vcclMax, vcclMin, vcclAvg};
    for (int c = 0; c < kColls; ++c) {
        const bool red = c == AllReduce || c == ReduceScatter || c == Reduce;
        for (size_t ti = 0; ti < sizeof(kTypes) / sizeof(kTypes[0]); ++ti) {
            for (size_t count : counts) {
                ++seed;
                if (count == 70001 && ti > 1) continue; // the large count on two types is enough
                vcclRedOp_t op = red ? ops[seed % 5] : vcclSum;
                if (op == vcclProd && kTypes[ti].t == vcclInt8) op = vcclMax; // products of many wrap int8
                if (op == vcclAvg && kTypes[ti].t == vcclBfloat16) op = vcclSum; // the quotient rounds: not exact
                int root = int(seed % uint64_t(n));
                for (int ip = 0; ip < 2; ++ip) run_case(comm, rank, n, Coll(c), kTypes[ti], op, count, ip != 0, root, seed, &st);
            }
        }
        // Every root once, for the rooted collectives.
        if (c == Broadcast || c == Reduce) {
            for (int root = 0; root < n; ++root) run_case(comm, rank, n, Coll(c), kTypes[0], vcclSum, 4099, root % 2 == 0, root, ++seed, &st);
        }
    }
    return st;
}

} // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, n = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    std::string prefix;
    std::vector<long> hosts;
    double seconds = 0;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (v == nullptr) setup_failed(rank, "option " + a + " needs a value");
        ++i;
        if (a == "--netns-prefix") prefix = v;
        else if (a == "--hosts") hosts = parse_list(v);
        else if (a == "--seconds") seconds = atof(v);
        else setup_failed(rank, "unknown option " + a);
    }
    if (prefix.empty() || int(hosts.size()) != n)
        setup_failed(rank, "usage: hosts_worker --netns-prefix P --hosts H0,H1,... (one per rank)");
    std::string err = enter_host(prefix + std::to_string(hosts[size_t(rank)]));
    if (!err.empty()) setup_failed(rank, err);
    vcclComm_t comm = nullptr;
    if (vcclCommInitMPI(&comm, MPI_COMM_WORLD, nullptr) != vcclSuccess)
        setup_failed(rank, std::string("vcclCommInitMPI: ") + vcclGetLastError(nullptr));
    Stats st;
    const double start = MPI_Wtime();
    for (int round = 0;; ++round) {
        Stats r = run_checks(comm, rank, n);
        if (seconds > 0) run_case(comm, rank, n, AllReduce, kTypes[0], vcclSum, size_t(1) << 22, round % 2 != 0, 0,
                                  uint64_t(1000 + round), &r);
        st.cases += r.cases;
        st.wrong += r.wrong;
        st.errors += r.errors;
        if (st.first.empty() && !r.first.empty()) st.first = "round " + std::to_string(round) + ": " + r.first;
        int more = rank == 0 && MPI_Wtime() - start < seconds;
        MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (!more) break;
    }
    char host[64] = {};
    gethostname(host, sizeof(host) - 1);
    printf("HOSTS_CHECK rank %d host %s cases %ld wrong %ld errors %ld first %s\n", rank, host, st.cases, st.wrong,
           st.errors, st.first.empty() ? "-" : st.first.c_str());
    fflush(stdout);
    vcclResult_t rc = vcclCommDestroy(comm);
    MPI_Finalize();
    return rc == vcclSuccess ? 0 : 1;
}
