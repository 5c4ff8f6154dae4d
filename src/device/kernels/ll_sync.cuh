/* SPDX-License-Identifier: BSD-3-Clause */
/* What the one-kernel collectives (ll_collectives.cu, chunked_collectives.cu) share around their data: the header
 * word that says each rank's collective and size, the wait for the peers' headers, and the count of blocks done
 * that tells the host the kernel no longer waits (kLlDone). The word sets and their reuse are explained in
 * ll_collectives.h. Device code only. */
#ifndef VCCL_DEVICE_LL_SYNC_CUH_
#define VCCL_DEVICE_LL_SYNC_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "device/kernels/ll_collectives.h"

namespace vccl {
namespace {

/* Waits until the word at p carries `seq` in its high half and at least `at_least` in its low half (the header
 * waits with 0); gives the low half. False when the communicator was aborted first. */
__device__ __forceinline__ bool wait_word(const uint64_t* p, uint32_t seq, uint32_t at_least, volatile int* control,
                                          uint32_t* low = nullptr) {
    const volatile uint64_t* vp = p;
    uint64_t x = *vp;
    for (unsigned spins = 1; uint32_t(x >> 32) != seq || uint32_t(x) < at_least; ++spins) {
        // The abort flag is in host memory (a PCIe read): looked at now and then.
        if ((spins & 255u) == 0 && control[kLlAbort] != 0) return false;
        x = *vp;
    }
    if (low != nullptr) *low = uint32_t(x);
    return true;
}

/* Calls captured into a CUDA graph (LlArgs::graph_calls set) take their number and word set on the device, from the
 * count of graph calls this rank's kernels finished: a replay needs no host call (ll_collectives.h). begin_call
 * works them out once per block into shared memory; the eager calls keep the host's (LlArgs::seq, the set that
 * outbox and inbox point at). */
__shared__ uint32_t ll_graph_seq;
__shared__ uint32_t ll_graph_shift; // words from the pointers' set to this call's
__shared__ int ll_graph_gone;       // the communicator was destroyed or aborted before this replay

__device__ __forceinline__ uint32_t call_seq(const LlArgs& a) { return a.graph_calls != nullptr ? ll_graph_seq : a.seq; }
__device__ __forceinline__ uint64_t* outbox(const LlArgs& a, int p) {
    return a.graph_calls != nullptr ? a.outbox[p] + ll_graph_shift : a.outbox[p];
}
__device__ __forceinline__ const uint64_t* inbox(const LlArgs& a, int p) {
    return a.graph_calls != nullptr ? a.inbox[p] + ll_graph_shift : a.inbox[p];
}

/* Every thread, first thing: false when the kernel must do nothing at all (a graph replayed after its communicator
 * was destroyed or aborted: its peers' memory may be gone, so nothing is stored there; the output is not written).
 * Ends with a barrier. */
__device__ __forceinline__ bool begin_call(const LlArgs& a) {
    if (a.graph_calls == nullptr) return true;
    if (threadIdx.x == 0) {
        const unsigned long long call = *reinterpret_cast<volatile unsigned long long*>(a.graph_calls) + 1;
        ll_graph_seq = ll_seq(call);
        ll_graph_shift = (call & 1u) != 0 ? a.graph_set_words : 0;
        ll_graph_gone = a.control[kLlAbort] != 0;
        if (ll_graph_gone && blockIdx.x == 0) {
            printf("vccl: a CUDA graph replayed a collective of a communicator that was destroyed or aborted: the "
                   "collective did nothing (rank %d)\n", a.rank);
        }
    }
    __syncthreads();
    return ll_graph_gone == 0;
}

/* Block 0 tells every peer this call's collective and size (word 0 of this rank's set in the peer's memory). */
__device__ __forceinline__ void publish_header(const LlArgs& a, uint32_t header) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const uint64_t word = (uint64_t(call_seq(a)) << 32) | header;
    for (int p = 0; p < a.nranks; ++p) {
        if (p != a.rank) *reinterpret_cast<volatile uint64_t*>(outbox(a, p)) = word;
    }
}

/* Every block reads every peer's header: a peer whose header differs from this rank's is reported (kLlMismatch)
 * and skipped (skip[p] = 1: no data is awaited from it or sent to it); an abort while waiting sets *aborted.
 * Ends with a barrier, so skip and aborted are seen by the whole block. False when aborted. */
__device__ __forceinline__ bool check_headers(const LlArgs& a, uint32_t header, int* skip, int* aborted) {
    for (int p = threadIdx.x; p < kMaxLlRanks; p += blockDim.x) {
        int s = 0;
        if (p < a.nranks && p != a.rank) {
            uint32_t h = 0;
            if (!wait_word(inbox(a, p), call_seq(a), 0, a.control, &h)) {
                *aborted = 1;
                s = 1;
            } else if (h != header) {
                a.control[kLlMismatch] = p + 1;
                s = 1;
            }
        }
        skip[p] = s;
    }
    __syncthreads();
    return *aborted == 0;
}

/* After the block's last wait: the last block to get here tells the host (kLlDone) through a counter in this rank's
 * own device memory; destroy need not abort the kernel once every block is here. A block that gave up on an abort
 * counts too, so the counter is back to 0 for the next call, which follows on the stream. */
__device__ __forceinline__ void arrive(const LlArgs& a) {
    __syncthreads(); // every thread of the block is done waiting
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(a.arrivals, 1u) == gridDim.x - 1) {
            *a.arrivals = 0;
            // A graph call counts itself for the next one on the stream (its number and set); an eager one tells
            // the host, which waits for its last launched call at destroy.
            if (a.graph_calls != nullptr) {
                *reinterpret_cast<volatile unsigned long long*>(a.graph_calls) += 1;
            } else {
                a.control[kLlDone] = int(a.seq);
            }
        }
    }
}

} // namespace
} // namespace vccl

#endif
