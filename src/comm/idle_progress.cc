/* SPDX-License-Identifier: BSD-3-Clause */
#include "comm/idle_progress.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "device/memory.h"

namespace vccl {

IdleProgress::IdleProgress(std::mutex* op_mutex, Transport* transport, int interval_ms,
                           const std::atomic<uint64_t>* activity, const std::atomic<int>* staged_jobs,
                           std::function<bool()> also)
    : op_mutex_(op_mutex), transport_(transport), interval_ms_(interval_ms > 0 ? interval_ms : 1), activity_(activity),
      staged_jobs_(staged_jobs), also_(std::move(also)), interval_now_(interval_ms_) {
    thread_ = std::thread([this] { run(); });
}

IdleProgress::~IdleProgress() {
    {
        std::lock_guard<std::mutex> lock(wake_mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

void IdleProgress::run() {
    relax_capture_for_this_thread(); // `also` may read device state while the application captures a graph
    using clock = std::chrono::steady_clock;
    std::unique_lock<std::mutex> wake_lock(wake_mutex_);
    const int slowest = std::max(interval_ms_, kMaxIntervalMs);
    int interval = interval_ms_;
    uint64_t seen = activity_ != nullptr ? activity_->load() : 0;
    clock::time_point last_busy = clock::now();
    for (;;) {
        wake_.wait_for(wake_lock, std::chrono::milliseconds(interval), [this] { return stop_; });
        if (stop_) return;
        bool busy = false;
        uint64_t now_activity = activity_ != nullptr ? activity_->load() : 0;
        if (now_activity != seen) {
            // Operations ran since the last poll: they drive the transport themselves, and taking their lock
            // in between would only delay the next one (measured: 1 MiB send/recv in a loop ran slower with
            // this thread polling on the rank's core). Poll once a whole interval passes without one.
            seen = now_activity;
            busy = true;
        } else {
            // Never waits for the lock: an operation in progress drives the transport itself.
            std::unique_lock<std::mutex> op_lock(*op_mutex_, std::try_to_lock);
            // Staged jobs are only queued under the lock: none starts while this thread holds it.
            if (op_lock.owns_lock() && (staged_jobs_ == nullptr || staged_jobs_->load() == 0)) {
                transport_->progress();
                busy = transport_->has_pending();
                if (also_ && also_()) busy = true;
            } else {
                busy = true;
            }
        }
        clock::time_point now = clock::now();
        if (busy) {
            last_busy = now;
            interval = interval_ms_;
        } else if (now - last_busy > std::chrono::nanoseconds(kQuietNs)) {
            interval = std::min(interval * 2, slowest);
        }
        interval_now_.store(interval, std::memory_order_relaxed);
    }
}

} // namespace vccl
