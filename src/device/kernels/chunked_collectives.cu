/* SPDX-License-Identifier: BSD-3-Clause */
/* The chunked collective kernels (device/kernels/chunked_collectives.h): up to LlArgs::max_blocks thread blocks per call,
 * each moving whole chunks through the peers' word sets; AllReduce and ReduceScatter. */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/dtype.h"
#include "device/kernels/chunked_collectives.h"
#include "device/kernels/ll_sync.cuh"
#include "device/kernels/reduce_ops.cuh"

namespace vccl {

namespace {

/* Where a call has more than 2 chunks per block, each block is two groups of warps that work at once: senders store
 * this rank's chunks into the peers' slots while reducers reduce the chunks that have arrived. One group doing both
 * in turn leaves each step's latency (loads, the system fence before a flag, the wait for the peer's flag) exposed;
 * two groups overlap them. Otherwise a block is one group of kReduceThreads doing both (launch_reduce says why).
 * Named barriers (1 and 2) order each group within itself; the block-wide barrier (0) comes only before and after. */
constexpr int kSendThreads = 256;
constexpr int kReduceThreads = 512;
constexpr int kThreads = kSendThreads + kReduceThreads;
/* 16-byte vectors a thread keeps in flight: loads issued back to back overlap their latency. Copying, 8 in a group
 * of 256 senders, 4 in one of 512 threads. Reducing, 4; in a split block, whose 768 threads have 80 registers each,
 * 2 where a vector's accumulators take more than 4 registers (fp16, bf16, 8-bit types), so that nothing spills. */
template <int Threads> __host__ __device__ constexpr int copy_batch() { return Threads == kSendThreads ? 8 : 4; }
template <typename T, bool Split> __host__ __device__ constexpr int reduce_batch() {
    return !Split || (16 / sizeof(T)) * ((sizeof(typename Acc<T>::type) + 3) / 4) <= 4 ? 4 : 2;
}

/* One group of the block: threads [first, first + count), barrier `barrier`, and its own abort flag. */
struct Group {
    int first;
    int count;
    int barrier;
    volatile int* aborted;
    __device__ __forceinline__ int tid() const { return int(threadIdx.x) - first; }
    __device__ __forceinline__ bool leader() const { return int(threadIdx.x) == first; }
    __device__ __forceinline__ void sync() const {
        asm volatile("bar.sync %0, %1;" ::"r"(barrier), "r"(count) : "memory");
    }
};

__device__ __forceinline__ uint64_t* flag_word(uint64_t* set, uint32_t slot) { return set + kLlDataWord + slot; }
__device__ __forceinline__ uint64_t* credit_word(uint64_t* set, const LlArgs& a, uint32_t slot) {
    return set + kLlDataWord + a.chunk_slots + slot;
}
__device__ __forceinline__ char* slot_data(uint64_t* set, const LlArgs& a, uint32_t slot) {
    return reinterpret_cast<char*>(set + a.chunk_data_word) + size_t(slot) * a.chunk_bytes;
}
__device__ __forceinline__ void store_word(uint64_t* p, uint64_t v) { *reinterpret_cast<volatile uint64_t*>(p) = v; }

/* Data written by a peer into this GPU's memory is read past the L1 cache, which is not kept coherent with it. */
__device__ __forceinline__ uint4 load_peer(const char* p) { return __ldcg(reinterpret_cast<const uint4*>(p)); }
__device__ __forceinline__ uint4 load_local(const char* p) { return *reinterpret_cast<const uint4*>(p); }

__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

/* Element k of the T-typed elements in a 16-byte vector, as the accumulation type. */
template <typename T> __device__ __forceinline__ typename Acc<T>::type vec_element(const uint4& v, int k) {
    constexpr int kPerHalf = 8 / sizeof(T);
    const uint64_t half = k < kPerHalf ? (uint64_t(v.y) << 32 | v.x) : (uint64_t(v.w) << 32 | v.z);
    return unit_element<T>(half, k % kPerHalf);
}

template <size_t N> struct BitsOf;
template <> struct BitsOf<1> { using type = unsigned char; };
template <> struct BitsOf<2> { using type = unsigned short; };
template <> struct BitsOf<4> { using type = unsigned int; };
template <> struct BitsOf<8> { using type = unsigned long long; };

/* One element at p as the accumulation type: one load where p is aligned to the element, else byte by byte (user
 * buffers need not be). The bits go through an integer, as in vec_element. */
template <typename T> __device__ __forceinline__ typename Acc<T>::type load_element(const char* p, bool peer) {
    using B = typename BitsOf<sizeof(T)>::type;
    B bits = 0;
    if (reinterpret_cast<uintptr_t>(p) % sizeof(T) == 0) {
        bits = peer ? __ldcg(reinterpret_cast<const B*>(p)) : *reinterpret_cast<const B*>(p);
    } else {
        for (size_t k = 0; k < sizeof(T); ++k) {
            const unsigned char byte = peer ? *reinterpret_cast<const volatile unsigned char*>(p + k)
                                            : static_cast<unsigned char>(p[k]);
            bits = B(bits | (B(byte) << (8 * k)));
        }
    }
    return unit_element<T>(bits, 0);
}

/* Stores v as one element at p (this rank's output), likewise. */
template <typename T> __device__ __forceinline__ void store_element(char* p, typename Acc<T>::type v) {
    using B = typename BitsOf<sizeof(T)>::type;
    T out[1];
    store<T>(out, 0, v);
    B bits;
    memcpy(&bits, out, sizeof(T));
    if (reinterpret_cast<uintptr_t>(p) % sizeof(T) == 0) {
        *reinterpret_cast<B*>(p) = bits;
    } else {
        for (size_t k = 0; k < sizeof(T); ++k) p[k] = char(bits >> (8 * k));
    }
}

/* PreMulSum's scaling of this rank's input in the chunked kernel: on or off when the kernel is compiled (the scaled
 * copy needs more registers, which the plain kernels should not pay for), and the scalar as the accumulation type. */
template <typename T, bool On> struct Scaling {
    typename Acc<T>::type factor; // used when On
};

/* A 16-byte vector of T-typed elements, each multiplied by the scalar and rounded to T: its two 8-byte halves as
 * the low-latency kernel scales its units (vec_element's layout). */
template <typename T> __device__ __forceinline__ uint4 scale_vec(const uint4& v, typename Acc<T>::type factor) {
    const uint64_t lo = premul_scale_unit<T>(uint64_t(v.y) << 32 | v.x, factor);
    const uint64_t hi = premul_scale_unit<T>(uint64_t(v.w) << 32 | v.z, factor);
    return make_uint4(uint32_t(lo), uint32_t(lo >> 32), uint32_t(hi), uint32_t(hi >> 32));
}

/* Copies `len` bytes of this rank's input to a peer's slot, every thread of the sender group: 16-byte vectors when
 * the input is 16-byte aligned (slots always are; user buffers nearly always), else byte by byte (scaled: element
 * by element; len is whole elements). */
template <typename T, bool Scaled, int Threads>
__device__ __forceinline__ void copy_chunk(const Group& g, char* dst, const char* src, uint32_t len,
                                           const Scaling<T, Scaled>& scaling) {
    const uint32_t vecs = aligned16(dst) && aligned16(src) ? len / 16 : 0;
    constexpr int kSendBatch = copy_batch<Threads>();
    for (uint32_t v0 = g.tid(); v0 < vecs; v0 += kSendBatch * Threads) {
        uint4 x[kSendBatch];
#pragma unroll
        for (int j = 0; j < kSendBatch; ++j) {
            const uint32_t v = v0 + j * Threads;
            if (v < vecs) x[j] = load_local(src + 16 * size_t(v));
        }
#pragma unroll
        for (int j = 0; j < kSendBatch; ++j) {
            const uint32_t v = v0 + j * Threads;
            if (v >= vecs) continue;
            if (Scaled) x[j] = scale_vec<T>(x[j], scaling.factor);
            *reinterpret_cast<uint4*>(dst + 16 * size_t(v)) = x[j];
        }
    }
    if (Scaled) {
        for (uint32_t e = g.tid(); 16 * vecs + e * sizeof(T) < len; e += Threads) {
            const size_t at = 16 * size_t(vecs) + size_t(e) * sizeof(T);
            store_element<T>(dst + at, premul_scale<T>(load_element<T>(src + at, false), scaling.factor));
        }
    } else {
        for (uint32_t b = 16 * vecs + g.tid(); b < len; b += Threads) dst[b] = src[b];
    }
}

struct NothingMore {
    __device__ bool operator()() const { return true; }
};

/* The group's leader waits for each peer's word (flag or credit) of a slot to reach `at_least` for this call, then
 * for `more` (false: aborted); the group learns the outcome after one barrier. False when the communicator was
 * aborted. The group's abort flag is written only by the leader before the barrier and read by the others only after
 * it, so every thread of the group takes the same way out. */
template <typename Word, typename More = NothingMore>
__device__ __forceinline__ bool wait_peers(const Group& g, const LlArgs& a, const int* skip, Word word, uint32_t at_least,
                                           More more = More()) {
    if (g.leader()) {
        for (int p = 0; p < a.nranks && *g.aborted == 0; ++p) {
            if (p == a.rank || skip[p]) continue;
            if (!wait_word(word(p), a.seq, at_least, a.control)) *g.aborted = 1;
        }
        if (*g.aborted == 0 && !more()) *g.aborted = 1;
        __threadfence(); // what the peers stored before the words is read after them
    }
    g.sync();
    return *g.aborted == 0;
}

/* Sender group: sends chunk i to every peer that is not skipped; src(p) is the chunk's first byte in this rank's
 * input for peer p. Waits for the slot's credit first when it held an earlier chunk of this call. Then tells the
 * block's reducers (*sent) that the chunk's input has been read: in place, they overwrite it. */
template <typename T, bool Scaled, int Threads, typename Src>
__device__ bool send_chunk(const Group& g, const LlArgs& a, const int* skip, uint32_t i, uint32_t len, Src src,
                           const Scaling<T, Scaled>& scaling, volatile uint32_t* sent) {
    const uint32_t slot = i % a.chunk_slots;
    if (i >= a.chunk_slots &&
        !wait_peers(g, a, skip, [&](int p) { return credit_word(const_cast<uint64_t*>(a.inbox[p]), a, slot); },
                    i - a.chunk_slots + 1)) {
        return false;
    }
    for (int p = 0; p < a.nranks; ++p) {
        if (p != a.rank && !skip[p]) {
            copy_chunk<T, Scaled, Threads>(g, slot_data(a.outbox[p], a, slot), src(p), len, scaling);
        }
    }
    g.sync(); // every thread's stores are issued (so its loads are done)
    if (g.leader()) {
        __threadfence_block(); // the group's loads of the chunk come before the reducers hear of them
        *sent = i + 1;
        __threadfence_system(); // the stores are visible to the peers before the flag
        for (int p = 0; p < a.nranks; ++p) {
            if (p != a.rank && !skip[p]) store_word(flag_word(a.outbox[p], slot), (uint64_t(a.seq) << 32) | (i + 1));
        }
    }
    return true;
}

/* The reducers' leader, before its group writes chunk i of the output: the block's senders have read chunk i of the
 * input (they go through the same chunks in the same order). False when the senders gave up (abort). Called inside
 * wait_peers, before its barrier. */
__device__ __forceinline__ bool senders_past(const LlArgs& a, volatile uint32_t* sent, volatile int* senders_aborted,
                                             uint32_t i) {
    for (unsigned spins = 1; *sent < i + 1; ++spins) {
        if (*senders_aborted != 0 || ((spins & 255u) == 0 && a.control[kLlAbort] != 0)) return false;
    }
    __threadfence_block(); // the senders' loads of the chunk come before the group's stores
    return true;
}

/* After the reducers have read chunk i from every peer's slot: the slot may take the peer's next chunk. */
__device__ __forceinline__ void give_credits(const Group& g, const LlArgs& a, const int* skip, uint32_t i) {
    g.sync(); // every thread has used what it loaded
    if (!g.leader()) return;
    const uint32_t slot = i % a.chunk_slots;
    for (int p = 0; p < a.nranks; ++p) {
        if (p != a.rank && !skip[p]) store_word(credit_word(a.outbox[p], a, slot), (uint64_t(a.seq) << 32) | (i + 1));
    }
}

/* After the reducers have read chunk i, the last chunk of this call in its slot: the slot's data is cleared in this
 * rank's own memory. The low-latency kernel (ll_collectives.h) takes the same set two calls later and trusts a word
 * whose high half is its call's number; left here, the user's bytes could pass for one (an int32 array of small
 * numbers would). Zero is no call's number. The peer writes this set again only after this rank's next call has
 * sent it data, which the stream orders after this kernel. */
__device__ void clear_slot_if_last(const Group& g, const LlArgs& a, const int* skip, uint32_t i, uint32_t chunks,
                                   uint32_t len) {
    if (i + a.chunk_slots < chunks) return;
    // Chunks of the slot before the last were whole; slots have room for whole 16-byte vectors.
    const uint32_t vecs = i >= a.chunk_slots ? a.chunk_bytes / 16 : (len + 15) / 16;
    g.sync(); // every thread has read the slot
    for (int p = 0; p < a.nranks; ++p) {
        if (p == a.rank || skip[p]) continue;
        uint4* d = reinterpret_cast<uint4*>(slot_data(const_cast<uint64_t*>(a.inbox[p]), a, i % a.chunk_slots));
        for (uint32_t v = g.tid(); v < vecs; v += kReduceThreads) d[v] = make_uint4(0, 0, 0, 0);
    }
}

__device__ __forceinline__ uint32_t chunk_len(const LlArgs& a, size_t bytes, uint32_t i) {
    const size_t start = size_t(i) * a.chunk_bytes;
    const size_t left = bytes - start;
    return uint32_t(left < a.chunk_bytes ? left : a.chunk_bytes);
}

/* Reduces chunk i (len bytes) of this rank's part in rank order: its own from `own` (scaled first for PreMulSum, as
 * the peers scaled what they sent), each peer's from its slot; writes it to `dst`. `dst` may be `own` (in place):
 * each vector is read and written by one thread, reads first. */
template <typename T, int Op, bool Split, bool Scaled>
__device__ void reduce_chunk(const Group& g, const LlArgs& a, const int* skip, uint32_t i, uint32_t len, const char* own,
                             char* dst, const Scaling<T, Scaled>& scaling) {
    using A = typename Acc<T>::type;
    constexpr int kPer = 16 / sizeof(T);
    constexpr int kReduceBatch = reduce_batch<T, Split>();
    const uint32_t slot = i % a.chunk_slots;
    // 16-byte vectors where this rank's input and output allow them (the slots always do), else element by element.
    const uint32_t vecs = aligned16(own) && aligned16(dst) ? len / 16 : 0;
    for (uint32_t v0 = g.tid(); v0 < vecs; v0 += kReduceBatch * kReduceThreads) {
        A acc[kReduceBatch][kPer];
        bool first = true;
        for (int r = 0; r < a.nranks; ++r) {
            if (r != a.rank && skip[r]) continue;
            const char* src = r == a.rank ? own : slot_data(const_cast<uint64_t*>(a.inbox[r]), a, slot);
            uint4 x[kReduceBatch];
#pragma unroll
            for (int j = 0; j < kReduceBatch; ++j) {
                const uint32_t v = v0 + j * kReduceThreads;
                if (v < vecs) x[j] = r == a.rank ? load_local(src + 16 * size_t(v)) : load_peer(src + 16 * size_t(v));
                else x[j] = make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int j = 0; j < kReduceBatch; ++j) {
#pragma unroll
                for (int k = 0; k < kPer; ++k) {
                    A e = vec_element<T>(x[j], k);
                    if (Scaled && r == a.rank) e = premul_scale<T>(e, scaling.factor);
                    acc[j][k] = first ? e : combine<A, Op>(acc[j][k], e);
                }
            }
            first = false;
        }
#pragma unroll
        for (int j = 0; j < kReduceBatch; ++j) {
            const uint32_t v = v0 + j * kReduceThreads;
            if (v >= vecs) break;
            T out[kPer];
#pragma unroll
            for (int k = 0; k < kPer; ++k) {
                A x = acc[j][k];
                if (Op == vcclAvg) x = x / A(a.nranks);
                store<T>(out, k, x);
            }
            uint4 packed;
            memcpy(&packed, out, 16);
            *reinterpret_cast<uint4*>(dst + 16 * size_t(v)) = packed;
        }
    }
    // Past the vectors (the message's last chunk may end in fewer than 16 bytes, or the buffers are not 16-byte
    // aligned): whole elements, one per thread.
    const uint32_t elems = (len - 16 * vecs) / sizeof(T);
    for (uint32_t e = g.tid(); e < elems; e += kReduceThreads) {
        const size_t at = 16 * size_t(vecs) + size_t(e) * sizeof(T);
        A acc = A(0);
        bool first = true;
        for (int r = 0; r < a.nranks; ++r) {
            if (r != a.rank && skip[r]) continue;
            A v = r == a.rank ? load_element<T>(own + at, false)
                              : load_element<T>(slot_data(const_cast<uint64_t*>(a.inbox[r]), a, slot) + at, true);
            if (Scaled && r == a.rank) v = premul_scale<T>(v, scaling.factor);
            acc = first ? v : combine<A, Op>(acc, v);
            first = false;
        }
        if (Op == vcclAvg) acc = acc / A(a.nranks);
        store_element<T>(dst + at, acc);
    }
}

/* AllReduce and ReduceScatter: `bytes` is what a rank sends each peer (AllReduce: the whole input; ReduceScatter:
 * the peer's block of it) and what it writes (its output). Split: a block of senders and reducers (kThreads), each
 * group taking chunks blockIdx.x, blockIdx.x + gridDim.x, ... in that order; else one group of kReduceThreads that
 * sends a chunk, then reduces it. Scaled (PreMulSum, a Sum): this rank's input is multiplied by a.premul's scalar
 * where it is read, in what it sends and in its own part of the reduction. */
template <typename T, int Op, LlKind Kind, bool Split, bool Scaled>
__global__ void __launch_bounds__(Split ? kThreads : kReduceThreads, 1)
    chunked_reduce_kernel(LlArgs a, const char* in, char* out, size_t bytes) {
    __shared__ int skip[kMaxLlRanks];
    __shared__ int aborted;
    __shared__ volatile int group_aborted[2];
    __shared__ volatile uint32_t sent;
    if (threadIdx.x == 0) {
        aborted = 0;
        sent = 0;
    }
    __syncthreads();
    const uint32_t header = ((kChunkedKind | uint32_t(Kind)) << 28) | uint32_t(bytes);
    publish_header(a, header);
    const bool ok = check_headers(a, header, skip, &aborted);
    if (threadIdx.x == 0) group_aborted[0] = group_aborted[1] = ok ? 0 : 1;
    __syncthreads();
    const size_t block_of = Kind == LlKind::ReduceScatter ? bytes : 0; // offset of peer p's part: p x block_of
    const char* own = in + size_t(a.rank) * block_of;
    const uint32_t chunks = uint32_t((bytes + a.chunk_bytes - 1) / a.chunk_bytes);
    // Chunks this rank moves: all, but for the test hook that stops a call in the middle (testing::stop_next_chunked).
    const uint32_t moved = a.chunk_stop != 0 && a.chunk_stop < chunks ? a.chunk_stop : chunks;
    constexpr int kSenders = Split ? kSendThreads : kReduceThreads; // threads that send (and copy)
    const Scaling<T, Scaled> scaling{Scaled ? premul_factor<T>(a.premul) : typename Acc<T>::type(1)};
    auto send_one = [&](const Group& g, uint32_t i) {
        const size_t at = size_t(i) * a.chunk_bytes;
        return send_chunk<T, Scaled, kSenders>(g, a, skip, i, chunk_len(a, bytes, i),
                                       [&](int p) { return in + size_t(p) * block_of + at; }, scaling, &sent);
    };
    auto reduce_one = [&](const Group& g, uint32_t i) {
        const size_t at = size_t(i) * a.chunk_bytes;
        const uint32_t len = chunk_len(a, bytes, i);
        auto flag = [&](int p) { return flag_word(const_cast<uint64_t*>(a.inbox[p]), i % a.chunk_slots); };
        if (!(Split ? wait_peers(g, a, skip, flag, i + 1, [&] { return senders_past(a, &sent, &group_aborted[0], i); })
                    : wait_peers(g, a, skip, flag, i + 1))) {
            return false;
        }
        reduce_chunk<T, Op, Split, Scaled>(g, a, skip, i, len, own + at, out + at, scaling);
        clear_slot_if_last(g, a, skip, i, chunks, len);
        give_credits(g, a, skip, i);
        return true;
    };
    if (!Split) {
        const Group g{0, kReduceThreads, 1, &group_aborted[0]};
        for (uint32_t i = blockIdx.x; i < moved && ok; i += gridDim.x) {
            if (!send_one(g, i) || !reduce_one(g, i)) break;
        }
    } else if (threadIdx.x < kSendThreads) {
        const Group g{0, kSendThreads, 1, &group_aborted[0]};
        for (uint32_t i = blockIdx.x; i < moved && ok; i += gridDim.x) {
            if (!send_one(g, i)) break;
        }
    } else {
        const Group g{kSendThreads, kReduceThreads, 2, &group_aborted[1]};
        for (uint32_t i = blockIdx.x; i < moved && ok; i += gridDim.x) {
            if (!reduce_one(g, i)) break;
        }
    }
    arrive(a);
}

/* Split or not: the blocks split when the call has more than 2 chunks per block (so a block may split with 2 of its
 * own). With 2 (a 4 MiB message in 64 KiB chunks on 32 blocks) the senders have little to run ahead with: on 2x H200
 * a 4 MiB allreduce took 30.2 us in one group against 32.7 split, 8 MiB 54.8 against 49.4 split. The choice is each
 * rank's own: the peers see the same flags and credits either way. */
template <typename T>
cudaError_t launch_reduce(const LlArgs& a, LlKind kind, const char* in, char* out, size_t bytes, vcclRedOp_t op,
                          cudaStream_t s) {
    const size_t chunks = (bytes + a.chunk_bytes - 1) / a.chunk_bytes;
    const int blocks = int(std::max<size_t>(1, std::min<size_t>(size_t(std::max(1, a.max_blocks)), chunks)));
    const bool split = chunks > 2 * size_t(blocks);
    const int threads = split ? kThreads : kReduceThreads;
    // PreMulSum is a Sum: its scaled kernels are compiled for that op alone.
    if (a.premul.on != 0) {
        if (op != vcclSum) return cudaErrorInvalidValue;
        if (kind == LlKind::ReduceScatter) {
            return launch_kernel(split ? chunked_reduce_kernel<T, vcclSum, LlKind::ReduceScatter, true, true>
                                       : chunked_reduce_kernel<T, vcclSum, LlKind::ReduceScatter, false, true>,
                                 blocks, threads, s, a, in, out, bytes);
        }
        return launch_kernel(split ? chunked_reduce_kernel<T, vcclSum, LlKind::AllReduce, true, true>
                                   : chunked_reduce_kernel<T, vcclSum, LlKind::AllReduce, false, true>,
                             blocks, threads, s, a, in, out, bytes);
    }
    return for_op(op, [&](auto o) {
        constexpr int kOp = decltype(o)::value;
        if (kind == LlKind::ReduceScatter) {
            return launch_kernel(split ? chunked_reduce_kernel<T, kOp, LlKind::ReduceScatter, true, false>
                                       : chunked_reduce_kernel<T, kOp, LlKind::ReduceScatter, false, false>,
                                 blocks, threads, s, a, in, out, bytes);
        }
        return launch_kernel(split ? chunked_reduce_kernel<T, kOp, LlKind::AllReduce, true, false>
                                   : chunked_reduce_kernel<T, kOp, LlKind::AllReduce, false, false>,
                             blocks, threads, s, a, in, out, bytes);
    });
}

} // namespace

vcclResult_t chunked_collective(const LlArgs& a, LlKind kind, const void* in, void* out, size_t count,
                                vcclDataType_t type, vcclRedOp_t op, vcclStream_t stream) {
    if (a.nranks < 1 || a.nranks > kMaxLlRanks || a.seq == 0 || a.arrivals == nullptr || a.chunk_slots < 2 ||
        a.chunk_bytes == 0 || a.chunk_bytes % 16 != 0) {
        return vcclInternalError;
    }
    const size_t bytes = count * dtype_size(type);
    if (bytes == 0 || bytes > kMaxChunkedBytes) return vcclInternalError;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    const char* src = static_cast<const char*>(in);
    char* dst = static_cast<char*>(out);
    // Only the reductions: the data movers take the copy engines above the low-latency limit (chunked_collectives.h),
    // and launch_reduce would run any other kind as an AllReduce.
    if (kind != LlKind::AllReduce && kind != LlKind::ReduceScatter) return vcclInternalError;
    const cudaError_t err =
        for_type(type, [&](auto t) { return launch_reduce<decltype(t)>(a, kind, src, dst, bytes, op, s); });
    return err == cudaSuccess ? vcclSuccess : vcclUnhandledCudaError;
}

} // namespace vccl
