/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Host staging as a StreamTransport (transport/stream_transport.h): what the direct GPU path leaves, over the host
 * transport. Device buffers are copied into pinned memory after their stream's earlier work (the calling thread
 * waits for the stream), moved as host memory, and copied back; host buffers with a stream wait for it first. It
 * takes every transfer it is given. The asynchronous form of the same, on the staged queue's proxy thread, is the
 * executor's (exec/p2p_batch.h, submit_p2p_staged).
 */
#ifndef VCCL_TRANSPORT_STAGING_STAGED_PATH_H_
#define VCCL_TRANSPORT_STAGING_STAGED_PATH_H_

#include <functional>
#include <string>
#include <vector>

#include "transport/host_batch.h"
#include "transport/staging/staging_buffer.h"
#include "transport/stream_transport.h"

namespace vccl {

class StagedPath final : public StreamTransport {
public:
    struct Env {
        HostBatchEnv host;
        StagingBuffer* staging = nullptr; // the communicator's synchronous staging memory
        /* Waits for a stream as a call must (watching abort and peer failure: comm_stream_wait). */
        std::function<vcclResult_t(vcclStream_t)> stream_wait;
    };
    Env env;

    const char* name() const override { return "staged"; }
    vcclResult_t post(const std::vector<const Transfer*>& batch, std::vector<const Transfer*>* rest,
                      std::string* mismatch) override;
};

} // namespace vccl

#endif
