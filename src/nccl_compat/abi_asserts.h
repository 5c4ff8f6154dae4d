/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * abi_asserts.h - compile-time proof that libvccl-nccl's NCCL ABI (nccl_abi.h, included inside namespace
 * `ours` with VCCL_NCCL_ABI_TYPES_ONLY) and vccl's own enums (vccl.h) match the real nccl.h.
 *
 * Include after <nccl.h> (global namespace), vccl.h and, inside `namespace ours { }`, nccl_abi.h.
 * Used by src/nccl_compat/abi_check.cc (library build) and tests/nccl_compat/test_nccl_compat.cc.
 */
#ifndef VCCL_NCCL_COMPAT_ABI_ASSERTS_H_
#define VCCL_NCCL_COMPAT_ABI_ASSERTS_H_

#include <cstddef>

#define VNCCL_SAME(a, b) static_assert(int(a) == int(b), #a " != " #b)
#define VNCCL_OFFSET(f)                                                                    \
    static_assert(offsetof(::ncclConfig_t, f) == offsetof(ours::ncclConfig_t, f),         \
                  "ncclConfig_t." #f " is not where nccl.h has it")

/* Result codes: NCCL's, ours and vccl's (vccl adds vcclTimeout = 8 where NCCL has ncclNumResults). */
VNCCL_SAME(::ncclSuccess, ours::ncclSuccess);
VNCCL_SAME(::ncclUnhandledCudaError, ours::ncclUnhandledCudaError);
VNCCL_SAME(::ncclSystemError, ours::ncclSystemError);
VNCCL_SAME(::ncclInternalError, ours::ncclInternalError);
VNCCL_SAME(::ncclInvalidArgument, ours::ncclInvalidArgument);
VNCCL_SAME(::ncclInvalidUsage, ours::ncclInvalidUsage);
VNCCL_SAME(::ncclRemoteError, ours::ncclRemoteError);
VNCCL_SAME(::ncclInProgress, ours::ncclInProgress);
VNCCL_SAME(::ncclNumResults, ours::ncclNumResults);
VNCCL_SAME(::ncclSuccess, vcclSuccess);
VNCCL_SAME(::ncclUnhandledCudaError, vcclUnhandledCudaError);
VNCCL_SAME(::ncclSystemError, vcclSystemError);
VNCCL_SAME(::ncclInternalError, vcclInternalError);
VNCCL_SAME(::ncclInvalidArgument, vcclInvalidArgument);
VNCCL_SAME(::ncclInvalidUsage, vcclInvalidUsage);
VNCCL_SAME(::ncclRemoteError, vcclRemoteError);
VNCCL_SAME(::ncclInProgress, vcclInProgress);

/* Data types. */
VNCCL_SAME(::ncclInt8, ours::ncclInt8);
VNCCL_SAME(::ncclChar, ours::ncclChar);
VNCCL_SAME(::ncclUint8, ours::ncclUint8);
VNCCL_SAME(::ncclInt32, ours::ncclInt32);
VNCCL_SAME(::ncclInt, ours::ncclInt);
VNCCL_SAME(::ncclUint32, ours::ncclUint32);
VNCCL_SAME(::ncclInt64, ours::ncclInt64);
VNCCL_SAME(::ncclUint64, ours::ncclUint64);
VNCCL_SAME(::ncclFloat16, ours::ncclFloat16);
VNCCL_SAME(::ncclHalf, ours::ncclHalf);
VNCCL_SAME(::ncclFloat32, ours::ncclFloat32);
VNCCL_SAME(::ncclFloat, ours::ncclFloat);
VNCCL_SAME(::ncclFloat64, ours::ncclFloat64);
VNCCL_SAME(::ncclDouble, ours::ncclDouble);
VNCCL_SAME(::ncclBfloat16, ours::ncclBfloat16);
VNCCL_SAME(::ncclFloat8e4m3, ours::ncclFloat8e4m3);
VNCCL_SAME(::ncclFloat8e5m2, ours::ncclFloat8e5m2);
VNCCL_SAME(::ncclNumTypes, ours::ncclNumTypes);
VNCCL_SAME(::ncclInt8, vcclInt8);
VNCCL_SAME(::ncclChar, vcclChar);
VNCCL_SAME(::ncclUint8, vcclUint8);
VNCCL_SAME(::ncclInt32, vcclInt32);
VNCCL_SAME(::ncclInt, vcclInt);
VNCCL_SAME(::ncclUint32, vcclUint32);
VNCCL_SAME(::ncclInt64, vcclInt64);
VNCCL_SAME(::ncclUint64, vcclUint64);
VNCCL_SAME(::ncclFloat16, vcclFloat16);
VNCCL_SAME(::ncclHalf, vcclHalf);
VNCCL_SAME(::ncclFloat32, vcclFloat32);
VNCCL_SAME(::ncclFloat, vcclFloat);
VNCCL_SAME(::ncclFloat64, vcclFloat64);
VNCCL_SAME(::ncclDouble, vcclDouble);
VNCCL_SAME(::ncclBfloat16, vcclBfloat16);
VNCCL_SAME(::ncclFloat8e4m3, vcclFloat8e4m3);
VNCCL_SAME(::ncclFloat8e5m2, vcclFloat8e5m2);
VNCCL_SAME(::ncclNumTypes, vcclNumTypes);

/* Reduction operations. */
VNCCL_SAME(::ncclSum, ours::ncclSum);
VNCCL_SAME(::ncclProd, ours::ncclProd);
VNCCL_SAME(::ncclMax, ours::ncclMax);
VNCCL_SAME(::ncclMin, ours::ncclMin);
VNCCL_SAME(::ncclAvg, ours::ncclAvg);
VNCCL_SAME(::ncclNumOps, ours::ncclNumOps);
VNCCL_SAME(::ncclMaxRedOp, ours::ncclMaxRedOp);
VNCCL_SAME(::ncclSum, vcclSum);
VNCCL_SAME(::ncclProd, vcclProd);
VNCCL_SAME(::ncclMax, vcclMax);
VNCCL_SAME(::ncclMin, vcclMin);
VNCCL_SAME(::ncclAvg, vcclAvg);
VNCCL_SAME(::ncclNumOps, vcclNumOps);
static_assert(sizeof(::ncclRedOp_t) == sizeof(ours::ncclRedOp_t), "ncclRedOp_t size");
static_assert(sizeof(::ncclDataType_t) == sizeof(ours::ncclDataType_t), "ncclDataType_t size");
static_assert(sizeof(::ncclResult_t) == sizeof(ours::ncclResult_t), "ncclResult_t size");

VNCCL_SAME(::ncclScalarDevice, ours::ncclScalarDevice);
VNCCL_SAME(::ncclScalarHostImmediate, ours::ncclScalarHostImmediate);

/* Macros. */
VNCCL_SAME(NCCL_UNIQUE_ID_BYTES, VNCCL_UNIQUE_ID_BYTES);
VNCCL_SAME(NCCL_UNIQUE_ID_BYTES, VCCL_UNIQUE_ID_BYTES);
VNCCL_SAME(NCCL_CONFIG_UNDEF_INT, VNCCL_CONFIG_UNDEF_INT);
VNCCL_SAME(NCCL_SPLIT_NOCOLOR, VNCCL_SPLIT_NOCOLOR);
VNCCL_SAME(NCCL_SPLIT_NOCOLOR, VCCL_SPLIT_NOCOLOR);
VNCCL_SAME(NCCL_WIN_DEFAULT, VNCCL_WIN_DEFAULT);
VNCCL_SAME(NCCL_WIN_COLL_SYMMETRIC, VNCCL_WIN_COLL_SYMMETRIC);
static_assert(sizeof(::ncclUniqueId) == sizeof(ours::ncclUniqueId), "ncclUniqueId size");
static_assert(sizeof(::ncclUniqueId) == sizeof(vcclUniqueId), "ncclUniqueId vs vcclUniqueId size");

/* ncclConfig_t: every field where nccl.h has it (the size may grow in a newer nccl.h: ours is a prefix). */
static_assert(sizeof(::ncclConfig_t) >= sizeof(ours::ncclConfig_t), "ncclConfig_t shrank in nccl.h");
VNCCL_OFFSET(size);
VNCCL_OFFSET(magic);
VNCCL_OFFSET(version);
VNCCL_OFFSET(blocking);
VNCCL_OFFSET(cgaClusterSize);
VNCCL_OFFSET(minCTAs);
VNCCL_OFFSET(maxCTAs);
VNCCL_OFFSET(netName);
VNCCL_OFFSET(splitShare);
VNCCL_OFFSET(trafficClass);
VNCCL_OFFSET(commName);
VNCCL_OFFSET(collnetEnable);
VNCCL_OFFSET(CTAPolicy);
VNCCL_OFFSET(shrinkShare);
VNCCL_OFFSET(nvlsCTAs);
VNCCL_OFFSET(nChannelsPerNetPeer);
VNCCL_OFFSET(nvlinkCentricSched);
static_assert(sizeof(::ncclSimInfo_t) == sizeof(ours::ncclSimInfo_t), "ncclSimInfo_t size");

#undef VNCCL_SAME
#undef VNCCL_OFFSET

#endif
