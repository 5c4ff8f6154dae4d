/*
 * libvccl-nccl internals: the NCCL communicator wrapper and the helpers the entry points share.
 *
 * An ncclComm_t points at a struct ncclComm of ours that holds the vccl communicator and the CUDA device
 * that was current when it was created (ncclCommCuDevice). Live wrappers are kept in a registry so that a
 * destroyed or foreign handle is answered with ncclInvalidUsage instead of a crash.
 */
#ifndef VCCL_NCCL_COMPAT_H_
#define VCCL_NCCL_COMPAT_H_

#include <cstdint>
#include <mutex>
#include <unordered_set>

#include "nccl_compat/nccl_abi.h"
#include "vccl.h"

/* NCCL API version that libvccl-nccl reports through ncclGetVersion: NCCL 2.28.3. */
#define VCCL_NCCL_COMPAT_VERSION_CODE 22803

struct ncclComm {
    uint64_t magic = kMagic;
    vcclComm_t vc = nullptr;
    int cuda_dev = -1;
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

/* Checks that comm is a live wrapper; *vc gets its vccl communicator. */
ncclResult_t lookup(const ncclComm* comm, const char* fn, vcclComm_t* vc, int* cuda_dev = nullptr);

/* Wraps a new vccl communicator (registered as live); on failure destroys vc. */
ncclResult_t wrap(vcclComm_t vc, int cuda_dev, ncclComm_t* out);

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
