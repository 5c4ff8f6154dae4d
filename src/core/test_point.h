/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test points: the few places where the tests inject a fault or observe what the library did. The test library
 * (src/testing/, linked only by test programs, never installed) defines vccl_test_point; in every other process
 * the weak reference is null, each point costs a load and a branch, and libvccl.so exports nothing for it.
 *
 * `key` names what the point belongs to, the communicator (vcclComm_t) for per-communicator points and NULL for
 * process-wide ones; a point answers 0 when no test asked for anything. The test library's side is in
 * src/testing/test_hooks.cc; the meaning of each point is documented there and at its call site.
 */
#ifndef VCCL_CORE_TEST_POINT_H_
#define VCCL_CORE_TEST_POINT_H_

extern "C" long long vccl_test_point(const void* key, int point, long long arg) __attribute__((weak));

namespace vccl {

enum class TestPoint : int {
    CommCreated = 1,     // a communicator was created at `key` (arg: 1 with the direct device path)
    CommDestroyed,       // the communicator at `key` is gone
    EnvReload,           // nonzero: read the VCCL_* variables again before this communicator's creation
    FailDirectSend,      // nonzero: the next direct or FIFO send fails after the descriptor exchange
    FailDirectRecv,      // likewise the next receive
    FailKernelCall,      // nonzero: the next one-kernel collective fails on the host before its launch
    ChunkedStop,         // chunks after which the next chunked kernel ends (0: it runs whole)
    FailExchange,        // nonzero: the next descriptor exchange with direct-path peers is given up
    LlBytes,             // reported at creation: the low-latency kernels' largest message (0: off)
    DirectSend,          // a direct send was enqueued
    LlCall,              // a collective took the low-latency kernel
    ChunkedCall,         // a collective took the chunked kernel
    IpcBlockReopen,      // a peer's mapping was closed to open another allocation of its 2 MiB block
    IpcEviction,         // a peer's mapping was let go at the mapping limit
    LlOnSharedGpu,       // nonzero: the low-latency kernels also where ranks share a GPU
    TeardownHoldMs,      // milliseconds a teardown thread holds once it begins freeing (0: none)
    StagingSkip,         // parts by which the staged queue's numbering moves on before its next job
    SlowLinkMilli,       // arg: a peer; 1000 x the factor by which telemetry stretches that link's times (0: none)
    // The PMPI interposer (coll_vccl/pmpi, C, over the public API) names this one by its number.
    PmpiRoute = 40,      // the interposer routed a call (arg: 0 through vccl, 1 to the MPI library, 2 on host copies)
};

inline long long test_point(const void* key, TestPoint point, long long arg = 0) {
    return vccl_test_point != nullptr ? vccl_test_point(key, int(point), arg) : 0;
}

} // namespace vccl

#endif
