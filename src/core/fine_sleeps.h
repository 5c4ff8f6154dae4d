/* SPDX-License-Identifier: BSD-3-Clause */
/* Short sleeps that last about what they ask for. Linux lets a thread's sleep end anywhere within its timer slack
 * after the time asked (50 us by default), so a wait that sleeps 5-10 us between polls would sleep up to 60 us. */
#ifndef VCCL_CORE_FINE_SLEEPS_H_
#define VCCL_CORE_FINE_SLEEPS_H_

#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include <chrono>
#include <thread>

namespace vccl {

/* Sleeps `d` with the calling thread's timer slack lowered to 1 us, and puts the slack back right after. Only for
 * the sleep itself: a thread created meanwhile by this one (a callback between sleeps, CUDA's or UCX's helpers)
 * would inherit the lowered slack for its life. Two prctl calls, well under a microsecond each. */
inline void sleep_finely(std::chrono::microseconds d) {
#if defined(__linux__)
    const int old = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    const bool lowered = old > 1000 && prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0) == 0;
    std::this_thread::sleep_for(d);
    if (lowered) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(old), 0, 0, 0);
#else
    std::this_thread::sleep_for(d);
#endif
}

} // namespace vccl

#endif
