/* Short sleeps that last what they ask for. Linux rounds a thread's sleep up by its timer slack (50 us by
 * default), so a wait that sleeps 5-10 us between polls would sleep 50-60 us instead. */
#ifndef VCCL_CORE_FINE_SLEEPS_H_
#define VCCL_CORE_FINE_SLEEPS_H_

#if defined(__linux__)
#include <sys/prctl.h>
#endif

namespace vccl {

/* Lowers the calling thread's timer slack to 1 us while it exists, and puts back what it was. On a caller's
 * thread only for the length of one wait; on a thread of the library's own, for its life. */
class FineSleeps {
public:
    FineSleeps() {
#if defined(__linux__)
        int old = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
        if (old > 1000 && prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0) == 0) old_ = old;
#endif
    }
    ~FineSleeps() {
#if defined(__linux__)
        if (old_ > 0) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(old_), 0, 0, 0);
#endif
    }
    FineSleeps(const FineSleeps&) = delete;
    FineSleeps& operator=(const FineSleeps&) = delete;

private:
    int old_ = 0;
};

} // namespace vccl

#endif
