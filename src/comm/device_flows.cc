#include "comm/device_flows.h"

#include <cstdint>
#include <utility>

#include "telemetry/telemetry.h"

namespace vccl {

using telemetry::Dir;
using telemetry::kDevicePath;

DeviceFlows::DeviceFlows(telemetry::Telemetry* telemetry, int nranks, std::function<uint32_t(int)> read_note)
    : telemetry_(telemetry), nranks_(nranks), read_note_(std::move(read_note)),
      pending_(size_t(2 * nranks + 1)), last_note_(size_t(2 * nranks + 1), 0) {}

uint32_t DeviceFlows::next_note(int word) {
    uint32_t n = ++last_note_[size_t(word)];
    if (n == 0) n = last_note_[size_t(word)] = 1; // 0 is the words' first value: "nothing done yet"
    return n;
}

uint32_t DeviceFlows::posted(int peer, Dir dir, uint64_t bytes, int* word) {
    *word = -1;
    if (paused_ || peer < 0 || peer >= nranks_) return 0;
    const uint64_t post_ns = telemetry_->on_post(peer, kDevicePath, dir, bytes, &tag_);
    if (post_ns == 0) {
        telemetry_->on_complete(peer, kDevicePath, dir, bytes, 0, tag_, true);
        return 0;
    }
    *word = dir == Dir::Send ? send_word(peer) : recv_word(peer);
    const uint32_t note = next_note(*word);
    pending_[size_t(*word)].push_back(Pending{peer, dir, bytes, post_ns, note, tag_});
    ++outstanding_;
    return note;
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
            if (!moves) continue;
            // Sampled at every size: the note of a kernel call costs a driver call of its own.
            const uint64_t post_ns = telemetry_->on_post(p, kDevicePath, dir, bytes, &tag_, UINT64_MAX);
            if (post_ns == 0) {
                telemetry_->on_complete(p, kDevicePath, dir, bytes, 0, tag_, true);
                continue;
            }
            if (note == 0) note = next_note(word);
            pending_[size_t(word)].push_back(Pending{p, dir, bytes, post_ns, note, tag_});
            ++outstanding_;
        }
    }
    return note;
}

void DeviceFlows::abandoned(int word, uint32_t note) {
    if (word < 0 || word >= words() || note == 0) return;
    std::deque<Pending>& q = pending_[size_t(word)];
    while (!q.empty() && q.back().note == note) {
        const Pending& r = q.back();
        telemetry_->on_complete(r.peer, kDevicePath, r.dir, r.bytes, r.post_ns, r.tag, false);
        q.pop_back();
        --outstanding_;
    }
}

bool DeviceFlows::poll() {
    if (outstanding_ == 0) return false;
    for (size_t w = 0; w < pending_.size(); ++w) {
        std::deque<Pending>& q = pending_[w];
        if (q.empty()) continue;
        const uint32_t done = read_note_(int(w));
        if (done == 0) continue;
        // Numbers wrap (skipping 0): a record is done when the word is at or past its number.
        while (!q.empty() && int32_t(done - q.front().note) >= 0) {
            const Pending& r = q.front();
            telemetry_->on_complete(r.peer, kDevicePath, r.dir, r.bytes, r.post_ns, r.tag, true);
            q.pop_front();
            --outstanding_;
        }
    }
    return outstanding_ > 0;
}

} // namespace vccl
