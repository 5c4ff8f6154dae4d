/* SPDX-License-Identifier: BSD-3-Clause */
#include "transport/staging/staged_queue.h"

#include "config.h"
#include "core/fine_sleeps.h"
#include "core/log.h"
#include "core/status.h"
#include "core/test_point.h"

#if VCCL_HAVE_CUDA

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "device/device_scope.h"
#include "device/driver_api.h"
#include "device/memory.h"

namespace vccl {

namespace {

using WaitValueFn = DriverApi::StreamValueFn;

/* Sequence numbers wrap: a is at or after b when the signed distance says so (as CU_STREAM_WAIT_VALUE_GEQ). */
bool reached(uint32_t a, uint32_t b) { return int32_t(a - b) >= 0; }

class CudaStagedQueue final : public StagedQueue {
public:
    CudaStagedQueue(int device, uint64_t pool_bytes, const std::atomic<bool>* aborted, std::atomic<int>* pending,
                    FailureFn on_failure, std::function<void()> while_waiting, WaitValueFn wait_value,
                    const void* test_key)
        : device_(device), pool_limit_(pool_bytes), aborted_(aborted), pending_(pending),
          on_failure_(std::move(on_failure)), while_waiting_(std::move(while_waiting)), wait_value_(wait_value),
          test_key_(test_key) {}

    ~CudaStagedQueue() override {
        stop(0);
        DeviceScope scope(device_);
        // A slot whose last output copy has not run (its stream is blocked elsewhere) may still be read by
        // the device, and so may the DONE word: freeing them would fault the copy, and cudaFreeHost would
        // wait for it. Such memory is left allocated.
        size_t kept = 0;
        for (Slot& s : pool_) {
            if (slot_busy(s)) {
                kept += s.bytes;
            } else {
                cudaFreeHost(s.host);
                cudaEventDestroy(s.released);
            }
        }
        for (cudaEvent_t ev : free_events_) cudaEventDestroy(ev);
        if (kept > 0) {
            VCCL_WARN(kLogDevice, "staging: %zu bytes of pinned memory left allocated: a stream has not yet copied "
                      "out of it (its work is blocked elsewhere)", kept);
        } else if (done_ != nullptr) {
            cudaFreeHost(const_cast<uint32_t*>(done_));
        }
        cudaGetLastError(); // only our own calls above can have set it
    }

    vcclResult_t init() {
        DeviceScope scope(device_);
        void* word = nullptr;
        cudaError_t err = cudaHostAlloc(&word, sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable);
        if (err != cudaSuccess) return cuda_fail("cudaHostAlloc (staging DONE word)", err);
        done_ = static_cast<volatile uint32_t*>(word);
        *done_ = 0;
        void* dev = nullptr;
        err = cudaHostGetDevicePointer(&dev, word, 0);
        if (err != cudaSuccess) return cuda_fail("cudaHostGetDevicePointer (staging DONE word)", err);
        done_device_ = reinterpret_cast<CUdeviceptr>(dev);
        thread_ = std::thread([this] { run(); });
        return vcclSuccess;
    }

    vcclResult_t submit(Job job) override {
        // A wraparound test moves the part numbering on, as if that many parts had run.
        if (long long n = test_point(test_key_, TestPoint::StagingSkip)) skip_sequence(uint32_t(n));
        int device = device_;
        if (cudaStreamGetDevice(static_cast<cudaStream_t>(job.stream), &device) != cudaSuccess) {
            cudaGetLastError();
            device = device_;
        }
        DeviceScope scope(device);
        cudaStream_t stream = static_cast<cudaStream_t>(job.stream);
        if (job.parts.empty()) return set_last_error(vcclInternalError, "staging: a job without parts");
        Slot* slot = nullptr;
        VCCL_RETURN_IF_ERROR(take_slot(job.host_bytes, device, &slot));
        // Every part's inputs, each followed by its READY.
        std::vector<cudaEvent_t> ready;
        ready.reserve(job.parts.size());
        auto give_back_ready = [&] {
            for (cudaEvent_t ev : ready) give_back_event(ev);
        };
        for (const Part& part : job.parts) {
            for (const Copy& c : part.in) {
                vcclResult_t r = enqueue_staged_copy(slot->host, c, true, job.stream);
                if (r != vcclSuccess) {
                    give_back_ready();
                    return r;
                }
            }
            cudaEvent_t ev = nullptr;
            vcclResult_t r = take_event(&ev);
            if (r != vcclSuccess) {
                give_back_ready();
                return r;
            }
            ready.push_back(ev);
            cudaError_t err = cudaEventRecord(ev, stream);
            if (err != cudaSuccess) {
                give_back_ready();
                return cuda_fail("cudaEventRecord (staging READY)", err);
            }
        }
        // Then, part by part, the wait for its DONE, the part handed to the proxy, its outputs. Each part goes to
        // the proxy as soon as its wait is enqueued, not at the end: enqueueing blocks when the stream's command
        // queue is full, and only the proxy's DONE for the parts already enqueued can drain it (hundreds of
        // parts hung the job when they were handed over last). Once the first wait is enqueued every part is
        // queued whatever fails after it (peers run the same parts); stream work after a failure is skipped.
        vcclResult_t status = vcclSuccess;
        for (size_t i = 0; i < job.parts.size(); ++i) {
            Part& part = job.parts[i];
            uint32_t seq = next_seq_ + 1;
            if (status == vcclSuccess) {
                CUresult res =
                    wait_value_(reinterpret_cast<CUstream>(stream), done_device_, seq, CU_STREAM_WAIT_VALUE_GEQ);
                if (res != CUDA_SUCCESS) {
                    status = cu_fail("cuStreamWaitValue32 (staging DONE)", res);
                    if (i == 0) {
                        give_back_ready();
                        return status;
                    }
                }
            }
            next_seq_ = seq;
            pending_->fetch_add(1);
            {
                std::lock_guard<std::mutex> lock(mutex_);
                jobs_.push_back(Queued{seq, ready[i], slot->host, std::move(part.work)});
            }
            wake_.notify_all();
            for (const Copy& c : part.out) {
                if (status == vcclSuccess) status = enqueue_staged_copy(slot->host, c, false, job.stream);
            }
        }
        // The slot is free again once DONE reaches the last part and its RELEASED event has fired (slot_busy;
        // the slot's fields are the calling thread's only). RELEASED is recorded after a failed output copy
        // too: the copies enqueued before it may still read the slot.
        slot->last_seq = next_seq_;
        slot->waiting = true;
        slot->recorded = false;
        slot->last_use = ++uses_;
        cudaError_t err = cudaEventRecord(slot->released, stream);
        if (err == cudaSuccess) {
            slot->recorded = true;
        } else {
            if (status == vcclSuccess) status = cuda_fail("cudaEventRecord (staging RELEASED)", err);
            else cudaGetLastError();
            // Nothing tells when the stream is done with the slot: it leaves the pool, its memory kept.
            VCCL_WARN(kLogDevice, "staging: %zu bytes of pinned memory set aside (cannot tell when the stream is "
                      "done with them)", slot->bytes);
            for (size_t i = 0; i < pool_.size(); ++i) {
                if (&pool_[i] == slot) {
                    pool_.erase(pool_.begin() + long(i));
                    break;
                }
            }
        }
        return status;
    }

    bool idle() const override { return pending_->load() == 0; }

    void wait_idle() override {
        std::unique_lock<std::mutex> lock(mutex_);
        idle_.wait(lock, [this] { return jobs_.empty(); });
    }

    void stop(int64_t wait_ms) override {
        {
            std::unique_lock<std::mutex> lock(mutex_);
            if (!thread_.joinable()) return;
            if (wait_ms > 0) idle_.wait_for(lock, std::chrono::milliseconds(wait_ms), [this] { return jobs_.empty(); });
            size_t left = jobs_.size();
            if (left > 0) {
                VCCL_WARN(kLogDevice, "staging: %zu part(s) of device operations end without running: their outputs "
                          "are not valid", left);
            }
            skip_all_ = true;
            stopping_ = true;
        }
        wake_.notify_all();
        thread_.join();
    }

    /* Waits until idle, then moves the part numbering on by n (test_point StagingSkip). */
    void skip_sequence(uint32_t n) {
        // As between any two submits, every slot is looked at before the numbers move on.
        wait_idle();
        for (Slot& slot : pool_) slot_busy(slot);
        next_seq_ += n;
        __atomic_store_n(done_, next_seq_, __ATOMIC_RELEASE);
    }

private:
    struct Slot {
        char* host = nullptr;
        size_t bytes = 0;
        cudaEvent_t released = nullptr; // recorded after the last output copy of the slot's job
        bool recorded = false;           // RELEASED not yet seen to have fired
        bool waiting = false;            // DONE not yet seen to reach last_seq
        uint32_t last_seq = 0;           // the last part of the last job that used it
        uint64_t last_use = 0;           // when that job was submitted (uses_), for the most recently used
        size_t used = 0;                 // that job's size class (counts against the pool limit while busy)
    };
    struct Queued {
        uint32_t seq;
        cudaEvent_t ready;
        char* host;
        std::function<vcclResult_t(char*)> work;
    };

    /* Whether the slot's last job may still use it. What has been seen to end is forgotten: sequence numbers
     * wrap, and a slot left unused for 2^31 parts would otherwise compare as not yet reached. Every slot is
     * looked at by each take_slot, far more often than that. */
    bool slot_busy(Slot& s) {
        if (s.waiting) {
            if (!reached(*done_, s.last_seq)) return true;
            s.waiting = false;
        }
        if (s.recorded) {
            cudaError_t q = cudaEventQuery(s.released);
            if (q == cudaErrorNotReady) return true;
            if (q != cudaSuccess) cudaGetLastError();
            s.recorded = false;
        }
        return false;
    }

    /* A free slot of at least `bytes`, from the pool or new; waits for one while the pool is full. */
    vcclResult_t take_slot(size_t bytes, int device, Slot** out) {
        // Powers of two: a slot serves the sizes near its own, so a size that changes a little reallocates
        // nothing (pinning memory costs milliseconds per tens of MiB).
        size_t rounded = kMinSlot;
        while (rounded < bytes) rounded *= 2;
        bytes = rounded;
        auto started = std::chrono::steady_clock::now();
        bool warned = false;
        for (;;) {
            // VCCL_STAGING_POOL_BYTES bounds the data in flight (the size classes of the jobs holding slots),
            // not the slots kept: slots are not freed here, since cudaFreeHost may wait for the device.
            Slot* best = nullptr;
            size_t in_flight = 0, total = 0;
            for (Slot& s : pool_) {
                total += s.bytes;
                if (slot_busy(s)) {
                    in_flight += s.used;
                    continue;
                }
                // The smallest free one that fits, at most 4 times the size (a small job does not hold a large
                // slot that a large one will need); among equals the one used last, whose memory is most
                // likely still in the CPU's cache for the host part.
                if (s.bytes < bytes || s.bytes > 4 * bytes) continue;
                if (best == nullptr || s.bytes < best->bytes ||
                    (s.bytes == best->bytes && s.last_use > best->last_use))
                    best = &s;
            }
            if (best != nullptr) {
                best->used = bytes;
                *out = best;
                return vcclSuccess;
            }
            if (in_flight + bytes <= pool_limit_ || in_flight == 0) {
                // Kept slots of sizes no longer used are given back only when they exceed twice the limit, by
                // another thread: cudaFreeHost may wait for the device, and this thread must not.
                std::vector<char*> unused;
                for (size_t i = pool_.size(); i-- > 0 && total + bytes > 2 * pool_limit_;) {
                    if (slot_busy(pool_[i])) continue;
                    total -= pool_[i].bytes;
                    unused.push_back(pool_[i].host);
                    cudaEventDestroy(pool_[i].released); // does not wait; the event has fired
                    pool_.erase(pool_.begin() + long(i));
                }
                if (!unused.empty()) free_pinned_elsewhere(std::move(unused), device);
                break;
            }
            if (aborted_->load()) return set_last_error(vcclInvalidUsage, "communicator aborted while waiting for staging memory");
            if (!warned && std::chrono::steady_clock::now() - started > std::chrono::seconds(10)) {
                VCCL_WARN(kLogDevice, "staging: waiting over 10 s for pinned memory (VCCL_STAGING_POOL_BYTES=%llu in "
                          "use by earlier operations whose streams have not reached them)",
                          (unsigned long long)pool_limit_);
                warned = true;
            }
            std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
        Slot s;
        DeviceScope scope(device);
        cudaError_t err = cudaHostAlloc(reinterpret_cast<void**>(&s.host), bytes, cudaHostAllocPortable);
        if (err != cudaSuccess) return cuda_fail("cudaHostAlloc (staging slot)", err);
        err = cudaEventCreateWithFlags(&s.released, cudaEventDisableTiming);
        if (err != cudaSuccess) {
            cudaFreeHost(s.host);
            return cuda_fail("cudaEventCreate (staging)", err);
        }
        s.bytes = bytes;
        s.used = bytes;
        pool_.push_back(s);
        *out = &pool_.back();
        return vcclSuccess;
    }

    static void free_pinned_elsewhere(std::vector<char*> blocks, int device) {
        std::thread([blocks, device] {
            relax_capture_for_this_thread();
            cudaSetDevice(device);
            for (char* b : blocks) cudaFreeHost(b);
            cudaGetLastError();
        }).detach();
    }

    vcclResult_t take_event(cudaEvent_t* out) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (!free_events_.empty()) {
                *out = free_events_.back();
                free_events_.pop_back();
                return vcclSuccess;
            }
        }
        cudaError_t err = cudaEventCreateWithFlags(out, cudaEventDisableTiming);
        return err == cudaSuccess ? vcclSuccess : cuda_fail("cudaEventCreate (staging)", err);
    }

    void give_back_event(cudaEvent_t ev) {
        std::lock_guard<std::mutex> lock(mutex_);
        free_events_.push_back(ev);
    }

    /* Polls until the job's inputs are in pinned memory; false when it should be skipped instead. A failed
     * query (the device or the stream failed before the inputs were copied) is reported as the
     * communicator's error and the part skipped: running it would hand the peers whatever the slot held. */
    bool wait_ready(cudaEvent_t ready) {
        int idle_rounds = 0;
        for (;;) {
            if (skip_all_.load() || aborted_->load()) return false;
            cudaError_t q = cudaEventQuery(ready);
            if (q == cudaSuccess) return true;
            if (q != cudaErrorNotReady) {
                cudaGetLastError();
                failed_ = true;
                if (on_failure_) {
                    on_failure_(vcclUnhandledCudaError,
                                std::string("staging: the stream of a device operation failed before its inputs "
                                            "reached pinned memory (cudaEventQuery: ") +
                                    cudaGetErrorString(q) + "); it and the operations after it did not run");
                }
                return false;
            }
            // Spin briefly (small transfers), then sleep: a stream may be busy for a long time.
            if (++idle_rounds < 200) {
                std::this_thread::yield();
            } else {
                if (while_waiting_) while_waiting_();
                sleep_finely(std::chrono::microseconds(idle_rounds < 2000 ? 10 : 100)); // 10 us, not 60
            }
        }
    }

    void run() {
        relax_capture_for_this_thread(); // a capture in global mode elsewhere must not see this thread's calls
        cudaSetDevice(device_);
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            wake_.wait(lock, [this] { return !jobs_.empty() || stopping_; });
            if (jobs_.empty()) return; // stopping
            Queued& job = jobs_.front();
            lock.unlock();
            bool run_it = !failed_ && wait_ready(job.ready);
            if (run_it) {
                vcclResult_t r = job.work(job.host);
                if (r != vcclSuccess) {
                    failed_ = true;
                    if (on_failure_) on_failure_(r, last_error_message());
                }
            }
            __atomic_store_n(done_, job.seq, __ATOMIC_RELEASE);
            lock.lock();
            free_events_.push_back(job.ready);
            jobs_.pop_front();
            pending_->fetch_sub(1);
            if (jobs_.empty()) idle_.notify_all();
        }
    }

    static constexpr size_t kMinSlot = 64 * 1024;

    const int device_;
    const uint64_t pool_limit_;
    const std::atomic<bool>* aborted_;
    std::atomic<int>* pending_;
    FailureFn on_failure_;
    std::function<void()> while_waiting_;
    WaitValueFn wait_value_;
    volatile uint32_t* done_ = nullptr;
    CUdeviceptr done_device_ = 0;
    uint32_t next_seq_ = 0;   // last submitted (calling thread)
    uint64_t uses_ = 0;       // jobs submitted (calling thread)
    std::deque<Slot> pool_;   // calling thread only; a deque keeps Slot addresses stable
    bool failed_ = false;     // proxy thread only

    std::mutex mutex_;        // jobs_, free_events_, stopping_
    std::condition_variable wake_, idle_;
    std::deque<Queued> jobs_; // parts of jobs; the front one runs
    std::vector<cudaEvent_t> free_events_;
    bool stopping_ = false;
    std::atomic<bool> skip_all_{false};
    std::thread thread_;
    const void* test_key_; // the communicator, for the test points (core/test_point.h)
};

} // namespace

std::unique_ptr<StagedQueue> StagedQueue::create(int device, uint64_t pool_bytes, const std::atomic<bool>* aborted,
                                                 std::atomic<int>* pending, FailureFn on_failure,
                                                 std::function<void()> while_waiting, const void* test_key) {
    const WaitValueFn wait_value = driver_api().wait_value;
    if (wait_value == nullptr) {
        VCCL_INFO(kLogDevice, "staging: no cuStreamWaitValue32 in this driver: device buffers are staged synchronously");
        return nullptr;
    }
    auto q = std::make_unique<CudaStagedQueue>(device, pool_bytes, aborted, pending, std::move(on_failure),
                                               std::move(while_waiting), wait_value, test_key);
    if (q->init() != vcclSuccess) {
        VCCL_INFO(kLogDevice, "staging: %s: device buffers are staged synchronously", last_error_message());
        return nullptr;
    }
    VCCL_INFO(kLogDevice, "staging: asynchronous, GPU %d, pinned pool of at most %llu bytes", device,
              (unsigned long long)pool_bytes);
    return q;
}

} // namespace vccl

#else // no CUDA

namespace vccl {

std::unique_ptr<StagedQueue> StagedQueue::create(int, uint64_t, const std::atomic<bool>*, std::atomic<int>*, FailureFn,
                                                 std::function<void()>, const void*) {
    return nullptr;
}

} // namespace vccl

#endif
