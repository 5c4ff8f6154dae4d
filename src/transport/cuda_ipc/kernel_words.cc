/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The words the low-latency and chunked kernels share between ranks: the sets of each call, and
 * telling the peers of a call given up on the host.
 */
#include "transport/cuda_ipc/cuda_ipc_p2p.h"

#if VCCL_HAVE_CUDA

#include "core/log.h"
#include "device/device_scope.h"

namespace vccl {

void CudaIpcP2p::ll_fill(LlArgs* a, bool graph, size_t set) const {
    auto words = [&](uint32_t* base, int sender, size_t which) {
        return graph ? ll_graph_words(base, sender, which) : ll_words(base, sender, which);
    };
    a->nranks = nranks_;
    a->rank = rank_;
    a->control = ll_control_;
    a->max_blocks = sm_count_;
    // No rank sends words to itself: the first word of this rank's own sets (eager or graph) counts its blocks.
    a->arrivals = reinterpret_cast<unsigned*>(words(flags_, rank_, 0));
    for (int r = 0; r < nranks_ && r < kMaxLlRanks; ++r) {
        a->outbox[r] = r == rank_ ? nullptr : words(peer_flags_[r], rank_, set);
        a->inbox[r] = r == rank_ ? nullptr : words(flags_, r, set);
    }
}

void CudaIpcP2p::ll_next(LlArgs* a) {
    uint64_t call = ++ll_calls_;
    // Sets alternate with every call; the number the words carry never repeats within two calls and is
    // never 0 (the words' initial value).
    a->seq = ll_seq(call);
    ll_fill(a, false, size_t(call & 1u));
    a->chunk_slots = chunk_layout_.slots;
    a->chunk_bytes = chunk_layout_.chunk_bytes;
    a->chunk_data_word = chunk_layout_.data_word;
}

bool CudaIpcP2p::ll_graph_args(LlArgs* a, std::shared_ptr<void>* keep) {
    if (!ll_active_) return false;
    if (graph_keep_ == nullptr) graph_keep_ = std::make_shared<GraphKeep>();
    a->seq = 1; // checked at launch, not used: the kernel counts graph calls itself
    // The graph's set 0; the kernel adds graph_set_words for odd calls. Word 0 of this rank's own graph set counts the
    // blocks of the graph call running (apart from the eager calls', so the two kinds may run on two streams at
    // once), word 1 the graph calls done.
    ll_fill(a, true, 0);
    a->graph_calls = reinterpret_cast<unsigned long long*>(ll_graph_words(flags_, rank_, 0) + 1);
    a->graph_set_words = uint32_t(ll_set_words_);
    a->chunk_slots = 0; // the chunked kernel is not captured
    *keep = graph_keep_;
    return true;
}

void CudaIpcP2p::ll_abandon(const LlArgs& a, void* stream) {
    // Each peer's header word of this call gets the sequence number with an impossible byte count: its
    // kernel takes the mismatch path (reported by vcclCommGetAsyncError) instead of waiting for data.
    // Two ordered 32-bit writes, count first, so the number never shows without it. They go on the call's
    // stream, behind this rank's previous call: a peer told early would finish this call and start the
    // next, which writes into the word set (sets alternate) that this rank's previous kernel may not have
    // read yet. Only when the stream refuses them do they go on the private stream, unordered.
    DeviceScope scope(device_);
    auto tell_on = [&](CUstream s) {
        for (int r = 0; r < a.nranks && r < kMaxLlRanks; ++r) {
            if (a.outbox[r] == nullptr) continue;
            CUdeviceptr word = reinterpret_cast<CUdeviceptr>(a.outbox[r]);
            if (driver().write_value(s, word, kLlAbandonedBytes, CU_STREAM_WRITE_VALUE_DEFAULT) != CUDA_SUCCESS ||
                driver().write_value(s, word + 4, a.seq, CU_STREAM_WRITE_VALUE_DEFAULT) != CUDA_SUCCESS) {
                return false;
            }
        }
        return true;
    };
    bool told = tell_on(static_cast<CUstream>(stream));
    CUstream cs = told ? nullptr : notify_stream();
    if (cs != nullptr) told = tell_on(cs);
    VCCL_WARN(kLogDevice, "rank %d: gave up low-latency collective call %u before its kernel ran; %s", rank_, a.seq,
              !told ? "could not tell the peers (their kernels wait until they abort)"
              : cs  ? "told the peers (outside the call's stream, which refused the writes)"
                    : "told the peers on the call's stream");
}

} // namespace vccl

#endif
