/* SPDX-License-Identifier: BSD-3-Clause */
/* Monotonic clocks for deadlines and telemetry. */
#ifndef VCCL_CORE_CLOCK_H_
#define VCCL_CORE_CLOCK_H_

#include <cstdint>
#include <time.h>

namespace vccl {

inline uint64_t now_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

/* A point in time after which a wait gives up. A limit of 0 means "never". */
class Deadline {
public:
    static Deadline after_ms(int64_t ms) { return Deadline(ms <= 0 ? 0 : now_ns() + uint64_t(ms) * 1000000ull); }
    static Deadline never() { return Deadline(0); }
    bool expired() const { return at_ns_ != 0 && now_ns() >= at_ns_; }
    /* Milliseconds left, clamped to [0, cap]; cap when there is no deadline. */
    int remaining_ms(int cap) const {
        if (at_ns_ == 0) return cap;
        uint64_t now = now_ns();
        if (now >= at_ns_) return 0;
        uint64_t left = (at_ns_ - now + 999999ull) / 1000000ull;
        return left > uint64_t(cap) ? cap : int(left);
    }
private:
    explicit Deadline(uint64_t at_ns) : at_ns_(at_ns) {}
    uint64_t at_ns_;
};

} // namespace vccl

#endif
