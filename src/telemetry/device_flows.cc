/* SPDX-License-Identifier: BSD-3-Clause */
#include "telemetry/device_flows.h"

#include <cstdint>
#include <utility>

#include "core/clock.h"

namespace vccl {

using telemetry::Dir;
using telemetry::kDevicePath;
using PathW = telemetry::Telemetry::PathW;

DeviceFlows::DeviceFlows(telemetry::Telemetry* telemetry, int nranks, std::function<uint32_t(int)> read_note,
                         FailState fail_state)
    : telemetry_(telemetry), nranks_(nranks), read_note_(std::move(read_note)), fail_state_(std::move(fail_state)),
      paths_(size_t(nranks), nullptr), pending_(size_t(2 * nranks + 1)), seen_done_(size_t(nranks)),
      last_note_(size_t(2 * nranks + 1), 0), seen_(size_t(2 * nranks + 1), 0),
      failed_(new std::atomic<bool>[size_t(nranks)]) {
    for (int p = 0; p < nranks; ++p) failed_[size_t(p)].store(false);
    // Looked up once: the lookup was a third of the cost of a counted transfer (telemetry.h).
    for (int p = 0; p < nranks; ++p) paths_[size_t(p)] = telemetry->path(p, kDevicePath);
}

uint32_t DeviceFlows::next_note(int word) {
    uint32_t n = ++last_note_[size_t(word)];
    if (n == 0) n = last_note_[size_t(word)] = 1; // 0 is the words' first value: "nothing done yet"
    return n;
}

/* Posts one transfer; a timed one is queued on `word` with `note` (a new number when 0). Returns its note, or 0
 * when it was counted and completed at once. */
uint32_t DeviceFlows::record(int peer, Dir dir, uint64_t bytes, int word, uint32_t note) {
    PathW* path = paths_[size_t(peer)];
    if (path == nullptr) return 0;
    // Sampled at every size (the header says why).
    const uint64_t post_ns = telemetry_->on_post(path, dir, bytes, &tag_, UINT64_MAX);
    if (post_ns == 0) {
        telemetry_->on_complete(path, dir, bytes, 0, tag_, true);
        return 0;
    }
    if (note == 0) note = next_note(word);
    pending_[size_t(word)].push_back(Pending{peer, path, dir, bytes, post_ns, note, tag_});
    ++outstanding_;
    return note;
}

uint32_t DeviceFlows::posted(int peer, Dir dir, uint64_t bytes, int* word) {
    *word = -1;
    if (paused_ || peer < 0 || peer >= nranks_) return 0;
    const int w = dir == Dir::Send ? send_word(peer) : recv_word(peer);
    const uint32_t note = record(peer, dir, bytes, w, 0);
    if (note != 0) *word = w;
    return note;
}

void DeviceFlows::counted(int peer, Dir dir, uint64_t bytes) {
    if (paused_ || peer < 0 || peer >= nranks_ || paths_[size_t(peer)] == nullptr) return;
    // Completed as not timed even when sampling picked it (on_post's clock reading then goes unused).
    telemetry_->on_post(paths_[size_t(peer)], dir, bytes, &tag_, UINT64_MAX);
    telemetry_->on_complete(paths_[size_t(peer)], dir, bytes, 0, tag_, true);
}

uint32_t DeviceFlows::kernel_posted(int rank, uint64_t bytes, KernelFlow flow, int root) {
    if (paused_ || bytes == 0) return 0;
    const int word = kernel_word();
    uint32_t note = 0;
    for (int p = 0; p < nranks_; ++p) {
        if (p == rank) continue;
        for (Dir dir : {Dir::Send, Dir::Recv}) {
            const bool moves = flow == KernelFlow::EveryPeer ? true
                               : flow == KernelFlow::FromRoot ? (dir == Dir::Send ? rank == root : p == root)
                                                              : (dir == Dir::Send ? p == root : rank == root);
            if (moves) note = record(p, dir, bytes, word, note);
        }
    }
    return note;
}

void DeviceFlows::abandoned(int word, uint32_t note) {
    if (word < 0 || word >= words() || note == 0) return;
    std::deque<Pending>& q = pending_[size_t(word)];
    while (!q.empty() && q.back().note == note) {
        const Pending& r = q.back();
        telemetry_->on_complete(r.path, r.dir, r.bytes, r.post_ns, r.tag, false);
        q.pop_back();
        --outstanding_;
    }
}

void DeviceFlows::peer_failed(int peer) {
    if (peer >= 0 && peer < nranks_) failed_[size_t(peer)].store(true, std::memory_order_relaxed);
}

bool DeviceFlows::poll() {
    if (outstanding_ == 0) return false;
    bool any_done = false;
    for (size_t w = 0; w < pending_.size(); ++w) {
        const std::deque<Pending>& q = pending_[w];
        if (q.empty()) continue;
        // Numbers wrap (skipping 0): a record is done when the word is at or past its number. The highest value
        // seen counts: a word written by two streams could show an older value after a newer one.
        uint32_t done = read_note_(int(w));
        if (done == 0 || int32_t(done - seen_[w]) < 0) done = seen_[w];
        seen_[w] = done;
        any_done = any_done || (done != 0 && int32_t(done - q.front().note) >= 0);
    }
    if (any_done) {
        // Read after the notes: a read of the FAIL words that starts after this vouches for what they said.
        const uint64_t seen_ns = now_ns(), done_ns = telemetry_->now_ns();
        for (size_t w = 0; w < pending_.size(); ++w) {
            std::deque<Pending>& q = pending_[w];
            while (!q.empty() && seen_[w] != 0 && int32_t(seen_[w] - q.front().note) >= 0) {
                seen_done_[size_t(q.front().peer)].push_back(Seen{q.front(), seen_ns, done_ns});
                ++unconfirmed_;
                q.pop_front();
            }
        }
    }
    for (int p = 0; p < nranks_ && unconfirmed_ > 0; ++p) {
        if (!seen_done_[size_t(p)].empty()) confirm(p);
    }
    return outstanding_ > unconfirmed_;
}

/* Completes `peer`'s records seen done that a read of the FAIL words has vouched for: all of them, as failures,
 * once the peer is known to have given up; else those seen before the latest read that found it had not. */
void DeviceFlows::confirm(int peer) {
    uint64_t clear_ns = 0;
    bool failed = false;
    fail_state_(peer, &clear_ns, &failed);
    failed = failed || failed_[size_t(peer)].load(std::memory_order_relaxed);
    std::deque<Seen>& q = seen_done_[size_t(peer)];
    while (!q.empty() && (failed || q.front().seen_ns < clear_ns)) {
        const Seen& s = q.front();
        telemetry_->on_complete(s.r.path, s.r.dir, s.r.bytes, s.r.post_ns, s.r.tag, !failed, s.done_ns);
        q.pop_front();
        --unconfirmed_;
        --outstanding_;
    }
}

} // namespace vccl
