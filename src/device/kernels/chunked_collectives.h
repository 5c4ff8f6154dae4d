/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Chunked collectives (AllReduce, ReduceScatter) for messages above the low-latency kernel's limit among the GPUs
 * of one host: one kernel launch, like device/kernels/ll_collectives.h, in the same word sets, but the data goes as is
 * (16-byte stores, not words that carry half data and half sequence number) in chunks, each announced by one flag
 * word. The low-latency words cost twice the bytes on NVLink, which is what bounds them from a few MiB on; the
 * copy-engine path pays handshakes across the GPUs per phase and a separate reduction kernel. On 2x H200 a 4 MiB
 * allreduce took 30.5 us (copy engines 54.0, NCCL 33.0), 8 MiB 49.6 (70.9, 47.1); at 16-32 MiB the kernel matches or
 * beats the copy engines alone, but beside a GEMM it keeps less of the GEMM and ends later, hence
 * VCCL_ALLREDUCE_KERNEL_BYTES 8M (docs/PERFORMANCE.md, "AllReduce").
 * AllGather has no reduction to do: the copy engines are faster for it at every size above the low-latency limit.
 *
 * A sender's set in a receiver's memory, in 8-byte words (chunk_layout below):
 *   word 0          header: the sequence number over kind << 28 | bytes (kChunkedKind | LlKind, so a rank whose
 *                   peer took the low-latency kernel, another collective or another size reports a mismatch);
 *   flags[slots]    flag of slot k: the sequence number over 1 + the index of the chunk last stored in slot k;
 *   credits[slots]  written by the sender too, about the other direction: credit of slot k is the sequence number
 *                   over 1 + the index of the chunk of the *receiver's* data, stored in slot k of the receiver's set
 *                   in the sender's memory, that the sender has finished reading;
 *   data            slots x chunk_bytes, from a 128-byte boundary.
 * Chunk i of a message (what a rank sends one peer) goes to slot i mod slots. Its sender first waits for the credit
 * of chunk i - slots (when i >= slots), stores the chunk, fences (system scope) and sets the slot's flag; the
 * receiver waits for the flag, reduces the chunk into its output and gives the credit; after the last chunk of a
 * slot it clears the slot's data, which the low-latency kernel's words use two calls later (a word is trusted by
 * its high half, the call's number, and the user's bytes left there could pass for one). Thread blocks take chunks
 * blockIdx.x, blockIdx.x + gridDim.x, ...; flags and credits are per slot, so ranks whose grids differ (another
 * VCCL_MAX_CTAS, another SM count) still pair up. Every block of a call must be resident on its GPU at once to be
 * sure of progress; a grid is at most VCCL_MAX_CTAS <= the SM count blocks of 768 (or 512) threads.
 *
 * Where a call has more than 2 chunks per block, each block is two groups of warps at work at once: 256 sender
 * threads store its chunks into the peers' slots while 512 reducer threads reduce the chunks that have arrived, so
 * that one chunk's latencies (the loads, the system fence before its flag, the wait for the peer's flag) overlap
 * another's. A reducer writes chunk i of the output only after the block's senders have read chunk i of the input
 * (in place they are the same bytes). Otherwise a block is one group of 512 threads that sends a chunk, then reduces
 * it (on 2x H200 a 4 MiB allreduce took 30.2 us that way, 32.7 split; 8 MiB 54.8 against 49.4 split). Each rank chooses for itself; the flags and credits are the same. No wait goes back to a chunk of a higher index, on either
 * rank, so the lowest chunk not yet done can always move on.
 *
 * Set reuse across calls is the low-latency kernels' argument (ll_collectives.h): sets alternate with calls, and
 * every pair of ranks exchanges data in every call. Aborts, mismatches and calls given up on the host behave as
 * there too (the header check comes before any data moves, so a skipped peer is neither sent to nor waited for).
 *
 * Buffers need not be aligned (16-byte vectors where they are, elements or bytes where not); ReduceScatter needs a
 * per-rank size that is a multiple of 16 bytes (the host takes the copy-engine path otherwise). Launches kernels:
 * for collectives only, never for send/recv.
 */
#ifndef VCCL_DEVICE_KERNELS_CHUNKED_COLLECTIVES_H_
#define VCCL_DEVICE_KERNELS_CHUNKED_COLLECTIVES_H_

#include <cstddef>
#include <cstdint>

#include "device/kernels/ll_collectives.h"
#include "vccl.h"

namespace vccl {

/* Kind bit of the chunked collectives in the header word (kind << 28). */
constexpr uint32_t kChunkedKind = 8;
static_assert(uint32_t(LlKind::Reduce) < kChunkedKind, "the low-latency kinds (Reduce the last) stay below the chunked bit");
/* The largest message (bytes a rank sends one peer) the header word can state. */
constexpr size_t kMaxChunkedBytes = 128u << 20;
static_assert(kMaxChunkedBytes <= kMaxHeaderBytes, "bytes must fit below the header's kind");

struct ChunkLayout {
    uint32_t slots = 0; // 0: the set is too small for two slots (the path is off)
    uint32_t chunk_bytes = 0;
    uint32_t data_word = 0;
};

/* The layout of a set of `set_words` 8-byte words: chunks of 64 KiB, or smaller (down to 4 KiB) so that at least 8
 * slots fit; at most 1024 slots. The same on every rank (the set size is agreed). */
inline ChunkLayout chunk_layout(size_t set_words) {
    constexpr size_t kMaxChunk = 64u << 10, kMinChunk = 4u << 10, kWantSlots = 8, kMaxSlots = 1024;
    const size_t set_bytes = set_words * 8;
    auto data_word = [](size_t slots) { return (kLlDataWord + 2 * slots + 15) / 16 * 16; };
    ChunkLayout out;
    for (size_t chunk = kMaxChunk; chunk >= kMinChunk; chunk /= 2) {
        size_t slots = set_bytes / (chunk + 16);
        if (slots > kMaxSlots) slots = kMaxSlots;
        while (slots > 0 && data_word(slots) * 8 + slots * chunk > set_bytes) --slots;
        if (slots < kWantSlots && chunk > kMinChunk) continue;
        if (slots >= 2) {
            out.slots = uint32_t(slots);
            out.chunk_bytes = uint32_t(chunk);
            out.data_word = uint32_t(data_word(slots));
        }
        break;
    }
    return out;
}

/* Enqueues the collective on `stream` (count as in ll_collective). The caller checked alignment and that what a rank
 * sends each peer is at most kMaxChunkedBytes. */
vcclResult_t chunked_collective(const LlArgs& args, LlKind kind, const void* in, void* out, size_t count,
                                vcclDataType_t type, vcclRedOp_t op, vcclStream_t stream);

} // namespace vccl

#endif
