/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The direct GPU path as a StreamTransport (transport/stream_transport.h): transfers with peers of this host,
 * through IpcP2p (transport/cuda_ipc/ipc_p2p.h). The sender describes its buffer first and picks the path: the
 * receiver's staging FIFO (small, from device memory) or a rendezvous. Every receiver waits for its sender's
 * descriptor and, for a rendezvous, answers with its own; both sides then decide alike between the direct copy and
 * the host transport (left in *rest). A FIFO sender waits for nobody, and nothing here waits for device work
 * (except receives into host memory, which complete before post returns). The descriptors travel over the host
 * transport.
 */
#ifndef VCCL_TRANSPORT_CUDA_IPC_DIRECT_PATH_H_
#define VCCL_TRANSPORT_CUDA_IPC_DIRECT_PATH_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "telemetry/device_flows.h"
#include "transport/cuda_ipc/ipc_p2p.h"
#include "transport/cuda_ipc/registrations.h"
#include "transport/host_batch.h"
#include "transport/staging/staging_buffer.h"
#include "transport/stream_transport.h"

namespace vccl {

class DirectPath final : public StreamTransport {
public:
    /* What the path borrows from its communicator, set before the first post (flows may change at destroy). */
    struct Env {
        HostBatchEnv host;                     // the descriptor exchange (transport, timeout, abort)
        IpcP2p* ipc = nullptr;                 // NULL: no direct path, every transfer goes to *rest
        Registrations* registrations = nullptr;
        DeviceFlows* flows = nullptr;          // device-path telemetry, NULL without
        const void* test_key = nullptr;        // the communicator (core/test_point.h)
        /* Waits for a stream as a call must (watching abort and peer failure: comm_stream_wait). */
        std::function<vcclResult_t(vcclStream_t)> stream_wait;
    };
    Env env;

    const char* name() const override { return "cuda_ipc"; }
    vcclResult_t post(const std::vector<const Transfer*>& batch, std::vector<const Transfer*>* rest,
                      std::string* mismatch) override;
    /* The memory FIFO receives into host memory landed in (freed with the communicator's GPU state). */
    void take_landing(StagingBuffer* landing, std::vector<std::unique_ptr<StagingBuffer>>* outgrown) {
        landing->swap(landing_);
        outgrown->swap(landing_outgrown_);
    }

private:
    struct Batch;
    vcclResult_t exchange(Batch& b);
    void choose(Batch& b, std::string* mismatch);
    void choose_graph(Batch& b, size_t i, std::string* mismatch);
    vcclResult_t keep_for_graphs(const Batch& b);
    vcclResult_t enqueue(Batch& b);
    vcclResult_t enqueue_fifo_rounds(Batch& b);
    vcclResult_t landing_memory(size_t total, char** out);

    // Receives into host memory through the FIFO land here first (landing_memory).
    StagingBuffer landing_;
    std::vector<std::unique_ptr<StagingBuffer>> landing_outgrown_; // freed with the teardown
};

} // namespace vccl

#endif
