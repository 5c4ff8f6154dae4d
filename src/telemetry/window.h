/*
 * Sliding window over the last W completions of one path and direction: the current bandwidth.
 *
 * bandwidth = sum of the window's bytes / the window's busy time. Completions arrive in completion order;
 * completion i adds the part of [post_i, done_i] after the previous completion, done_i - max(post_i,
 * done_{i-1}), to the busy time. Back-to-back and overlapping transfers (a queue) so count their wall time
 * once, and idle gaps between them (the application computing) do not count: the figure is what the link
 * delivers while it has work. Time spent waiting for a peer that posts late counts as busy (a receive cannot
 * tell waiting from moving); vccl-telemetry report separates the two with every rank's records.
 *
 * O(1) per completion, no allocation after construction. Single writer; not thread safe.
 */
#ifndef VCCL_TELEMETRY_WINDOW_H_
#define VCCL_TELEMETRY_WINDOW_H_

#include <cstdint>
#include <vector>

namespace vccl {
namespace telemetry {

class Window {
public:
    explicit Window(int size = 8) : entries_(size_t(size < 1 ? 1 : size)) {}

    /* Adds a completion; done_ns values must not decrease (later ones are clamped). */
    void add(uint64_t post_ns, uint64_t done_ns, uint64_t bytes) {
        if (count_ > 0 && done_ns < last_done_) done_ns = last_done_;
        uint64_t start = post_ns;
        if (count_ > 0 && last_done_ > start) start = last_done_;
        uint64_t busy = done_ns > start ? done_ns - start : 0;
        Entry& e = entries_[next_];
        if (count_ == entries_.size()) { // evict the oldest
            sum_bytes_ -= e.bytes;
            sum_busy_ -= e.busy;
        } else {
            ++count_;
        }
        e.bytes = bytes;
        e.busy = busy;
        sum_bytes_ += bytes;
        sum_busy_ += busy;
        next_ = next_ + 1 == entries_.size() ? 0 : next_ + 1;
        last_done_ = done_ns;
    }

    /* Bytes per second over the window; 0 while empty or when no busy time was measured. */
    double bandwidth() const { return sum_busy_ == 0 ? 0.0 : double(sum_bytes_) * 1e9 / double(sum_busy_); }
    uint64_t bytes() const { return sum_bytes_; }
    uint64_t busy_ns() const { return sum_busy_; }
    size_t count() const { return count_; }
    size_t size() const { return entries_.size(); }

private:
    struct Entry {
        uint64_t bytes = 0;
        uint64_t busy = 0;
    };
    std::vector<Entry> entries_;
    size_t next_ = 0;
    size_t count_ = 0;
    uint64_t sum_bytes_ = 0;
    uint64_t sum_busy_ = 0;
    uint64_t last_done_ = 0;
};

} // namespace telemetry
} // namespace vccl

#endif
