/* SPDX-License-Identifier: BSD-3-Clause */
/* Telemetry entry points: argument checks and mapping to telemetry/, nothing else. */
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "api/check.h"
#include "core/status.h"
#include "telemetry/latency.h"
#include "telemetry/telemetry.h"

using namespace vccl;

namespace {

/* The checks both entry points share, then the snapshot: the comm's telemetry (kept alive by the returned
 * pointer if another thread destroys comm meanwhile) and its paths. */
vcclResult_t take_snapshot(vcclComm_t comm, const char* fn, const void* out, int maxOut, int* nOut,
                           std::shared_ptr<telemetry::Telemetry>* tele_out, std::vector<telemetry::PathStats>* paths) {
    VCCL_RETURN_IF_ERROR(check_comm(comm, fn));
    if (nOut == nullptr) return set_last_error(vcclInvalidArgument, "%s: the count pointer is NULL", fn);
    if (maxOut < 0) return set_last_error(vcclInvalidArgument, "%s: the array size %d is negative", fn, maxOut);
    if (maxOut > 0 && out == nullptr) return set_last_error(vcclInvalidArgument, "%s: the array is NULL", fn);
    std::shared_ptr<telemetry::Telemetry> tele;
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
    *paths = tele->snapshot();
    *tele_out = std::move(tele);
    return vcclSuccess;
}

void fill_peer(const telemetry::PathStats& s, vcclTelemetryPeer* p) {
    p->peer = s.peer;
    p->path = s.path;
    p->state = int(s.state);
    p->bytesSent = s.bytes_sent;
    p->bytesReceived = s.bytes_recv;
    p->sendBandwidth = s.send_bw;
    p->recvBandwidth = s.recv_bw;
    p->outstandingRequests = s.outstanding_reqs;
    p->outstandingBytes = s.outstanding_bytes;
    p->completions = s.send_completions + s.recv_completions;
    p->failures = s.failures;
    p->lastCompletionNs = s.last_done_ns;
}

} // namespace

extern "C" VCCL_EXPORT vcclResult_t vcclCommGetTelemetry(vcclComm_t comm, vcclTelemetryPeer* peers, int maxPeers,
                                                         int* nPeers) {
    std::shared_ptr<telemetry::Telemetry> tele;
    std::vector<telemetry::PathStats> paths;
    VCCL_RETURN_IF_ERROR(take_snapshot(comm, "vcclCommGetTelemetry", peers, maxPeers, nPeers, &tele, &paths));
    for (size_t i = 0; i < paths.size() && i < size_t(maxPeers); ++i) fill_peer(paths[i], &peers[i]);
    *nPeers = int(paths.size());
    return vcclSuccess;
}

extern "C" VCCL_EXPORT vcclResult_t vcclCommGetTelemetryPaths(vcclComm_t comm, void* out, size_t pathSize,
                                                              int maxPaths, int* nPaths) {
    const char* fn = "vcclCommGetTelemetryPaths";
    if (pathSize < sizeof(vcclTelemetryPeer)) {
        return set_last_error(vcclInvalidArgument, "%s: pathSize %zu is below sizeof(vcclTelemetryPeer) (%zu)", fn,
                              pathSize, sizeof(vcclTelemetryPeer));
    }
    std::shared_ptr<telemetry::Telemetry> tele;
    std::vector<telemetry::PathStats> paths;
    VCCL_RETURN_IF_ERROR(take_snapshot(comm, fn, out, maxPaths, nPaths, &tele, &paths));
    for (size_t i = 0; i < paths.size() && i < size_t(maxPaths); ++i) {
        const telemetry::PathStats& s = paths[i];
        vcclTelemetryPath full;
        memset(&full, 0, sizeof(full));
        fill_peer(s, &full.base);
        telemetry::PathTotalsCopy t = tele->totals(s.peer, s.path);
        full.latencySamples = t.latency_count();
        full.latencyP50Ns = telemetry::latency_quantile_ns(t.latency, 0.5);
        full.latencyP99Ns = telemetry::latency_quantile_ns(t.latency, 0.99);
        full.latencyP999Ns = telemetry::latency_quantile_ns(t.latency, 0.999);
        for (uint64_t n : t.failovers) full.failovers += n;
        full.failbacks = t.failbacks;
        // The caller's element size: what it knows of the struct gets filled, nothing past it.
        memcpy(static_cast<char*>(out) + i * pathSize, &full, pathSize < sizeof(full) ? pathSize : sizeof(full));
    }
    *nPaths = int(paths.size());
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
    comm->telemetry->pause_collectives(pause != 0);
    if (comm->device_flows) comm->device_flows->set_paused(pause != 0);
    return vcclSuccess;
}
