/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sliding window over the last W completions of one path and direction: the current bandwidth.
 *
 * bandwidth = sum of the window's bytes / the window's busy time. Completions arrive in completion order;
 * completion i adds the part of [post_i, done_i] after the previous completion, done_i - max(post_i,
 * done_{i-1}), to the busy time. Back-to-back and overlapping transfers (a queue) so count their wall time
 * once, and idle gaps between them (the application computing) do not count: the figure is what the link
 * delivers while it has work, also when more transfers are queued than the window holds. Time spent waiting
 * for a peer that posts late counts as busy (a receive cannot tell waiting from moving); vccl-telemetry
 * report separates the two with every rank's records.
 *
 * Completions seen together (within kGroupNs of each other: one progress call found them all done) share
 * their busy time evenly. Before, the first of them took it all and the rest about nothing, so once the
 * first had left the window the others kept their bytes with almost no time: 16 queued 1 MB transfers on a
 * 1 GB/s link, seen complete in one call, showed 104,857 GB/s. (The union of the window's own [post, done]
 * intervals, tried instead, fails the other way: with a queue deeper than the window, every entry's
 * interval spans the whole queue and the figure falls by the queue depth over the window.)
 *
 * O(1) per completion, O(group) when a group closes (at most kMaxGroup), no allocation after construction. Single writer; not thread safe.
 */
#ifndef VCCL_TELEMETRY_WINDOW_H_
#define VCCL_TELEMETRY_WINDOW_H_

#include <cstdint>
#include <vector>

namespace vccl {
namespace telemetry {

class Window {
public:
    static constexpr uint64_t kGroupNs = 10000; // completions closer than this were seen in one progress call
    static constexpr uint64_t kMaxGroup = 64;

    explicit Window(int size = 8) : entries_(size_t(size < 1 ? 1 : size)) {}

    /* Adds a completion; done_ns values must not decrease (later ones are clamped). */
    void add(uint64_t post_ns, uint64_t done_ns, uint64_t bytes) {
        if (count_ > 0 && done_ns < last_done_) done_ns = last_done_;
        uint64_t start = post_ns;
        if (count_ > 0 && last_done_ > start) start = last_done_;
        uint64_t busy = done_ns > start ? done_ns - start : 0;
        bool joins = count_ > 0 && done_ns - last_done_ <= kGroupNs && group_all_ < kMaxGroup;
        if (!joins) close_group();
        Entry& e = entries_[next_];
        if (count_ == entries_.size()) { // evict the oldest
            sum_bytes_ -= e.bytes;
            if (group_ == count_) {
                group_--; // a member of the open group: its share leaves with it
            } else {
                sum_busy_closed_ -= e.busy;
            }
        } else {
            ++count_;
        }
        e.bytes = bytes;
        e.busy = busy; // the raw part; shared out when the group closes
        sum_bytes_ += bytes;
        group_++;
        group_all_++;
        group_total_ += busy;
        next_ = next_ + 1 == entries_.size() ? 0 : next_ + 1;
        last_done_ = done_ns;
    }

    /* Bytes per second over the window; 0 while empty or when no busy time was measured. */
    double bandwidth() const {
        uint64_t busy = busy_ns();
        return busy == 0 ? 0.0 : double(sum_bytes_) * 1e9 / double(busy);
    }
    uint64_t bytes() const { return sum_bytes_; }
    uint64_t busy_ns() const {
        return sum_busy_closed_ + (group_all_ == 0 ? 0 : group_total_ * group_ / group_all_);
    }
    size_t count() const { return count_; }
    size_t size() const { return entries_.size(); }

private:
    struct Entry {
        uint64_t bytes = 0;
        uint64_t busy = 0; // closed entries: its share; open group: the raw part
    };
    /* The open group's members still in the window get their equal share of the whole group's time. */
    void close_group() {
        if (group_all_ == 0) return;
        uint64_t share = group_total_ / group_all_;
        size_t i = next_;
        for (uint64_t k = 0; k < group_; ++k) {
            i = i == 0 ? entries_.size() - 1 : i - 1;
            entries_[i].busy = share;
            sum_busy_closed_ += share;
        }
        group_ = group_all_ = group_total_ = 0;
    }

    std::vector<Entry> entries_;
    size_t next_ = 0;
    size_t count_ = 0;
    uint64_t sum_bytes_ = 0;
    uint64_t sum_busy_closed_ = 0; // busy time of the entries in the window outside the open group
    uint64_t last_done_ = 0;
    // The open group: completions seen together, the newest `group_` entries of the window, `group_all_`
    // counting those already evicted too, `group_total_` their busy time.
    uint64_t group_ = 0, group_all_ = 0, group_total_ = 0;
};

} // namespace telemetry
} // namespace vccl

#endif
