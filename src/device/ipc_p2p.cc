#include "device/ipc_p2p.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <errno.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "config.h"
#include "core/clock.h"
#include "core/env.h"
#include "core/log.h"
#include "core/status.h"
#include "device/fd_channel.h"
#include "device/fifo_credits.h"
#include "device/ipc_handles.h"
#include "device/memory.h"
#include "device/vmm.h"

#if VCCL_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "device/driver_entry.h"
#endif

namespace vccl {

namespace {

/* The object used where the direct path is impossible: nothing is reachable. */
class NoIpcP2p final : public IpcP2p {
public:
    bool reachable(int) const override { return false; }
    bool everyone_reachable() const override { return false; }
    void describe(int, const void*, size_t bytes, bool, const Registration*, P2pDescriptor* out) override {
        memset(out, 0, sizeof(*out));
        out->magic = kDescMagic;
        out->bytes = bytes;
    }
    bool export_buffer(const void*, size_t, Registration*) override { return false; }
    vcclResult_t post_recv_ready(int, void*, uint32_t*) override { return unreachable(); }
    vcclResult_t post_send(int, const void*, const P2pDescriptor&, void*, bool) override { return unreachable(); }
    vcclResult_t post_recv_wait(int, uint32_t, void*, int, uint32_t) override { return unreachable(); }
    int note_words() const override { return 0; }
    void note(int, uint32_t, void*) override {}
    uint32_t note_value(int) const override { return 0; }
    size_t fifo_bytes(int) const override { return 0; }
    vcclResult_t post_fifo_send(int, const void*, size_t, void*) override { return unreachable(); }
    vcclResult_t post_fifo_recv(int, void*, size_t, bool, void*) override { return unreachable(); }
    void abandon_fifo_send(int, void*) override {}
    void abandon_fifo_recv(int) override {}
    void report_failure(int) override {}
    int release_waits(int64_t) override { return 0; }
    void abandon_send(int, void*) override {}
    void abandon_recv(int) override {}
    int failed_peer() override { return -1; }
    int failed_peer_polled() override { return -1; }
    int failed_peer_now(int64_t) override { return -1; }
    void fail_state(int, uint64_t* clear_ns, bool* failed) const override {
        *clear_ns = 0;
        *failed = false;
    }
    int device() const override { return -1; }
    size_t ll_bytes() const override { return 0; }
    bool chunked_possible() const override { return false; }
    void ll_next(LlArgs*) override {}
    void ll_abandon(const LlArgs&, void*) override {}
    void ll_launched(const LlArgs&) override {}
    vcclResult_t flush() override { return vcclSuccess; }
    void test_fail_next(bool) override {}
    uint64_t direct_sends() const override { return 0; }
    uint64_t block_reopens() const override { return 0; }
    uint64_t evictions() const override { return 0; }
private:
    static vcclResult_t unreachable() {
        return set_last_error(vcclInternalError, "direct device transfer to an unreachable peer");
    }
};

/* What every rank publishes at creation. */
struct PeerInfo {
    uint32_t ok; // flags exported
    int32_t device;
    uint32_t fifo_slots;      // staging FIFO geometry (0: none); a FIFO is used only between equal ones
    uint32_t fifo_slot_bytes;
    uint32_t ll_bytes;        // low-latency collectives (0: none); used only when equal on every rank,
    uint32_t ll_offset;       // and so is where its words start (after the FIFO slots, whose size may differ)
    char uuid[16];            // of the GPU: ranks sharing one take turns, which the low-latency kernel cannot
    char handle[64];
    uint64_t fd_name;         // descriptor socket (device/fd_channel.h) for VMM buffers; 0: none
    uint64_t fd_secret;
    int64_t pid;              // with the host id, names the exporter of its handles (device/ipc_handles.h)
};

std::atomic<bool> g_ll_on_shared_gpu{false}; // testing::allow_ll_on_shared_gpu

} // namespace

#if VCCL_HAVE_CUDA

namespace {

using StreamValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
using AddressRangeFn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
using BatchMemOpFn = CUresult (*)(CUstream, unsigned int, CUstreamBatchMemOpParams*, unsigned int);

/* Driver entry points through the runtime: vccl links no libcuda, so it loads where no driver exists. */
struct DriverApi {
    StreamValueFn wait_value = nullptr;
    StreamValueFn write_value = nullptr;
    AddressRangeFn address_range = nullptr;
    BatchMemOpFn batch_mem_op = nullptr; // optional: several stream memory operations for the price of one call
    bool ok = false;
};

const DriverApi& driver() {
    static const DriverApi api = [] {
        DriverApi a;
        a.ok = load_driver_entry("cuStreamWaitValue32", &a.wait_value) &&
               load_driver_entry("cuStreamWriteValue32", &a.write_value) &&
               load_driver_entry("cuMemGetAddressRange", &a.address_range);
        load_driver_entry("cuStreamBatchMemOp", &a.batch_mem_op); // optional
        return a;
    }();
    return api;
}

class CudaIpcP2p final : public IpcP2p {
public:
    ~CudaIpcP2p() override {
        DeviceScope scope(device_);
        // A stream release_waits could not unblock would hold cudaFree (it synchronises the device) for ever:
        // leave everything allocated and mapped. Leaked mappings are not harmless (CUDA maps a peer's block
        // only once per process, so a later communicator could not map a new buffer at that address), which
        // is why this is only done when the release did not land; nor may another communicator close them
        // (ipc_handles::keep_for_good).
        if (stream_blocked_) {
            for (auto& per_peer : mappings_) {
                for (Mapping& m : per_peer) {
                    if (m.vmm_size == 0) ipc_handles::keep_for_good(m.ipc);
                }
            }
            return;
        }
        // cudaFree first: it waits for the device, so a copy a release let go has landed before its
        // mapping is closed.
        if (flags_ != nullptr) cudaFree(flags_);
        for (auto& per_peer : mappings_) {
            for (Mapping& m : per_peer) unmap(m);
        }
        for (Retired& r : retired_) { // the device is idle (cudaFree above): their copies are done
            for (const View& v : r.views) vmm::unmap(v.ptr, v.size);
            for (cudaEvent_t ev : r.events) cudaEventDestroy(ev);
        }
        for (const View& v : retiring_) vmm::unmap(v.ptr, v.size);
        for (size_t r = 0; r < peer_flags_.size(); ++r) {
            if (peer_flags_[r] != nullptr && int(r) != rank_) cudaIpcCloseMemHandle(peer_flags_[r]);
        }
        if (flags_host_ != nullptr) cudaFreeHost(flags_host_);
        if (notes_host_ != nullptr) cudaFreeHost(notes_host_);
        if (ll_control_ != nullptr) cudaFreeHost(const_cast<int*>(ll_control_));
        for (cudaStream_t st : private_streams_) {
            if (st != nullptr) cudaStreamDestroy(st);
        }
        if (notify_stream_ != nullptr) cudaStreamDestroy(notify_stream_);
        cudaGetLastError(); // only our own calls above can have set it
    }

    vcclResult_t init(Bootstrap* bootstrap, const std::vector<uint64_t>& host_ids);

    bool reachable(int peer) const override { return peer >= 0 && size_t(peer) < reach_.size() && reach_[peer]; }
    bool everyone_reachable() const override { return everyone_reachable_; }

    void describe(int peer, const void* buf, size_t bytes, bool is_recv, const Registration* reg,
                  P2pDescriptor* out) override {
        memset(out, 0, sizeof(*out));
        out->magic = kDescMagic;
        out->bytes = bytes;
        // A registration may span several allocations: its cached export holds only for the first one.
        const uintptr_t b = reinterpret_cast<uintptr_t>(buf);
        if (reg != nullptr && reg->exported && (b < reg->alloc_base || b + bytes > reg->alloc_base + reg->alloc_size)) {
            reg = nullptr;
        }
        // Another allocator's VMM memory may be remapped under a registration: described afresh every time.
        if (reg != nullptr && reg->foreign) reg = nullptr;
        if (reg != nullptr) {
            if (!reg->device) return;
            out->flags |= kDescDevice;
            if (!is_recv || !reg->exported || peer < 0) return;
            describe_export(peer, buf, *reg, out);
            return;
        }
        if (buf == nullptr || mem_type_of(buf) != MemType::Cuda) return;
        out->flags |= kDescDevice;
        if (!is_recv || peer < 0) return;
        Registration r;
        if (!export_buffer(buf, bytes, &r)) return;
        describe_export(peer, buf, r, out);
    }

    /* The export part of a receive buffer's descriptor; a VMM allocation's file descriptor goes to `peer`
     * first, and when it cannot the transfer is staged (no kDescIpc). */
    void describe_export(int peer, const void* buf, const Registration& r, P2pDescriptor* out) {
        if (r.vmm) {
            VmmRef ref;
            memcpy(&ref, r.handle, sizeof(ref));
            // Records of peers holding freed allocations are dropped now and then (ids are never reused).
            if (fds_.offers() > kMaxOffers) fds_.prune_offers([](uint64_t id) { return vmm::alive(id); });
            auto make = [&](FdChannel::FdSet* set) { return vmm::export_fds(ref.id, &set->fds, &set->values); };
            if (!fds_.offer_set(peer, ref.id, make)) return;
            out->flags |= kDescVmm;
        }
        static_assert(sizeof(r.handle) <= sizeof(out->handle), "IPC handle size");
        memcpy(out->handle, r.handle, sizeof(r.handle));
        out->offset = reinterpret_cast<uintptr_t>(buf) - uintptr_t(r.alloc_base);
        out->alloc_base = r.alloc_base;
        out->alloc_size = r.alloc_size;
        out->flags |= kDescIpc;
    }

    bool export_buffer(const void* buf, size_t bytes, Registration* r) override {
        if (!driver().ok) return false;
        vmm::Allocation a;
        auto as_vmm = [&](bool foreign) { // no CUDA IPC handle: file descriptors instead
            if (!fds_.is_open()) return false;
            VmmRef ref{kVmmMagic, foreign ? kVmmSpan : 0u, a.id, a.size};
            static_assert(sizeof(ref) <= sizeof(r->handle), "VMM reference size");
            memcpy(r->handle, &ref, sizeof(ref));
            r->vmm = true;
            r->foreign = foreign;
            r->alloc_base = uint64_t(a.base);
            r->alloc_size = a.size;
            return true;
        };
        if (vmm::find(buf, 1, &a)) return as_vmm(false); // vcclMemAlloc memory
        CUdeviceptr base = 0;
        size_t size = 0;
        if (driver().address_range(&base, &size, reinterpret_cast<CUdeviceptr>(buf)) != CUDA_SUCCESS) return false;
        cudaIpcMemHandle_t handle;
        if (cudaIpcGetMemHandle(&handle, reinterpret_cast<void*>(base)) != cudaSuccess) {
            cudaGetLastError();
            // Another allocator's VMM memory (PyTorch's expandable segments) when its allocations allow file
            // descriptors; anything else (stream-ordered pools, VMM without them) takes the staged path.
            return vmm::find_foreign(buf, bytes > 0 ? bytes : 1, &a) && as_vmm(true);
        }
        static_assert(sizeof(handle) <= sizeof(r->handle), "IPC handle size");
        memcpy(r->handle, &handle, sizeof(handle));
        r->alloc_base = uint64_t(base);
        r->alloc_size = size;
        return true;
    }

    vcclResult_t post_recv_ready(int peer, void* stream, uint32_t* seq) override {
        DeviceScope scope(device_);
        auto give_up = [&](vcclResult_t failed) {
            abandon_recv(peer);
            return failed;
        };
        if (fail_next_ == FailNext::RecvReady) {
            fail_next_ = FailNext::None;
            return give_up(set_last_error(vcclInternalError, "direct receive from rank %d failed (test hook)", peer));
        }
        uint32_t s = recv_seq_[peer] + 1;
        // Enqueued with the stream's next memory operation (issue_pending): one driver call for both.
        defer_write(static_cast<CUstream>(stream), flag_addr(peer, kReady, rank_), s, peer, false, kFail, 0);
        recv_seq_[peer] = s;
        *seq = s;
        return vcclSuccess;
    }

    vcclResult_t post_send(int peer, const void* buf, const P2pDescriptor& desc, void* stream, bool wait_ready) override {
        DeviceScope scope(device_);
        uint32_t s = send_seq_[peer] + 1;
        // Whatever failed, transfer s is given up: counted (as if its READY wait had been enqueued, the peer
        // has written that READY) and the peer told.
        auto give_up = [&](vcclResult_t failed) {
            send_seq_[peer] = s;
            notify_abandoned(peer, true, kDone, s, stream);
            return failed;
        };
        if (fail_next_ == FailNext::Send) {
            fail_next_ = FailNext::None;
            return give_up(set_last_error(vcclInternalError, "direct send to rank %d failed (test hook)", peer));
        }
        // Another communicator may close this mapping to open its own handle (ipc_handles.h): checked open under
        // UseLock, which keeps it so until the copy is enqueued. Closed between map() and the check, it is
        // opened again (map() drops closed mappings).
        void* base = nullptr;
        std::optional<ipc_handles::UseLock> in_use;
        for (int attempt = 0;; ++attempt) {
            ipc_handles::Ref ipc;
            vcclResult_t mapped = map(peer, desc, stream, &base, &ipc);
            if (mapped != vcclSuccess) return give_up(mapped);
            in_use.emplace();
            if (!ipc || ipc->open.load()) break;
            in_use.reset();
            if (attempt == 2) {
                return give_up(set_last_error(vcclInternalError, "rank %d's receive buffer was unmapped by another "
                                              "communicator of this process three times in a row", peer));
            }
        }
        CUstream cs = static_cast<CUstream>(stream);
        // Left out, READY s is still written by the peer and still counted here, so the next wait (for s + 1,
        // or later: the waits are "at least") pairs as before. This stream's pending writes (its own READYs)
        // then go with its next memory operation, after the copy: later, and a peer that does wait for one
        // still gets it (the copy waits for nothing), one driver call fewer.
        if (wait_ready) {
            CUresult res = issue_pending(cs, wait_op(flag_addr(rank_, kReady, peer), s));
            if (res != CUDA_SUCCESS) return give_up(cu_fail("cuStreamWaitValue32 (ready)", res));
            ready_waited_[peer] = s; // release_waits goes by these: a READY no wait needs is not waited for
        }
        send_seq_[peer] = s;
        cudaError_t err = cudaMemcpyAsync(static_cast<char*>(base) + desc.offset, buf, desc.bytes,
                                          cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream));
        if (err != cudaSuccess) return give_up(cuda_fail("cudaMemcpyAsync to a peer GPU", err));
        // The default write is ordered after the copy and fenced, so the receiver sees the data with DONE.
        // Enqueued with the stream's next memory operation, at the latest by flush().
        defer_write(cs, flag_addr(peer, kDone, rank_), s, peer, true, kDone, s);
        ++direct_sends_;
        return vcclSuccess;
    }
    uint64_t direct_sends() const override { return direct_sends_; }
    int note_words() const override { return notes_count_; }
    void note(int word, uint32_t value, void* stream) override {
        if (word < 0 || word >= notes_count_) return;
        defer_write(static_cast<CUstream>(stream), note_addr(word), value, -1, false, kFail, 0);
    }
    uint32_t note_value(int word) const override {
        if (word < 0 || word >= notes_count_) return 0;
        return __atomic_load_n(&notes_host_[word], __ATOMIC_ACQUIRE);
    }
    uint64_t block_reopens() const override { return block_reopens_; }
    uint64_t evictions() const override { return evictions_; }

    void abandon_send(int peer, void* stream) override { notify_abandoned(peer, true, kDone, ++send_seq_[peer], stream); }
    void abandon_recv(int peer) override {
        ++recv_seq_[peer]; // in step with the sender's count, though its READY never comes
        notify_abandoned(peer, false, kFail, 0);
    }
    int failed_peer() override { return or_ll_mismatch(read_fail_words(true, 100)); }
    int failed_peer_polled() override { return or_ll_mismatch(poll_fail_words()); }
    int failed_peer_now(int64_t wait_ms) override { return or_ll_mismatch(read_fail_words(false, wait_ms)); }
    void fail_state(int peer, uint64_t* clear_ns, bool* failed) const override {
        *clear_ns = 0;
        *failed = false;
        if (peer < 0 || peer >= nranks_ || fail_seen_ == nullptr) return;
        // A kernel that found the peer's header impossible wrote this before its stream wrote the note.
        *failed = fail_seen_[peer].load(std::memory_order_acquire) ||
                  (ll_control_ != nullptr && ll_control_[kLlMismatch] == peer + 1);
        *clear_ns = fail_clear_ns_[peer].load(std::memory_order_acquire);
    }
    int device() const override { return device_; }
    int release_flag_waits(int64_t wait_ms); // release_waits without the low-latency kernels

    vcclResult_t post_recv_wait(int peer, uint32_t seq, void* stream, int note_word, uint32_t note_value) override {
        DeviceScope scope(device_);
        CUstreamBatchMemOpParams ops[2] = {wait_op(flag_addr(rank_, kDone, peer), seq), {}};
        size_t count = 1;
        if (note_word >= 0 && note_word < notes_count_) ops[count++] = write_op(note_addr(note_word), note_value);
        CUresult res = issue_pending(static_cast<CUstream>(stream), ops, count);
        if (res != CUDA_SUCCESS) return cu_fail("cuStreamWaitValue32 (done)", res);
        done_waited_[peer] = seq;
        return vcclSuccess;
    }

    size_t ll_bytes() const override { return ll_active_ ? ll_message_bytes_ : 0; }
    bool chunked_possible() const override { return ll_active_ && chunk_layout_.slots >= 2; }

    void ll_next(LlArgs* a) override {
        uint64_t call = ++ll_calls_;
        // Sets alternate with every call; the number the words carry never repeats within two calls and is
        // never 0 (the words' initial value).
        size_t set = size_t(call & 1u);
        a->seq = ll_seq(call);
        a->nranks = nranks_;
        a->rank = rank_;
        a->control = ll_control_;
        a->max_blocks = sm_count_;
        // No rank sends words to itself: the first word of this rank's own sets counts its blocks.
        a->arrivals = reinterpret_cast<unsigned*>(ll_words(flags_, rank_, 0));
        for (int r = 0; r < nranks_ && r < kMaxLlRanks; ++r) {
            a->outbox[r] = r == rank_ ? nullptr : ll_words(peer_flags_[r], rank_, set);
            a->inbox[r] = r == rank_ ? nullptr : ll_words(flags_, r, set);
        }
        a->chunk_slots = chunk_layout_.slots;
        a->chunk_bytes = chunk_layout_.chunk_bytes;
        a->chunk_data_word = chunk_layout_.data_word;
    }

    void ll_launched(const LlArgs& a) override { ll_launched_seq_ = a.seq; }

    void ll_abandon(const LlArgs& a, void* stream) override {
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

    size_t fifo_bytes(int peer) const override {
        return peer >= 0 && size_t(peer) < fifo_ok_.size() && fifo_ok_[peer] ? fifo_slot_bytes_ : 0;
    }

    vcclResult_t post_fifo_send(int peer, const void* buf, size_t bytes, void* stream) override {
        DeviceScope scope(device_);
        const uint64_t n = fifo_sent_[peer] + 1;
        // Whatever failed, transfer n is given up: counted, FULL(n) published so the receiver goes on.
        auto give_up = [&](vcclResult_t failed) {
            fifo_sent_[peer] = n;
            notify_abandoned(peer, true, kFull, uint32_t(n), stream);
            return failed;
        };
        // Earlier READY/DONE writes of this stream first; if they cannot be enqueued the batch fails here.
        CUresult pending = issue_pending(static_cast<CUstream>(stream), nullptr);
        if (pending != CUDA_SUCCESS) return give_up(cu_fail("cuStreamWriteValue32 (ready/done)", pending));
        if (fail_next_ == FailNext::Send) {
            fail_next_ = FailNext::None;
            return give_up(set_last_error(vcclInternalError, "FIFO send to rank %d failed (test hook)", peer));
        }
        if (bytes > fifo_bytes(peer)) {
            return give_up(set_last_error(vcclInternalError, "FIFO send of %zu bytes to rank %d: slots hold %zu",
                                          bytes, peer, fifo_bytes(peer)));
        }
        CUstream cs = static_cast<CUstream>(stream);
        // Slot (m - 1) % slots is free once the receiver freed transfer m - slots. One wait covers a whole credit
        // batch (device/fifo_credits.h): each enqueued stream operation costs the host 1-2 us.
        if (uint64_t wait = credits_.wait_before(n)) {
            const uint32_t credit = uint32_t(wait);
            CUresult res = driver().wait_value(cs, flag_addr(rank_, kFree, peer), credit, CU_STREAM_WAIT_VALUE_GEQ);
            if (res != CUDA_SUCCESS) return give_up(cu_fail("cuStreamWaitValue32 (FIFO credit)", res));
            fifo_credit_waited_[peer] = credit;
        }
        cudaError_t err = cudaMemcpyAsync(slot(peer, rank_, n), buf, bytes, cudaMemcpyDeviceToDevice,
                                          static_cast<cudaStream_t>(stream));
        if (err != cudaSuccess) return give_up(cuda_fail("cudaMemcpyAsync into a peer's FIFO slot", err));
        // Ordered after the copy and fenced (default write): the receiver sees the data with FULL.
        CUresult res = driver().write_value(cs, flag_addr(peer, kFull, rank_), uint32_t(n), CU_STREAM_WRITE_VALUE_DEFAULT);
        if (res != CUDA_SUCCESS) return give_up(cu_fail("cuStreamWriteValue32 (FIFO full)", res));
        fifo_sent_[peer] = n;
        return vcclSuccess;
    }

    vcclResult_t post_fifo_recv(int peer, void* buf, size_t bytes, bool to_host, void* stream) override {
        DeviceScope scope(device_);
        CUresult pending = issue_pending(static_cast<CUstream>(stream), nullptr);
        if (pending != CUDA_SUCCESS) {
            abandon_fifo_recv(peer);
            return cu_fail("cuStreamWriteValue32 (ready/done)", pending);
        }
        const uint64_t n = fifo_recvd_[peer] + 1;
        if (fail_next_ == FailNext::RecvReady) {
            fail_next_ = FailNext::None;
            abandon_fifo_recv(peer);
            return set_last_error(vcclInternalError, "FIFO receive from rank %d failed (test hook)", peer);
        }
        CUstream cs = static_cast<CUstream>(stream);
        CUresult res = driver().wait_value(cs, flag_addr(rank_, kFull, peer), uint32_t(n), CU_STREAM_WAIT_VALUE_GEQ);
        if (res != CUDA_SUCCESS) {
            abandon_fifo_recv(peer);
            return cu_fail("cuStreamWaitValue32 (FIFO full)", res);
        }
        fifo_recvd_[peer] = n;
        fifo_full_waited_[peer] = uint32_t(n);
        if (buf != nullptr && bytes > 0) {
            cudaError_t err = cudaMemcpyAsync(buf, slot(rank_, peer, n), bytes, to_host ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice,
                                              static_cast<cudaStream_t>(stream));
            if (err != cudaSuccess) { // the slot stays taken: the sender stalls when its credits are spent
                notify_abandoned(peer, false, kFail, 0);
                return cuda_fail("cudaMemcpyAsync from a FIFO slot", err);
            }
        }
        if (!credits_.free_after(n)) return vcclSuccess; // freed with the batch's last transfer
        res = driver().write_value(cs, flag_addr(peer, kFree, rank_), uint32_t(n), CU_STREAM_WRITE_VALUE_DEFAULT);
        if (res != CUDA_SUCCESS) {
            notify_abandoned(peer, false, kFail, 0);
            return cu_fail("cuStreamWriteValue32 (FIFO free)", res);
        }
        return vcclSuccess;
    }

    void abandon_fifo_send(int peer, void* stream) override {
        notify_abandoned(peer, true, kFull, uint32_t(++fifo_sent_[peer]), stream);
    }
    void abandon_fifo_recv(int peer) override {
        ++fifo_recvd_[peer];
        notify_abandoned(peer, false, kFail, 0);
    }
    void report_failure(int peer) override { tell_failed(peer, kFail, 0); }

    int release_waits(int64_t wait_ms) override;
    void test_fail_next(bool send) override { fail_next_ = send ? FailNext::Send : FailNext::RecvReady; }

private:
    /* FULL[s]: written by FIFO sender s into its receiver's flags; FREE[r]: by FIFO receiver r into its
     * sender's flags. */
    enum Region { kReady = 0, kDone = 1, kFail = 2, kFull = 3, kFree = 4 };
    static constexpr size_t kRegions = 5;
    static constexpr int64_t kMaxMappingsLimit = 65536;
    /* A VMM buffer's file descriptor is in this rank's socket queue before its descriptor message arrives;
     * the wait only covers a scheduling hiccup. */
    static constexpr int kFdWaitMs = 1000;
    static constexpr size_t kMaxOffers = 1024;
    static constexpr size_t kMaxFifoSlotBytes = 4u << 20;
    static constexpr int64_t kMaxFifoSlots = 64;
    static constexpr size_t kIpcBlock = size_t(2) << 20; // granularity of CUDA IPC mappings of cudaMalloc memory

    struct Mapping {
        char handle[64];
        void* ptr;
        uint64_t last_use;
        uint64_t alloc_base; // in the exporting process
        uint64_t alloc_size;
        size_t vmm_size;     // a VMM allocation's mapping (vmm::unmap); 0: a CUDA IPC mapping
        ipc_handles::Ref ipc; // the CUDA IPC mapping, shared with the process's other communicators
    };
    static void unmap(const Mapping& m) {
        if (m.vmm_size > 0) {
            vmm::unmap(m.ptr, m.vmm_size);
        } else {
            ipc_handles::release(m.ipc);
        }
    }
    /* A CUDA IPC mapping closed to make room for another communicator's handle (ipc_handles.h). */
    static bool closed_elsewhere(const Mapping& m) { return m.vmm_size == 0 && m.ipc && !m.ipc->open.load(); }
    /* VMM mappings let go of while copies into them may still be queued: cuMemUnmap does not wait for them
     * (cudaIpcCloseMemHandle does). Such a mapping waits in retiring_ until the batch ends (flush), when an
     * event is recorded on every stream of the batch; it is unmapped once those have completed (reap_retired,
     * at the next map and at destroy). That covers its copies: those of this batch are on its streams, and
     * earlier calls' work is ordered before them (StreamOrder). Streams of earlier calls are not used: the
     * caller may have destroyed them. */
    struct View {
        void* ptr;
        size_t size;
    };
    struct Retired { // the views dropped in one batch, and an event per stream of that batch
        std::vector<View> views;
        std::vector<cudaEvent_t> events;
    };
    std::vector<View> retiring_;       // dropped in the current batch
    std::vector<Retired> retired_;     // waiting for their events
    std::vector<void*> batch_streams_; // streams that direct copies were enqueued on since the last flush
    void retire_batch() {
        std::vector<void*> streams;
        streams.swap(batch_streams_);
        if (retiring_.empty()) return;
        Retired r;
        r.views.swap(retiring_);
        for (void* st : streams) {
            cudaEvent_t ev = nullptr;
            if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess ||
                cudaEventRecord(ev, static_cast<cudaStream_t>(st)) != cudaSuccess) {
                cudaGetLastError();
                if (ev != nullptr) cudaEventDestroy(ev);
                // No knowing when the copies are done: the views stay mapped for good.
                for (cudaEvent_t e : r.events) cudaEventDestroy(e);
                for (const View& v : r.views) {
                    VCCL_WARN(kLogDevice, "rank %d: cannot order the release of a peer's VMM buffer after its "
                              "copies; it stays mapped (%zu bytes)", rank_, v.size);
                }
                return;
            }
            r.events.push_back(ev);
        }
        retired_.push_back(std::move(r));
    }
    void reap_retired() {
        for (size_t i = 0; i < retired_.size();) {
            bool done = true;
            for (cudaEvent_t ev : retired_[i].events) {
                cudaError_t q = cudaEventQuery(ev);
                if (q == cudaErrorNotReady) done = false;
                else if (q != cudaSuccess) cudaGetLastError(); // a failed device: nothing will run any more
            }
            if (!done) {
                ++i;
                continue;
            }
            for (const View& v : retired_[i].views) vmm::unmap(v.ptr, v.size);
            for (cudaEvent_t ev : retired_[i].events) cudaEventDestroy(ev);
            retired_.erase(retired_.begin() + long(i));
        }
    }
    /* Lets go of a mapping of `peer`'s memory; a VMM one's exporter is told, so it sends the descriptors
     * again if the buffer is used again. */
    void drop(int peer, const Mapping& m) {
        if (m.vmm_size == 0) {
            unmap(m);
        } else {
            retiring_.push_back(View{m.ptr, m.vmm_size});
            VmmRef ref;
            memcpy(&ref, m.handle, sizeof(ref));
            fds_.forget(peer, ref.id);
        }
    }

    /* Address of flag `index` in `region` of `owner`'s flag buffer (as mapped here). READY[r] is written by
     * receiver r into its sender's flags; DONE[s] by sender s into its receiver's flags. */
    CUdeviceptr flag_addr(int owner, Region region, int index) const {
        return reinterpret_cast<CUdeviceptr>(peer_flags_[owner] + size_t(region) * nranks_ + index);
    }

    /* Unmaps and forgets every mapping of `peer`'s memory that `pred` selects. */
    template <typename Pred> void close_mappings_if(int peer, Pred pred) {
        std::vector<Mapping>& list = mappings_[peer];
        for (size_t i = 0; i < list.size();) {
            if (pred(list[i])) {
                drop(peer, list[i]);
                list.erase(list.begin() + long(i));
            } else {
                ++i;
            }
        }
    }

    /* Slot of FIFO transfer n from `sender` in `owner`'s buffer (as mapped here). */
    void* slot(int owner, int sender, uint64_t n) const {
        size_t index = size_t(local_index_[sender]) * fifo_slots_ + size_t((n - 1) % fifo_slots_);
        return reinterpret_cast<char*>(peer_flags_[owner]) + slots_offset_ + index * fifo_slot_stride_;
    }

    /* The receiver's buffer allocation mapped into this process, opened once and kept (bounded). *ipc: its
     * CUDA IPC mapping, which the caller checks is still open under ipc_handles::UseLock (empty for VMM memory
     * and for the rank itself). */
    vcclResult_t map(int peer, const P2pDescriptor& desc, void* stream, void** base, ipc_handles::Ref* ipc) {
        auto& list = mappings_[peer];
        ++clock_;
        if (!retired_.empty()) reap_retired();
        if (std::find(batch_streams_.begin(), batch_streams_.end(), stream) == batch_streams_.end()) {
            batch_streams_.push_back(stream);
        }
        if (peer == rank_) {
            // A transfer to itself: the buffer is in this process already. CUDA refuses to open a handle in the
            // process that exported it, so mapping it failed, the send gave up, and the communicator was left
            // failed by its own FAIL flag (alltoall loops over send/recv include the rank itself).
            *base = reinterpret_cast<void*>(uintptr_t(desc.alloc_base));
            return vcclSuccess;
        }
        for (size_t i = 0; i < list.size(); ++i) {
            Mapping& m = list[i];
            if (memcmp(m.handle, desc.handle, sizeof(m.handle)) != 0) continue;
            if (closed_elsewhere(m)) { // opened again below
                drop(peer, m);
                list.erase(list.begin() + long(i));
                break;
            }
            m.last_use = clock_;
            *base = m.ptr;
            *ipc = m.ipc;
            return vcclSuccess;
        }
        // The peer freed an allocation and made a new one over its range: the old mapping is stale (its
        // last transfer completed before the peer could free it), and CUDA refuses to map the range twice.
        // Not so for spans of another allocator's VMM memory: two live receive buffers of one segment may
        // share an allocation, and their views coexist (a remapped span comes with a new id, and its stale
        // view goes by least recent use).
        const bool span = is_span(desc.handle, desc.flags);
        close_mappings_if(peer, [&](const Mapping& m) {
            return !span && !is_span(m.handle, m.vmm_size > 0 ? kDescVmm : 0u) &&
                   m.alloc_base < desc.alloc_base + desc.alloc_size && desc.alloc_base < m.alloc_base + m.alloc_size;
        });
        if (list.size() >= max_mappings_) { // forget the least recently used buffer
            if (evictions_++ == 0) {
                VCCL_WARN(kLogDevice, "rank %d: more than %zu receive buffers of rank %d are mapped "
                          "(VCCL_P2P_MAX_MAPPINGS); each further one lets the least recently used mapping go, "
                          "which waits for the whole GPU", rank_, max_mappings_, peer);
            }
            size_t oldest = 0;
            for (size_t i = 1; i < list.size(); ++i) {
                if (list[i].last_use < list[oldest].last_use) oldest = i;
            }
            drop(peer, list[oldest]);
            list.erase(list.begin() + long(oldest));
        }
        void* ptr = nullptr;
        if (desc.flags & kDescVmm) {
            // Its file descriptors came over the descriptor socket before this descriptor (FdChannel::offer_set).
            VmmRef ref;
            memcpy(&ref, desc.handle, sizeof(ref));
            if (ref.magic != kVmmMagic || ref.size == 0) {
                return set_last_error(vcclInternalError, "rank %d described a VMM buffer wrongly", peer);
            }
            std::string why;
            FdChannel::FdSet set;
            if (!fds_.take_set(peer, ref.id, kFdWaitMs, &set, &why)) {
                fds_.forget(peer, ref.id); // so that the next transfer into that buffer brings it again
                return set_last_error(vcclSystemError, "cannot map rank %d's receive buffer (VMM memory): %s",
                                      peer, why.c_str());
            }
            uint64_t total = 0;
            for (uint64_t v : set.values) total += v;
            if (total != ref.size) {
                set.close_all();
                fds_.forget(peer, ref.id);
                return set_last_error(vcclInternalError, "rank %d's VMM buffer descriptors map %llu bytes, not %llu",
                                      peer, (unsigned long long)total, (unsigned long long)ref.size);
            }
            vcclResult_t imported = vmm::import(set.fds, set.values, device_, &ptr); // closes the descriptors
            if (imported != vcclSuccess) {
                fds_.forget(peer, ref.id);
                return imported;
            }
            remember(list, desc, ptr, size_t(ref.size), nullptr);
            *base = ptr;
            return vcclSuccess;
        }
        // Small cudaMalloc allocations share 2 MiB blocks, and CUDA maps an exported block only once per process:
        // the process-wide table closes the mappings of other allocations in the same blocks, of every
        // communicator, when CUDA refuses (counted: each close waits for the device; on the H100 with CUDA 13
        // this did not happen within one communicator, see GpuP2p.SmallBuffersOfOneBlockAreMappedOnce).
        ipc_handles::Ref opened;
        bool made_room = false;
        int err = ipc_handles::acquire(exporters_[peer], device_, desc.handle, desc.alloc_base, desc.alloc_size,
                                       &opened, &made_room);
        if (made_room) {
            ++block_reopens_;
            close_mappings_if(peer, closed_elsewhere);
        }
        if (err != 0) return cuda_fail("cudaIpcOpenMemHandle of a peer's receive buffer", cudaError_t(err));
        remember(list, desc, opened->ptr, 0, opened);
        *base = opened->ptr;
        *ipc = opened;
        return vcclSuccess;
    }
    /* Whether a descriptor's handle (flags: its kDesc* bits) names a span of another allocator's VMM memory. */
    static bool is_span(const char* handle, uint32_t flags) {
        if (!(flags & kDescVmm)) return false;
        VmmRef ref;
        memcpy(&ref, handle, sizeof(ref));
        return (ref.flags & kVmmSpan) != 0;
    }
    void remember(std::vector<Mapping>& list, const P2pDescriptor& desc, void* ptr, size_t vmm_size,
                  ipc_handles::Ref ipc) {
        Mapping m;
        memcpy(m.handle, desc.handle, sizeof(m.handle));
        m.ptr = ptr;
        m.last_use = clock_;
        m.alloc_base = desc.alloc_base;
        m.alloc_size = desc.alloc_size;
        m.vmm_size = vmm_size;
        m.ipc = std::move(ipc);
        list.push_back(m);
    }

    int rank_ = 0;
    int nranks_ = 0;
    /* Flag writes of the direct path wait here for the stream's next memory operation, so that each pair
     * costs one driver call (about 1.8 us against 3 for two on the H100 host). A write that cannot be
     * enqueued gives its transfer up as the immediate write did (notify_abandoned with `release`). */
    struct PendingWrite {
        CUstream stream;
        CUdeviceptr addr;
        uint32_t value;
        int peer;
        bool send;
        Region release;
        uint32_t release_seq;
    };
    std::vector<PendingWrite> pending_;
    void defer_write(CUstream stream, CUdeviceptr addr, uint32_t value, int peer, bool send, Region release,
                     uint32_t release_seq) {
        pending_.push_back(PendingWrite{stream, addr, value, peer, send, release, release_seq});
    }
    static CUstreamBatchMemOpParams wait_op(CUdeviceptr addr, uint32_t value) {
        CUstreamBatchMemOpParams p;
        memset(&p, 0, sizeof(p));
        p.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
        p.waitValue.address = addr;
        p.waitValue.value = value;
        p.waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
        return p;
    }
    static CUstreamBatchMemOpParams write_op(CUdeviceptr addr, uint32_t value) {
        CUstreamBatchMemOpParams p;
        memset(&p, 0, sizeof(p));
        p.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
        p.writeValue.address = addr;
        p.writeValue.value = value;
        p.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
        return p;
    }
    CUresult issue_pending(CUstream stream, const CUstreamBatchMemOpParams& op) { return issue_pending(stream, &op, 1); }
    CUresult issue_pending(CUstream stream, std::nullptr_t) { return issue_pending(stream, nullptr, 0); }
    /* Enqueues the pending writes of `stream` and then ops[0..count) on it. */
    CUresult issue_pending(CUstream stream, const CUstreamBatchMemOpParams* ops, size_t count);
    /* Telemetry's note words (note()): pinned host memory the streams write through its device address. */
    uint32_t* notes_host_ = nullptr;
    CUdeviceptr notes_dev_ = 0;
    int notes_count_ = 0;
    CUdeviceptr note_addr(int word) const { return notes_dev_ + CUdeviceptr(word) * sizeof(uint32_t); }

public:
    vcclResult_t flush() override {
        DeviceScope scope(device_);
        CUresult res = CUDA_SUCCESS;
        while (!pending_.empty()) {
            CUresult r = issue_pending(pending_.front().stream, nullptr);
            if (res == CUDA_SUCCESS) res = r;
        }
        retire_batch(); // after the batch's last copies and flag writes
        return res == CUDA_SUCCESS ? vcclSuccess : cu_fail("cuStreamWriteValue32 (ready/done)", res);
    }

private:
    int device_ = -1;
    uint32_t* flags_ = nullptr;            // this rank's flags: READY[nranks], DONE[nranks], FAIL[nranks]
    std::vector<uint32_t*> peer_flags_;    // every reachable rank's flags mapped here (own at rank_)
    std::vector<bool> reach_;
    bool everyone_reachable_ = false;
    std::vector<uint32_t> send_seq_, recv_seq_; // direct sends per peer (their READY numbers); READY writes per peer
    std::vector<uint32_t> ready_waited_;        // the last READY wait enqueued per peer (some sends enqueue none)
    std::vector<uint32_t> done_waited_;         // the last DONE wait enqueued per peer
    // Staging FIFO: geometry (equal on every rank it is used with), where the slots start in a rank's
    // buffer, each rank's index among the ranks of its host (its slots' row), and per peer the transfers
    // sent and received and the last FREE (credit) and FULL waits enqueued.
    size_t fifo_slots_ = 0, fifo_slot_bytes_ = 0, fifo_slot_stride_ = 0, slots_offset_ = 0;
    // Low-latency collectives: words per (sender, set) and where they start in a rank's buffer; whether every
    // rank can take part; calls made; the control words the kernel shares with the host (abort, mismatch).
    size_t ll_bytes_ = 0, ll_message_bytes_ = 0, ll_set_words_ = 0, ll_offset_ = 0;
    ChunkLayout chunk_layout_; // the chunked collectives' view of a set (from ll_set_words_)
    bool ll_active_ = false;
    uint64_t ll_calls_ = 0;
    uint32_t ll_launched_seq_ = 0; // number of the last call whose kernel was enqueued (0: none)
    int sm_count_ = 1;             // the GPU's multiprocessors: the most blocks a low-latency kernel takes
    volatile int* ll_control_ = nullptr;
    /* The words `sender` writes for set `set` in the buffer of its receiver at `base` (as mapped here). */
    uint64_t* ll_words(uint32_t* base, int sender, size_t set) const {
        return reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(base) + ll_offset_) +
               (size_t(sender) * 2 + set) * ll_set_words_;
    }
    FifoCredits credits_; // when to wait for and publish FREE (device/fifo_credits.h)
    std::vector<int> local_index_;
    std::vector<bool> fifo_ok_;
    std::vector<uint64_t> fifo_sent_, fifo_recvd_;
    std::vector<uint32_t> fifo_credit_waited_, fifo_full_waited_;
    std::vector<std::vector<Mapping>> mappings_;
    std::vector<ipc_handles::Exporter> exporters_; // per rank: the process its handles come from
    uint64_t clock_ = 0;
    FdChannel fds_;               // VMM buffers' file descriptors to and from the ranks of this host
    uint64_t direct_sends_ = 0;
    uint64_t block_reopens_ = 0;
    size_t max_mappings_ = 64;    // VCCL_P2P_MAX_MAPPINGS
    uint64_t evictions_ = 0;      // mappings let go to make room (a CUDA IPC one waited for the device)
    static constexpr int kPrivateStreams = 4;
    static constexpr int64_t kReadyGraceMs = 500; // release_waits: how long a peer may still post its READY
    /* Reading and releasing this rank's own flags: several streams, since one of them may share a hardware
     * queue with a blocked stream (CUDA_DEVICE_MAX_CONNECTIONS) and stay stuck behind it. Made on first use;
     * flags_mutex_ guards them and flags_host_ (failed_peer runs on any thread). */
    std::mutex flags_mutex_;
    cudaStream_t private_streams_[kPrivateStreams] = {};
    uint32_t* flags_host_ = nullptr; // pinned: one copy of flags_ per private stream (pageable would block)
    cudaStream_t notify_stream_ = nullptr; // notify_abandoned's and ll_abandon's, made on first use
    /* notify_stream_ (made now if needed), or nullptr when it cannot be made. */
    CUstream notify_stream() {
        if (notify_stream_ == nullptr && cudaStreamCreateWithFlags(&notify_stream_, cudaStreamNonBlocking) != cudaSuccess) {
            cudaGetLastError();
            notify_stream_ = nullptr;
        }
        return reinterpret_cast<CUstream>(notify_stream_);
    }
    uint64_t last_fail_check_ns_ = 0;
    /* failed_peer_polled: a read of the FAIL words on one of the private streams (into its part of
     * flags_host_), looked at by a later call; flags_mutex_ guards all but the time of the next poll. A read
     * stuck behind a blocked stream (a shared hardware queue) is left, and the next goes on another stream. */
    static constexpr uint64_t kFailPollNs = 10000000; // 10 ms
    std::atomic<uint64_t> next_fail_poll_ns_{0};
    int fail_poll_stream_ = -1;       // private stream of the read in flight; -1: none
    uint64_t fail_poll_started_ns_ = 0;
    uint32_t abandoned_ = 0;         // transfers this rank gave up (the value written into peers' FAIL)
    /* fail_state, per peer (sized by init): when the latest landed read that found the peer's FAIL word unwritten
     * started, and whether a read found it written. Written under flags_mutex_. */
    std::unique_ptr<std::atomic<uint64_t>[]> fail_clear_ns_;
    std::unique_ptr<std::atomic<bool>[]> fail_seen_;
    /* failed_peer() (`throttled`: at most one read per millisecond) and failed_peer_now(), without the low-latency
     * kernels' reports: the FAIL words are still read after one, so that fail_state goes on vouching for the
     * other peers' transfers (comm/device_flows.h). */
    int read_fail_words(bool throttled, int64_t wait_ms);
    int poll_fail_words(); // failed_peer_polled() likewise
    /* A peer a low-latency kernel found mismatched (it takes precedence), else `who`. */
    int or_ll_mismatch(int who) const {
        return ll_control_ != nullptr && ll_control_[kLlMismatch] != 0 ? ll_control_[kLlMismatch] - 1 : who;
    }
    /* A read of the FAIL words (nranks_ of them) that started at `started_ns` has landed: records what it says
     * (fail_state); returns the first peer whose word was written, or -1. Under flags_mutex_. */
    int fail_words_landed(const uint32_t* fail, uint64_t started_ns);
    /* This rank gave up a transfer with `peer` after the descriptors were exchanged: FAIL[rank_] in the
     * peer's flags says so (its vcclCommGetAsyncError reports it), and for a send DONE(seq) or FULL(seq)
     * (`release`; kFail: nothing) lets the peer's receiving stream go on, with data that is not valid,
     * instead of waiting for ever. A receive's READY or FREE is not faked: that would let the peer's copy
     * land in memory the caller was told failed. The release goes on `stream` after this rank's earlier work
     * there (pending writes first), so the peer's waits pass in order and only after the data of earlier
     * transfers landed; on a private stream when there is none or it refuses (the caller's may be what failed),
     * as before: prompt, but not ordered. */
    void notify_abandoned(int peer, bool send, Region release, uint32_t seq, void* stream = nullptr);
    /* Writes FAIL (and `release` = seq unless kFail) into the peer's flags; false when it could not. */
    bool tell_failed(int peer, Region release, uint32_t seq, void* stream = nullptr);
    bool stream_blocked_ = false;    // release_waits could not release a wait: keep everything allocated
    enum class FailNext { None, Send, RecvReady };
    FailNext fail_next_ = FailNext::None; // test hook

    /* This rank's flag (region, p) as it should end: the last value a wait was enqueued for. */
    uint32_t expected(Region region, int peer) const {
        switch (region) {
        case kReady: return ready_waited_[peer];
        case kDone: return done_waited_[peer];
        case kFull: return fifo_full_waited_[peer];
        case kFree: return fifo_credit_waited_[peer];
        default: return 0;
        }
    }
    /* Releasing a wait on this region lets this rank's copy land in a peer's memory early (grace period). */
    static bool lets_copy_go(Region region) { return region == kReady || region == kFree; }
    /* Creates the private streams not made yet; false when there is none. */
    bool private_streams();
    /* Reads flags_ on every idle private stream (each into its own copy) and returns the first copy that
     * lands, or nullptr on an error or at `deadline_ns`. A stream still busy with an earlier read (stuck
     * behind a blocked stream) is left alone. */
    const uint32_t* read_flags(uint64_t deadline_ns);
    /* Flags (region, peer) whose waits are not satisfied in `flags`. */
    std::vector<std::pair<Region, int>> unsatisfied(const uint32_t* flags) const;
};

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

std::vector<std::pair<CudaIpcP2p::Region, int>> CudaIpcP2p::unsatisfied(const uint32_t* flags) const {
    std::vector<std::pair<Region, int>> out;
    for (int p = 0; p < nranks_; ++p) {
        for (Region region : {kReady, kDone, kFull, kFree}) {
            // The waits compare cyclically (CU_STREAM_WAIT_VALUE_GEQ): so does this.
            uint32_t have = flags[size_t(region) * size_t(nranks_) + size_t(p)];
            if (int32_t(have - expected(region, p)) < 0) out.emplace_back(region, p);
        }
    }
    return out;
}

int CudaIpcP2p::release_waits(int64_t wait_ms) {
    flush();
    const uint64_t until = now_ns() + uint64_t(wait_ms) * 1000000ull;
    int released = release_flag_waits(wait_ms);
    if (ll_control_ != nullptr) {
        // A low-latency kernel still waiting for a peer gets what is left of the same time (at least
        // 100 ms: it may have been queued behind a wait released just now), then sees the abort flag within
        // microseconds (its output is then not valid).
        const uint64_t ll_until = std::max<uint64_t>(until, now_ns() + 100000000ull);
        // The last call whose kernel runs: a later number given up on the host never writes kLlDone.
        while (ll_launched_seq_ != 0 && uint32_t(ll_control_[kLlDone]) != ll_launched_seq_ && now_ns() < ll_until &&
               wait_ms > 0) {
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
        ll_control_[kLlAbort] = 1;
    }
    return released;
}

int CudaIpcP2p::release_flag_waits(int64_t wait_ms) {
    if (flags_ == nullptr || flags_host_ == nullptr) return 0;
    std::lock_guard<std::mutex> lock(flags_mutex_);
    DeviceScope scope(device_);
    if (!private_streams()) {
        stream_blocked_ = true; // cannot check: assume the worst rather than hang in cudaFree
        VCCL_WARN(kLogDevice, "rank %d: no stream to check pending device transfers at destroy; flags left allocated",
                  rank_);
        return -1;
    }
    // DONE and FULL waits are released at once on abort (wait_ms 0): releasing only lets this rank's own
    // stream go on. Releasing a READY or FREE wait lets this rank's copy land in the peer's memory before the
    // peer said it may, so the peer gets a grace period even on abort.
    const uint64_t start = now_ns();
    const uint64_t done_until = start + uint64_t(wait_ms) * 1000000ull;
    const uint64_t ready_until = start + uint64_t(wait_ms > kReadyGraceMs ? wait_ms : kReadyGraceMs) * 1000000ull;
    std::vector<std::pair<Region, int>> left;
    for (;;) {
        const uint32_t* flags = read_flags(now_ns() + 1000000000ull);
        if (flags == nullptr) { // an error, or the reads are stuck: check nothing more, release everything
            left.clear();
            for (int p = 0; p < nranks_; ++p) left.insert(left.end(), {{kReady, p}, {kDone, p}, {kFull, p}, {kFree, p}});
            break;
        }
        left = unsatisfied(flags);
        uint64_t now = now_ns();
        bool ready_left = false, done_left = false;
        for (const auto& f : left) (lets_copy_go(f.first) ? ready_left : done_left) = true;
        if ((!ready_left || now >= ready_until) && (!done_left || now >= done_until)) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (left.empty()) return 0;
    int written = 0;
    for (cudaStream_t st : private_streams_) { // the same writes on every stream: one of them is not stuck
        if (st == nullptr) continue;
        for (const auto& f : left) {
            if (driver().write_value(static_cast<CUstream>(st), flag_addr(rank_, f.first, f.second),
                                     expected(f.first, f.second), CU_STREAM_WRITE_VALUE_DEFAULT) == CUDA_SUCCESS) {
                ++written;
            }
        }
    }
    const uint32_t* after = read_flags(now_ns() + 1000000000ull);
    bool landed = after != nullptr && unsatisfied(after).empty();
    stream_blocked_ = !landed;
    VCCL_WARN(kLogDevice, "rank %d: %zu wait(s) of direct device transfers were still pending at %s; %s (the data of "
              "those transfers is not valid; a released send may still land in the peer's buffer)", rank_, left.size(),
              wait_ms > 0 ? "destroy" : "abort",
              landed ? "released them" : "could not release them within 1 s: flags and mappings stay allocated");
    return written;
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

CUresult CudaIpcP2p::issue_pending(CUstream stream, const CUstreamBatchMemOpParams* after, size_t after_count) {
    std::vector<CUstreamBatchMemOpParams> ops;
    std::vector<PendingWrite> mine;
    for (size_t i = 0; i < pending_.size();) {
        if (pending_[i].stream != stream) {
            ++i;
            continue;
        }
        const PendingWrite& w = pending_[i];
        ops.push_back(write_op(w.addr, w.value));
        mine.push_back(w);
        pending_.erase(pending_.begin() + long(i));
    }
    for (size_t k = 0; k < after_count; ++k) ops.push_back(after[k]);
    CUresult res = CUDA_SUCCESS;
    constexpr size_t kMaxBatch = 256; // the driver's limit per call
    for (size_t i = 0; i < ops.size() && res == CUDA_SUCCESS; i += kMaxBatch) {
        size_t count = std::min(kMaxBatch, ops.size() - i);
        if (driver().batch_mem_op != nullptr) {
            res = driver().batch_mem_op(stream, unsigned(count), &ops[i], 0);
        } else {
            for (size_t k = i; k < i + count && res == CUDA_SUCCESS; ++k) {
                const CUstreamBatchMemOpParams& p = ops[k];
                res = p.operation == CU_STREAM_MEM_OP_WAIT_VALUE_32
                          ? driver().wait_value(stream, p.waitValue.address, p.waitValue.value, p.waitValue.flags)
                          : driver().write_value(stream, p.writeValue.address, p.writeValue.value, p.writeValue.flags);
            }
        }
    }
    if (res != CUDA_SUCCESS) {
        // Some or all of these writes are not enqueued: their peers are told, as an immediate write's failure
        // would have told them.
        for (const PendingWrite& w : mine) {
            if (w.peer >= 0) notify_abandoned(w.peer, w.send, w.release, w.release_seq); // peer -1: a note
        }
    }
    return res;
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

vcclResult_t CudaIpcP2p::init(Bootstrap* bootstrap, const std::vector<uint64_t>& host_ids) {
    rank_ = bootstrap->rank();
    nranks_ = bootstrap->nranks();
    fail_clear_ns_.reset(new std::atomic<uint64_t>[size_t(nranks_)]);
    fail_seen_.reset(new std::atomic<bool>[size_t(nranks_)]);
    for (int p = 0; p < nranks_; ++p) {
        fail_clear_ns_[size_t(p)].store(0);
        fail_seen_[size_t(p)].store(false);
    }
    peer_flags_.assign(nranks_, nullptr);
    reach_.assign(nranks_, false);
    send_seq_.assign(nranks_, 0);
    ready_waited_.assign(nranks_, 0);
    recv_seq_.assign(nranks_, 0);
    done_waited_.assign(nranks_, 0);
    mappings_.resize(nranks_);
    fifo_ok_.assign(nranks_, false);
    fifo_sent_.assign(nranks_, 0);
    fifo_recvd_.assign(nranks_, 0);
    fifo_credit_waited_.assign(nranks_, 0);
    fifo_full_waited_.assign(nranks_, 0);

    // Staging FIFO geometry: one row of slots per rank of this host (by its index among them).
    local_index_.assign(nranks_, 0);
    size_t nlocal = 0;
    for (int r = 0; r < nranks_; ++r) {
        int index = 0;
        for (int q = 0; q < r; ++q) index += !host_ids.empty() && host_ids[q] == host_ids[r] ? 1 : 0;
        local_index_[r] = index;
        nlocal += host_ids.empty() || host_ids[r] == host_ids[rank_] ? 1 : 0;
    }
    int64_t max_mappings = env::get_int(env::kP2pMaxMappings);
    if (max_mappings < 1 || max_mappings > kMaxMappingsLimit) {
        VCCL_WARN(kLogDevice, "VCCL_P2P_MAX_MAPPINGS=%lld out of range (1-%lld): %zu", (long long)max_mappings,
                  (long long)kMaxMappingsLimit, max_mappings_);
    } else {
        max_mappings_ = size_t(max_mappings);
    }
    fifo_slot_bytes_ = size_t(env::get_size(env::kP2pFifoBytes));
    int64_t slots = env::get_int(env::kP2pFifoSlots);
    if (fifo_slot_bytes_ > kMaxFifoSlotBytes || slots < 0 || slots > kMaxFifoSlots) {
        VCCL_WARN(kLogDevice, "VCCL_P2P_FIFO_BYTES=%zu / VCCL_P2P_FIFO_SLOTS=%lld out of range (at most %zu bytes and "
                  "%lld slots): staging FIFO off", fifo_slot_bytes_, (long long)slots, kMaxFifoSlotBytes,
                  (long long)kMaxFifoSlots);
        slots = 0;
    }
    fifo_slots_ = fifo_slot_bytes_ > 0 ? size_t(slots) : 0;
    if (fifo_slots_ == 0) fifo_slot_bytes_ = 0;
    fifo_slot_stride_ = (fifo_slot_bytes_ + 255) / 256 * 256;
    credits_ = FifoCredits::for_slots(fifo_slots_);
    const size_t flag_bytes = kRegions * sizeof(uint32_t) * size_t(nranks_);
    slots_offset_ = (flag_bytes + 4095) / 4096 * 4096;
    const size_t fifo_total = nlocal * fifo_slots_ * fifo_slot_stride_;
    ll_bytes_ = size_t(env::get_size(env::kAllreduceLlBytes));
    // On by default: where it cannot be used, only a value the user set is worth a warning.
    const LogLevel ll_level = env::is_set(env::kAllreduceLlBytes) ? LogLevel::Warn : LogLevel::Info;
    if (ll_bytes_ > kMaxLlBytes || nranks_ > kMaxLlRanks) {
        VCCL_LOG(ll_level, kLogDevice, "VCCL_ALLREDUCE_LL_BYTES=%zu with %d ranks: the low-latency collectives take "
                    "at most %zu bytes and %d ranks; off", ll_bytes_, nranks_, kMaxLlBytes, kMaxLlRanks);
        ll_bytes_ = 0;
    }
    // The largest message: what a rank stores into its peers (message x (n - 1)) stays within the setting.
    ll_message_bytes_ = nranks_ > 1 ? ll_bytes_ / size_t(nranks_ - 1) / 8 * 8 : ll_bytes_;
    if (ll_bytes_ > 0 && ll_message_bytes_ < 8) ll_bytes_ = ll_message_bytes_ = 0;
    // A header word and a spare one, then 4 data bytes per word; sets 256-byte aligned.
    ll_set_words_ = ll_bytes_ > 0 ? (kLlDataWord + (ll_message_bytes_ + 7) / 8 * 2 + 31) / 32 * 32 : 0;
    ll_offset_ = (slots_offset_ + fifo_total + 4095) / 4096 * 4096;
    chunk_layout_ = chunk_layout(ll_set_words_);
    const size_t ll_total = size_t(nranks_) * 2 * ll_set_words_ * sizeof(uint64_t);

    // Every rank takes part in both exchanges below, whatever it could set up: they are collective.
    std::vector<PeerInfo> infos(nranks_);
    PeerInfo& mine = infos[rank_];
    memset(&mine, 0, sizeof(mine));
    mine.pid = int64_t(getpid());
    // Whole 2 MiB blocks: CUDA shares a block among small cudaMalloc allocations and maps an exported block
    // only once per process, so flags in a block shared with another communicator's flags (or with a receive
    // buffer) could not be mapped by a peer that mapped the other one: that communicator would silently lose
    // the direct path.
    auto whole_blocks = [](size_t bytes) { return (bytes + kIpcBlock - 1) / kIpcBlock * kIpcBlock; };
    bool allocated = false;
    if (driver().ok && cudaGetDevice(&device_) == cudaSuccess) {
        if (cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device_) != cudaSuccess || sm_count_ < 1) {
            cudaGetLastError();
            sm_count_ = 1;
        }
        allocated = cudaMalloc(reinterpret_cast<void**>(&flags_), whole_blocks(ll_offset_ + ll_total)) == cudaSuccess;
        if (!allocated && fifo_total + ll_total > 0) { // no room for the slots: flags only
            cudaGetLastError();
            VCCL_WARN(kLogDevice, "rank %d: cannot allocate %zu bytes of FIFO slots and low-latency words: staging "
                      "FIFO and low-latency collectives off", rank_, fifo_total + ll_total);
            fifo_slots_ = fifo_slot_bytes_ = fifo_slot_stride_ = 0;
            ll_bytes_ = ll_message_bytes_ = ll_set_words_ = 0;
            allocated = cudaMalloc(reinterpret_cast<void**>(&flags_), whole_blocks(slots_offset_)) == cudaSuccess;
        }
    }
    if (allocated && ll_bytes_ > 0) {
        void* control = nullptr;
        if (cudaMemset(reinterpret_cast<char*>(flags_) + ll_offset_, 0, ll_total) == cudaSuccess &&
            cudaHostAlloc(&control, kLlControlWords * sizeof(int), cudaHostAllocMapped) == cudaSuccess) {
            memset(control, 0, kLlControlWords * sizeof(int));
            ll_control_ = static_cast<volatile int*>(control); // one address for host and device (UVA)
        } else {
            cudaGetLastError();
            VCCL_WARN(kLogDevice, "rank %d: cannot set up the low-latency collectives: off", rank_);
            ll_bytes_ = ll_message_bytes_ = 0;
        }
    }
    if (allocated && cudaMemset(flags_, 0, flag_bytes) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess &&
        cudaHostAlloc(reinterpret_cast<void**>(&flags_host_), kPrivateStreams * kRegions * sizeof(uint32_t) * nranks_,
                      cudaHostAllocDefault) ==
            cudaSuccess) {
        cudaIpcMemHandle_t handle;
        if (cudaIpcGetMemHandle(&handle, flags_) == cudaSuccess) {
            memcpy(mine.handle, &handle, sizeof(handle));
            mine.ok = 1;
            mine.device = device_;
            mine.fifo_slots = uint32_t(fifo_slots_);
            mine.fifo_slot_bytes = uint32_t(fifo_slot_bytes_);
            mine.ll_bytes = uint32_t(ll_bytes_);
            mine.ll_offset = uint32_t(ll_offset_);
            cudaDeviceProp prop;
            if (cudaGetDeviceProperties(&prop, device_) == cudaSuccess) memcpy(mine.uuid, &prop.uuid, sizeof(mine.uuid));
        }
    }
    cudaGetLastError();
    // Telemetry's note words (comm/device_flows.h): one per peer and direction, and one for the kernels. Without
    // them the device path is counted but not timed.
    if (mine.ok) {
        const size_t words = size_t(2) * size_t(nranks_) + 1;
        void* host = nullptr;
        void* dev = nullptr;
        if (cudaHostAlloc(&host, words * sizeof(uint32_t), cudaHostAllocMapped) == cudaSuccess) {
            memset(host, 0, words * sizeof(uint32_t));
            if (cudaHostGetDevicePointer(&dev, host, 0) == cudaSuccess) {
                notes_host_ = static_cast<uint32_t*>(host);
                notes_dev_ = reinterpret_cast<CUdeviceptr>(dev);
                notes_count_ = int(words);
            } else {
                cudaFreeHost(host);
            }
        }
        cudaGetLastError();
    }
    // The descriptor socket is only worth having where VMM buffers can be shared at all.
    if (mine.ok && vmm::supported(device_, nullptr)) {
        if (fds_.open(rank_)) {
            mine.fd_name = fds_.address().name;
            mine.fd_secret = fds_.address().secret;
        } else {
            VCCL_INFO(kLogDevice, "rank %d: no descriptor socket (%s): vcclMemAlloc buffers are received staged",
                      rank_, strerror(errno));
        }
    }
    VCCL_RETURN_IF_ERROR(bootstrap->allgather(infos.data(), sizeof(PeerInfo)));
    exporters_.resize(nranks_);
    for (int r = 0; r < nranks_; ++r) exporters_[r] = ipc_handles::Exporter{host_ids.empty() ? 0 : host_ids[r], infos[r].pid};
    {
        std::vector<FdChannel::Address> addresses(nranks_);
        for (int r = 0; r < nranks_; ++r) {
            bool same_host = !host_ids.empty() && host_ids[r] == host_ids[rank_];
            if (same_host && r != rank_) addresses[r] = FdChannel::Address{infos[r].fd_name, infos[r].fd_secret};
        }
        fds_.set_peers(addresses);
    }

    std::vector<uint8_t> opened(size_t(nranks_) * nranks_, 0); // row r: the peers rank r mapped
    if (mine.ok) {
        peer_flags_[rank_] = flags_;
        opened[size_t(rank_) * nranks_ + rank_] = 1;
        for (int r = 0; r < nranks_; ++r) {
            if (r == rank_ || !infos[r].ok || host_ids.empty() || host_ids[r] != host_ids[rank_]) continue;
            cudaIpcMemHandle_t handle;
            memcpy(&handle, infos[r].handle, sizeof(handle));
            void* ptr = nullptr;
            if (cudaIpcOpenMemHandle(&ptr, handle, cudaIpcMemLazyEnablePeerAccess) == cudaSuccess) {
                peer_flags_[r] = static_cast<uint32_t*>(ptr);
                opened[size_t(rank_) * nranks_ + r] = 1;
            } else {
                VCCL_WARN(kLogDevice, "rank %d: cannot map rank %d's flags (%s); transfers with it are staged",
                          rank_, r, cudaGetErrorString(cudaGetLastError()));
            }
        }
    }
    // Row exchange (each rank contributes its row): reachable only when both sides mapped each other.
    VCCL_RETURN_IF_ERROR(bootstrap->allgather(opened.data(), size_t(nranks_)));
    int count = 0, fifo_count = 0;
    for (int r = 0; r < nranks_; ++r) {
        reach_[r] = opened[size_t(rank_) * nranks_ + r] && opened[size_t(r) * nranks_ + rank_];
        fifo_ok_[r] = reach_[r] && r != rank_ && fifo_slots_ > 0 && infos[r].fifo_slots == mine.fifo_slots &&
                      infos[r].fifo_slot_bytes == mine.fifo_slot_bytes;
        if (reach_[r] && r != rank_ && !fifo_ok_[r] && fifo_slots_ > 0) {
            VCCL_WARN(kLogDevice, "rank %d: rank %d's staging FIFO (%u slots of %u bytes) differs from this rank's (%zu of "
                      "%zu): small transfers with it take the rendezvous path (set VCCL_P2P_FIFO_* alike on every rank)",
                      rank_, r, infos[r].fifo_slots, infos[r].fifo_slot_bytes, fifo_slots_, fifo_slot_bytes_);
        }
        count += reach_[r] ? 1 : 0;
        fifo_count += fifo_ok_[r] ? 1 : 0;
    }
    everyone_reachable_ = true;
    for (size_t i = 0; i < opened.size(); ++i) everyone_reachable_ = everyone_reachable_ && opened[i] != 0;
    // Low-latency allreduce: every rank stores into every other's buffer, so every pair must have mapped each
    // other (the whole matrix, which every rank holds: the decision is the same everywhere) with equal sizes.
    ll_active_ = mine.ll_bytes > 0;
    for (int r = 0; r < nranks_ && ll_active_; ++r) {
        ll_active_ = infos[r].ok && infos[r].ll_bytes == mine.ll_bytes && infos[r].ll_offset == mine.ll_offset;
        for (int q = 0; q < nranks_ && ll_active_; ++q) ll_active_ = opened[size_t(r) * nranks_ + q] != 0;
    }
    if (mine.ll_bytes > 0 && !ll_active_) {
        VCCL_LOG(ll_level, kLogDevice, "rank %d: low-latency collectives off: not every rank is on this host with its "
                    "buffer mapped by every other, or VCCL_ALLREDUCE_LL_BYTES or the staging FIFO's size "
                    "(VCCL_P2P_FIFO_*) differs between ranks", rank_);
    }
    bool shared_gpu = false;
    for (int r = 0; r < nranks_; ++r) {
        for (int q = r + 1; q < nranks_; ++q) shared_gpu = shared_gpu || memcmp(infos[r].uuid, infos[q].uuid, 16) == 0;
    }
    if (ll_active_ && shared_gpu && !g_ll_on_shared_gpu.load()) {
        ll_active_ = false;
        VCCL_LOG(ll_level, kLogDevice, "rank %d: low-latency collectives off: ranks of this communicator share a GPU, "
                    "where its waiting kernels would take turns by time slices (about 2 ms per call)", rank_);
    }
    VCCL_INFO(kLogDevice, "rank %d: direct GPU send/recv with %d of %d ranks (device %d); staging FIFO (%zu slots of "
              "%zu bytes) with %d", rank_, count, nranks_, device_, fifo_slots_, fifo_slot_bytes_, fifo_count);
    return vcclSuccess;
}

} // namespace

namespace testing {
void allow_ll_on_shared_gpu(int allow) { g_ll_on_shared_gpu.store(allow != 0); }
} // namespace testing

vcclResult_t IpcP2p::create(Bootstrap* bootstrap, const std::vector<uint64_t>& host_ids,
                            std::unique_ptr<IpcP2p>* out) {
    auto p2p = std::make_unique<CudaIpcP2p>();
    VCCL_RETURN_IF_ERROR(p2p->init(bootstrap, host_ids));
    *out = std::move(p2p);
    return vcclSuccess;
}

#else // no CUDA

namespace testing {
void allow_ll_on_shared_gpu(int) {}
} // namespace testing

vcclResult_t IpcP2p::create(Bootstrap*, const std::vector<uint64_t>&, std::unique_ptr<IpcP2p>* out) {
    *out = std::make_unique<NoIpcP2p>();
    return vcclSuccess;
}

#endif

} // namespace vccl
