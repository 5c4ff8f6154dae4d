/* SPDX-License-Identifier: BSD-3-Clause */
/* A peer that gave up a direct device transfer with this rank: how the communicator learns of it (IpcP2p's reads of
 * the FAIL words), what it records (vcclRemoteError), and the device-path telemetry records that wait for such a
 * read before they count as data moved (telemetry/device_flows.h). */
#include <string>

#include "comm/comm.h"
#include "device/memory.h"
#include "telemetry/device_flows.h"
#include "transport/cuda_ipc/ipc_p2p.h"

namespace vccl {

void comm_note_failed_peer(vcclComm* comm, int who) {
    // Its transfers with this rank that telemetry still times did not move data (telemetry/device_flows.h).
    if (comm->device_flows) comm->device_flows->peer_failed(who);
    comm_set_async_error(comm, vcclRemoteError,
                         "rank " + std::to_string(who) + " gave up or rejected a direct device transfer or "
                         "low-latency collective with this rank after it was set up (its call failed, e.g. on "
                         "mismatched sizes or counts); the data of that operation is not valid");
}

bool comm_poll_peer_failure(vcclComm* comm) {
    if (!comm->dev.ipc) return false;
    // Also from a watchdog thread while the application captures a CUDA graph in global mode (device/memory.h).
    RelaxedCapture relaxed;
    int who = comm->dev.ipc->failed_peer_polled();
    if (who >= 0) comm_note_failed_peer(comm, who);
    return who >= 0;
}

void comm_confirm_device_flows(vcclComm* comm, int64_t wait_ms) {
    if (!comm->device_flows) return;
    comm->device_flows->poll();
    if (!comm->device_flows->unconfirmed() || !comm->dev.ipc) return;
    int who = comm->dev.ipc->failed_peer_now(wait_ms);
    if (who >= 0) comm_note_failed_peer(comm, who);
    comm->device_flows->poll();
}

} // namespace vccl
