/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The test library's interface: what a test asks of libvccl through its test points (core/test_point.h). Linked
 * only by test programs (libvccl_testing, never installed); libvccl itself exports none of this. Requests apply to
 * the calls that come after them on that communicator, as each point says; a communicator the library never
 * reported (created before the test library was loaded, or not a communicator) gets vcclInvalidArgument, and the
 * counters read -1 for it.
 */
#ifndef VCCL_TESTING_TEST_HOOKS_H_
#define VCCL_TESTING_TEST_HOOKS_H_

#include "vccl.h"

namespace vccl {
namespace testing {

/* VCCL_* variables are read again when the next communicator is created (the library caches them): a test sets
 * variables, calls this, creates a communicator, restores them and calls this again. */
void reload_env();

/* The next direct device send (send != 0) or receive of comm fails after the descriptors were exchanged, as a
 * failed IPC mapping would: the peer's stream then waits until the peer aborts or destroys its communicator.
 * vcclInvalidUsage where comm has no direct device path. */
vcclResult_t fail_next_direct(vcclComm_t comm, int send);
/* Communicators created from now on use the low-latency kernels also where ranks share a GPU (where they are
 * otherwise off: each waiting kernel holds the GPU for a time slice, about 2 ms a call). */
void allow_ll_on_shared_gpu(int allow);
/* The next one-kernel collective (low-latency or chunked) of comm fails on the host before its launch. */
vcclResult_t fail_next_ll(vcclComm_t comm);
/* The next chunked collective of comm moves only its first `chunks` chunks, then its kernel ends, as if a peer had
 * stopped in the middle of a call. */
vcclResult_t stop_next_chunked(vcclComm_t comm, unsigned chunks);
/* The next send/recv batch of comm with direct-path peers fails right after its descriptor exchange (as a timeout
 * there would), before anything is enqueued. */
vcclResult_t fail_next_exchange(vcclComm_t comm);
/* Before the next staged job of comm, its staged queue's part numbering moves on by n (wraparound tests). */
vcclResult_t staging_skip_sequence(vcclComm_t comm, unsigned n);
/* Teardown threads started from now on hold `ms` milliseconds (the library caps it at 1000) once they begin freeing,
 * then say on stderr that they finished, so that a process exiting meanwhile shows whether its exit waited. */
void hold_teardown_ms(int ms);
/* Sends of comm's rank to `peer` on its primary path are recorded by telemetry as taking `factor` times as long as
 * they did (a slow link without link shaping); factor <= 1 turns it off. */
vcclResult_t slow_link(vcclComm_t comm, int peer, double factor);

/* Calls the PMPI interposer (libvccl-pmpi.so) of this process routed through vccl, to the MPI library unchanged,
 * and to the MPI library on host copies of device buffers. */
void pmpi_routes(unsigned long long* vccl_calls, unsigned long long* mpi_calls, unsigned long long* staged_calls);

/* What comm's rank did (-1 for a communicator the library never reported). */
long long direct_sends(vcclComm_t comm);      // direct device sends enqueued
long long ipc_block_reopens(vcclComm_t comm); // a peer's mapping closed to open another allocation of its block
long long ipc_evictions(vcclComm_t comm);     // a peer's mapping let go at VCCL_P2P_MAX_MAPPINGS
long long ll_bytes(vcclComm_t comm);          // the low-latency kernels' largest message (0: off)
long long ll_calls(vcclComm_t comm);          // collectives that took the low-latency kernel
long long chunked_calls(vcclComm_t comm);     // collectives that took the chunked kernel

} // namespace testing
} // namespace vccl

#endif
