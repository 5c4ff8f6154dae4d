/* SPDX-License-Identifier: BSD-3-Clause */
/* Communicator creation over a bootstrap, split, destroy and abort. */
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <random>

#include "comm/comm.h"
#include "comm/comm_ops.h"
#include "comm/enqueue.h"
#include "core/env.h"
#include "core/log.h"
#include "core/status.h"
#include "core/test_point.h"
#include "device/memory.h"
#include "topo/topo.h"

namespace vccl {

namespace {

uint64_t mix64(uint64_t x) { // splitmix64 finaliser: a cheap, well-spread hash
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

} // namespace

vcclResult_t comm_check_config(const vcclConfig_t* config) {
    if (config == nullptr) return vcclSuccess;
    if (config->magic != VCCL_CONFIG_MAGIC) {
        return set_last_error(vcclInvalidArgument,
                              "vcclConfig_t was not initialised with VCCL_CONFIG_INITIALIZER (bad magic 0x%x)",
                              config->magic);
    }
    if (config->size < offsetof(vcclConfig_t, splitShare) + sizeof(int) || config->size > 4096) {
        return set_last_error(vcclInvalidArgument, "vcclConfig_t has an unexpected size %zu", config->size);
    }
    if (config->splitShare != VCCL_CONFIG_UNDEF_INT && config->splitShare != 0) {
        return set_last_error(vcclInvalidArgument, "vcclConfig_t.splitShare=%d is not supported (use 0)",
                              config->splitShare);
    }
    if (config->blocking != VCCL_CONFIG_UNDEF_INT && config->blocking != 0 && config->blocking != 1) {
        return set_last_error(vcclInvalidArgument, "vcclConfig_t.blocking=%d must be 0 or 1", config->blocking);
    }
    if (config->maxCtas != VCCL_CONFIG_UNDEF_INT && config->maxCtas <= 0) {
        return set_last_error(vcclInvalidArgument, "vcclConfig_t.maxCtas=%d must be positive", config->maxCtas);
    }
    int telemetry = config_telemetry(config);
    if (telemetry != VCCL_CONFIG_UNDEF_INT && telemetry != 0 && telemetry != 1) {
        return set_last_error(vcclInvalidArgument, "vcclConfig_t.telemetry=%d must be 0 or 1", telemetry);
    }
    int op_timeout = config_op_timeout_ms(config);
    if (op_timeout != VCCL_CONFIG_UNDEF_INT && op_timeout < 0) {
        return set_last_error(vcclInvalidArgument, "vcclConfig_t.opTimeoutMs=%d must be 0 (no limit) or positive",
                              op_timeout);
    }
    return vcclSuccess;
}

int config_telemetry(const vcclConfig_t* config) {
    // A caller compiled against a version without the field passes a smaller struct: the field is not there.
    if (config == nullptr || config->size < offsetof(vcclConfig_t, telemetry) + sizeof(int)) {
        return VCCL_CONFIG_UNDEF_INT;
    }
    return config->telemetry;
}

int config_op_timeout_ms(const vcclConfig_t* config) {
    if (config == nullptr || config->size < offsetof(vcclConfig_t, opTimeoutMs) + sizeof(int)) {
        return VCCL_CONFIG_UNDEF_INT;
    }
    return config->opTimeoutMs;
}

namespace {

/* Every rank learns which ranks share its host: rails and proxy CPUs are chosen per local rank. */
vcclResult_t find_local_ranks(Bootstrap* bootstrap, int* local_rank, int* local_size,
                              std::vector<uint64_t>* host_ids) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    uint64_t mine = 1469598103934665603ull; // FNV-1a of the host name
    for (const char* p = host; *p; ++p) mine = (mine ^ uint8_t(*p)) * 1099511628211ull;
    std::vector<uint64_t> all(bootstrap->nranks());
    all[bootstrap->rank()] = mine;
    VCCL_RETURN_IF_ERROR(bootstrap->allgather(all.data(), sizeof(uint64_t)));
    int before = 0, same = 0;
    for (int r = 0; r < bootstrap->nranks(); ++r) {
        if (all[r] != mine) continue;
        if (r < bootstrap->rank()) before++;
        same++;
    }
    *local_rank = before;
    *local_size = same;
    *host_ids = std::move(all);
    return vcclSuccess;
}

/* The primary-path devices from the topology (or VCCL_NET_DEVICES), computed once per process and local
 * placement: loading the topology costs tens of milliseconds. */
void rail_devices(int local_rank, int local_size, std::string* primary, std::string* backup) {
    static std::mutex mutex;
    static std::string cached_primary, cached_backup;
    static int cached_rank = -1, cached_size = -1;
    std::lock_guard<std::mutex> lock(mutex);
    if (cached_rank != local_rank || cached_size != local_size) {
        cached_primary = topo_primary_devices(local_rank, local_size, device_busids());
        cached_backup = topo_backup_devices(local_rank, local_size, device_busids());
        cached_rank = local_rank;
        cached_size = local_size;
    }
    *primary = cached_primary;
    *backup = cached_backup;
}

/* VCCL_FAILOVER and friends; `use` says whether the failover layer goes over the transport. */
vcclResult_t failover_options(const std::string& backup, FailoverOptions* fo, bool* use) {
    std::string mode = env::get_str(env::kFailover);
    fo->backup_devices = backup;
    fo->timeout_ms = int(env::get_int(env::kFailoverTimeoutMs));
    fo->failback_ms = int(env::get_int(env::kFailbackIntervalMs));
    fo->failback = env::get_bool(env::kFailback);
    fo->peer_timeout_ms = int(env::get_int(env::kPeerTimeoutMs));
    if (fo->timeout_ms <= 0 || fo->failback_ms <= 0 || fo->peer_timeout_ms <= 0) {
        return set_last_error(vcclInvalidArgument,
                              "VCCL_FAILOVER_TIMEOUT_MS, VCCL_FAILBACK_INTERVAL_MS and VCCL_PEER_TIMEOUT_MS must be "
                              "positive");
    }
    std::string multipath = env::get_str(env::kMultipath);
    if (multipath == "spray") {
        fo->spray = true;
    } else if (multipath == "standby" || multipath.empty()) {
        fo->spray = false;
    } else {
        return set_last_error(vcclInvalidArgument, "VCCL_MULTIPATH='%s': expected standby or spray", multipath.c_str());
    }
    if (mode == "off" || mode == "0") {
        *use = false;
    } else if (mode == "on" || mode == "1") {
        if (backup.empty()) {
            return set_last_error(vcclInvalidArgument,
                                  "VCCL_FAILOVER=on needs a backup device (VCCL_BACKUP_NET_DEVICES, or a second NIC "
                                  "in the topology)");
        }
        *use = true;
        fo->every_peer = true;
    } else if (mode == "auto" || mode.empty()) {
        *use = !backup.empty();
    } else {
        return set_last_error(vcclInvalidArgument, "VCCL_FAILOVER='%s': expected auto, on or off", mode.c_str());
    }
    return vcclSuccess;
}

CollSettings settings_from_env() {
    CollSettings s;
    s.chunk_bytes = env::get_size(env::kChunkSize);
    if (s.chunk_bytes < 4096) s.chunk_bytes = 4096;
    s.small_bytes = env::get_size(env::kSmallMsgBytes);
    s.reduce_pipeline_bytes = env::get_size(env::kReducePipelineBytes);
    s.reduce_scratch_bytes = env::get_size(env::kReduceScratchBytes);
    s.kernel_bytes = env::get_size(env::kAllreduceKernelBytes);
    s.premul_kernel_bytes = env::get_size(env::kPreMulSumKernelBytes);
    s.op_timeout_ms = env::get_int(env::kOpTimeoutMs);
    return s;
}

/* The settings a communicator keeps from its creation on (VCCL_* variables and the config). */
void read_settings(vcclComm* comm, const vcclConfig_t* config) {
    comm->settings = settings_from_env();
    comm->algos = algo_choice_from_env();
    int op_timeout = config_op_timeout_ms(config);
    if (op_timeout != VCCL_CONFIG_UNDEF_INT) comm->settings.op_timeout_ms = op_timeout;
    DevicePath& dev = comm->dev;
    dev.max_ctas = int(env::get_int(env::kMaxCtas));
    if (config != nullptr && config->maxCtas != VCCL_CONFIG_UNDEF_INT) dev.max_ctas = config->maxCtas;
    if (dev.max_ctas < 1) dev.max_ctas = 1;
    // Read here, not when the staged queue is made on first use, so a communicator keeps the settings it was
    // created with.
    dev.staged_queue_unavailable = !env::get_bool(env::kStagingAsync);
    dev.staging_pool_bytes = env::get_size(env::kStagingPoolBytes);
    dev.staging_chunk_bytes = env::get_size(env::kStagingChunkBytes);
}

/* Every rank must build the same transport (their set-up exchanges must pair up), and cut messages into the same
 * pieces and choose the same algorithms, or their messages would not pair up either (a mismatch showed as
 * "mismatched send/receive sizes", or a hang): rank 0's value of each setting below is used everywhere. Failover is
 * used only where every rank has a backup path. */
vcclResult_t agree_settings(vcclComm* comm, Bootstrap* bootstrap, bool* use_failover) {
    struct Agreed {
        const char* name;
        uint64_t value;
    };
    Agreed agreed[] = {{"VCCL_STAGING_CHUNK_BYTES", comm->dev.staging_chunk_bytes},
                       {"VCCL_CHUNK_SIZE", comm->settings.chunk_bytes},
                       {"VCCL_ALLREDUCE_SMALL_BYTES", comm->settings.small_bytes},
                       {"VCCL_REDUCE_PIPELINE_BYTES", comm->settings.reduce_pipeline_bytes},
                       {"VCCL_REDUCE_SCRATCH_BYTES", comm->settings.reduce_scratch_bytes},
                       {"VCCL_ALLREDUCE_KERNEL_BYTES", comm->settings.kernel_bytes},
                       {"VCCL_PREMULSUM_KERNEL_BYTES", comm->settings.premul_kernel_bytes},
                       {"VCCL_ALGO (coded)", algo_choice_encode(comm->algos)}};
    constexpr size_t kVotes = 1 + sizeof(agreed) / sizeof(agreed[0]);
    std::vector<uint64_t> votes(size_t(comm->nranks) * kVotes);
    votes[size_t(comm->rank) * kVotes] = *use_failover ? 1 : 0;
    for (size_t i = 1; i < kVotes; ++i) votes[size_t(comm->rank) * kVotes + i] = agreed[i - 1].value;
    VCCL_RETURN_IF_ERROR(bootstrap->allgather(votes.data(), kVotes * sizeof(uint64_t)));
    for (size_t i = 1; i < kVotes; ++i) {
        if (votes[i] == agreed[i - 1].value) continue;
        VCCL_WARN(kLogInit, "%s is %llu here and %llu on rank 0: using rank 0's (it must be equal on every rank)",
                  agreed[i - 1].name, (unsigned long long)agreed[i - 1].value, (unsigned long long)votes[i]);
        agreed[i - 1].value = votes[i];
    }
    comm->dev.staging_chunk_bytes = agreed[0].value;
    comm->settings.chunk_bytes = size_t(agreed[1].value);
    comm->settings.small_bytes = size_t(agreed[2].value);
    comm->settings.reduce_pipeline_bytes = size_t(agreed[3].value);
    comm->settings.reduce_scratch_bytes = size_t(agreed[4].value);
    comm->settings.kernel_bytes = size_t(agreed[5].value);
    comm->settings.premul_kernel_bytes = size_t(agreed[6].value);
    comm->algos = algo_choice_decode(agreed[7].value);
    uint64_t yes = 0;
    for (int r = 0; r < comm->nranks; ++r) yes += votes[size_t(r) * kVotes];
    if (yes != 0 && yes != uint64_t(comm->nranks)) {
        if (comm->rank == 0) {
            VCCL_WARN(kLogInit, "failover off: only %llu of %d ranks have a backup path (VCCL_BACKUP_NET_DEVICES)",
                      (unsigned long long)yes, comm->nranks);
        }
        *use_failover = false;
    }
    return vcclSuccess;
}

/* Telemetry (when on) and the host transport: UCX, under the failover layer where it is used. */
vcclResult_t create_transport(vcclComm* comm, Bootstrap* bootstrap, const vcclConfig_t* config,
                              TransportOptions* options, const std::string& backup) {
    FailoverOptions fo;
    bool use_failover = false;
    VCCL_RETURN_IF_ERROR(failover_options(backup, &fo, &use_failover));
    // Peers on other hosts exist only in a multi-host job; without any, auto mode needs no second path.
    bool remote_peers = false;
    for (uint64_t id : options->host_ids) remote_peers = remote_peers || id != options->host_ids[size_t(comm->rank)];
    if (!fo.every_peer && !remote_peers) use_failover = false;
    VCCL_RETURN_IF_ERROR(agree_settings(comm, bootstrap, &use_failover));
    options->tls = env::get_str(env::kUcxTls);
    int telemetry = config_telemetry(config);
    if (telemetry == VCCL_CONFIG_UNDEF_INT ? env::get_bool(env::kTelemetry) : telemetry == 1) {
        std::unique_ptr<telemetry::Telemetry> made;
        telemetry::Options topt = telemetry::Options::from_env(comm->rank, comm->nranks, comm->hash, comm->name);
        topt.test_key = comm;
        VCCL_RETURN_IF_ERROR(telemetry::Telemetry::create(topt, &made));
        comm->telemetry = std::move(made); // before anyone else can see the communicator: no lock needed
        options->telemetry = comm->telemetry.get();
        comm->telemetry->describe_paths(options->net_devices, use_failover ? fo.backup_devices : std::string(),
                                        use_failover && fo.spray);
    }
    if (use_failover) return failover_transport_create(bootstrap, *options, fo, &comm->transport);
    return ucx_transport_create(bootstrap, *options, &comm->transport);
}

/* The device path's links to the communicator and its transports (exec/device_path.h); the direct GPU path where
 * VCCL_P2P_DIRECT allows (collective over the bootstrap). */
vcclResult_t setup_device_path(vcclComm* comm, Bootstrap* bootstrap, const std::vector<uint64_t>& host_ids) {
    DevicePath& dev = comm->dev;
    dev.rank = comm->rank;
    dev.nranks = comm->nranks;
    dev.settings = &comm->settings;
    dev.services = &comm->services;
    dev.test_key = comm;
    dev.forced = &comm->algos;
    HostBatchEnv host;
    host.transport = comm->transport.get();
    host.op_timeout_ms = comm->settings.op_timeout_ms;
    host.aborted = &comm->aborted;
    host.scratch = &comm->scratch;
    host.piece_bytes = dev.staging_chunk_bytes;
    auto stream_wait = [comm](vcclStream_t s) { return comm_stream_wait(comm, s); };
    dev.staged.env.host = host;
    dev.staged.env.staging = &dev.staging;
    dev.staged.env.stream_wait = stream_wait;
    dev.direct.env.host = host;
    dev.direct.env.registrations = &dev.registrations;
    dev.direct.env.test_key = comm;
    dev.direct.env.stream_wait = stream_wait;
    if (env::get_bool(env::kP2pDirect)) {
        VCCL_RETURN_IF_ERROR(IpcP2p::create(bootstrap, host_ids, comm, &dev.ipc));
    }
    dev.direct.env.ipc = dev.ipc.get();
    return vcclSuccess;
}

/* Device-path telemetry and idle progress, once the communicator is complete. */
void setup_progress(vcclComm* comm) {
    if (comm->telemetry && comm->dev.ipc && comm->dev.ipc->note_words() >= 2 * comm->nranks + 1) {
        IpcP2p* ipc = comm->dev.ipc.get(); // outlives device_flows (comm_destroy)
        comm->device_flows = std::make_unique<DeviceFlows>(
            comm->telemetry.get(), comm->nranks, [ipc](int word) { return ipc->note_value(word); },
            [ipc](int peer, uint64_t* clear_ns, bool* failed) { ipc->fail_state(peer, clear_ns, failed); });
        comm->dev.flows = comm->device_flows.get();
        comm->dev.direct.env.flows = comm->device_flows.get();
    }
    int idle_ms = int(env::get_int(env::kIdleProgressMs));
    if (idle_ms > 0 && (comm->transport->wants_idle_progress() || comm->device_flows)) {
        // Device transfers still outstanding are looked at while idle too, so telemetry shows them done.
        std::function<bool()> poll_device;
        if (comm->device_flows) poll_device = [flows = comm->device_flows.get()] { return flows->poll(); };
        comm->idle_progress =
            std::make_unique<IdleProgress>(&comm->op_mutex, comm->transport.get(), idle_ms, &comm->op_count,
                                           &comm->dev.staged_pending, std::move(poll_device));
    }
}

} // namespace

vcclResult_t comm_build(vcclComm* comm, std::shared_ptr<Bootstrap> bootstrap, const vcclConfig_t* config) {
    // A test that changed VCCL_* variables for this communicator asks for them to be read again.
    if (test_point(nullptr, TestPoint::EnvReload)) env::reload();
    comm->rank = bootstrap->rank();
    comm->nranks = bootstrap->nranks();
    read_settings(comm, config);

    // Rank 0 names the communicator; everyone learns the name, which also checks the bootstrap works.
    uint64_t hash = 0;
    if (comm->rank == 0) hash = mix64(std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32));
    VCCL_RETURN_IF_ERROR(bootstrap->broadcast(&hash, sizeof(hash), 0));
    comm->hash = hash;
    char name[32];
    snprintf(name, sizeof(name), "comm-%016llx", (unsigned long long)hash);
    comm->name = config != nullptr && config->commName != nullptr ? config->commName : name;

    TransportOptions options;
    VCCL_RETURN_IF_ERROR(find_local_ranks(bootstrap.get(), &comm->local_rank, &comm->local_size, &options.host_ids));
    comm->hosts = HostGroups::from_ids(options.host_ids);
    std::string backup;
    rail_devices(comm->local_rank, comm->local_size, &options.net_devices, &backup);
    if (config != nullptr && config->netName != nullptr) {
        options.net_devices = config->netName;
        comm->config_net_name = config->netName;
    }
    VCCL_RETURN_IF_ERROR(create_transport(comm, bootstrap.get(), config, &options, backup));
    VCCL_RETURN_IF_ERROR(setup_device_path(comm, bootstrap.get(), options.host_ids));
    // No rank returns before every rank has connected to every peer: one that destroyed its new
    // communicator at once would free its UCX worker (shared-memory FIFO) while a slower peer was still
    // attaching to it, failing that peer's init (found by vccl-perf --soak; test_comm's
    // SplitThenDestroyAtOnceInALoop).
    VCCL_RETURN_IF_ERROR(bootstrap->barrier());
    comm->bootstrap = std::move(bootstrap);
    setup_progress(comm);
    VCCL_INFO(kLogInit, "%s: rank %d of %d ready (transport %s)", comm->name.c_str(), comm->rank, comm->nranks,
              comm->transport->name());
    return vcclSuccess;
}

vcclResult_t comm_init_with_bootstrap(vcclComm_t* out, std::shared_ptr<Bootstrap> bootstrap,
                                      const vcclConfig_t* config) {
    return comm_create(out, [bootstrap = std::move(bootstrap)](const CancelScope*, std::shared_ptr<Bootstrap>* made) {
        *made = bootstrap;
        return vcclSuccess;
    }, config);
}

/* A child made with a NULL config takes its parent's settings, as in NCCL: the same network devices (when they
 * were configured), CTA bound, telemetry choice, operation timeout and blocking or not; it gets a name of its
 * own. `storage` keeps the strings. */
const vcclConfig_t* comm_child_config(const vcclComm* parent, const vcclConfig_t* given, vcclConfig_t* storage) {
    if (given != nullptr) return given;
    *storage = VCCL_CONFIG_INITIALIZER;
    storage->maxCtas = parent->dev.max_ctas;
    storage->netName = parent->config_net_name.empty() ? nullptr : parent->config_net_name.c_str();
    storage->telemetry = parent->telemetry != nullptr ? 1 : 0;
    if (parent->nonblocking) storage->blocking = 0;
    if (parent->settings.op_timeout_ms >= 0) { // a negative VCCL_OP_TIMEOUT_MS is left to the environment again
        storage->opTimeoutMs = int(std::min<int64_t>(parent->settings.op_timeout_ms, INT32_MAX));
    }
    return storage;
}

vcclResult_t comm_split(vcclComm* comm, int color, int key, vcclComm_t* out, const vcclConfig_t* given) {
    VCCL_RETURN_IF_ERROR(comm_check_config(given));
    vcclConfig_t inherited;
    const vcclConfig_t* config = given;
    struct Entry {
        int32_t color, key, rank;
    };
    std::vector<Entry> all(comm->nranks);
    all[comm->rank] = {color, key, comm->rank};
    uint64_t split_seq;
    std::shared_ptr<Bootstrap> bootstrap; // a copy: another thread's destroy empties the communicator
    {
        std::lock_guard<std::mutex> lock(comm->op_mutex);
        if (comm->destroyed.load()) {
            return set_last_error(vcclInvalidUsage, "communicator %s was destroyed", comm->name.c_str());
        }
        if (comm->revoked.load()) {
            return set_last_error(vcclInvalidUsage, "communicator %s was revoked (shrink, destroy or abort it)",
                                  comm->name.c_str());
        }
        split_seq = comm->split_seq++;
        bootstrap = comm->bootstrap;
        config = comm_child_config(comm, given, &inherited); // under the lock: destroy empties the parent
    }
    VCCL_RETURN_IF_ERROR(bootstrap->allgather(all.data(), sizeof(Entry)));

    std::vector<Entry> group;
    for (const Entry& e : all) {
        if (color != VCCL_SPLIT_NOCOLOR && e.color == color) group.push_back(e);
    }
    std::stable_sort(group.begin(), group.end(), [](const Entry& a, const Entry& b) {
        return a.key != b.key ? a.key < b.key : a.rank < b.rank;
    });
    std::vector<int> members;
    int new_rank = -1;
    for (const Entry& e : group) {
        if (e.rank == comm->rank) new_rank = int(members.size());
        members.push_back(e.rank);
    }
    uint64_t split_id = mix64(comm->hash ^ mix64(split_seq) ^ mix64(uint64_t(uint32_t(color)) + 0x51));
    if (color == VCCL_SPLIT_NOCOLOR) {
        *out = nullptr;
        return vcclSuccess;
    }
    // Only members call split (the MPI bootstrap builds the group with MPI_Comm_create_group); a nonblocking
    // split does it on the child's creation thread.
    return comm_create(out, [=](const CancelScope*, std::shared_ptr<Bootstrap>* child) {
        VCCL_RETURN_IF_ERROR(bootstrap->split(members, new_rank, split_id, child));
        if (*child == nullptr) return set_last_error(vcclInternalError, "split produced no bootstrap");
        return vcclSuccess;
    }, config);
}

vcclResult_t comm_shrink(vcclComm* comm, const std::vector<int>& members, bool abort_pending, vcclComm_t* out,
                         const vcclConfig_t* given) {
    VCCL_RETURN_IF_ERROR(comm_check_config(given));
    vcclConfig_t inherited;
    const vcclConfig_t* config = given;
    // Abandoning pending operations: they see `aborted` and end; the parent bootstrap stays up, since the
    // new communicator's set-up is routed over it.
    if (abort_pending) comm->aborted.store(true);
    uint64_t shrink_seq;
    std::shared_ptr<Bootstrap> bootstrap;
    {
        std::lock_guard<std::mutex> lock(comm->op_mutex);
        if (comm->destroyed.load()) {
            return set_last_error(vcclInvalidUsage, "communicator %s was destroyed", comm->name.c_str());
        }
        shrink_seq = comm->split_seq++;
        bootstrap = comm->bootstrap;
        config = comm_child_config(comm, given, &inherited);
    }
    int new_rank = int(std::find(members.begin(), members.end(), comm->rank) - members.begin());
    // No exchange among the members is needed: each computes the same list, and excluded ranks take no
    // part (they may be dead).
    uint64_t split_id = mix64(comm->hash ^ mix64(shrink_seq) ^ 0x7368726b6e6b6e00ull);
    return comm_create(out, [=](const CancelScope*, std::shared_ptr<Bootstrap>* child) {
        VCCL_RETURN_IF_ERROR(bootstrap->split(members, new_rank, split_id, child));
        if (*child == nullptr) return set_last_error(vcclInternalError, "shrink produced no bootstrap");
        return vcclSuccess;
    }, config);
}

vcclResult_t comm_revoke(vcclComm* comm) {
    if (comm->revoked.exchange(true)) return vcclSuccess;
    // Every wait of an operation (host algorithms, batches, staged jobs, stream waits) watches `aborted` and gives
    // up within milliseconds. The bootstrap is not aborted: a shrink of the revoked communicator goes over it.
    comm->aborted.store(true);
    // The operation lock is free once the operation in flight on another thread has returned.
    std::lock_guard<std::mutex> lock(comm->op_mutex);
    // Kernels waiting for a peer give up too, and so does every CUDA graph replay of this communicator's calls.
    if (comm->dev.ipc) comm->dev.ipc->abort_kernels();
    VCCL_INFO(kLogInit, "%s: rank %d revoked", comm->name.c_str(), comm->rank);
    return vcclSuccess;
}

vcclResult_t comm_destroy(vcclComm* comm, bool abort) {
    // Two threads may both have passed check_comm (destroy and abort from a watchdog): one destroys.
    if (comm->destroyed.exchange(true)) {
        return set_last_error(vcclInvalidUsage, "communicator %s is already being destroyed or aborted",
                              comm->name.c_str());
    }
    comm_end_creation(comm, abort); // the communicator is complete, or as far as its creation got
    comm_unregister(comm);
    test_point(comm, TestPoint::CommDestroyed);
    if (abort) {
        comm->aborted.store(true);
        if (comm->bootstrap) comm->bootstrap->abort();
    }
    // After a revoke the operations were abandoned: their peers are not waited for, as after an abort.
    const bool quick = abort || comm->revoked.load();
    if (comm->dev.staged_queue) {
        // Staged device work still queued runs first (it owns the transport), for up to the operation timeout;
        // after an abort none starts. Streams waiting for a skipped one are let go (transport/staging/staged_queue.h).
        int64_t t = comm->settings.op_timeout_ms;
        comm->dev.staged_queue->stop(quick ? 0 : t > 0 ? t : int64_t(1) << 40);
        comm->dev.staged_queue.reset();
    }
    comm->idle_progress.reset(); // before the transport goes
    vcclResult_t status = vcclSuccess;
    auto staging = std::make_shared<StagingBuffer>();
    auto landing = std::make_shared<StagingBuffer>();
    auto outgrown = std::make_shared<std::vector<std::unique_ptr<StagingBuffer>>>();
    {
        // An operation running on another thread sees `aborted` and ends within milliseconds.
        std::lock_guard<std::mutex> lock(comm->op_mutex);
        // Streams waiting on a peer's flag: destroy gives the peers the operation timeout to finish (no
        // limit when that is 0), abort none; what is still waiting then is released (transport/cuda_ipc/ipc_p2p.h).
        // Records whose notes came since the last call, confirmed by a read of the FAIL words. Not on abort: the
        // read's copies, stuck behind a blocked stream, would leave release_waits no private stream to read on.
        if (abort) {
            if (comm->device_flows) comm->device_flows->poll();
        } else {
            comm_confirm_device_flows(comm, 100);
        }
        comm->dev.flows = nullptr;
        comm->dev.direct.env.flows = nullptr;
        comm->device_flows.reset(); // before the telemetry and the note words it reads
        if (comm->dev.ipc) {
            int64_t t = comm->settings.op_timeout_ms;
            comm->dev.ipc->release_waits(quick ? 0 : t > 0 ? t : int64_t(1) << 40);
        }
        if (comm->transport) {
            status = comm->transport->close(Deadline::after_ms(quick ? 500 : 5000));
            comm->transport.reset();
        }
        std::lock_guard<std::mutex> pointer_lock(comm->telemetry_mutex);
        comm->telemetry.reset(); // after the transport: closing may still complete requests
        staging->swap(comm->dev.staging); // freed with the GPU state below
        comm->dev.direct.take_landing(landing.get(), outgrown.get());
        // The object itself is never freed, only emptied (a few hundred bytes stay per communicator). Freed, its
        // address came back for the next communicator, and a stale handle then passed the live-handle check and
        // acted on the new one (even destroying it); and a call of another thread that had passed that check
        // and waited for the operation lock locked freed memory, or ran on a communicator being taken apart.
        // Now such a call finds `aborted` under the lock and returns vcclInvalidUsage, and a stale handle is
        // never live again.
        comm->aborted.store(true);
    }
    // cudaFree of the flag buffer and the reduction scratch waits for the whole GPU: while the communicator's
    // last device work has not run (a stream the caller's own work still blocks), they are freed by a thread
    // once it has, so destroy and abort do not wait for the device. Abort hands them to the thread in any case:
    // other work may keep the GPU busy or blocked (a watchdog aborting beside a hung stream waited for it).
    // The staging buffers too: a call that stopped waiting for its stream (comm_stream_wait) may have left
    // copies into them queued there.
    comm->dev.direct.env.ipc = nullptr;
    std::shared_ptr<IpcP2p> ipc(std::move(comm->dev.ipc));
    auto scratch = std::make_shared<DeviceScratch>(std::move(comm->dev.device_scratch));
    auto in_place_scratch = std::make_shared<DeviceScratch>(std::move(comm->dev.in_place_scratch));
    auto premul_scratch = std::make_shared<DeviceScratch>(std::move(comm->dev.premul_scratch));
    // A host-only communicator frees nothing on the GPU. A graph holding its send/recv may have a replay waiting on a
    // peer that will never replay: the GPU would not become idle for the caller either.
    const bool on_thread = ipc != nullptr && (abort || ipc->graphs_hold_transfers());
    const int device = ipc != nullptr ? ipc->device() : -1;
    comm->dev.stream_order.run_when_done(
        [ipc = std::move(ipc), scratch = std::move(scratch), in_place_scratch = std::move(in_place_scratch),
         premul_scratch = std::move(premul_scratch), staging = std::move(staging), landing = std::move(landing),
         outgrown = std::move(outgrown)]() mutable {
            ipc.reset();
            scratch.reset();
            in_place_scratch.reset();
            premul_scratch.reset();
            staging.reset();
            landing.reset();
            outgrown.reset();
        },
        on_thread, device);
    VCCL_INFO(kLogInit, "%s: rank %d %s", comm->name.c_str(), comm->rank, abort ? "aborted" : "destroyed");
    {
        std::lock_guard<std::mutex> lock(comm->op_mutex);
        comm->bootstrap.reset();
        comm->scratch.release();
        comm->dev.side_stream.release();
        comm->dev.call_timer.release();
        comm->dev.registrations.clear();
    }
    // A flush that timed out at destroy is not the caller's problem: data already completed.
    (void)status;
    return vcclSuccess;
}

} // namespace vccl
