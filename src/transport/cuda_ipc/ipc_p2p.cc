/* SPDX-License-Identifier: BSD-3-Clause */
/* IpcP2p::create: the CUDA IPC implementation where CUDA is built in, else an object through which no peer is
 * reachable. */
#include "transport/cuda_ipc/ipc_p2p.h"

#include <cstring>
#include <memory>

#include "config.h"
#include "core/status.h"
#include "transport/cuda_ipc/cuda_ipc_p2p.h"

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
    bool graph_slots(int, bool, uint32_t, uint32_t*) override { return false; }
    vcclResult_t post_graph_recv_ready(int, uint32_t, void*) override { return unreachable(); }
    vcclResult_t post_graph_send(int, uint32_t, const void*, const P2pDescriptor&, void*) override { return unreachable(); }
    vcclResult_t post_graph_recv_wait(int, uint32_t, void*) override { return unreachable(); }
    std::shared_ptr<void> graph_keep() override { return nullptr; }
    bool graphs_hold_transfers() const override { return false; }
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
    bool ll_graph_args(LlArgs*, std::shared_ptr<void>*) override { return false; }
    void abort_kernels() override {}
    vcclResult_t flush() override { return vcclSuccess; }
private:
    static vcclResult_t unreachable() {
        return set_last_error(vcclInternalError, "direct device transfer to an unreachable peer");
    }
};
} // namespace

#if VCCL_HAVE_CUDA

vcclResult_t IpcP2p::create(Bootstrap* bootstrap, const std::vector<uint64_t>& host_ids, const void* test_key,
                            std::unique_ptr<IpcP2p>* out) {
    auto p2p = std::make_unique<CudaIpcP2p>(test_key);
    VCCL_RETURN_IF_ERROR(p2p->init(bootstrap, host_ids));
    *out = std::move(p2p);
    return vcclSuccess;
}

#else // no CUDA

vcclResult_t IpcP2p::create(Bootstrap*, const std::vector<uint64_t>&, const void*, std::unique_ptr<IpcP2p>* out) {
    *out = std::make_unique<NoIpcP2p>();
    return vcclSuccess;
}

#endif

} // namespace vccl
