/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libvccl-nccl: nonblocking communicators (ncclConfig_t.blocking = 0), as PyTorch uses them for eager init and
 * split (TORCH_NCCL_USE_COMM_NONBLOCKING=1).
 *
 * vccl's creation is a blocking collective. A nonblocking creation here runs it on a detached thread of its
 * own and returns ncclInProgress at once; the wrapper answers ncclInProgress from ncclCommGetAsyncError until
 * the thread ends, then the creation's result, and refuses other calls meanwhile (ncclInvalidUsage, naming the
 * state), as NCCL asks callers to wait for ncclSuccess first. A split, shrink or grow of an existing
 * communicator keeps that parent busy while it runs: calls on the parent wait for it, since one vccl
 * communicator is not driven by two threads at once. Collectives on a nonblocking communicator complete their
 * enqueue before returning, so they answer ncclSuccess (which NCCL's nonblocking contract allows).
 * Inside ncclGroupStart/ncclGroupEnd creations stay deferred to ncclGroupEnd (group.cc), which returns once
 * they are done.
 */
#include <string>
#include <thread>

#include "config.h"
#include "core/log.h"
#include "nccl_compat/compat.h"

#if VCCL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace vccl {
namespace nccl_compat {

namespace {

/* The creation thread: device current as at the call, then the creation; the result lands in the wrapper. */
void create(std::string fn, int cuda_dev, Creation make, ncclComm* wrapper, ncclComm* parent) {
    ncclResult_t r = ncclSuccess;
    vcclComm_t vc = nullptr;
#if VCCL_HAVE_CUDA
    // The application may capture a CUDA graph in global mode meanwhile: this thread's CUDA calls must not disturb it.
    cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
    if (cudaThreadExchangeStreamCaptureMode(&relaxed) != cudaSuccess) cudaGetLastError();
    if (cuda_dev >= 0 && cudaSetDevice(cuda_dev) != cudaSuccess) {
        (void)cudaGetLastError();
        r = fail(ncclUnhandledCudaError, "%s (nonblocking): cudaSetDevice(%d) failed", fn.c_str(), cuda_dev);
    }
#endif
    if (r == ncclSuccess) {
        r = to_nccl(make(&vc));
        if (r != ncclSuccess) fail(r, "%s (nonblocking): %s", fn.c_str(), vcclGetLastError(nullptr));
    }
    complete_pending(wrapper, vc, r);
    if (parent != nullptr) note_deriving(parent, -1);
    VCCL_INFO(kLogInit, "NCCL compat: %s (nonblocking) ended: %s", fn.c_str(), ncclGetErrorString(r));
}

} // namespace

ncclResult_t start_nonblocking_creation(const char* fn, int cuda_dev, Creation make, bool want_wrapper,
                                        ncclComm* parent, bool nonblocking, ncclComm_t* out) {
    if (!want_wrapper) {
        // NCCL_SPLIT_NOCOLOR: no communicator to poll, so the rank takes its part before returning.
        vcclComm_t none = nullptr;
        ncclResult_t r = to_nccl(make(&none));
        if (none != nullptr) vcclCommDestroy(none);
        *out = nullptr;
        return r;
    }
    ncclComm_t wrapper = nullptr;
    ncclResult_t r = wrap_pending(cuda_dev, &wrapper, nonblocking, true);
    if (r != ncclSuccess) return r;
    if (parent != nullptr) note_deriving(parent, +1);
    try {
        std::thread(create, std::string(fn), cuda_dev, std::move(make), wrapper, parent).detach();
    } catch (const std::exception& e) {
        if (parent != nullptr) note_deriving(parent, -1);
        complete_pending(wrapper, nullptr, ncclSystemError);
        unwrap(wrapper);
        return fail(ncclSystemError, "%s: could not start the nonblocking creation's thread: %s", fn, e.what());
    }
    *out = wrapper;
    VCCL_INFO(kLogInit, "NCCL compat: %s is nonblocking: the communicator is being created on a thread of its own", fn);
    return ncclInProgress;
}

} // namespace nccl_compat
} // namespace vccl
