/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libvccl-nccl internals: the NCCL communicator wrapper and the helpers the entry points share.
 *
 * An ncclComm_t points at a struct ncclComm of ours that holds the vccl communicator and the CUDA device
 * that was current when it was created (ncclCommCuDevice). Live wrappers are kept in a registry so that a
 * destroyed or foreign handle is answered with ncclInvalidUsage instead of a crash.
 */
#ifndef VCCL_NCCL_COMPAT_COMPAT_H_
#define VCCL_NCCL_COMPAT_COMPAT_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_set>

#include "nccl_compat/nccl_abi.h"
#include "vccl.h"

/* NCCL API version that libvccl-nccl reports through ncclGetVersion: NCCL 2.28.3. */
#define VCCL_NCCL_COMPAT_VERSION_CODE 22803

struct ncclComm {
    uint64_t magic = kMagic;
    vcclComm_t vc = nullptr; /* NULL while its creation waits for ncclGroupEnd, or when that creation failed */
    int cuda_dev = -1;
    ncclResult_t creation = ncclSuccess; /* ncclInProgress until the group ends or the nonblocking creation
                                            finishes; then the creation's result */
    bool nonblocking = false;  /* created with ncclConfig_t.blocking = 0: its own children are created so too */
    bool async_creation = false; /* its creation runs on a thread of its own (not at ncclGroupEnd) */
    int deriving = 0;          /* nonblocking splits/shrinks of this communicator still running */
    static constexpr uint64_t kMagic = 0x6e63636c636f6d6dull; /* "ncclcomm" */
};

namespace vccl {
namespace nccl_compat {

/* vccl status -> NCCL status (vcclTimeout, which NCCL lacks, becomes ncclRemoteError). */
ncclResult_t to_nccl(vcclResult_t r);

/* Records the error for ncclGetLastError, logs it as a warning (one line, "NCCL compat: ...") and returns r. */
ncclResult_t fail(ncclResult_t r, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* The entry point `fn` is not supported by vccl: ncclInvalidUsage with one warning naming it. */
ncclResult_t unsupported(const char* fn, const char* why);

/* True when comm is a live wrapper (no logging). */
bool is_live(const ncclComm* comm);
/* The vccl communicator of a live wrapper (read under the registry lock), or NULL. */
vcclComm_t live_vccl_comm(const ncclComm* comm);

/* Checks that comm is a live wrapper with a vccl communicator; *vc gets it. With `creation` given, a wrapper
 * whose creation is pending or failed is accepted too (*vc = NULL, *creation says which). */
ncclResult_t lookup(const ncclComm* comm, const char* fn, vcclComm_t* vc, int* cuda_dev = nullptr,
                    ncclResult_t* creation = nullptr);
/* lookup() first waits until no nonblocking split/shrink/grow of comm is running; peek() does not (for
 * ncclCommGetAsyncError, which must answer at once). *nonblocking gets the wrapper's flag. */
ncclResult_t peek(const ncclComm* comm, const char* fn, vcclComm_t* vc, ncclResult_t* creation,
                  bool* nonblocking = nullptr);
/* Counts a nonblocking creation from parent as running (+1) or ended (-1); waiters are woken. */
void note_deriving(ncclComm* parent, int delta);

/* Wraps a new vccl communicator (registered as live); on failure destroys vc. */
ncclResult_t wrap(vcclComm_t vc, int cuda_dev, ncclComm_t* out, bool nonblocking = false);

/* A wrapper with no communicator yet (creation ncclInProgress), for a creation deferred to ncclGroupEnd. */
ncclResult_t wrap_pending(int cuda_dev, ncclComm_t* out, bool nonblocking = false, bool async_creation = false);
/* Ends a deferred creation: the wrapper gets vc (r == ncclSuccess) or keeps none and remembers r. */
void complete_pending(ncclComm* comm, vcclComm_t vc, ncclResult_t r);

/* Inside ncclGroupStart/ncclGroupEnd on this thread, communicators are created at ncclGroupEnd, all at once
 * (one thread each), as NCCL does: a thread creating several ranks' communicators (nccl-tests) would
 * otherwise wait in the first for ranks it has not created yet. make() runs with the device cuda_dev current.
 * *out gets a pending wrapper, or NULL when want_wrapper is false (a split with NCCL_SPLIT_NOCOLOR). */
using Creation = std::function<vcclResult_t(vcclComm_t*)>;
bool in_group();
ncclResult_t defer_creation(const char* fn, int cuda_dev, Creation make, bool want_wrapper, ncclComm_t* out);

/* Nonblocking creation (ncclConfig_t.blocking = 0, outside a group): make() runs on a thread of its own with
 * cuda_dev current and the call returns ncclInProgress at once; ncclCommGetAsyncError on *out answers
 * ncclInProgress until it ends, then its result. `parent` (a split, shrink or grow) is kept busy meanwhile:
 * other calls on it wait for the creation to end (vccl's communicators are not used by two threads at once).
 * want_wrapper false (NCCL_SPLIT_NOCOLOR): runs before returning, *out = NULL. */
ncclResult_t start_nonblocking_creation(const char* fn, int cuda_dev, Creation make, bool want_wrapper,
                                        ncclComm* parent, bool nonblocking, ncclComm_t* out);
/* Blocks until comm's nonblocking creation (if any) has ended; bounded by vccl's bootstrap timeouts. */
void wait_async_creation(const ncclComm* comm);

/* Forgets the windows of comm (their registrations end with its vccl communicator). */
void drop_windows(const ncclComm* comm);

/* Removes comm from the registry and frees it (the vccl communicator is the caller's business). */
void unwrap(ncclComm* comm);

/* Maps datatype/op, refusing values vccl does not have. */
ncclResult_t map_dtype(ncclDataType_t t, const char* fn, vcclDataType_t* out);
ncclResult_t map_op(ncclRedOp_t op, const char* fn, vcclRedOp_t* out);

/* Current CUDA device, or -1 without CUDA or a device (the CUDA error is cleared). */
int current_device();

} // namespace nccl_compat
} // namespace vccl

#endif
