/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The communicator: its identity and bootstrap, the host path (transport, settings, algorithm choice), the device
 * path (exec/device_path.h: everything device memory uses, owned there), telemetry, PreMulSum ops, and the lifecycle
 * and error state. All operations on one communicator are serialised by op_mutex.
 */
#ifndef VCCL_COMM_COMM_H_
#define VCCL_COMM_COMM_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "algo/algo.h"
#include "algo/host_groups.h"
#include "algo/host/coll_ctx.h"
#include "bootstrap/bootstrap.h"
#include "comm/idle_progress.h"
#include "comm/premul_ops.h"
#include "core/scratch_arena.h"
#include "exec/device_path.h"
#include "telemetry/device_flows.h"
#include "telemetry/telemetry.h"
#include "transport/transfer.h"
#include "transport/transport.h"
#include "vccl.h"

namespace vccl {

/* The services the device path asks of its communicator (exec/device_path.h), over comm/enqueue.h's stream waits
 * and comm_set_async_error. */
class CommServicesOf final : public CommServices {
public:
    explicit CommServicesOf(vcclComm* comm) : comm_(comm) {}
    vcclResult_t stream_wait(vcclStream_t stream, bool device) override;
    void fail(vcclResult_t error, const std::string& text) override;
private:
    vcclComm* comm_;
};

} // namespace vccl

struct vcclComm {
    // ---- Identity ----
    int rank = 0;
    int nranks = 0;
    int local_rank = 0;         // index among the ranks on this host
    int local_size = 1;         // ranks on this host
    vccl::HostGroups hosts;     // every rank's host and local rank (two-level algorithms choose by it)
    uint64_t hash = 0;          // equal on all ranks: names the communicator in logs and telemetry
    std::string name;           // vcclConfig_t::commName or "comm-<hash>"
    std::shared_ptr<vccl::Bootstrap> bootstrap;
    // What a split or shrink with a NULL config inherits (as NCCL's children do): the configured network
    // devices (not the per-rank defaults, which follow the child's local ranks), maxCtas and telemetry.
    std::string config_net_name;        // vcclConfig_t.netName, or empty when it was not given

    // ---- Host path: the transport, the agreed settings and algorithm choice, and what host algorithms use ----
    std::unique_ptr<vccl::Transport> transport;
    vccl::CollSettings settings;
    vccl::AlgoChoice algos;     // VCCL_ALGO as agreed by the ranks (rank 0's)
    vccl::ScratchArena scratch; // host memory of one collective or batch
    uint64_t coll_seq = 0;      // collectives issued; tags of collective n use it
    uint64_t split_seq = 0;     // splits issued, to keep child bootstraps apart

    // ---- Device path ----
    vccl::CommServicesOf services{this};
    vccl::DevicePath dev;

    // ---- Telemetry ----
    // NULL when VCCL_TELEMETRY=0; outlives the transport. Shared: vcclCommGetTelemetry reads it without the
    // operation lock (a snapshot must not wait for a long operation) and keeps it alive across a concurrent
    // destroy; the pointer itself changes only under telemetry_mutex.
    std::shared_ptr<vccl::telemetry::Telemetry> telemetry;
    std::mutex telemetry_mutex;
    std::unique_ptr<vccl::DeviceFlows> device_flows; // telemetry of the device path (under op_mutex; NULL without
                                                     // telemetry or without the direct path; dev.flows points here)

    vccl::PreMulOps premul_ops; // the PreMulSum ops this communicator made

    // ---- Lifecycle and errors ----
    std::mutex op_mutex;        // one operation at a time drives the transport
    std::atomic<uint64_t> op_count{0}; // operations started (idle progress watches it)
    std::unique_ptr<vccl::IdleProgress> idle_progress; // after transport and op_mutex: stopped before them
    std::atomic<bool> aborted{false};
    std::atomic<bool> revoked{false};   // comm_revoke ran: `aborted` is set too, the bootstrap and connections stay
    std::atomic<bool> destroyed{false}; // comm_destroy ran or runs: the object stays, hollow (comm_destroy)
    std::atomic<int> async_error{vcclSuccess};
    std::mutex error_mutex;
    std::string async_error_text;

    // ---- Nonblocking creation (vcclConfig_t.blocking = 0; comm/comm_create.cc) ----
    std::atomic<int> creation{0};  // vccl::CommCreation
    bool nonblocking = false;      // created with blocking = 0: children made without a config are too
    std::thread creation_thread;   // builds the communicator; joined by comm_destroy
    std::shared_ptr<vccl::Bootstrap> creation_bootstrap; // the thread's bootstrap once made (under error_mutex)
};

namespace vccl {

/* Tags of collective n on the host transport: its sequence number, below the point-to-point bit
 * (transport/transfer.h). */
inline uint64_t coll_tag(uint64_t seq) { return (seq & (kP2pTagBit - 1)); }

/* Where a communicator's creation stands. Only a nonblocking creation is ever seen in the last two states. */
enum CommCreation : int {
    kCommReady = 0,          // usable
    kCommCreating = 1,       // a thread still builds it: calls other than GetAsyncError, Destroy and Abort refused
    kCommCreationFailed = 2, // the build failed (vcclCommGetAsyncError says why): only Destroy and Abort remain
};

/* Makes the bootstrap a creation runs on (on the creation's thread when it is nonblocking); `cancel` is raised
 * by vcclCommAbort. */
using BootstrapMaker = std::function<vcclResult_t(const CancelScope* cancel, std::shared_ptr<Bootstrap>* out)>;

/* Creates a communicator over the bootstrap that `make` returns (collective over the bootstrap's ranks). With
 * vcclConfig_t.blocking = 0 both run on a thread of the communicator's own: *out is set at once and this returns
 * vcclInProgress; vcclCommGetAsyncError reports vcclInProgress until the communicator is ready. */
vcclResult_t comm_create(vcclComm_t* out, BootstrapMaker make, const vcclConfig_t* config);
/* Builds `comm` (fresh, or registered and still creating) over `bootstrap`; on failure it is left half built,
 * for comm_destroy or its destructor. */
vcclResult_t comm_build(vcclComm* comm, std::shared_ptr<Bootstrap> bootstrap, const vcclConfig_t* config);
/* comm_destroy's first step: a nonblocking creation still running is cancelled (abort) or waited for. */
void comm_end_creation(vcclComm* comm, bool abort);

/* Creates a communicator over an existing bootstrap (collective over the bootstrap's ranks). Used by the
 * TCP path, by vcclCommSplit and by vcclCommInitBootstrap (through which libvccl_mpi's vcclCommInitMPI comes). */
vcclResult_t comm_init_with_bootstrap(vcclComm_t* out, std::shared_ptr<Bootstrap> bootstrap,
                                      const vcclConfig_t* config);

/* Live-handle registry: lets the API reject destroyed or never-created communicators instead of crashing. */
void comm_register(vcclComm* comm);
void comm_unregister(vcclComm* comm);
bool comm_is_live(const vcclComm* comm);

/* Records an error that ended an operation (reported by vcclCommGetAsyncError); keeps the first. */
void comm_set_async_error(vcclComm* comm, vcclResult_t error, const std::string& text);
/* A peer gave up a direct device transfer with comm's rank (IpcP2p::failed_peer): records vcclRemoteError. */
void comm_note_failed_peer(vcclComm* comm, int who);
/* Records a peer's failure found without waiting (IpcP2p::failed_peer_polled); true when there is one. */
bool comm_poll_peer_failure(vcclComm* comm);
/* Device-path telemetry (telemetry/device_flows.h): completes the records whose notes have come, after a read of the FAIL
 * words (waiting at most wait_ms) when some wait for one. The caller holds the operation lock, no staged job runs. */
void comm_confirm_device_flows(vcclComm* comm, int64_t wait_ms);

} // namespace vccl

#endif
