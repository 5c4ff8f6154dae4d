/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libvccl-nccl: ncclGroupStart/ncclGroupEnd, and communicators created inside a group.
 *
 * NCCL lets one thread create the communicators of several ranks (one per GPU) between ncclGroupStart and
 * ncclGroupEnd; the creations run together at ncclGroupEnd. vccl's creation is a blocking collective, so
 * made at once the first would wait for ranks this thread has not created yet (until VCCL_BOOTSTRAP_TIMEOUT).
 * Here a creation inside a group hands back a wrapper that is not usable yet; ncclGroupEnd runs every
 * creation of the group on a thread of its own, with the device that was current at the call, then ends the
 * vccl group (the group's collectives). Groups are per thread, as in NCCL.
 */
#include <string>
#include <thread>
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

struct Pending {
    const char* fn;
    int cuda_dev;
    Creation make;
    ncclComm* wrapper; // NULL: the rank takes part but gets no communicator (NCCL_SPLIT_NOCOLOR)
};

thread_local int t_depth = 0;
thread_local std::vector<Pending>* t_pending = nullptr; // allocated on first use, freed when emptied

struct Outcome {
    ncclResult_t result = ncclSuccess;
    vcclComm_t vc = nullptr;
    std::string why; // vccl's last error on the creating thread (thread-local there)
};

void run_one(const Pending& p, Outcome* out) {
#if VCCL_HAVE_CUDA
    if (p.cuda_dev >= 0 && cudaSetDevice(p.cuda_dev) != cudaSuccess) {
        (void)cudaGetLastError();
        out->result = ncclUnhandledCudaError;
        out->why = "cudaSetDevice(" + std::to_string(p.cuda_dev) + ") failed";
        return;
    }
#endif
    out->result = to_nccl(p.make(&out->vc));
    if (out->result != ncclSuccess) out->why = vcclGetLastError(nullptr);
}

/* Runs the creations of the group that just ended; returns the first failure (every one is reported). */
ncclResult_t create_all(std::vector<Pending>& pending) {
    std::vector<Outcome> outcomes(pending.size());
    std::vector<std::thread> threads;
    threads.reserve(pending.size());
    for (size_t i = 0; i < pending.size(); ++i) threads.emplace_back(run_one, std::cref(pending[i]), &outcomes[i]);
    for (auto& t : threads) t.join();
    ncclResult_t first = ncclSuccess;
    for (size_t i = 0; i < pending.size(); ++i) {
        Outcome& o = outcomes[i];
        ncclResult_t r = o.result;
        if (r != ncclSuccess) {
            fail(r, "%s (created at ncclGroupEnd): %s", pending[i].fn, o.why.empty() ? ncclGetErrorString(r) : o.why.c_str());
            if (first == ncclSuccess) first = r;
        }
        if (pending[i].wrapper != nullptr) {
            complete_pending(pending[i].wrapper, o.vc, r);
        } else if (o.vc != nullptr) { // a split that was to give no communicator gave one: not ours to keep
            vcclCommDestroy(o.vc);
        }
    }
    return first;
}

} // namespace

bool in_group() { return t_depth > 0; }

ncclResult_t defer_creation(const char* fn, int cuda_dev, Creation make, bool want_wrapper, ncclComm_t* out) {
    ncclComm_t wrapper = nullptr;
    if (want_wrapper) {
        ncclResult_t r = wrap_pending(cuda_dev, &wrapper);
        if (r != ncclSuccess) return r;
    }
    if (t_pending == nullptr) t_pending = new std::vector<Pending>();
    t_pending->push_back(Pending{fn, cuda_dev, std::move(make), wrapper});
    *out = wrapper;
    VCCL_INFO(kLogInit, "NCCL compat: %s inside a group: the communicator is created at ncclGroupEnd", fn);
    return ncclSuccess;
}

} // namespace nccl_compat
} // namespace vccl

using namespace vccl::nccl_compat;

extern "C" {

VNCCL_API(ncclResult_t, ncclGroupStart, void) {
    ncclResult_t r = to_nccl(vcclGroupStart());
    if (r == ncclSuccess) ++t_depth;
    return r;
}

VNCCL_API(ncclResult_t, ncclGroupEnd, void) {
    if (t_depth == 0) return to_nccl(vcclGroupEnd()); // vccl reports the unmatched end
    if (--t_depth > 0) return to_nccl(vcclGroupEnd());
    ncclResult_t created = ncclSuccess;
    if (t_pending != nullptr) {
        std::vector<Pending> pending;
        pending.swap(*t_pending);
        delete t_pending;
        t_pending = nullptr;
        created = create_all(pending);
    }
    ncclResult_t ended = to_nccl(vcclGroupEnd());
    return created != ncclSuccess ? created : ended;
}

} // extern "C"
