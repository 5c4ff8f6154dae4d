/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vccl-perf --soak SECONDS: a long mixed run that looks for wrong results, errors and leaks (docs/RELIABILITY.md,
 * "Soak").
 *
 * Every rank draws the same plan from one seed (rank 0's, broadcast), so all ranks agree on each step
 * without messages: collective, datatype, op, root, in place or not, and an element count that is often
 * 0, 1 or odd. Each step fills the inputs, runs the collective on host buffers, and checks every output
 * element against the expectation that buffers.cc computes independently of vccl. Every --split-every
 * steps the world communicator is split (random colors, keys and opted-out ranks; the new communicator's
 * size and rank are checked against the plan), used for two checked collectives and destroyed; every
 * fourth such time the world communicator itself is destroyed and created again.
 *
 * Leaks: VmRSS (/proc/self/status) and the number of open descriptors (/proc/self/fd) are sampled at
 * start, after a warm-up (first 10% of the run, at most 30 s: allocators, UCX and the proxy thread grow
 * to their working size first) and at the end; growth is end minus warm-up.
 */
#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cstring>
#include <string>
#include <vector>

#include "tools/perf/perf.h"
#include "vccl_mpi.h"

namespace vperf {

namespace {

struct Usage {
    long rss_kb = -1;
    long fds = -1;
};

Usage usage_now() {
    Usage u;
    if (FILE* f = fopen("/proc/self/status", "r")) {
        char line[256];
        while (fgets(line, sizeof(line), f) != nullptr) {
            if (strncmp(line, "VmRSS:", 6) == 0) u.rss_kb = strtol(line + 6, nullptr, 10);
        }
        fclose(f);
    }
    if (DIR* d = opendir("/proc/self/fd")) {
        long n = 0;
        while (struct dirent* e = readdir(d)) n += e->d_name[0] != '.';
        closedir(d);
        u.fds = n - 1; // the directory stream's own descriptor
    }
    return u;
}

/* splitmix64: small, and the same sequence on every rank from the same seed. */
class Rng {
public:
    explicit Rng(uint64_t seed) : s_(seed) {}
    uint64_t next() {
        uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    /* Draws exactly one value whatever n is, so ranks that pass different n (group sizes) stay aligned. */
    size_t below(size_t n) {
        uint64_t v = next();
        return n ? size_t(v % n) : 0;
    }

private:
    uint64_t s_;
};

const Coll kAllColls[] = {Coll::AllReduce, Coll::Broadcast,     Coll::Reduce,  Coll::AllGather,
                          Coll::ReduceScatter, Coll::AlltoAll, Coll::SendRecv};
const vcclDataType_t kTypes[] = {vcclInt8,  vcclUint8,   vcclInt32,   vcclUint32,  vcclInt64,
                                 vcclUint64, vcclFloat16, vcclFloat32, vcclFloat64, vcclBfloat16,
                                 vcclFloat8e4m3, vcclFloat8e5m2};
const vcclRedOp_t kOps[] = {vcclSum, vcclProd, vcclMax, vcclMin, vcclAvg};
constexpr int kNumTypes = sizeof(kTypes) / sizeof(kTypes[0]);

/* Collectives whose count argument is per rank block (buffers hold nranks blocks). */
bool per_block(Coll c) { return c == Coll::AllGather || c == Coll::ReduceScatter || c == Coll::AlltoAll; }

struct Step {
    Options o; // coll, dtype, op, root of this step
    Shape shape;
    bool in_place = false;
    int type_index = 0;
};

/* Element counts: 1/8 zero, 1/8 one, 1/4 small odd, the rest log-uniform up to the largest size, half of
 * those made odd. */
Step plan_step(const Options& base, Rng& rng, int nranks) {
    Step s;
    s.o = base;
    s.o.coll = base.soak_all ? kAllColls[rng.below(7)] : base.coll;
    s.type_index = int(rng.below(kNumTypes));
    s.o.dtype = kTypes[s.type_index];
    s.o.op = kOps[rng.below(5)];
    s.o.root = int(rng.below(size_t(nranks)));
    s.in_place = rng.below(2) == 1;
    size_t per = type_size(s.o.dtype) * (per_block(s.o.coll) ? size_t(nranks) : 1);
    size_t max_count = base.max_bytes / per;
    size_t count = 0;
    size_t kind = rng.below(8);
    if (kind == 0) count = 0;
    else if (kind == 1) count = 1;
    else if (kind <= 3) count = rng.below(32) * 2 + 1;
    else {
        size_t bits = 0;
        while ((size_t(2) << bits) <= max_count) bits++;
        size_t high = size_t(1) << rng.below(bits + 1); // separate statements: the draw order is fixed
        size_t low_bits = rng.below(bits + 1);
        count = high + rng.below(size_t(1) << low_bits);
        if (rng.below(2)) count |= 1;
    }
    if (count > max_count) count = max_count;
    s.shape = make_shape(s.o.coll, count * per, s.o.dtype, nranks);
    return s;
}

struct Tally {
    long long steps = 0; // collective operations (counted by rank 0 of the communicator that ran them)
    long long wrong = 0;
    long long errors = 0;
    long long comms_created = 0;
    long long comms_destroyed = 0;
    long long zero_count = 0;
    long long per_coll[7] = {};
};

class Soak {
public:
    Soak(const Options& o, int rank, int nranks) : o_(o), rank_(rank), nranks_(nranks), rng_(0) {}

    int run();

private:
    bool ok(vcclResult_t r, const char* what, vcclComm_t comm);
    void one_step(vcclComm_t comm, int rank, int nranks);
    void churn();
    /* Sums the local counts over ranks; the flags are rank 0's (its clock decides for everybody). Returns
     * the flags as every rank sees them. */
    struct Flags {
        bool stop = false;
        bool warm = false;
    };
    Flags agree(Flags rank0);
    void report(const Usage& start, const Usage& warm, const Usage& end, double seconds, int* rc);

    Options o_;
    int rank_, nranks_;
    Rng rng_;
    vcclComm_t world_ = nullptr;
    std::vector<Buffers*> bufs_; // one per datatype, sized for the largest step
    Tally local_, total_;
    long long churns_ = 0;
    int wrong_reports_ = 0;
};

bool Soak::ok(vcclResult_t r, const char* what, vcclComm_t comm) {
    if (r == vcclSuccess) return true;
    local_.errors++;
    const char* last = comm != nullptr ? vcclGetLastError(comm) : "";
    fprintf(stderr, "vccl-perf soak: rank %d step %lld: %s: %s %s\n", rank_, total_.steps, what,
            vcclGetErrorString(r), last != nullptr ? last : "");
    return false;
}

void Soak::one_step(vcclComm_t comm, int rank, int nranks) {
    Step s = plan_step(o_, rng_, nranks);
    Buffers& buf = *bufs_[size_t(s.type_index)];
    std::string error;
    uint64_t wrong = 0;
    if (rank == 0) {
        local_.steps++;
        local_.per_coll[int(s.o.coll)]++;
        local_.zero_count += s.shape.count == 0;
    }
    if (!buf.fill(s.o, s.shape, rank, nranks, s.in_place, &error)) {
        fprintf(stderr, "vccl-perf soak: rank %d: %s\n", rank_, error.c_str());
        local_.errors++;
        return;
    }
    CallBuffers cb = call_buffers(s.o.coll, buf, s.shape, rank, s.in_place);
    if (!ok(run_vccl(s.o, s.shape, cb, comm, rank, nranks, nullptr), coll_name(s.o.coll), comm)) return;
    buf.check(s.o, s.shape, rank, nranks, s.in_place, &wrong, &error);
    if (wrong > 0 && ++wrong_reports_ <= 10) // the first few describe the problem; the counts say the rest
        fprintf(stderr, "vccl-perf soak: rank %d: %llu wrong elements: %s %s %s count %zu root %d %s on %d ranks\n",
                rank_, (unsigned long long)wrong, coll_name(s.o.coll), type_name(s.o.dtype), op_name(s.o.op),
                s.shape.count, s.o.root, s.in_place ? "in place" : "out of place", nranks);
    local_.wrong += (long long)wrong;
}

/* Splits the world communicator by a plan every rank draws alike, checks the result, uses it, destroys it;
 * every fourth time also recreates the world communicator. */
void Soak::churn() {
    churns_++;
    size_t colors = 1 + rng_.below(3);
    std::vector<int> color(static_cast<size_t>(nranks_)), key(static_cast<size_t>(nranks_));
    for (int r = 0; r < nranks_; ++r) {
        color[size_t(r)] = rng_.below(8) == 0 ? VCCL_SPLIT_NOCOLOR : int(rng_.below(colors));
        key[size_t(r)] = int(rng_.below(4)); // ties are broken by the parent rank
    }
    int mine = color[size_t(rank_)];
    int want_size = 0, want_rank = 0;
    for (int r = 0; r < nranks_; ++r) {
        if (mine == VCCL_SPLIT_NOCOLOR || color[size_t(r)] != mine) continue;
        want_size++;
        bool before = key[size_t(r)] < key[size_t(rank_)] || (key[size_t(r)] == key[size_t(rank_)] && r < rank_);
        want_rank += before;
    }
    vcclComm_t sub = nullptr;
    if (!ok(vcclCommSplit(world_, mine, key[size_t(rank_)], &sub, nullptr), "vcclCommSplit", world_)) return;
    if (mine == VCCL_SPLIT_NOCOLOR) {
        if (sub != nullptr) {
            fprintf(stderr, "vccl-perf soak: rank %d: NOCOLOR split returned a communicator\n", rank_);
            local_.errors++;
        }
    } else if (sub != nullptr) {
        int n = 0, me = -1;
        vcclCommCount(sub, &n);
        vcclCommUserRank(sub, &me);
        if (n != want_size || me != want_rank) {
            fprintf(stderr, "vccl-perf soak: rank %d: split gave rank %d of %d, expected %d of %d\n", rank_, me,
                    n, want_rank, want_size);
            local_.errors++;
        }
    } else {
        fprintf(stderr, "vccl-perf soak: rank %d: split returned no communicator\n", rank_);
        local_.errors++;
    }
    /* Every rank draws these steps' plans: how many values plan_step draws depends only on the generator's
     * state, not on the group size, so all ranks stay aligned. Members run them at the size and rank vccl
     * reports; the child's rank 0 counts the communicator. */
    int n = 1, me = 0;
    if (sub != nullptr && vcclCommCount(sub, &n) == vcclSuccess && vcclCommUserRank(sub, &me) == vcclSuccess) {
        if (me == 0) local_.comms_created++;
        for (int i = 0; i < 2; ++i) one_step(sub, me, n);
    } else {
        for (int i = 0; i < 2; ++i) plan_step(o_, rng_, 1);
    }
    if (sub != nullptr && ok(vcclCommDestroy(sub), "vcclCommDestroy", nullptr) && me == 0)
        local_.comms_destroyed++;
    if (churns_ % 4 == 0) {
        if (ok(vcclCommDestroy(world_), "vcclCommDestroy (world)", nullptr) && rank_ == 0)
            local_.comms_destroyed++;
        world_ = nullptr;
        if (ok(vcclCommInitMPI(&world_, MPI_COMM_WORLD, nullptr), "vcclCommInitMPI", nullptr) && rank_ == 0)
            local_.comms_created++;
    }
}

Soak::Flags Soak::agree(Flags rank0) {
    /* One reduction: the counters, then rank 0's flags (zero elsewhere). */
    long long in[15] = {local_.steps, local_.wrong, local_.errors, local_.comms_created, local_.comms_destroyed,
                        local_.zero_count, rank_ == 0 && rank0.stop, rank_ == 0 && rank0.warm};
    for (int i = 0; i < 7; ++i) in[8 + i] = local_.per_coll[i];
    long long out[15] = {};
    Flags f;
    f.stop = true;
    if (MPI_Allreduce(in, out, 15, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS) {
        total_.errors++;
        return f;
    }
    total_.steps += out[0];
    total_.wrong += out[1];
    total_.errors += out[2];
    total_.comms_created += out[3];
    total_.comms_destroyed += out[4];
    total_.zero_count += out[5];
    for (int i = 0; i < 7; ++i) total_.per_coll[i] += out[8 + i];
    local_ = Tally();
    f.stop = out[6] != 0 || total_.errors != 0;
    f.warm = out[7] != 0;
    return f;
}

void Soak::report(const Usage& start, const Usage& warm, const Usage& end, double seconds, int* rc) {
    long mine[6] = {start.rss_kb, warm.rss_kb, end.rss_kb, start.fds, warm.fds, end.fds};
    std::vector<long> all(size_t(nranks_) * 6);
    MPI_Gather(mine, 6, MPI_LONG, all.data(), 6, MPI_LONG, 0, MPI_COMM_WORLD);
    bool grew = false;
    if (rank_ == 0) {
        printf("# soak: %.0f s, seed %llu, largest message %zu B, %d ranks\n", seconds,
               (unsigned long long)o_.seed, o_.max_bytes, nranks_);
        printf("# operations %lld (zero-count %lld), wrong elements %lld, errors %lld\n", total_.steps,
               total_.zero_count, total_.wrong, total_.errors);
        printf("# communicators created %lld, destroyed %lld (splits and world re-creations)\n",
               total_.comms_created, total_.comms_destroyed);
        printf("# operations per collective:");
        for (int i = 0; i < 7; ++i) printf(" %s %lld", coll_name(kAllColls[i]), total_.per_coll[i]);
        printf("\n#\n# %4s %12s %12s %12s %10s   %6s %6s %6s %6s\n", "rank", "rss0(kB)", "rssWarm(kB)",
               "rssEnd(kB)", "growth", "fd0", "fdWarm", "fdEnd", "growth");
        for (int r = 0; r < nranks_; ++r) {
            const long* u = &all[size_t(r) * 6];
            long rss_growth = u[2] - u[1], fd_growth = u[5] - u[4];
            bool bad = rss_growth > o_.max_rss_growth_kb || fd_growth > o_.max_fd_growth;
            grew = grew || bad;
            printf("  %4d %12ld %12ld %12ld %10ld   %6ld %6ld %6ld %6ld%s\n", r, u[0], u[1], u[2], rss_growth, u[3],
                   u[4], u[5], fd_growth, bad ? "  <- above limit" : "");
        }
        printf("# limits: RSS growth %ld kB, fd growth %ld per rank (after warm-up)\n", o_.max_rss_growth_kb,
               o_.max_fd_growth);
        const char* verdict = total_.errors ? "FAIL (errors)" : total_.wrong ? "FAIL (wrong elements)"
                              : grew       ? "FAIL (growth above limit)"
                                           : "PASS";
        printf("# soak result: %s\n", verdict);
        fflush(stdout);
    }
    int code = total_.errors ? kExitRuntime : total_.wrong ? kExitWrong : grew ? kExitLeak : kExitOk;
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    *rc = code;
}

int Soak::run() {
    unsigned long long seed = o_.seed;
    if (rank_ == 0 && seed == 0) seed = (unsigned long long)time(nullptr) ^ (unsigned long long)getpid() << 32;
    MPI_Bcast(&seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    o_.seed = seed;
    rng_ = Rng(seed);
    if (!ok(vcclCommInitMPI(&world_, MPI_COMM_WORLD, nullptr), "vcclCommInitMPI", nullptr)) return kExitRuntime;
    std::string error;
    for (vcclDataType_t t : kTypes) {
        bufs_.push_back(new Buffers(Memory::Host, DeviceAlloc::Cuda, t));
        size_t elems = o_.max_bytes / type_size(t);
        if (!bufs_.back()->allocate(elems, elems, &error)) {
            fprintf(stderr, "vccl-perf soak: rank %d: %s\n", rank_, error.c_str());
            MPI_Abort(MPI_COMM_WORLD, kExitRuntime);
        }
    }
    if (rank_ == 0) {
        printf("# vccl-perf soak: %d ranks, %.0f s, seed %llu, sizes 0..%zu B, split every %d steps\n", nranks_,
               o_.soak_seconds, seed, o_.max_bytes, o_.split_every);
        fflush(stdout);
    }
    Usage start = usage_now(), warm = start;
    double warm_s = o_.soak_seconds * 0.1 < 30 ? o_.soak_seconds * 0.1 : 30;
    bool warmed = false;
    double t0 = MPI_Wtime(), next_progress = o_.soak_progress;
    for (long long i = 0;; ++i) {
        if (world_ != nullptr) one_step(world_, rank_, nranks_);
        if (o_.split_every > 0 && i % o_.split_every == o_.split_every - 1) churn();
        double elapsed = MPI_Wtime() - t0;
        Flags f = agree({elapsed >= o_.soak_seconds, !warmed && elapsed >= warm_s});
        if (f.warm) { // every rank samples after the same step
            warm = usage_now();
            warmed = true;
        }
        if (f.stop) break;
        if (rank_ == 0 && o_.soak_progress > 0 && elapsed >= next_progress) {
            Usage u = usage_now();
            printf("# %6.0f s: operations %lld, wrong %lld, errors %lld, comms %lld/%lld, rank 0 RSS %ld kB fds %ld\n",
                   elapsed, total_.steps, total_.wrong, total_.errors, total_.comms_created,
                   total_.comms_destroyed, u.rss_kb, u.fds);
            fflush(stdout);
            next_progress += o_.soak_progress;
        }
    }
    double seconds = MPI_Wtime() - t0;
    Usage end = usage_now();
    int rc = kExitOk;
    report(start, warm, end, seconds, &rc);
    if (world_ != nullptr && total_.errors == 0) vcclCommDestroy(world_);
    for (Buffers* b : bufs_) delete b;
    return rc;
}

} // namespace

int run_soak(const Options& o, int rank, int nranks) {
    Soak soak(o, rank, nranks);
    return soak.run();
}

} // namespace vperf
