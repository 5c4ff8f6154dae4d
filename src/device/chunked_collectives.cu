/* The chunked collective kernels (device/chunked_collectives.h): up to LlArgs::max_blocks thread blocks per call,
 * each moving whole chunks through the peers' word sets; AllReduce and ReduceScatter. */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/dtype.h"
#include "device/chunked_collectives.h"
#include "device/ll_sync.cuh"
#include "device/reduce_ops.cuh"

namespace vccl {

namespace {

constexpr int kThreads = 512;
/* 16-byte vectors a thread keeps in flight: loads issued back to back overlap their latency. */
constexpr int kBatch = 4;

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

/* Copies `len` bytes of this rank's input to a peer's slot, every thread of the block: 16-byte vectors when the
 * input is 16-byte aligned (slots always are; user buffers nearly always), else byte by byte. */
__device__ __forceinline__ void copy_chunk(char* dst, const char* src, uint32_t len) {
    const uint32_t vecs = aligned16(dst) && aligned16(src) ? len / 16 : 0;
    for (uint32_t v0 = threadIdx.x; v0 < vecs; v0 += kBatch * kThreads) {
        uint4 x[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
            const uint32_t v = v0 + j * kThreads;
            if (v < vecs) x[j] = load_local(src + 16 * size_t(v));
        }
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
            const uint32_t v = v0 + j * kThreads;
            if (v < vecs) *reinterpret_cast<uint4*>(dst + 16 * size_t(v)) = x[j];
        }
    }
    for (uint32_t b = 16 * vecs + threadIdx.x; b < len; b += kThreads) dst[b] = src[b];
}

/* Thread 0 waits for each peer's word (flag or credit) of slot `slot` to reach `at_least` for this call; the block
 * learns the outcome after a barrier. False when the communicator was aborted. */
template <typename Word>
__device__ __forceinline__ bool wait_peers(const LlArgs& a, const int* skip, int* aborted, Word word, uint32_t at_least) {
    if (threadIdx.x == 0) {
        for (int p = 0; p < a.nranks && *aborted == 0; ++p) {
            if (p == a.rank || skip[p]) continue;
            if (!wait_word(word(p), a.seq, at_least, a.control)) *aborted = 1;
        }
        __threadfence(); // what the peers stored before the words is read after them
    }
    __syncthreads();
    return *aborted == 0;
}

/* Sends chunk i to every peer that is not skipped: src(p) is the chunk's first byte in this rank's input for peer p.
 * Waits for the slot's credit first when it held an earlier chunk of this call. */
template <typename Src>
__device__ bool send_chunk(const LlArgs& a, const int* skip, int* aborted, uint32_t i, uint32_t len, Src src) {
    const uint32_t slot = i % a.chunk_slots;
    if (i >= a.chunk_slots &&
        !wait_peers(a, skip, aborted, [&](int p) { return credit_word(const_cast<uint64_t*>(a.inbox[p]), a, slot); },
                    i - a.chunk_slots + 1)) {
        return false;
    }
    for (int p = 0; p < a.nranks; ++p) {
        if (p != a.rank && !skip[p]) copy_chunk(slot_data(a.outbox[p], a, slot), src(p), len);
    }
    __syncthreads(); // every thread's stores are issued
    if (threadIdx.x == 0) {
        __threadfence_system(); // and visible to the peers before the flag
        for (int p = 0; p < a.nranks; ++p) {
            if (p != a.rank && !skip[p]) store_word(flag_word(a.outbox[p], slot), (uint64_t(a.seq) << 32) | (i + 1));
        }
    }
    return true;
}

/* After the block has read chunk i from every peer's slot: the slot may take the peer's next chunk. */
__device__ __forceinline__ void give_credits(const LlArgs& a, const int* skip, uint32_t i) {
    __syncthreads(); // every thread has used what it loaded
    if (threadIdx.x != 0) return;
    const uint32_t slot = i % a.chunk_slots;
    for (int p = 0; p < a.nranks; ++p) {
        if (p != a.rank && !skip[p]) store_word(credit_word(a.outbox[p], a, slot), (uint64_t(a.seq) << 32) | (i + 1));
    }
}

/* After the block has read chunk i, the last chunk of this call in its slot: the slot's data is cleared in this
 * rank's own memory. The low-latency kernel (ll_collectives.h) takes the same set two calls later and trusts a word
 * whose high half is its call's number; left here, the user's bytes could pass for one (an int32 array of small
 * numbers would). Zero is no call's number. The peer writes this set again only after this rank's next call has
 * sent it data, which the stream orders after this kernel. */
__device__ void clear_slot_if_last(const LlArgs& a, const int* skip, uint32_t i, uint32_t chunks, uint32_t len) {
    if (i + a.chunk_slots < chunks) return;
    // Chunks of the slot before the last were whole; slots have room for whole 16-byte vectors.
    const uint32_t vecs = i >= a.chunk_slots ? a.chunk_bytes / 16 : (len + 15) / 16;
    __syncthreads(); // every thread has read the slot
    for (int p = 0; p < a.nranks; ++p) {
        if (p == a.rank || skip[p]) continue;
        uint4* d = reinterpret_cast<uint4*>(slot_data(const_cast<uint64_t*>(a.inbox[p]), a, i % a.chunk_slots));
        for (uint32_t v = threadIdx.x; v < vecs; v += kThreads) d[v] = make_uint4(0, 0, 0, 0);
    }
}

__device__ __forceinline__ uint32_t chunk_len(const LlArgs& a, size_t bytes, uint32_t i) {
    const size_t start = size_t(i) * a.chunk_bytes;
    const size_t left = bytes - start;
    return uint32_t(left < a.chunk_bytes ? left : a.chunk_bytes);
}

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

/* Reduces chunk i (len bytes) of this rank's part in rank order: its own from `own`, each peer's from its slot;
 * writes it to `dst`. `dst` may be `own` (in place): each vector is read and written by one thread, reads first. */
template <typename T, int Op>
__device__ void reduce_chunk(const LlArgs& a, const int* skip, uint32_t i, uint32_t len, const char* own, char* dst) {
    using A = typename Acc<T>::type;
    constexpr int kPer = 16 / sizeof(T);
    const uint32_t slot = i % a.chunk_slots;
    // 16-byte vectors where this rank's input and output allow them (the slots always do), else element by element.
    const uint32_t vecs = aligned16(own) && aligned16(dst) ? len / 16 : 0;
    for (uint32_t v0 = threadIdx.x; v0 < vecs; v0 += kBatch * kThreads) {
        A acc[kBatch][kPer];
        bool first = true;
        for (int r = 0; r < a.nranks; ++r) {
            if (r != a.rank && skip[r]) continue;
            const char* src = r == a.rank ? own : slot_data(const_cast<uint64_t*>(a.inbox[r]), a, slot);
            uint4 x[kBatch];
#pragma unroll
            for (int j = 0; j < kBatch; ++j) {
                const uint32_t v = v0 + j * kThreads;
                if (v < vecs) x[j] = r == a.rank ? load_local(src + 16 * size_t(v)) : load_peer(src + 16 * size_t(v));
                else x[j] = make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int j = 0; j < kBatch; ++j) {
#pragma unroll
                for (int k = 0; k < kPer; ++k) {
                    const A e = vec_element<T>(x[j], k);
                    acc[j][k] = first ? e : combine<A, Op>(acc[j][k], e);
                }
            }
            first = false;
        }
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
            const uint32_t v = v0 + j * kThreads;
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
    for (uint32_t e = threadIdx.x; e < elems; e += kThreads) {
        const size_t at = 16 * size_t(vecs) + size_t(e) * sizeof(T);
        A acc = A(0);
        bool first = true;
        for (int r = 0; r < a.nranks; ++r) {
            if (r != a.rank && skip[r]) continue;
            const A v = r == a.rank ? load_element<T>(own + at, false)
                                    : load_element<T>(slot_data(const_cast<uint64_t*>(a.inbox[r]), a, slot) + at, true);
            acc = first ? v : combine<A, Op>(acc, v);
            first = false;
        }
        if (Op == vcclAvg) acc = acc / A(a.nranks);
        store_element<T>(dst + at, acc);
    }
}

/* AllReduce and ReduceScatter: `bytes` is what a rank sends each peer (AllReduce: the whole input; ReduceScatter:
 * the peer's block of it) and what it writes (its output). */
template <typename T, int Op, LlKind Kind>
__global__ void __launch_bounds__(kThreads) chunked_reduce_kernel(LlArgs a, const char* in, char* out, size_t bytes) {
    __shared__ int skip[kMaxLlRanks];
    __shared__ int aborted;
    if (threadIdx.x == 0) aborted = 0;
    __syncthreads();
    const uint32_t header = ((kChunkedKind | uint32_t(Kind)) << 28) | uint32_t(bytes);
    publish_header(a, header);
    bool ok = check_headers(a, header, skip, &aborted);
    const size_t block_of = Kind == LlKind::ReduceScatter ? bytes : 0; // offset of peer p's part: p x block_of
    const char* own = in + size_t(a.rank) * block_of;
    const uint32_t chunks = uint32_t((bytes + a.chunk_bytes - 1) / a.chunk_bytes);
    for (uint32_t i = blockIdx.x; i < chunks && ok; i += gridDim.x) {
        const size_t at = size_t(i) * a.chunk_bytes;
        const uint32_t len = chunk_len(a, bytes, i);
        ok = send_chunk(a, skip, &aborted, i, len, [&](int p) { return in + size_t(p) * block_of + at; }) &&
             wait_peers(a, skip, &aborted,
                        [&](int p) { return flag_word(const_cast<uint64_t*>(a.inbox[p]), i % a.chunk_slots); }, i + 1);
        if (!ok) break;
        reduce_chunk<T, Op>(a, skip, i, len, own + at, out + at);
        clear_slot_if_last(a, skip, i, chunks, len);
        give_credits(a, skip, i);
    }
    arrive(a);
}

int grid_for(const LlArgs& a, size_t bytes) {
    const size_t chunks = (bytes + a.chunk_bytes - 1) / a.chunk_bytes;
    return int(std::max<size_t>(1, std::min<size_t>(size_t(std::max(1, a.max_blocks)), chunks)));
}

template <typename T>
cudaError_t launch_reduce(const LlArgs& a, LlKind kind, const char* in, char* out, size_t bytes, vcclRedOp_t op,
                          cudaStream_t s) {
    const int blocks = grid_for(a, bytes);
    return for_op(op, [&](auto o) {
        constexpr int kOp = decltype(o)::value;
        return kind == LlKind::ReduceScatter
                   ? launch_kernel(chunked_reduce_kernel<T, kOp, LlKind::ReduceScatter>, blocks, kThreads, s, a, in,
                                   out, bytes)
                   : launch_kernel(chunked_reduce_kernel<T, kOp, LlKind::AllReduce>, blocks, kThreads, s, a, in, out,
                                   bytes);
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
    if (kind == LlKind::AllGather) return vcclInternalError; // the copy engines do it faster (chunked_collectives.h)
    const cudaError_t err =
        for_type(type, [&](auto t) { return launch_reduce<decltype(t)>(a, kind, src, dst, bytes, op, s); });
    return err == cudaSuccess ? vcclSuccess : vcclUnhandledCudaError;
}

} // namespace vccl
