/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nccl_abi.h - the NCCL 2.x C API as libvccl-nccl.so.2 implements it: types, enum values and the
 * ncclConfig_t layout of NCCL 2.28 (nccl.h), written out here so that building needs no NCCL.
 * abi_asserts.h checks every value and offset against the real nccl.h wherever one is installed.
 *
 * Namespace-safe: with VCCL_NCCL_ABI_TYPES_ONLY defined it declares only types (no functions, no
 * includes, no macros that nccl.h also defines), so a test can include it inside a namespace next to
 * the real nccl.h and compare the two.
 */
#ifndef VCCL_NCCL_COMPAT_NCCL_ABI_H_
#define VCCL_NCCL_COMPAT_NCCL_ABI_H_

#ifndef VCCL_NCCL_ABI_TYPES_ONLY
#include <stddef.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Our own spellings of nccl.h's macros (nccl.h's names would clash when both are included). */
#define VNCCL_UNIQUE_ID_BYTES 128
#define VNCCL_CONFIG_MAGIC 0xcafebeefu
#define VNCCL_CONFIG_UNDEF_INT (-2147483647 - 1)
#define VNCCL_SPLIT_NOCOLOR (-1)
#define VNCCL_WIN_DEFAULT 0x00
#define VNCCL_WIN_COLL_SYMMETRIC 0x01
#define VNCCL_SIM_INFO_MAGIC 0x74685283u

typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
typedef struct CUstream_st* vncclStream_t; /* cudaStream_t */

typedef struct {
    char internal[VNCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    ncclNumResults = 8
} ncclResult_t;

/* NCCL 2.28 layout ("ncclConfig_v22800"). Older callers pass a smaller size; fields beyond it are not read. */
typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
    int cgaClusterSize;
    int minCTAs;
    int maxCTAs;
    const char* netName;
    int splitShare;
    int trafficClass;
    const char* commName;
    int collnetEnable;
    int CTAPolicy;
    int shrinkShare;
    int nvlsCTAs;
    int nChannelsPerNetPeer;
    int nvlinkCentricSched;
} ncclConfig_t;

typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    float estimatedTime;
} ncclSimInfo_t;

typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
    ncclSum = 0,
    ncclProd = 1,
    ncclMax = 2,
    ncclMin = 3,
    ncclAvg = 4,
    ncclNumOps = 5,
    ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
    ncclInt8 = 0,
    ncclChar = 0,
    ncclUint8 = 1,
    ncclInt32 = 2,
    ncclInt = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6,
    ncclHalf = 6,
    ncclFloat32 = 7,
    ncclFloat = 7,
    ncclFloat64 = 8,
    ncclDouble = 8,
    ncclBfloat16 = 9,
    ncclFloat8e4m3 = 10,
    ncclFloat8e5m2 = 11,
    ncclNumTypes = 12
} ncclDataType_t;

typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

#ifndef VCCL_NCCL_ABI_TYPES_ONLY

#if defined(__GNUC__)
#define VNCCL_EXPORT __attribute__((visibility("default")))
#else
#define VNCCL_EXPORT
#endif

/* Defines nccl<name> and, as an alias of it, pnccl<name> (NCCL's profiling entry points). */
#define VNCCL_API(ret, name, ...)                                                              \
    VNCCL_EXPORT ret p##name(__VA_ARGS__) __attribute__((alias(#name)));                      \
    VNCCL_EXPORT ret name(__VA_ARGS__)

VNCCL_EXPORT ncclResult_t ncclGetVersion(int* version);
VNCCL_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
VNCCL_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                                 ncclConfig_t* config);
VNCCL_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
VNCCL_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
VNCCL_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                   ncclUniqueId* commIds, ncclConfig_t* config);
VNCCL_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm);
VNCCL_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm);
VNCCL_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm);
VNCCL_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
VNCCL_EXPORT ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
VNCCL_EXPORT ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                                       ncclComm_t* newcomm, ncclConfig_t* config);
VNCCL_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                        ncclConfig_t* config);
VNCCL_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                         ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);
VNCCL_EXPORT const char* ncclGetErrorString(ncclResult_t result);
VNCCL_EXPORT const char* ncclGetLastError(ncclComm_t comm);
VNCCL_EXPORT void ncclResetDebugInit(void);
VNCCL_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
VNCCL_EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
VNCCL_EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
VNCCL_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
VNCCL_EXPORT ncclResult_t ncclMemAlloc(void** ptr, size_t size);
VNCCL_EXPORT ncclResult_t ncclMemFree(void* ptr);
VNCCL_EXPORT ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
VNCCL_EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
VNCCL_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                                 int winFlags);
VNCCL_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
/* NCCL 2.28's device API (nccl_device/core.h); PyTorch 2.11 links these. Opaque here: never implemented. */
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
typedef struct ncclDevComm ncclDevComm_t;
VNCCL_EXPORT ncclResult_t ncclDevCommCreate(ncclComm_t comm, const ncclDevCommRequirements_t* reqs, ncclDevComm_t* outDevComm);
VNCCL_EXPORT ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const ncclDevComm_t* devComm);
VNCCL_EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                   ncclScalarResidence_t residence, ncclComm_t comm);
VNCCL_EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
VNCCL_EXPORT ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                     ncclRedOp_t op, int root, ncclComm_t comm, vncclStream_t stream);
VNCCL_EXPORT ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                    vncclStream_t stream);
VNCCL_EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                        ncclDataType_t datatype, int root, ncclComm_t comm, vncclStream_t stream);
VNCCL_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                        ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                        vncclStream_t stream);
VNCCL_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                            vncclStream_t stream);
VNCCL_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                        ncclDataType_t datatype, ncclComm_t comm, vncclStream_t stream);
VNCCL_EXPORT ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                       ncclDataType_t datatype, ncclComm_t comm, vncclStream_t stream);
VNCCL_EXPORT ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                     int root, ncclComm_t comm, vncclStream_t stream);
VNCCL_EXPORT ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                                      ncclDataType_t datatype, int root, ncclComm_t comm, vncclStream_t stream);
VNCCL_EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                   ncclComm_t comm, vncclStream_t stream);
VNCCL_EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                   ncclComm_t comm, vncclStream_t stream);
VNCCL_EXPORT ncclResult_t ncclGroupStart(void);
VNCCL_EXPORT ncclResult_t ncclGroupEnd(void);
VNCCL_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

#endif /* !VCCL_NCCL_ABI_TYPES_ONLY */

#ifdef __cplusplus
}
#endif

#endif /* VCCL_NCCL_COMPAT_NCCL_ABI_H_ */
