/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What recording one transfer costs the thread that drives the transport (the target: telemetry on costs
 * <= 1% at >= 1 MiB and <= 3% at 8 B; figures in docs/PERFORMANCE.md, "Telemetry cost"). End-to-end comparisons
 * (vccl-perf --baseline telemetry-off or telemetry-paused) vary by several percent from job to job, far more than
 * the cost itself; this times Telemetry::on_post + on_complete directly, as the UCX transport calls them:
 *   - transfers under 4 MiB (8 B and 1 MiB) of successive collectives: one collective in VCCL_TELEMETRY_SAMPLE
 *     (64) timed, the others only counted;
 *   - a 4 MiB transfer: always timed (clock, a window entry and a ring record);
 * each with warm caches (back to back) and colder ones: 2 MiB of other memory written between transfers (about
 * what a 1 MiB operation moves through the cache: telemetry's lines then come from the last-level cache),
 * and 32 MiB (more than most last-level caches: they come from memory, a worst case). Prints nanoseconds per
 * transfer, median of 5.
 * Not a test: it asserts nothing (run it by hand: tests/unit/bench_telemetry).
 */
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "telemetry/telemetry.h"

using namespace vccl::telemetry;

namespace {

using Clock = std::chrono::steady_clock;

/* Nanoseconds per transfer of `n` transfers of `bytes`; with `evict`, touches `evict` between transfers and
 * times only the telemetry calls. */
double per_transfer_ns(Telemetry* t, Telemetry::PathW* p, uint64_t bytes, int n, std::vector<char>* evict) {
    TransferTag tag{3, 0};
    double total = 0;
    Clock::time_point a = Clock::now();
    for (int i = 0; i < n; ++i) {
        if (evict != nullptr) {
            for (size_t k = 0; k < evict->size(); k += 64) (*evict)[k]++;
            a = Clock::now();
        }
        tag.seq = uint64_t(i / 2); // a send and a receive per collective
        Dir dir = (i & 1) ? Dir::Recv : Dir::Send;
        uint64_t post = t->on_post(p, dir, bytes, &tag);
        t->on_complete(p, dir, bytes, post, tag, true);
        if (evict != nullptr) total += std::chrono::duration<double, std::nano>(Clock::now() - a).count();
    }
    if (evict == nullptr) total = std::chrono::duration<double, std::nano>(Clock::now() - a).count();
    return total / n;
}

/* What reading the clock twice costs (subtracted from the cold figures). */
double clock_pair_ns(int n) {
    double total = 0;
    for (int i = 0; i < n; ++i) {
        Clock::time_point a = Clock::now();
        total += std::chrono::duration<double, std::nano>(Clock::now() - a).count();
    }
    return total / n;
}

double median5(double (*f)(void*), void* arg) {
    std::vector<double> v;
    for (int r = 0; r < 5; ++r) v.push_back(f(arg));
    std::sort(v.begin(), v.end());
    return v[2];
}

struct Case {
    Telemetry* t;
    Telemetry::PathW* p;
    uint64_t bytes;
    int n;
    std::vector<char>* evict;
};

} // namespace

int main() {
    Options o;
    o.rank = 0;
    o.nranks = 2;
    o.comm_hash = 0x62656e6368ull;
    o.comm_name = "bench";
    o.job = "bench";
    std::unique_ptr<Telemetry> t;
    if (Telemetry::create(o, &t) != vcclSuccess || !t) {
        fprintf(stderr, "bench_telemetry: cannot create telemetry\n");
        return 1;
    }
    Telemetry::PathW* p = t->path(1, 0);
    std::vector<char> evict_l2(2u << 20, 1), evict_all(32u << 20, 1);
    double clock_ns = clock_pair_ns(100000);
    printf("telemetry cost per transfer (on_post + on_complete), window %d, sample 1/%d, ring %s; median of 5\n",
           o.window, o.sample, t->shm_path().empty() ? "private" : "in /dev/shm");
    printf("%-32s %10s %14s %15s\n", "transfer", "warm ns", "2 MiB evict ns", "32 MiB evict ns");
    auto run = [](void* c) {
        Case* k = static_cast<Case*>(c);
        return per_transfer_ns(k->t, k->p, k->bytes, k->n, k->evict);
    };
    for (uint64_t bytes : {uint64_t(8), uint64_t(1) << 20, uint64_t(4) << 20}) {
        Case warm{t.get(), p, bytes, 2000000, nullptr}, l2{t.get(), p, bytes, 20000, &evict_l2},
            all{t.get(), p, bytes, 4000, &evict_all};
        double w = median5(run, &warm), c2 = median5(run, &l2) - clock_ns, c32 = median5(run, &all) - clock_ns;
        const char* what = bytes == 8 ? "8 B (1 collective in 64 timed)"
                           : bytes < (uint64_t(4) << 20) ? "1 MiB (1 collective in 64 timed)" : "4 MiB (every one timed)";
        printf("%-32s %10.1f %14.1f %15.1f\n", what, w, c2, c32);
    }
    return 0;
}
