/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libvccl-nccl: communicators. Each ncclComm_t wraps a vccl communicator and remembers the CUDA device
 * that was current at init (ncclCommCuDevice). ncclConfig_t maps onto vcclConfig_t: maxCTAs, netName and
 * commName carry over; blocking = 0 makes the creation nonblocking (nonblocking.cc); NCCL's tuning hints (CTA counts, CGA size, traffic class, collnet,
 * resource sharing) are accepted and ignored with an INFO line; fields of a newer NCCL than 2.28 must hold
 * their defaults.
 */
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "config.h"
#include "core/log.h"
#include "nccl_compat/compat.h"

#if VCCL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace vccl {
namespace nccl_compat {

namespace {

std::mutex g_registry_mutex;
std::condition_variable g_registry_changed; // a creation ended or a wrapper's busy count went down
std::unordered_set<const ncclComm*>& registry() {
    static auto* live = new std::unordered_set<const ncclComm*>(); // never destroyed: usable from atexit
    return *live;
}

template <typename T>
bool has_field(const ncclConfig_t* c, size_t offset) {
    return c->size >= offset + sizeof(T);
}
#define VNCCL_HAS(c, f) has_field<decltype(ncclConfig_t::f)>(c, offsetof(ncclConfig_t, f))

void ignore_hint(const char* fn, const char* field, int value) {
    if (value != VNCCL_CONFIG_UNDEF_INT) {
        VCCL_INFO(kLogInit, "NCCL compat: %s: ncclConfig_t.%s=%d ignored (a tuning hint vccl has no use for)", fn,
                  field, value);
    }
}

/* *out is filled and *use_out set when config is not NULL. */
ncclResult_t map_config(const ncclConfig_t* in, const char* fn, vcclConfig_t* out, bool* use_out) {
    *use_out = false;
    if (in == nullptr) return ncclSuccess;
    if (in->magic != VNCCL_CONFIG_MAGIC) {
        return fail(ncclInvalidArgument, "%s: ncclConfig_t was not initialised with NCCL_CONFIG_INITIALIZER (magic 0x%x)",
                    fn, in->magic);
    }
    // NCCL 2.14, the first with ncclConfig_t, ended at netName.
    if (in->size < offsetof(ncclConfig_t, netName) + sizeof(const char*) || in->size > 4096) {
        return fail(ncclInvalidArgument, "%s: ncclConfig_t has an unexpected size %zu", fn, in->size);
    }
    vcclConfig_t c = VCCL_CONFIG_INITIALIZER;
    if (in->blocking != VNCCL_CONFIG_UNDEF_INT) {
        if (in->blocking != 0 && in->blocking != 1) {
            return fail(ncclInvalidArgument, "%s: ncclConfig_t.blocking=%d must be 0 or 1", fn, in->blocking);
        }
        c.blocking = in->blocking; // 0: the creation runs on a thread of this library (nonblocking.cc)
    }
    if (in->maxCTAs != VNCCL_CONFIG_UNDEF_INT) {
        if (in->maxCTAs <= 0) return fail(ncclInvalidArgument, "%s: ncclConfig_t.maxCTAs=%d must be positive", fn, in->maxCTAs);
        c.maxCtas = in->maxCTAs;
    }
    c.netName = in->netName;
    ignore_hint(fn, "cgaClusterSize", in->cgaClusterSize);
    ignore_hint(fn, "minCTAs", in->minCTAs);
    if (VNCCL_HAS(in, splitShare)) ignore_hint(fn, "splitShare", in->splitShare);
    if (VNCCL_HAS(in, trafficClass)) ignore_hint(fn, "trafficClass", in->trafficClass);
    if (VNCCL_HAS(in, commName)) c.commName = in->commName;
    if (VNCCL_HAS(in, collnetEnable)) ignore_hint(fn, "collnetEnable", in->collnetEnable);
    if (VNCCL_HAS(in, CTAPolicy)) ignore_hint(fn, "CTAPolicy", in->CTAPolicy);
    if (VNCCL_HAS(in, shrinkShare)) ignore_hint(fn, "shrinkShare", in->shrinkShare);
    if (VNCCL_HAS(in, nvlsCTAs)) ignore_hint(fn, "nvlsCTAs", in->nvlsCTAs);
    if (VNCCL_HAS(in, nChannelsPerNetPeer)) ignore_hint(fn, "nChannelsPerNetPeer", in->nChannelsPerNetPeer);
    if (VNCCL_HAS(in, nvlinkCentricSched)) ignore_hint(fn, "nvlinkCentricSched", in->nvlinkCentricSched);
    // Fields of an NCCL newer than 2.28: unknown to us, so they must be left at their defaults
    // (NCCL_CONFIG_UNDEF_INT, or zero bytes for NULL pointers and padding).
    for (size_t off = sizeof(ncclConfig_t); off + sizeof(int) <= in->size; off += sizeof(int)) {
        int word;
        memcpy(&word, reinterpret_cast<const char*>(in) + off, sizeof(word));
        if (word != 0 && word != VNCCL_CONFIG_UNDEF_INT) {
            return fail(ncclInvalidUsage,
                        "%s: ncclConfig_t (size %zu, version %u) sets a field at byte %zu that vccl does not know "
                        "(it implements the NCCL 2.28 layout); leave it at its default",
                        fn, in->size, in->version, off);
        }
    }
    *out = c;
    *use_out = true;
    return ncclSuccess;
}

/* A mapped config that outlives the caller's ncclConfig_t (whose strings a deferred creation must not read at
 * ncclGroupEnd: the caller may have freed them by then). */
class OwnedConfig {
  public:
    explicit OwnedConfig(const vcclConfig_t* c) : use_(c != nullptr) {
        if (!use_) return;
        config_ = *c;
        if (c->netName != nullptr) net_name_ = c->netName;
        if (c->commName != nullptr) comm_name_ = c->commName;
        has_net_name_ = c->netName != nullptr;
        has_comm_name_ = c->commName != nullptr;
    }
    vcclConfig_t* get() {
        if (!use_) return nullptr;
        // The wrapper's thread or the group makes the creation nonblocking; the vccl creation under it blocks.
        config_.blocking = 1;
        config_.netName = has_net_name_ ? net_name_.c_str() : nullptr;
        config_.commName = has_comm_name_ ? comm_name_.c_str() : nullptr;
        return &config_;
    }

  private:
    bool use_;
    vcclConfig_t config_{};
    std::string net_name_, comm_name_;
    bool has_net_name_ = false, has_comm_name_ = false;
};

ncclResult_t init_rank(ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank, ncclConfig_t* config,
                       const char* fn) {
    if (comm == nullptr) return fail(ncclInvalidArgument, "%s: comm is NULL", fn);
    vcclConfig_t vconfig;
    bool use_config = false;
    ncclResult_t r = map_config(config, fn, &vconfig, &use_config);
    if (r != ncclSuccess) return r;
    vcclUniqueId vid;
    static_assert(sizeof(vid) == sizeof(id), "unique id sizes");
    memcpy(&vid, &id, sizeof(vid));
    int dev = current_device();
    if (in_group()) {
        // What can be checked now is, as NCCL does; the rest shows at ncclGroupEnd.
        if (nranks < 1) return fail(ncclInvalidArgument, "%s: nranks %d must be at least 1", fn, nranks);
        if (rank < 0 || rank >= nranks) {
            return fail(ncclInvalidArgument, "%s: rank %d is not in 0..%d", fn, rank, nranks - 1);
        }
        OwnedConfig owned(use_config ? &vconfig : nullptr);
        return defer_creation(fn, dev, [=](vcclComm_t* out) mutable {
            return vcclCommInitRankConfig(out, nranks, vid, rank, owned.get());
        }, true, comm);
    }
    if (use_config && vconfig.blocking == 0) {
        OwnedConfig owned(&vconfig);
        return start_nonblocking_creation(fn, dev, [=](vcclComm_t* out) mutable {
            return vcclCommInitRankConfig(out, nranks, vid, rank, owned.get());
        }, true, nullptr, true, comm);
    }
    vcclComm_t vc = nullptr;
    r = to_nccl(vcclCommInitRankConfig(&vc, nranks, vid, rank, use_config ? &vconfig : nullptr));
    if (r != ncclSuccess) return r;
    return wrap(vc, dev, comm);
}

} // namespace

bool is_live(const ncclComm* comm) {
    if (comm == nullptr) return false;
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    return registry().count(comm) != 0;
}

vcclComm_t live_vccl_comm(const ncclComm* comm) {
    if (comm == nullptr) return nullptr;
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    return registry().count(comm) != 0 ? comm->vc : nullptr;
}

/* The wrapper's fields are read under the registry lock: another thread's ncclCommAbort or ncclCommDestroy
 * (a watchdog) may free the wrapper as soon as the lock is let go. */
ncclResult_t find(const ncclComm* comm, const char* fn, bool wait_idle, vcclComm_t* vc, int* cuda_dev,
                  ncclResult_t* creation, bool* nonblocking) {
    if (comm == nullptr) return fail(ncclInvalidArgument, "%s: comm is NULL", fn);
    ncclResult_t state = ncclSuccess;
    bool async = false;
    {
        std::unique_lock<std::mutex> lock(g_registry_mutex);
        if (wait_idle) {
            // A nonblocking split of comm is using it on another thread: wait for it (bounded by vccl's
            // bootstrap timeouts), then look again (the wrapper may have gone meanwhile).
            g_registry_changed.wait(lock, [&] { return registry().count(comm) == 0 || comm->deriving == 0; });
        }
        if (registry().count(comm) == 0) {
            return fail(ncclInvalidUsage, "%s: comm %p is not a live communicator (destroyed or never created)", fn,
                        static_cast<const void*>(comm));
        }
        *vc = comm->vc;
        if (cuda_dev != nullptr) *cuda_dev = comm->cuda_dev;
        state = comm->creation;
        async = comm->async_creation;
        if (creation != nullptr) *creation = state;
        if (nonblocking != nullptr) *nonblocking = comm->nonblocking;
    }
    if (*vc != nullptr || creation != nullptr) return ncclSuccess;
    if (state == ncclInProgress && async) {
        return fail(ncclInvalidUsage,
                    "%s: comm %p is nonblocking and still being created: call ncclCommGetAsyncError until it no "
                    "longer answers ncclInProgress",
                    fn, static_cast<const void*>(comm));
    }
    if (state == ncclInProgress) {
        return fail(ncclInvalidUsage,
                    "%s: comm %p was created inside ncclGroupStart/ncclGroupEnd and is usable only after ncclGroupEnd",
                    fn, static_cast<const void*>(comm));
    }
    return fail(ncclInvalidUsage, "%s: comm %p could not be created (%s); destroy or abort it", fn,
                static_cast<const void*>(comm), ncclGetErrorString(state));
}

ncclResult_t lookup(const ncclComm* comm, const char* fn, vcclComm_t* vc, int* cuda_dev, ncclResult_t* creation) {
    return find(comm, fn, true, vc, cuda_dev, creation, nullptr);
}

ncclResult_t peek(const ncclComm* comm, const char* fn, vcclComm_t* vc, ncclResult_t* creation, bool* nonblocking) {
    return find(comm, fn, false, vc, nullptr, creation, nonblocking);
}

void note_deriving(ncclComm* parent, int delta) {
    {
        std::lock_guard<std::mutex> lock(g_registry_mutex);
        parent->deriving += delta;
    }
    g_registry_changed.notify_all();
}

void wait_async_creation(const ncclComm* comm) {
    std::unique_lock<std::mutex> lock(g_registry_mutex);
    g_registry_changed.wait(lock, [&] {
        return registry().count(comm) == 0 || !comm->async_creation || comm->creation != ncclInProgress;
    });
}

ncclResult_t wrap(vcclComm_t vc, int cuda_dev, ncclComm_t* out, bool nonblocking) {
    auto* c = new (std::nothrow) ncclComm();
    if (c == nullptr) {
        vcclCommDestroy(vc);
        return fail(ncclSystemError, "out of memory creating a communicator");
    }
    c->vc = vc;
    c->cuda_dev = cuda_dev;
    c->nonblocking = nonblocking;
    {
        std::lock_guard<std::mutex> lock(g_registry_mutex);
        registry().insert(c);
    }
    *out = c;
    return ncclSuccess;
}

ncclResult_t wrap_pending(int cuda_dev, ncclComm_t* out, bool nonblocking, bool async_creation) {
    auto* c = new (std::nothrow) ncclComm();
    if (c == nullptr) return fail(ncclSystemError, "out of memory creating a communicator");
    c->cuda_dev = cuda_dev;
    c->creation = ncclInProgress;
    c->nonblocking = nonblocking;
    c->async_creation = async_creation;
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    registry().insert(c);
    *out = c;
    return ncclSuccess;
}

void complete_pending(ncclComm* comm, vcclComm_t vc, ncclResult_t r) {
    {
        std::lock_guard<std::mutex> lock(g_registry_mutex);
        comm->vc = r == ncclSuccess ? vc : nullptr;
        comm->creation = r;
    }
    g_registry_changed.notify_all();
}

void unwrap(ncclComm* comm) {
    drop_windows(comm);
    {
        std::lock_guard<std::mutex> lock(g_registry_mutex);
        registry().erase(comm);
    }
    comm->magic = 0;
    delete comm;
}

int current_device() {
#if VCCL_HAVE_CUDA
    int count = 0, dev = -1;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count <= 0 || cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError(); // no GPU (host-memory use): leave no sticky error behind
        return -1;
    }
    return dev;
#else
    return -1;
#endif
}

} // namespace nccl_compat
} // namespace vccl

using namespace vccl;
using namespace vccl::nccl_compat;

namespace {
/* Split and shrink: a communicator made from a live one, with the config mapped and the parent's device kept.
 * make(vc, config or NULL, &child) calls vccl; a NULL child (NCCL_SPLIT_NOCOLOR, no_child) gives *newcomm = NULL.
 * Inside a group the creation waits for ncclGroupEnd. */
template <typename Make>
ncclResult_t derive_comm(ncclComm_t comm, const char* fn, ncclComm_t* newcomm, ncclConfig_t* config, bool no_child,
                         Make make) {
    vcclComm_t vc = nullptr;
    int cuda_dev = -1;
    ncclResult_t r = lookup(comm, fn, &vc, &cuda_dev);
    if (r != ncclSuccess) return r;
    if (newcomm == nullptr) return fail(ncclInvalidArgument, "%s: newcomm is NULL", fn);
    vcclConfig_t vconfig;
    bool use_config = false;
    r = map_config(config, fn, &vconfig, &use_config);
    if (r != ncclSuccess) return r;
    if (in_group()) {
        OwnedConfig owned(use_config ? &vconfig : nullptr);
        return defer_creation(fn, cuda_dev, [=](vcclComm_t* child) mutable {
            return make(vc, owned.get(), child);
        }, !no_child, newcomm);
    }
    // As NCCL: a child made without a config takes its parent's (blocking or not).
    bool parent_nonblocking = false;
    ncclResult_t ignored;
    r = peek(comm, fn, &vc, &ignored, &parent_nonblocking);
    if (r != ncclSuccess) return r;
    const bool nonblocking = use_config ? vconfig.blocking == 0 : parent_nonblocking;
    if (nonblocking) {
        OwnedConfig owned(use_config ? &vconfig : nullptr);
        return start_nonblocking_creation(fn, cuda_dev, [=](vcclComm_t* child) mutable {
            return make(vc, owned.get(), child);
        }, !no_child, comm, true, newcomm);
    }
    vcclComm_t child = nullptr;
    r = to_nccl(make(vc, use_config ? &vconfig : nullptr, &child));
    if (r != ncclSuccess) return r;
    if (child == nullptr) {
        *newcomm = nullptr;
        return ncclSuccess;
    }
    return wrap(child, cuda_dev, newcomm);
}
} // namespace

extern "C" {

VNCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
    if (uniqueId == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    vcclUniqueId vid;
    ncclResult_t r = to_nccl(vcclGetUniqueId(&vid));
    if (r == ncclSuccess) memcpy(uniqueId, &vid, sizeof(*uniqueId));
    return r;
}

VNCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
          ncclConfig_t* config) {
    return init_rank(comm, nranks, commId, rank, config, "ncclCommInitRankConfig");
}

VNCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
    return init_rank(comm, nranks, commId, rank, nullptr, "ncclCommInitRank");
}

/* Several roots only spread NCCL's bootstrap load; vccl bootstraps through the first id. */
VNCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank, int nId,
          ncclUniqueId* commIds, ncclConfig_t* config) {
    if (nId < 1 || commIds == nullptr) {
        return fail(ncclInvalidArgument, "ncclCommInitRankScalable: need at least one unique id (nId=%d)", nId);
    }
    return init_rank(newcomm, nranks, commIds[0], myrank, config, "ncclCommInitRankScalable");
}

/* One process, ndev GPUs: the creations are those of a group (group.cc), one thread each with its device
 * current; the caller's device is left as it was. */
VNCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist) {
    const char* fn = "ncclCommInitAll";
    if (comms == nullptr) return fail(ncclInvalidArgument, "%s: comms is NULL", fn);
    if (ndev < 1) return fail(ncclInvalidArgument, "%s: ndev %d must be at least 1", fn, ndev);
#if VCCL_HAVE_CUDA
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError();
        count = 0;
    }
    std::vector<int> devs(ndev);
    for (int i = 0; i < ndev; ++i) {
        devs[i] = devlist != nullptr ? devlist[i] : i;
        if (devs[i] < 0 || devs[i] >= count) {
            return fail(ncclInvalidArgument, "%s: device %d is not one of the %d CUDA devices", fn, devs[i], count);
        }
        for (int j = 0; j < i; ++j) {
            if (devs[j] == devs[i]) return fail(ncclInvalidArgument, "%s: device %d listed twice", fn, devs[i]);
        }
    }
    ncclUniqueId id;
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) return r;
    int caller_dev = current_device();
    std::vector<ncclComm_t> out(ndev, nullptr);
    r = ncclGroupStart();
    for (int i = 0; i < ndev && r == ncclSuccess; ++i) {
        if (cudaSetDevice(devs[i]) != cudaSuccess) {
            r = fail(ncclUnhandledCudaError, "%s: cudaSetDevice(%d) failed", fn, devs[i]);
        } else {
            r = init_rank(&out[i], ndev, id, i, nullptr, fn); // deferred: the group is open
        }
    }
    if (caller_dev >= 0) cudaSetDevice(caller_dev);
    // With r failed the creations already queued still run, and fail after VCCL_BOOTSTRAP_TIMEOUT (a rank is
    // missing), as they did when each had a thread of its own here.
    ncclResult_t ended = ncclGroupEnd();
    if (r == ncclSuccess) r = ended;
    if (r != ncclSuccess) {
        for (ncclComm_t c : out)
            if (c != nullptr) ncclCommAbort(c);
        return r;
    }
    for (int i = 0; i < ndev; ++i) comms[i] = out[i];
    return ncclSuccess;
#else
    return unsupported(fn, "built without CUDA");
#endif
}

/* vccl completes every operation before its call returns (host) or before the stream continues
 * (device), so there is nothing left to flush. */
VNCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
    vcclComm_t vc = nullptr;
    return lookup(comm, "ncclCommFinalize", &vc);
}

namespace {
/* Destroy and abort: a wrapper whose deferred creation failed is released (it holds nothing); one whose
 * creation still waits for ncclGroupEnd cannot be (the group's end would fill it in). */
ncclResult_t release(ncclComm_t comm, const char* fn, bool abort) {
    vcclComm_t vc = nullptr;
    ncclResult_t creation = ncclSuccess;
    ncclResult_t r = lookup(comm, fn, &vc, nullptr, &creation);
    if (r != ncclSuccess) return r;
    if (creation == ncclInProgress && comm->async_creation) {
        // A nonblocking creation cannot be called off half way: let it end (bounded by the bootstrap's
        // timeouts), then release what it made.
        wait_async_creation(comm);
        r = lookup(comm, fn, &vc, nullptr, &creation);
        if (r != ncclSuccess) return r;
    }
    if (creation == ncclInProgress) {
        return fail(ncclInvalidUsage, "%s: comm %p is still being created (call ncclGroupEnd first)", fn,
                    static_cast<const void*>(comm));
    }
    if (vc == nullptr) {
        unwrap(comm);
        return ncclSuccess;
    }
    r = to_nccl(abort ? vcclCommAbort(vc) : vcclCommDestroy(vc));
    if (r == ncclSuccess || abort) unwrap(comm); // abort always releases the handle
    return r;
}
} // namespace

VNCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) { return release(comm, "ncclCommDestroy", false); }

VNCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
    if (comm == nullptr) return ncclSuccess; // NCCL accepts aborting a NULL communicator
    return release(comm, "ncclCommAbort", true);
}

/* NCCL_REVOKE_DEFAULT is 0, as VCCL_REVOKE_DEFAULT; vccl's revoke is blocking (it returns once the rank's
 * operations in flight have ended), so it never answers ncclInProgress. */
VNCCL_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
    vcclComm_t vc = nullptr;
    ncclResult_t r = lookup(comm, "ncclCommRevoke", &vc);
    return r != ncclSuccess ? r : to_nccl(vcclCommRevoke(vc, revokeFlags));
}
static_assert(VCCL_REVOKE_DEFAULT == 0, "nccl.h 2.28's NCCL_REVOKE_DEFAULT (0) is passed through");

VNCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
          ncclConfig_t* config) {
    if (color < 0 && color != VNCCL_SPLIT_NOCOLOR) {
        return fail(ncclInvalidArgument, "ncclCommSplit: color %d must be >= 0 or NCCL_SPLIT_NOCOLOR", color);
    }
    return derive_comm(comm, "ncclCommSplit", newcomm, config, color == VNCCL_SPLIT_NOCOLOR,
                       [=](vcclComm_t vc, vcclConfig_t* c, vcclComm_t* child) {
                           return vcclCommSplit(vc, color, key, child, c);
                       });
}

/* NCCL 2.29's grow: the id is made by one rank of the communicator; vccl's is a unique id like any other. */
VNCCL_API(ncclResult_t, ncclCommGetUniqueId, ncclComm_t comm, ncclUniqueId* uniqueId) {
    vcclComm_t vc = nullptr;
    ncclResult_t r = lookup(comm, "ncclCommGetUniqueId", &vc);
    if (r != ncclSuccess) return r;
    if (uniqueId == nullptr) return fail(ncclInvalidArgument, "ncclCommGetUniqueId: uniqueId is NULL");
    vcclUniqueId vid;
    r = to_nccl(vcclCommGetUniqueId(vc, &vid));
    if (r == ncclSuccess) memcpy(uniqueId, &vid, sizeof(*uniqueId));
    return r;
}

/* Ranks of comm derive the grown communicator from it (keeping its device, as a split does); a new rank (comm
 * NULL) creates one as ncclCommInitRank does, on the device current now. */
VNCCL_API(ncclResult_t, ncclCommGrow, ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
          ncclComm_t* newcomm, ncclConfig_t* config) {
    const char* fn = "ncclCommGrow";
    struct Id {
        bool given;
        vcclUniqueId id;
    } id{uniqueId != nullptr, {}};
    if (uniqueId != nullptr) memcpy(&id.id, uniqueId, sizeof(id.id));
    if (comm != nullptr) {
        return derive_comm(comm, fn, newcomm, config, false, [=](vcclComm_t vc, vcclConfig_t* c, vcclComm_t* child) {
            return vcclCommGrow(vc, nRanks, id.given ? &id.id : nullptr, rank, child, c);
        });
    }
    if (newcomm == nullptr) return fail(ncclInvalidArgument, "%s: newcomm is NULL", fn);
    vcclConfig_t vconfig;
    bool use_config = false;
    ncclResult_t r = map_config(config, fn, &vconfig, &use_config);
    if (r != ncclSuccess) return r;
    const int dev = current_device();
    if (in_group()) {
        OwnedConfig owned(use_config ? &vconfig : nullptr);
        return defer_creation(fn, dev, [=](vcclComm_t* out) mutable {
            return vcclCommGrow(nullptr, nRanks, id.given ? &id.id : nullptr, rank, out, owned.get());
        }, true, newcomm);
    }
    if (use_config && vconfig.blocking == 0) {
        OwnedConfig owned(&vconfig);
        return start_nonblocking_creation(fn, dev, [=](vcclComm_t* out) mutable {
            return vcclCommGrow(nullptr, nRanks, id.given ? &id.id : nullptr, rank, out, owned.get());
        }, true, nullptr, true, newcomm);
    }
    vcclComm_t vc = nullptr;
    r = to_nccl(vcclCommGrow(nullptr, nRanks, id.given ? &id.id : nullptr, rank, &vc, use_config ? &vconfig : nullptr));
    if (r != ncclSuccess) return r;
    return wrap(vc, dev, newcomm);
}

/* NCCL_SHRINK_DEFAULT and NCCL_SHRINK_ABORT have vccl's values (checked at build time below). The excluded
 * ranks do not call it, as with NCCL. */
VNCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
          ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
    // The list is copied: a deferred shrink runs at ncclGroupEnd, when the caller's array may be gone.
    std::vector<int> excluded;
    if (excludeRanksList != nullptr && excludeRanksCount > 0) {
        excluded.assign(excludeRanksList, excludeRanksList + excludeRanksCount);
    }
    return derive_comm(comm, "ncclCommShrink", newcomm, config, false,
                       [=](vcclComm_t vc, vcclConfig_t* c, vcclComm_t* child) mutable {
                           return vcclCommShrink(vc, excludeRanksList == nullptr ? nullptr : excluded.data(),
                                                 excludeRanksCount, child, c, shrinkFlags);
                       });
}
static_assert(VCCL_SHRINK_DEFAULT == 0x00 && VCCL_SHRINK_ABORT == 0x01,
              "nccl.h 2.28's NCCL_SHRINK_DEFAULT (0) and NCCL_SHRINK_ABORT (1) are passed through");

VNCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
    vcclComm_t vc = nullptr;
    ncclResult_t creation = ncclSuccess;
    ncclResult_t r = peek(comm, "ncclCommGetAsyncError", &vc, &creation);
    if (r != ncclSuccess) return r;
    if (asyncError == nullptr) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
    if (vc == nullptr) { // created in a group or nonblocking: in progress until it ends, then the creation's error
        *asyncError = creation;
        return ncclSuccess;
    }
    vcclResult_t state;
    r = to_nccl(vcclCommGetAsyncError(vc, &state));
    if (r == ncclSuccess) *asyncError = to_nccl(state);
    return r;
}

VNCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
    vcclComm_t vc = nullptr;
    ncclResult_t r = lookup(comm, "ncclCommCount", &vc);
    return r != ncclSuccess ? r : to_nccl(vcclCommCount(vc, count));
}

VNCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
    vcclComm_t vc = nullptr;
    ncclResult_t r = lookup(comm, "ncclCommUserRank", &vc);
    return r != ncclSuccess ? r : to_nccl(vcclCommUserRank(vc, rank));
}

/* The device current when the communicator was created; -1 when there was none (host-only use). */
VNCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
    vcclComm_t vc = nullptr;
    int cuda_dev = -1;
    ncclResult_t r = lookup(comm, "ncclCommCuDevice", &vc, &cuda_dev);
    if (r != ncclSuccess) return r;
    if (device == nullptr) return fail(ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
    *device = cuda_dev;
    return ncclSuccess;
}

} // extern "C"
