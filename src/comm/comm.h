/*
 * The communicator: ranks, bootstrap, transport, the operation sequence that keeps collectives apart, and
 * the error state. All operations on one communicator are serialised by op_mutex.
 */
#ifndef VCCL_COMM_COMM_H_
#define VCCL_COMM_COMM_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "algo/coll_ctx.h"
#include "bootstrap/bootstrap.h"
#include "comm/device_flows.h"
#include "comm/idle_progress.h"
#include "comm/premul.h"
#include "core/export.h"
#include "device/ipc_p2p.h"
#include "device/side_stream.h"
#include "device/staged_queue.h"
#include "device/staging.h"
#include "telemetry/telemetry.h"
#include "transport/transport.h"
#include "vccl.h"

struct vcclComm {
    int rank = 0;
    int nranks = 0;
    int local_rank = 0;         // index among the ranks on this host
    int local_size = 1;         // ranks on this host
    uint64_t hash = 0;          // equal on all ranks: names the communicator in logs and telemetry
    std::string name;           // vcclConfig_t::commName or "comm-<hash>"
    std::shared_ptr<vccl::Bootstrap> bootstrap;
    // NULL when VCCL_TELEMETRY=0; outlives the transport. Shared: vcclCommGetTelemetry reads it without the
    // operation lock (a snapshot must not wait for a long operation) and keeps it alive across a concurrent
    // destroy; the pointer itself changes only under telemetry_mutex.
    std::shared_ptr<vccl::telemetry::Telemetry> telemetry;
    std::mutex telemetry_mutex;
    std::unique_ptr<vccl::Transport> transport;
    vccl::CollSettings settings;

    std::mutex op_mutex;        // one operation at a time drives the transport
    std::atomic<uint64_t> op_count{0}; // operations started (idle progress watches it)
    bool test_fail_next_ll = false;    // vccl::testing::fail_next_ll (under op_mutex)
    uint32_t test_chunked_stop = 0;    // vccl::testing::stop_next_chunked (under op_mutex)
    uint64_t chunked_calls = 0;        // calls the chunked kernel took (vccl::testing::chunked_calls; under op_mutex)
    uint64_t ll_calls = 0;             // calls the low-latency kernel took (vccl::testing::ll_calls; under op_mutex)
    bool test_fail_next_exchange = false; // vccl::testing::fail_next_exchange (under op_mutex)
    std::unique_ptr<vccl::DeviceFlows> device_flows;   // telemetry of the device path (under op_mutex; NULL
                                                       // without telemetry or without the direct path)
    std::unique_ptr<vccl::IdleProgress> idle_progress; // after transport and op_mutex: stopped before them
    uint64_t coll_seq = 0;      // collectives issued; tags of collective n use it
    uint64_t split_seq = 0;     // splits issued, to keep child bootstraps apart
    vccl::ScratchArena scratch;
    std::unique_ptr<vccl::IpcP2p> ipc; // direct GPU send/recv on one host (NULL when disabled)
    vccl::StagingBuffer staging;       // the synchronous staging path (device/staging.h)
    vccl::StagingBuffer fifo_landing;  // receives into host memory through the staging FIFO land here first
    std::vector<std::unique_ptr<vccl::StagingBuffer>> fifo_landing_outgrown; // freed with the teardown (p2p_exec.cc)
    std::atomic<int> staged_pending{0};              // staged jobs queued or running: they own the transport
    bool staged_queue_unavailable = false;           // made once and failed, or VCCL_STAGING_ASYNC=0
    uint64_t staging_pool_bytes = 0;                 // VCCL_STAGING_POOL_BYTES at creation
    uint64_t staging_chunk_bytes = 0;                // VCCL_STAGING_CHUNK_BYTES at creation (comm/staged_pieces.h)
    std::unique_ptr<vccl::StagedQueue> staged_queue; // asynchronous staging (made on first use; under op_mutex;
                                                     // comm_destroy stops it before the transport goes)
    vccl::DeviceScratch device_scratch{vccl::DeviceScratch::Use::MappedByPeers}; // receive slots of device reductions
    // Set by a copy-engine AllReduce whose last waits were for every peer's DONE written after that peer's last read
    // of its device_scratch: the next direct device collective on this stream sends into the peers' scratch without
    // waiting for their READY (comm/device_coll.cc, take_peers_scratch_free). Under op_mutex.
    bool peers_scratch_waited = false;
    vcclStream_t peers_scratch_stream = nullptr;
    // Copies of in-place sends' data (p2p_exec.cc) and PreMulSum calls' scaled inputs (comm/premul.h).
    vccl::DeviceScratch in_place_scratch{vccl::DeviceScratch::Use::LocalOnly};
    vccl::DeviceScratch premul_scratch{vccl::DeviceScratch::Use::LocalOnly};
    vccl::PreMulOps premul_ops;           // the PreMulSum ops this communicator made
    vccl::SideStream side_stream;       // reductions and local copies beside a call's transfers (under op_mutex)
    vccl::StreamOrder stream_order;     // device work in call order across the caller's streams
    vccl::Registrations registrations;  // vcclCommRegister (under op_mutex)
    int max_ctas = 32;                  // VCCL_MAX_CTAS / vcclConfig_t.maxCtas
    // What a split or shrink with a NULL config inherits (as NCCL's children do): the configured network
    // devices (not the per-rank defaults, which follow the child's local ranks), maxCtas and telemetry.
    std::string config_net_name;        // vcclConfig_t.netName, or empty when it was not given

    std::atomic<bool> aborted{false};
    std::atomic<bool> destroyed{false}; // comm_destroy ran or runs: the object stays, hollow (comm_destroy)
    std::atomic<int> async_error{vcclSuccess};
    std::mutex error_mutex;
    std::string async_error_text;
};

namespace vccl {

/* Tags: bit 43 set marks point-to-point traffic; collectives use their sequence number. */
constexpr uint64_t kP2pTagBit = 1ull << (kTagBits - 1);
/* Descriptors exchanged before direct device transfers: one tag per direction of the described transfer. */
constexpr uint64_t kP2pSendDescTag = kP2pTagBit | 1;
constexpr uint64_t kP2pRecvDescTag = kP2pTagBit | 2;
/* Pieces after the first of a large send/recv message (comm/p2p_exec.cc): kP2pTagBit | kP2pPieceTagBit | k. */
constexpr uint64_t kP2pPieceTagBit = 1ull << 32;
inline uint64_t coll_tag(uint64_t seq) { return (seq & (kP2pTagBit - 1)); }

/* Creates a communicator over an existing bootstrap (collective over the bootstrap's ranks). Used by the
 * TCP path, by vcclCommSplit, and by libvccl_mpi's vcclCommInitMPI. */
VCCL_INTERNAL_API vcclResult_t comm_init_with_bootstrap(vcclComm_t* out, std::shared_ptr<Bootstrap> bootstrap,
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
/* Device-path telemetry (comm/device_flows.h): completes the records whose notes have come, after a read of the FAIL
 * words (waiting at most wait_ms) when some wait for one. The caller holds the operation lock, no staged job runs. */
void comm_confirm_device_flows(vcclComm* comm, int64_t wait_ms);

namespace testing {
/* Measurement hook (vccl-perf --baseline telemetry-paused; exported by libvccl.map): pauses (paused != 0) or
 * resumes the recording of comm's transfers (Transport::pause_telemetry); vcclInvalidUsage with telemetry off. */
VCCL_INTERNAL_API vcclResult_t pause_telemetry(vcclComm_t comm, int paused);
/* Test hook (tests/gpu; exported by libvccl.map): once comm's staged queue is idle, moves its part numbering on
 * by n (StagedQueue::test_skip_sequence); vcclInvalidUsage before the queue exists. */
VCCL_INTERNAL_API vcclResult_t staging_skip_sequence(vcclComm_t comm, unsigned n);
} // namespace testing

} // namespace vccl

#endif
