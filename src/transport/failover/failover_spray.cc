/* SPDX-License-Identifier: BSD-3-Clause */
/* Failover transport (failover_transport.h), spray mode (VCCL_MULTIPATH=spray): which path each chunk of a
 * message takes, the per-path speeds that decide it, and whether a path still carries chunks. */
#include "transport/failover/failover_transport.h"

namespace vccl {
namespace failover {

/* Each chunk to the path where it would be done first: the bytes outstanding there (earlier chunks included)
 * over the path's measured speed. A path not measured yet counts as fast as the other (or 1 GB/s). */
void FailoverTransport::plan_spray(int peer, OutMsg* m) {
    PeerState& p = *peers_[size_t(peer)];
    auto speed = [&](int i) { return p.rate[i].peer_bps > 0 ? p.rate[i].peer_bps : p.rate[i].bps; };
    double known = std::max(speed(0), speed(1));
    double bps[kPaths], load[kPaths];
    for (int i = 0; i < kPaths; ++i) {
        bps[i] = speed(i) > 0 ? speed(i) : (known > 0 ? known : 1e9);
        load[i] = double(p.rate[i].outstanding);
    }
    int a = p.active, o = 1 - p.active;
    for (uint32_t c = 0; c < m->nchunks; ++c) {
        double len = double(std::min<size_t>(m->chunk_bytes, m->bytes - size_t(c) * m->chunk_bytes));
        int best = (load[o] + len) / bps[o] < (load[a] + len) / bps[a] ? o : a;
        load[best] += len;
        m->chunk_path[c] = uint8_t(best);
    }
}

void FailoverTransport::rate_post(int peer, int path, uint64_t bytes) {
    PathRate& r = (*peers_[size_t(peer)]).rate[path];
    if (r.outstanding == 0) {
        r.win_start = now_ns();
        r.win_bytes = 0;
    }
    r.outstanding += bytes;
}

/* A chunk send ended (`completed`) or was given up. The speed is sampled over busy time: bytes completed since
 * the window began, at least 20 ms (a burst of completions at once says nothing), or until the path is idle. */
void FailoverTransport::rate_done(int peer, int path, uint64_t bytes, bool completed) {
    PathRate& r = (*peers_[size_t(peer)]).rate[path];
    r.outstanding -= std::min(r.outstanding, bytes);
    if (!completed) return;
    uint64_t now = now_ns();
    r.win_bytes += bytes;
    uint64_t elapsed = now > r.win_start ? now - r.win_start : 0;
    if (elapsed >= 20000000ull || (r.outstanding == 0 && elapsed >= 1000000ull)) {
        double sample = double(r.win_bytes) * 1e9 / double(elapsed);
        r.bps = r.bps > 0 ? 0.7 * r.bps + 0.3 * sample : sample;
        r.win_start = now;
        r.win_bytes = 0;
    }
}

bool FailoverTransport::carries(int peer, int path) const {
    const PeerState& p = *peers_[size_t(peer)];
    for (const auto& mp : p.out) {
        for (size_t i = 1; i < mp->reqs.size(); ++i) {
            if (mp->reqs[i] != nullptr && mp->chunk_path[i - 1] == path) return true;
        }
    }
    for (const auto& kv : p.in) {
        const InMsg* m = kv.second.get();
        for (size_t c = 0; c < m->reqs.size(); ++c) {
            if (m->reqs[c] != nullptr && m->chunk_path[c] == path) return true;
        }
    }
    return false;
}

} // namespace failover
} // namespace vccl
