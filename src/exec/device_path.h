/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The device part of a communicator: everything its operations on device memory use, owned here (the
 * communicator holds one, comm/comm.h). Set up by comm_init, torn down by comm_destroy, used under the
 * communicator's operation lock. The device algorithms (algo/device/) and the executor (exec/p2p_batch.h) take it
 * instead of the whole communicator; what they need of the communicator itself comes through CommServices.
 */
#ifndef VCCL_EXEC_DEVICE_PATH_H_
#define VCCL_EXEC_DEVICE_PATH_H_

#include <atomic>
#include <memory>
#include <string>

#include "core/coll_settings.h"
#include "device/call_timer.h"
#include "device/scratch.h"
#include "device/side_stream.h"
#include "device/stream_order.h"
#include "telemetry/device_flows.h"
#include "transport/cuda_ipc/direct_path.h"
#include "transport/cuda_ipc/ipc_p2p.h"
#include "transport/cuda_ipc/registrations.h"
#include "transport/staging/staged_path.h"
#include "transport/staging/staged_queue.h"
#include "transport/staging/staging_buffer.h"
#include "vccl.h"

namespace vccl {

struct AlgoChoice; // algo/algo.h

/* What the device path asks of its communicator. */
class CommServices {
public:
    virtual ~CommServices() = default;
    /* Waits for `stream` as a call must: gives up when the communicator is aborted or a peer failed. `device`: a
     * NULL stream is CUDA's legacy default stream and is waited for too (else NULL is skipped). */
    virtual vcclResult_t stream_wait(vcclStream_t stream, bool device) = 0;
    /* Records an error that ends the communicator (vcclCommGetAsyncError reports it). */
    virtual void fail(vcclResult_t error, const std::string& text) = 0;
};

struct DevicePath {
    // Borrowed from the communicator at creation.
    int rank = 0;
    int nranks = 0;
    const CollSettings* settings = nullptr;
    CommServices* services = nullptr;
    const void* test_key = nullptr; // the communicator (core/test_point.h)
    int max_ctas = 32;              // VCCL_MAX_CTAS / vcclConfig_t.maxCtas
    const AlgoChoice* forced = nullptr; // VCCL_ALGO as agreed at creation

    // Transports of device memory (transport/stream_transport.h): the direct path between GPUs of one host, then
    // host staging for the rest.
    std::unique_ptr<IpcP2p> ipc;        // NULL when VCCL_P2P_DIRECT=0
    Registrations registrations;        // vcclCommRegister
    DirectPath direct;
    StagedPath staged;
    StagingBuffer staging;              // pinned memory of synchronous staging (send/recv and collectives)
    DeviceFlows* flows = nullptr;       // device-path telemetry (owned by the communicator; NULL without)

    // Asynchronous staging (transport/staging/staged_queue.h): made on first use.
    std::unique_ptr<StagedQueue> staged_queue;
    std::atomic<int> staged_pending{0}; // staged jobs queued or running: they own the host transport
    bool staged_queue_unavailable = false; // made once and failed, or VCCL_STAGING_ASYNC=0
    uint64_t staging_pool_bytes = 0;    // VCCL_STAGING_POOL_BYTES at creation
    uint64_t staging_chunk_bytes = 0;   // VCCL_STAGING_CHUNK_BYTES at creation (transport/staging/staged_pieces.h)

    // Device memory and streams of the device algorithms.
    DeviceScratch device_scratch{DeviceScratch::Use::MappedByPeers}; // receive slots of device reductions
    DeviceScratch in_place_scratch{DeviceScratch::Use::LocalOnly};   // copies of in-place sends' data
    DeviceScratch premul_scratch{DeviceScratch::Use::LocalOnly};     // PreMulSum calls' scaled inputs
    SideStream side_stream;             // reductions and local copies beside a call's transfers
    CallTimer call_timer;               // device time of sampled GPU-path collectives (telemetry's time counters)
    StreamOrder stream_order;           // device work in call order across the caller's streams
    // Set by a copy-engine AllReduce whose last waits were for every peer's DONE written after that peer's last read
    // of its device_scratch: the next direct device collective on this stream sends into the peers' scratch without
    // waiting for their READY (algo/device/common.h, take_peers_scratch_free).
    bool peers_scratch_waited = false;
    vcclStream_t peers_scratch_stream = nullptr;

    /* The communicator's GPU (-1 without the direct path). */
    int device() const { return ipc != nullptr ? ipc->device() : -1; }
};

} // namespace vccl

#endif
