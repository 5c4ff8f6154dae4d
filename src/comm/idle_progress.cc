#include "comm/idle_progress.h"

#include <chrono>

namespace vccl {

IdleProgress::IdleProgress(std::mutex* op_mutex, Transport* transport, int interval_ms)
    : op_mutex_(op_mutex), transport_(transport), interval_ms_(interval_ms > 0 ? interval_ms : 1) {
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
    std::unique_lock<std::mutex> wake_lock(wake_mutex_);
    for (;;) {
        wake_.wait_for(wake_lock, std::chrono::milliseconds(interval_ms_), [this] { return stop_; });
        if (stop_) return;
        // Never waits for the lock: an operation in progress drives the transport itself.
        std::unique_lock<std::mutex> op_lock(*op_mutex_, std::try_to_lock);
        if (op_lock.owns_lock()) transport_->progress();
    }
}

} // namespace vccl
