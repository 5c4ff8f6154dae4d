/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An in-process Transport for tests: N ranks are N threads of one process sharing a mailbox.
 *
 * Matching follows the Transport contract: a send from s to d with tag t matches the oldest receive posted
 * on d for (s, t), in posting order. Knobs that make bugs visible:
 *  - eager = false: every send completes only once a receive has matched it and the data moved (what UCX
 *    rendezvous does for large messages), so an algorithm that waits on a send before posting the receive
 *    its peer needs deadlocks here too (and ends in the collective's timeout instead of hanging forever);
 *  - max_delay_us > 0: each delivery and each send completion happens after a random delay, so completions
 *    are reordered across streams (and within one: the contract allows any completion order). Data moves
 *    at delivery time, so touching a buffer before its request completed shows up as wrong data.
 * The world also counts what is left over (unreleased requests, unmatched messages) for leak checks.
 */
#ifndef VCCL_TESTS_UNIT_SIM_TRANSPORT_H_
#define VCCL_TESTS_UNIT_SIM_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "transport/transport.h"

namespace vccl {
namespace test {

struct SimOptions {
    bool eager = true;     // non-sync sends complete without a matching receive (data copied at post)
    int max_delay_us = 0;  // random delay of each delivery and send completion; 0: immediate
    uint64_t seed = 1;
};

class SimWorld {
public:
    explicit SimWorld(int nranks, const SimOptions& options = SimOptions());
    ~SimWorld();
    SimWorld(const SimWorld&) = delete;
    SimWorld& operator=(const SimWorld&) = delete;

    int nranks() const;
    Transport* transport(int rank);
    /* Runs fn(rank) on nranks threads and joins them. */
    void run(const std::function<void(int rank)>& fn);

    /* Requests created and not yet released. */
    size_t outstanding_requests() const;
    /* Messages sent but never received, plus receives posted but never matched. */
    size_t unmatched() const;
    /* Bytes of every send posted from one rank to another so far. */
    size_t bytes_sent(int from, int to) const;

    struct Impl;
private:
    std::unique_ptr<Impl> impl_;
};

} // namespace test
} // namespace vccl

#endif
