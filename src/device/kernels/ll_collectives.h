/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Low-latency collectives (AllReduce, ReduceScatter, AllGather, AlltoAll, Broadcast, Reduce) for small and medium
 * messages among the GPUs of one host, in one kernel launch and no host round trip: each rank's kernel stores what
 * each peer needs of its input (all of it; for ReduceScatter and AlltoAll the peer's block; for Broadcast only the
 * root sends, for Reduce only to the root) straight into that peer's GPU memory (the IPC-mapped buffer of
 * transport/cuda_ipc/ipc_p2p.h) as 8-byte words that carry 4 data bytes and the call's sequence number, waits until every peer's
 * words of this call have arrived in its own memory, and reduces them in rank order (every rank gets the same bits)
 * or, for the others, places them. A word is stored and loaded whole, so the sequence number proves its data bytes
 * arrived: no fence and no separate flag. Two words (8 data bytes) go in one 16-byte access. The words cost twice
 * the bytes on NVLink, which small and medium messages can afford: they are bound by latency (a copy-engine transfer
 * costs handshakes across the GPUs). Several thread blocks share a call (at most LlArgs::max_blocks, from
 * VCCL_MAX_CTAS), each on its own range of the message, without waiting for one another; each writes its range
 * straight from the words into the output (no scratch buffer). A block reads all of its range of the input before it
 * writes any of its range of the output, so AlltoAll and the others may run in place.
 *
 * Each sender has two sets of words in each receiver's buffer, used by calls of odd and even sequence numbers
 * (counted over all these collectives, which every rank makes in the same order): a rank's call k + 2 can only start
 * after its call k + 1, which waited for every peer's call k + 1 header word, which peers wrote after their call k
 * had read everything: no set is overwritten while it is read. That needs every pair of ranks to exchange at least
 * the header in every call: in Broadcast and Reduce the ranks that send no data to a peer still send it their header
 * (and root) words. Word 0 of a set says the sender's collective and byte count: a receiver whose differ reports the
 * sender (mismatched calls) and does not wait for its words. Word 1 carries Broadcast's and Reduce's root (checked
 * the same way; unused by the other kinds of this file, so that data units stay 16-byte aligned); data from word 2.
 * A kernel that waits for a peer that never calls is released by the communicator's abort flag (vcclCommAbort,
 * vcclCommDestroy), with output that is not valid.
 *
 * These launch kernels: they are for collectives, not for send/recv, which stay SM-free.
 *
 * Calls captured into a CUDA graph have two word sets of their own per sender (after the eager calls' sets), and
 * their numbers come from a counter in this rank's own memory that every graph kernel advances when its last block
 * is done (LlArgs::graph_calls): the next graph kernel on the stream, in this replay or the next, takes the next
 * number and the other set. So replays need no host call, graph calls never touch the eager calls' words, and the
 * two kinds may interleave in any order; graph calls of one communicator keep one order on every rank (replays
 * ordered on the GPU, the same graphs in the same order on every rank), as eager calls do.
 */
#ifndef VCCL_DEVICE_KERNELS_LL_COLLECTIVES_H_
#define VCCL_DEVICE_KERNELS_LL_COLLECTIVES_H_

#include <cstddef>
#include <cstdint>

#include "device/kernels/premul_arg.h"
#include "vccl.h"

namespace vccl {

constexpr int kMaxLlRanks = 64;
/* The largest VCCL_ALLREDUCE_LL_BYTES. With n ranks a message takes the path up to VCCL_ALLREDUCE_LL_BYTES / (n - 1)
 * bytes (what a rank stores into its peers stays within the setting); its words take 2x its size per sender and
 * word set (two sets, and two more for calls captured into CUDA graphs) in every rank's memory: about 8 x the setting x
 * n / (n - 1) of device memory per rank. */
constexpr size_t kMaxLlBytes = 8u << 20;
/* The header word is kind << 28 | bytes: the kinds of ll_collectives (LlKind, 0-7) and of chunked_collectives
 * (kChunkedKind | LlKind, kChunkedKind 8) both fit in the top 4 bits, bytes below (kLlAbandonedBytes is kind 15,
 * with bytes no call has). */
constexpr size_t kMaxHeaderBytes = (size_t(1) << 28) - 1;
static_assert(kMaxLlBytes <= kMaxHeaderBytes, "the header word keeps the collective's kind above bit 27");
constexpr size_t kLlDataWord = 2; // index of a set's first data word

/* Control words in pinned host memory shared with the kernels: abort (host), a peer whose count differed
 * (rank + 1, kernel), the sequence number of the last call that stopped waiting (kernel). */
enum LlControl { kLlAbort = 0, kLlMismatch = 1, kLlDone = 2, kLlControlWords = 3 };

/* The byte count a rank that gave up a call writes into its peers' header words (larger than any call). */
constexpr uint32_t kLlAbandonedBytes = 0xFFFFFFFFu;

/* The number the words of call `call` (1, 2, ...) carry: never 0 (the words' initial value), and different
 * for any two calls less than 2^32 - 1 apart. */
#if defined(__CUDACC__)
#define VCCL_LL_HOST_DEVICE __host__ __device__ // graph calls take their numbers on the device (ll_sync.cuh)
#else
#define VCCL_LL_HOST_DEVICE
#endif
inline VCCL_LL_HOST_DEVICE uint32_t ll_seq(uint64_t call) { return uint32_t((call - 1) % 0xFFFFFFFFull) + 1; }

struct LlArgs {
    uint64_t* outbox[kMaxLlRanks];        // peer r's words from this rank, in r's memory (this call's set)
    const uint64_t* inbox[kMaxLlRanks];   // this rank's words from peer r, in its own memory (this call's set)
    volatile int* control;                // kLlControlWords, host memory mapped for the device
    unsigned* arrivals;                   // device word of this rank's own (0 between calls): blocks done waiting
    int max_blocks;                       // thread blocks at most (VCCL_MAX_CTAS)
    int nranks;
    int rank;
    uint32_t seq;                         // this call's sequence number, never 0
    int root;                             // Broadcast's and Reduce's root (the other kinds: not used)
    // The chunked collectives' view of the same sets (device/kernels/chunked_collectives.h; slots 0: they are off).
    uint32_t chunk_slots;
    uint32_t chunk_bytes;
    uint32_t chunk_data_word;             // first word of slot 0's data
    uint32_t chunk_stop;                  // test hook (testing::stop_next_chunked): chunks moved, then stop; 0: all
    // PreMulSum (AllReduce, ReduceScatter, Reduce; op is then vcclSum): each element of this rank's input is
    // multiplied by the scalar where the kernel reads it, both what it sends and its own part of the reduction.
    PreMulArg premul;
    // A call captured into a CUDA graph: this rank's count of finished graph calls (device memory), from which the
    // kernel takes its number and set; outbox and inbox then point at the graph's set 0, set 1 graph_set_words further.
    // NULL: an eager call (seq and the set of outbox and inbox as given).
    unsigned long long* graph_calls;
    uint32_t graph_set_words;
};

/* The kind goes into the header word with the byte count (kind << 28 | bytes; bytes < 2^28), so that ranks
 * calling different collectives of the same size report a mismatch instead of taking each other's words. */
enum class LlKind : uint32_t {
    AllReduce = 0,
    ReduceScatter = 1,
    AllGather = 2,
    AlltoAll = 3,
    Broadcast = 4,
    Reduce = 5, // the last: the chunked kinds start above it (chunked_collectives.h)
};

/* Enqueues the collective on `stream`, with NCCL's meaning of `count`: AllReduce's, Broadcast's and Reduce's
 * elements, ReduceScatter's elements per rank (its output), AllGather's elements per rank (its input), AlltoAll's
 * elements per peer. What a rank sends each peer, count x size of `type`, is at most the message size the word sets
 * were made for (IpcP2p::ll_bytes). `op` is used by AllReduce, ReduceScatter and Reduce; the root of Broadcast and
 * Reduce is args.root (Broadcast reads only the root's `in`, Reduce writes only the root's `out`). */
vcclResult_t ll_collective(const LlArgs& args, LlKind kind, const void* in, void* out, size_t count,
                           vcclDataType_t type, vcclRedOp_t op, vcclStream_t stream);

} // namespace vccl

#endif
