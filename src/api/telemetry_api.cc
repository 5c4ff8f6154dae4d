/* SPDX-License-Identifier: BSD-3-Clause */
/* Telemetry entry points: argument checks and mapping to telemetry/, nothing else. */
#include <memory>
#include <mutex>

#include "api/check.h"
#include "core/status.h"
#include "telemetry/telemetry.h"

using namespace vccl;

extern "C" VCCL_EXPORT vcclResult_t vcclCommGetTelemetry(vcclComm_t comm, vcclTelemetryPeer* peers, int maxPeers,
                                                         int* nPeers) {
    const char* fn = "vcclCommGetTelemetry";
    VCCL_RETURN_IF_ERROR(check_comm(comm, fn));
    if (nPeers == nullptr) return set_last_error(vcclInvalidArgument, "%s: nPeers is NULL", fn);
    if (maxPeers < 0) return set_last_error(vcclInvalidArgument, "%s: maxPeers %d is negative", fn, maxPeers);
    if (maxPeers > 0 && peers == nullptr) return set_last_error(vcclInvalidArgument, "%s: peers is NULL", fn);
    std::shared_ptr<telemetry::Telemetry> tele; // kept alive here if another thread destroys comm meanwhile
    {
        std::lock_guard<std::mutex> pointer_lock(comm->telemetry_mutex);
        tele = comm->telemetry;
    }
    if (comm->destroyed.load()) {
        return set_last_error(vcclInvalidUsage, "%s: communicator %s was destroyed", fn, comm->name.c_str());
    }
    if (!tele) return set_last_error(vcclInvalidUsage, "%s: telemetry is off for this communicator (VCCL_TELEMETRY=0 or vcclConfig_t.telemetry=0)", fn);
    {
        // Counters held back by the publication interval go out first, when no operation is running: the lock
        // and no staged job queued or running (the staging thread drives the transport without the lock; jobs
        // are queued under it) make this thread the writer. A snapshot taken during an operation may be up to
        // the publication interval (1 ms) old.
        std::unique_lock<std::mutex> lock(comm->op_mutex, std::try_to_lock);
        if (lock.owns_lock() && comm->dev.staged_pending.load(std::memory_order_acquire) == 0) {
            // Device transfers whose notes have come, confirmed by a read of the FAIL words (telemetry/device_flows.h).
            comm_confirm_device_flows(comm, 5);
            tele->publish_held();
        }
    }
    std::vector<telemetry::PathStats> paths = tele->snapshot();
    for (size_t i = 0; i < paths.size() && i < size_t(maxPeers); ++i) {
        const telemetry::PathStats& s = paths[i];
        vcclTelemetryPeer& p = peers[i];
        p.peer = s.peer;
        p.path = s.path;
        p.state = int(s.state);
        p.bytesSent = s.bytes_sent;
        p.bytesReceived = s.bytes_recv;
        p.sendBandwidth = s.send_bw;
        p.recvBandwidth = s.recv_bw;
        p.outstandingRequests = s.outstanding_reqs;
        p.outstandingBytes = s.outstanding_bytes;
        p.completions = s.send_completions + s.recv_completions;
        p.failures = s.failures;
        p.lastCompletionNs = s.last_done_ns;
    }
    *nPeers = int(paths.size());
    return vcclSuccess;
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommPauseTelemetry(vcclComm_t comm, int pause) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, "vcclCommPauseTelemetry"));
    std::lock_guard<std::mutex> lock(comm->op_mutex); // the recording side: no operation runs meanwhile
    if (!comm->telemetry) {
        return set_last_error(vcclInvalidUsage, "vcclCommPauseTelemetry: telemetry is off for this communicator "
                              "(VCCL_TELEMETRY=0 or vcclConfig_t.telemetry = 0)");
    }
    // Staged jobs record on the proxy thread: they end first, so no transfer is left half recorded.
    if (comm->dev.staged_pending.load() != 0 && comm->dev.staged_queue) comm->dev.staged_queue->wait_idle();
    comm->transport->pause_telemetry(pause != 0);
    if (comm->device_flows) comm->device_flows->set_paused(pause != 0);
    return vcclSuccess;
}
