/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * FAIL words: a rank that gives up a transfer tells its peer (and releases the peer's waiting stream where
 * that is safe); reads of this rank's own words, on private streams, say which peer gave up.
 */
#include "transport/cuda_ipc/cuda_ipc_p2p.h"

#if VCCL_HAVE_CUDA

#include <chrono>
#include <thread>

#include "core/clock.h"
#include "core/log.h"
#include "device/device_scope.h"

namespace vccl {

void CudaIpcP2p::fail_state(int peer, uint64_t* clear_ns, bool* failed) const {
    *clear_ns = 0;
    *failed = false;
    if (peer < 0 || peer >= nranks_ || fail_seen_ == nullptr) return;
    // A kernel that found the peer's header impossible wrote this before its stream wrote the note.
    *failed = fail_seen_[peer].load(std::memory_order_acquire) ||
              (ll_control_ != nullptr && ll_control_[kLlMismatch] == peer + 1);
    *clear_ns = fail_clear_ns_[peer].load(std::memory_order_acquire);
}

CUstream CudaIpcP2p::notify_stream() {
    if (notify_stream_ == nullptr && cudaStreamCreateWithFlags(&notify_stream_, cudaStreamNonBlocking) != cudaSuccess) {
        cudaGetLastError();
        notify_stream_ = nullptr;
    }
    return reinterpret_cast<CUstream>(notify_stream_);
}

bool CudaIpcP2p::tell_failed(int peer, Region release, uint32_t seq, void* stream) {
    if (peer < 0 || peer >= nranks_ || peer_flags_[peer] == nullptr) return false;
    DeviceScope scope(device_);
    if (stream != nullptr && release != kFail) {
        CUstream us = static_cast<CUstream>(stream);
        // issue_pending's own failure path comes back here without a stream: no recursion through it.
        if (issue_pending(us, write_op(flag_addr(peer, kFail, rank_), ++abandoned_)) == CUDA_SUCCESS &&
            driver().write_value(us, flag_addr(peer, release, rank_), seq, CU_STREAM_WRITE_VALUE_DEFAULT) == CUDA_SUCCESS) {
            return true;
        }
        cudaGetLastError();
    }
    CUstream cs = notify_stream();
    if (cs == nullptr) return false;
    bool ok = driver().write_value(cs, flag_addr(peer, kFail, rank_), ++abandoned_, CU_STREAM_WRITE_VALUE_DEFAULT) ==
              CUDA_SUCCESS;
    if (release != kFail) {
        ok = ok && driver().write_value(cs, flag_addr(peer, release, rank_), seq, CU_STREAM_WRITE_VALUE_DEFAULT) ==
                       CUDA_SUCCESS;
    }
    return ok;
}

void CudaIpcP2p::notify_abandoned(int peer, bool send, Region release, uint32_t seq, void* stream) {
    if (peer < 0 || peer >= nranks_ || peer_flags_[peer] == nullptr) return;
    bool ok = tell_failed(peer, release, seq, stream);
    VCCL_WARN(kLogDevice, "rank %d: gave up a direct %s rank %d after the transfer was set up; %s", rank_,
              send ? "send to" : "receive from", peer,
              !ok ? "could not tell it" : send ? "told it (its stream goes on; vcclCommGetAsyncError reports the failure there)"
                                               : "told it (vcclCommGetAsyncError reports it there; its stream waits until it aborts)");
}

int CudaIpcP2p::read_fail_words(bool throttled, int64_t wait_ms) {
    if (flags_ == nullptr || flags_host_ == nullptr) return -1;
    std::lock_guard<std::mutex> lock(flags_mutex_);
    // At most one read per millisecond for failed_peer(): frameworks poll the asynchronous error often (PyTorch
    // on every work query), and a failure found is kept by the communicator.
    uint64_t now = now_ns();
    if (throttled && now - last_fail_check_ns_ < 1000000ull) return -1;
    last_fail_check_ns_ = now;
    DeviceScope scope(device_);
    if (!private_streams()) return -1;
    const uint32_t* flags = read_flags(now_ns() + uint64_t(wait_ms > 0 ? wait_ms : 0) * 1000000ull);
    if (flags == nullptr) return -1;
    return fail_words_landed(flags + size_t(kFail) * size_t(nranks_), now);
}

int CudaIpcP2p::fail_words_landed(const uint32_t* fail, uint64_t started_ns) {
    int first = -1;
    for (int p = 0; p < nranks_; ++p) {
        if (fail[p] != 0) {
            fail_seen_[size_t(p)].store(true, std::memory_order_release);
            if (first < 0) first = p;
        } else if (started_ns > fail_clear_ns_[size_t(p)].load(std::memory_order_relaxed)) {
            fail_clear_ns_[size_t(p)].store(started_ns, std::memory_order_release);
        }
    }
    return first;
}

int CudaIpcP2p::poll_fail_words() {
    if (flags_ == nullptr || flags_host_ == nullptr) return -1;
    uint64_t now = now_ns();
    if (now < next_fail_poll_ns_.load(std::memory_order_relaxed)) return -1;
    // Never wait: failed_peer() may hold the lock for up to 100 ms on another thread (a framework's watchdog).
    std::unique_lock<std::mutex> lock(flags_mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return -1;
    next_fail_poll_ns_.store(now + kFailPollNs, std::memory_order_relaxed);
    DeviceScope scope(device_);
    const size_t words = kRegions * size_t(nranks_), fail_at = size_t(kFail) * size_t(nranks_);
    int next = 0;
    if (fail_poll_stream_ >= 0) {
        const int i = fail_poll_stream_;
        cudaError_t q = cudaStreamQuery(private_streams_[i]);
        if (q == cudaSuccess) {
            fail_poll_stream_ = -1;
            // The words of this read, or of a later failed_peer() read into the same part: fresh either way.
            const int who = fail_words_landed(flags_host_ + size_t(i) * words + fail_at, fail_poll_started_ns_);
            if (who >= 0) return who;
        } else if (q != cudaErrorNotReady) {
            cudaGetLastError(); // a broken context: the calls themselves will say so
            return -1;
        } else if (now - fail_poll_started_ns_ < 2 * kFailPollNs) {
            return -1; // the copy engines are busy: look again next time
        }
        next = i + 1; // stuck: leave it and read on another stream
    }
    if (!private_streams()) return -1; // made on first use, tried again next time
    for (int k = 0; k < kPrivateStreams; ++k) {
        const int i = (next + k) % kPrivateStreams;
        cudaStream_t st = private_streams_[i];
        if (st == nullptr) continue;
        cudaError_t q = cudaStreamQuery(st); // busy: an earlier read is stuck there
        if (q == cudaSuccess) {
            q = cudaMemcpyAsync(flags_host_ + size_t(i) * words + fail_at, flags_ + fail_at,
                                sizeof(uint32_t) * size_t(nranks_), cudaMemcpyDeviceToHost, st);
            if (q == cudaSuccess) {
                fail_poll_stream_ = i;
                fail_poll_started_ns_ = now;
                return -1;
            }
        }
        if (q != cudaErrorNotReady) cudaGetLastError();
    }
    return -1;
}

bool CudaIpcP2p::private_streams() {
    bool any = false;
    for (cudaStream_t& st : private_streams_) {
        if (st == nullptr && cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) {
            cudaGetLastError();
            st = nullptr;
        }
        any = any || st != nullptr;
    }
    return any;
}

const uint32_t* CudaIpcP2p::read_flags(uint64_t deadline_ns) {
    const size_t words = kRegions * size_t(nranks_);
    bool reading[kPrivateStreams] = {};
    for (int i = 0; i < kPrivateStreams; ++i) {
        cudaStream_t st = private_streams_[i];
        if (st == nullptr) continue;
        cudaError_t q = cudaStreamQuery(st); // busy: an earlier read is stuck there
        if (q == cudaSuccess) {
            q = cudaMemcpyAsync(flags_host_ + size_t(i) * words, flags_, words * sizeof(uint32_t),
                                cudaMemcpyDeviceToHost, st);
            reading[i] = q == cudaSuccess;
        }
        if (q != cudaSuccess && q != cudaErrorNotReady) cudaGetLastError(); // ours: do not leave it to the caller
    }
    for (;;) {
        for (int i = 0; i < kPrivateStreams; ++i) {
            if (!reading[i]) continue;
            cudaError_t e = cudaStreamQuery(private_streams_[i]);
            if (e == cudaSuccess) return flags_host_ + size_t(i) * words;
            if (e != cudaErrorNotReady) { // a real error (a broken context): nothing to wait for
                cudaGetLastError();
                return nullptr;
            }
        }
        if (now_ns() >= deadline_ns) return nullptr;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
}

} // namespace vccl

#endif
