/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vccl.h - the public C API of vccl, a GPU collective communication library.
 *
 * Names mirror NCCL's with the "vccl" prefix, so that an NCCL-compatible layer is a thin map.
 *
 * Memory and ordering:
 *  - Buffers may be host memory or (when built with CUDA) device memory. Between GPUs of one host, device
 *    operations are ordered on the stream and the call returns without waiting for the device (send/recv
 *    use copy engines only, no kernels). Elsewhere (peers on other hosts, buffers CUDA IPC cannot export,
 *    in-place send/recv) device buffers are staged through pinned host memory: the call waits for the
 *    stream's prior work and returns when the result is in place.
 *  - Every operation takes a stream argument compatible with cudaStream_t. With host buffers and a NULL
 *    stream the call completes before it returns (the output buffer holds the result).
 *  - CUDA graphs: collectives on device buffers that the low-latency kernel takes (every rank on one host,
 *    at most VCCL_ALLREDUCE_LL_BYTES / (ranks - 1) bytes a peer, GPUs not shared) can be captured, in any capture
 *    mode, and replayed any number of times: each replay takes its call number on the GPU, on word sets apart
 *    from the eager calls', so replays and eager calls interleave freely. Replays of one communicator's calls
 *    must be ordered on the GPU the same way on every rank. A replay after the communicator was destroyed,
 *    aborted or revoked does nothing (and says so on stdout). Send/recv on device buffers between GPUs of one
 *    host (the direct path) can be captured too: stream memory operations and one copy per transfer, no kernel
 *    launched by vccl, nothing on the host at replay; both sides must capture (a capture matched by an eager call
 *    fails on both), in the same order, and replay the same number of times; not in place; at most 1024
 *    captured sends per pair and direction over a communicator's life; one graph must not run twice at once.
 *    Such a graph replayed after destroy still moves data when every rank replays it; after abort or revoke its
 *    replays end without waiting for the peers (their data is not valid, and their sends still land in the
 *    peers' buffers). Other calls on a capturing stream
 *    (larger collectives, host buffers, send/recv with peers on other hosts) return vcclInvalidUsage (with a
 *    message from vcclGetLastError) and enqueue nothing.
 *  - All ranks of a communicator must call collectives in the same order with matching arguments.
 *
 * Errors: every function returns a vcclResult_t. Output parameters are written only on success.
 * vcclGetLastError() returns a human-readable description of the most recent error of the calling thread.
 */
#ifndef VCCL_H_
#define VCCL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define VCCL_EXPORT __attribute__((visibility("default")))
#else
#define VCCL_EXPORT
#endif

#define VCCL_MAJOR 0
#define VCCL_MINOR 1
#define VCCL_PATCH 0
/* Encoded like NCCL_VERSION_CODE: major*10000 + minor*100 + patch. */
#define VCCL_VERSION(X, Y, Z) ((X) * 10000 + (Y) * 100 + (Z))
#define VCCL_VERSION_CODE VCCL_VERSION(VCCL_MAJOR, VCCL_MINOR, VCCL_PATCH)

/** Opaque communicator handle. */
typedef struct vcclComm* vcclComm_t;

/** A stream: a cudaStream_t when built with CUDA; pass NULL for host-synchronous calls. */
typedef void* vcclStream_t;

/** Status codes. Values match NCCL's ncclResult_t where the name matches. */
typedef enum {
    vcclSuccess            = 0, /**< the call succeeded */
    vcclUnhandledCudaError = 1, /**< a CUDA call failed */
    vcclSystemError        = 2, /**< a system call or a network library failed */
    vcclInternalError      = 3, /**< a bug in vccl */
    vcclInvalidArgument    = 4, /**< a bad argument: NULL pointer, bad count, datatype, op, rank */
    vcclInvalidUsage       = 5, /**< a call that is wrong in this state: destroyed comm, mismatched group */
    vcclRemoteError        = 6, /**< a peer failed or all paths to it are down */
    vcclInProgress         = 7, /**< a nonblocking operation has not finished yet */
    vcclTimeout            = 8, /**< a wait ran past its configured limit */
    vcclNumResults         = 9
} vcclResult_t;

/**
 * Element types of the buffers, with NCCL's values. Reductions of fp16, bf16 and the FP8 types are computed in float
 * and rounded back to the type to nearest even; FP8 results saturate to the largest finite value (as CUDA's
 * __nv_cvt_float_to_fp8 with __NV_SATFINITE; a NaN gives 0x7F). Algorithms that reduce in steps round at each step.
 */
typedef enum {
    vcclInt8     = 0,
    vcclChar     = 0,
    vcclUint8    = 1,
    vcclInt32    = 2,
    vcclInt      = 2,
    vcclUint32   = 3,
    vcclInt64    = 4,
    vcclUint64   = 5,
    vcclFloat16  = 6,
    vcclHalf     = 6,
    vcclFloat32  = 7,
    vcclFloat    = 7,
    vcclFloat64  = 8,
    vcclDouble   = 8,
    vcclBfloat16 = 9,
    vcclFloat8e4m3 = 10, /**< OCP FP8 E4M3 (finite only: max 448, NaN 0x7F/0xFF, no infinity) */
    vcclFloat8e5m2 = 11, /**< OCP FP8 E5M2 (IEEE-like: max 57344, infinities and NaNs) */
    vcclNumTypes = 12
} vcclDataType_t;

/**
 * Reduction operations. vcclAvg divides the sum by the number of ranks (integer division for integers).
 * Values from vcclNumOps on are operations a communicator created (vcclRedOpCreatePreMulSum), valid only
 * with that communicator until vcclRedOpDestroy.
 */
typedef enum {
    vcclSum      = 0,
    vcclProd     = 1,
    vcclMax      = 2,
    vcclMin      = 3,
    vcclAvg      = 4,
    vcclNumOps   = 5,
    vcclMaxRedOp = 0x7fffffff
} vcclRedOp_t;

/** Where the scalar of vcclRedOpCreatePreMulSum lives (NCCL's ncclScalarResidence_t). */
typedef enum {
    vcclScalarDevice        = 0, /**< device memory: read on the device each time a call runs */
    vcclScalarHostImmediate = 1  /**< host memory: read once, before vcclRedOpCreatePreMulSum returns */
} vcclScalarResidence_t;

/** Opaque unique id produced by vcclGetUniqueId on one rank and distributed to all others. */
#define VCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[VCCL_UNIQUE_ID_BYTES];
} vcclUniqueId;

/**
 * Communicator configuration. Initialise with VCCL_CONFIG_INITIALIZER, then set the fields you need.
 * size/magic/version let later versions grow the struct without breaking binaries built against this one.
 * Fields left at VCCL_CONFIG_UNDEF_INT / NULL take their defaults (environment variable, then built-in).
 */
#define VCCL_CONFIG_UNDEF_INT (-2147483647 - 1)
#define VCCL_CONFIG_MAGIC 0x7cc1c0f6u
typedef struct {
    size_t size;        /**< sizeof(vcclConfig_t) as the caller compiled it */
    unsigned int magic; /**< VCCL_CONFIG_MAGIC */
    unsigned int version; /**< VCCL_VERSION_CODE the caller compiled against */
    int blocking;       /**< 1 (default): creation returns when the communicator is ready. 0: init, split,
                             shrink and grow return vcclInProgress at once and build the communicator on a
                             thread of vccl's; vcclCommGetAsyncError reports vcclInProgress until it is ready
                             (then vcclSuccess, or the creation's error), and other calls on it return
                             vcclInvalidUsage meanwhile. Children made without a config inherit it. */
    int maxCtas;        /**< upper bound on CUDA thread blocks used by reduction kernels */
    const char* netName; /**< network devices for this communicator (overrides VCCL_NET_DEVICES) */
    const char* commName; /**< a name shown in logs and telemetry */
    int splitShare;     /**< reserved: must be 0 or undefined */
    int telemetry;      /**< 1: record flow telemetry for this communicator, 0: not; undefined: VCCL_TELEMETRY.
                             A caller built against a header without this field passes a smaller size and
                             gets the default. */
    int opTimeoutMs;    /**< milliseconds an operation of this communicator may wait for its peers before it ends
                             with vcclTimeout (0: no limit); undefined: VCCL_OP_TIMEOUT_MS. Each rank applies its
                             own value: give every rank the same one. Older callers (smaller size) get the
                             default. */
} vcclConfig_t;

#define VCCL_CONFIG_INITIALIZER                                                                   \
    {                                                                                             \
        sizeof(vcclConfig_t), VCCL_CONFIG_MAGIC, VCCL_VERSION_CODE, VCCL_CONFIG_UNDEF_INT,        \
            VCCL_CONFIG_UNDEF_INT, NULL, NULL, VCCL_CONFIG_UNDEF_INT, VCCL_CONFIG_UNDEF_INT,      \
            VCCL_CONFIG_UNDEF_INT                                                                 \
    }

/* ------------------------------------------------------------------------------------------------ */
/* Errors and version                                                                               */

/** Returns a static string naming a result code ("invalid argument", ...). Never NULL. */
VCCL_EXPORT const char* vcclGetErrorString(vcclResult_t result);

/**
 * Returns a description of the last error reported by a vccl call on the calling thread (comm may be NULL);
 * if comm is given and it recorded an asynchronous error, that error's description. Never NULL; empty
 * string when there was no error.
 */
VCCL_EXPORT const char* vcclGetLastError(vcclComm_t comm);

/** Writes VCCL_VERSION_CODE of the loaded library into *version. */
VCCL_EXPORT vcclResult_t vcclGetVersion(int* version);

/**
 * For libraries built on this API (bootstraps, interposers): records `text` as the calling thread's last error
 * (what vcclGetLastError(NULL) returns), logs it at WARN under VCCL_DEBUG, and returns `result`. NULL text: the
 * result's vcclGetErrorString.
 */
VCCL_EXPORT vcclResult_t vcclSetLastError(vcclResult_t result, const char* text);

/* ------------------------------------------------------------------------------------------------ */
/* Communicators                                                                                    */

/**
 * Creates a unique id on the rank that will be the bootstrap root (usually rank 0). The id carries the
 * root's address and a random 128-bit secret; a bootstrap service is started in this process and serves
 * one communicator initialisation. Distribute the id to every rank (by any means) before vcclCommInitRank.
 */
VCCL_EXPORT vcclResult_t vcclGetUniqueId(vcclUniqueId* uniqueId);

/**
 * Collective over nranks processes: creates a communicator where this process has rank `rank`.
 * Every wait of the bootstrap is bounded by VCCL_BOOTSTRAP_TIMEOUT; vcclTimeout is returned when it expires.
 */
VCCL_EXPORT vcclResult_t vcclCommInitRank(vcclComm_t* comm, int nranks, vcclUniqueId commId, int rank);

/** As vcclCommInitRank with a configuration (may be NULL for defaults). */
VCCL_EXPORT vcclResult_t vcclCommInitRankConfig(vcclComm_t* comm, int nranks, vcclUniqueId commId, int rank,
                                                vcclConfig_t* config);

/* ------------------------------------------------------------------------------------------------ */
/* External bootstrap: a channel of the caller's (an MPI communicator, a launcher's key-value store) over     */
/* which the ranks find each other, in place of the TCP unique id. vcclCommInitMPI (vccl_mpi.h) is one.       */

#define VCCL_BOOTSTRAP_VERSION 1

/** How long a bootstrap call may wait, and how it learns that it should stop waiting. */
typedef struct vcclBootstrapWait {
    long long timeoutMs;         /**< give up with vcclTimeout after this long (VCCL_BOOTSTRAP_TIMEOUT) */
    int (*cancelled)(void* arg); /**< poll while waiting: nonzero means give up with vcclRemoteError */
    void* cancelArg;
} vcclBootstrapWait_t;

/**
 * The functions of an external bootstrap. Every call gets `ctx` and returns vcclSuccess or an error (then
 * lastError, when given, describes it). Calls may come from several threads at once (communicators split from
 * one another share their parent's bootstrap) and must return within wait->timeoutMs.
 */
typedef struct vcclBootstrap {
    int version; /**< VCCL_BOOTSTRAP_VERSION */
    int rank;    /**< of this process, in [0, nranks) */
    int nranks;
    void* ctx;
    /** Required. A message to `peer` with `tag` matches the receive from this rank with the same tag; messages
     *  with equal (sender, tag) match in order. send may return before the peer receives. recv fails
     *  (vcclInternalError) when the message's size is not `bytes`. Tags use all 64 bits. */
    vcclResult_t (*send)(void* ctx, int peer, uint64_t tag, const void* data, size_t bytes,
                         const vcclBootstrapWait_t* wait);
    vcclResult_t (*recv)(void* ctx, int peer, uint64_t tag, void* data, size_t bytes, const vcclBootstrapWait_t* wait);
    /** Optional (NULL: vccl builds them from send and recv). data holds nranks slots of `bytes`, this rank's
     *  filled on entry, all on return; broadcast copies root's data to every rank. */
    vcclResult_t (*allgather)(void* ctx, void* data, size_t bytes, const vcclBootstrapWait_t* wait);
    vcclResult_t (*broadcast)(void* ctx, void* data, size_t bytes, int root, const vcclBootstrapWait_t* wait);
    vcclResult_t (*barrier)(void* ctx, const vcclBootstrapWait_t* wait);
    /** Optional (NULL: vccl routes a split's traffic over this bootstrap). Fills *out with a bootstrap over
     *  members[0..nmembers) (ranks of this one, in their new order; newRank is the caller's index there), for
     *  vcclCommSplit and vcclCommShrink. Only the members call it, after a barrier among them has passed;
     *  splitId is equal on the members and differs between splits. */
    vcclResult_t (*split)(void* ctx, const int* members, int nmembers, int newRank, uint64_t splitId,
                          struct vcclBootstrap* out);
    /** Optional: waits in progress give up (vcclRemoteError) and later calls fail. vcclCommAbort calls it. */
    void (*abort)(void* ctx);
    /** Optional: called once, when no communicator uses the bootstrap any more (also when creation failed). */
    void (*destroy)(void* ctx);
    /** Optional: the description of this thread's last failure of a call above. */
    const char* (*lastError)(void* ctx);
} vcclBootstrap_t;

/**
 * Collective over the bootstrap's ranks: creates a communicator with the bootstrap's rank and size. vccl keeps a
 * copy of *bootstrap and owns ctx from this call on (destroy is called once, at the end). config may be NULL.
 */
VCCL_EXPORT vcclResult_t vcclCommInitBootstrap(vcclComm_t* comm, const vcclBootstrap_t* bootstrap,
                                               const vcclConfig_t* config);

/**
 * Collective over comm: ranks with the same color form a new communicator ordered by key (ties broken by
 * the rank in comm). color = VCCL_SPLIT_NOCOLOR returns *newcomm = NULL. With config NULL the new communicator
 * inherits comm's configuration (netName, maxCtas, telemetry; not commName), as vcclCommShrink does.
 */
#define VCCL_SPLIT_NOCOLOR (-1)
VCCL_EXPORT vcclResult_t vcclCommSplit(vcclComm_t comm, int color, int key, vcclComm_t* newcomm,
                                       vcclConfig_t* config);

/** vcclCommShrink flags. */
#define VCCL_SHRINK_DEFAULT 0x00 /**< planned: every remaining rank is healthy and idle on comm */
#define VCCL_SHRINK_ABORT 0x01   /**< after a failure: operations still pending on comm are abandoned first */

/**
 * Collective over the ranks of comm that are not in excludeRanksList (the excluded ranks do not call it; they
 * may be dead): creates a communicator of the remaining ranks, in their order in comm. The calling rank must
 * not be excluded; ranks in the list must be valid and distinct. comm stays valid (destroy or abort it later);
 * with VCCL_SHRINK_ABORT it no longer runs operations.
 */
VCCL_EXPORT vcclResult_t vcclCommShrink(vcclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                        vcclComm_t* newcomm, vcclConfig_t* config, int shrinkFlags);

/**
 * Makes a grow id for vcclCommGrow of comm (NCCL's ncclCommGetUniqueId): called by one rank of comm, the
 * coordinator, which hands it to the new ranks by any means. The id serves one grow; it names a bootstrap service
 * that runs in the coordinator's process until the grow is complete.
 */
VCCL_EXPORT vcclResult_t vcclCommGetUniqueId(vcclComm_t comm, vcclUniqueId* uniqueId);

/**
 * Creates a communicator of nRanks ranks: comm's ranks, which keep their ranks, and nRanks - (comm's size) new
 * ones (NCCL 2.29's ncclCommGrow). Collective over comm's ranks and the new ones. A rank of comm passes comm and
 * rank -1, and the coordinator (the rank that called vcclCommGetUniqueId) its id, the others NULL. A new rank
 * passes comm NULL, the id and its rank in the new communicator, from comm's size up to nRanks - 1. With config
 * NULL, comm's ranks inherit comm's configuration as with vcclCommSplit and new ranks take the defaults. comm is
 * left as it was (destroy it when done). vcclInvalidArgument on every rank of comm when not exactly one of them
 * passed an id, or when they ask for different sizes.
 */
VCCL_EXPORT vcclResult_t vcclCommGrow(vcclComm_t comm, int nRanks, const vcclUniqueId* uniqueId, int rank,
                                      vcclComm_t* newcomm, vcclConfig_t* config);

/** vcclCommRevoke flags. */
#define VCCL_REVOKE_DEFAULT 0x00 /**< the only value defined */

/**
 * Local (as NCCL's ncclCommRevoke): ends the calling rank's operations in flight on comm, from any thread, and
 * returns once they have returned (within about a second); they end with vcclRemoteError and their output buffers
 * are not valid. Later operations and vcclCommSplit on comm return vcclInvalidUsage; connections and bootstrap
 * stay, so vcclCommShrink (either flag), vcclCommDestroy (waiting for no peer) and vcclCommAbort work; the last two
 * also release streams waiting on a peer's direct device transfer. Every rank revokes its own communicator: a peer
 * that does not waits in its operation until vcclConfig_t.opTimeoutMs (VCCL_OP_TIMEOUT_MS) or its own revoke.
 */
VCCL_EXPORT vcclResult_t vcclCommRevoke(vcclComm_t comm, int revokeFlags);

/**
 * Frees the communicator after its pending operations complete. Local: does not wait for other ranks.
 * Using comm afterwards returns vcclInvalidUsage. A direct device transfer whose peer never does its part
 * (it failed after the transfer was set up) is waited for up to VCCL_OP_TIMEOUT_MS, then its stream is
 * released with the data not valid (logged), so no stream stays blocked on a freed communicator.
 */
VCCL_EXPORT vcclResult_t vcclCommDestroy(vcclComm_t comm);

/**
 * Stops every pending operation of comm (they end with an error) and frees it. Never blocks for long:
 * returns within about one second even when peers are dead. Streams of this rank waiting on a peer's part
 * of a direct device transfer are released (that data is not valid): at once when waiting for the peer's
 * data, after 500 ms when waiting for the peer's go-ahead to write into its buffer. When any rank's call fails,
 * abort (or destroy) the communicator on every rank; the others learn of it from vcclCommGetAsyncError.
 */
VCCL_EXPORT vcclResult_t vcclCommAbort(vcclComm_t comm);

/**
 * Writes the communicator's asynchronous state into *asyncError: vcclSuccess while healthy, or the error
 * that ended an operation (for example vcclRemoteError when a peer is unreachable or gave up a direct
 * device transfer with this rank after this rank's call had returned, vcclTimeout).
 */
VCCL_EXPORT vcclResult_t vcclCommGetAsyncError(vcclComm_t comm, vcclResult_t* asyncError);

/** Number of ranks in comm. */
VCCL_EXPORT vcclResult_t vcclCommCount(const vcclComm_t comm, int* count);

/** Rank of the caller in comm. */
VCCL_EXPORT vcclResult_t vcclCommUserRank(const vcclComm_t comm, int* rank);

/* ------------------------------------------------------------------------------------------------ */
/* Collectives. count is in elements. In-place: sendbuff == recvbuff (for AllGather:                */
/* sendbuff == recvbuff + rank*count; for ReduceScatter: recvbuff == sendbuff + rank*recvcount).     */

/** Reduces count elements across ranks with op; every rank receives the result. */
VCCL_EXPORT vcclResult_t vcclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                       vcclDataType_t datatype, vcclRedOp_t op, vcclComm_t comm,
                                       vcclStream_t stream);

/** Copies count elements from root's sendbuff into every rank's recvbuff. */
VCCL_EXPORT vcclResult_t vcclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                       vcclDataType_t datatype, int root, vcclComm_t comm,
                                       vcclStream_t stream);

/** Reduces count elements across ranks with op into root's recvbuff (recvbuff is ignored elsewhere). */
VCCL_EXPORT vcclResult_t vcclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    vcclDataType_t datatype, vcclRedOp_t op, int root, vcclComm_t comm,
                                    vcclStream_t stream);

/** Gathers sendcount elements from every rank; recvbuff holds nranks*sendcount elements in rank order. */
VCCL_EXPORT vcclResult_t vcclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                       vcclDataType_t datatype, vcclComm_t comm, vcclStream_t stream);

/**
 * Reduces nranks*recvcount elements with op; rank i receives block i (recvcount elements) of the result.
 */
VCCL_EXPORT vcclResult_t vcclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           vcclDataType_t datatype, vcclRedOp_t op, vcclComm_t comm,
                                           vcclStream_t stream);

/**
 * Every rank sends block j (count elements) of sendbuff to rank j, which stores it as block i of its
 * recvbuff. Both buffers hold nranks*count elements. In-place (sendbuff == recvbuff) is supported.
 */
VCCL_EXPORT vcclResult_t vcclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                      vcclDataType_t datatype, vcclComm_t comm, vcclStream_t stream);

/**
 * Creates a reduction op for comm that multiplies every rank's input by that rank's scalar (one element of
 * datatype) and sums: out = sum over ranks r of scalar_r * in_r, as NCCL's ncclRedOpCreatePreMulSum. It is
 * valid for AllReduce, Reduce and ReduceScatter of datatype on comm until vcclRedOpDestroy. fp16, bf16 and fp8
 * products are rounded once, then summed as vcclSum sums them; integers wrap. A vcclScalarDevice scalar must
 * stay valid, and hold its value, until every call using the op has run on its stream; with host buffers it
 * is read when the call runs. Each rank may pass its own scalar.
 */
VCCL_EXPORT vcclResult_t vcclRedOpCreatePreMulSum(vcclRedOp_t* op, void* scalar, vcclDataType_t datatype,
                                                  vcclScalarResidence_t residence, vcclComm_t comm);

/** Releases an op made by vcclRedOpCreatePreMulSum; calls already made with it are not affected. */
VCCL_EXPORT vcclResult_t vcclRedOpDestroy(vcclRedOp_t op, vcclComm_t comm);

/* ------------------------------------------------------------------------------------------------ */
/* Point-to-point. Sends and receives between a pair of ranks match in the order they were posted.  */
/* Inside vcclGroupStart/vcclGroupEnd they are issued together and never deadlock, whatever order   */
/* the peers post them in.                                                                          */

/** Sends count elements to rank peer. */
VCCL_EXPORT vcclResult_t vcclSend(const void* sendbuff, size_t count, vcclDataType_t datatype, int peer,
                                  vcclComm_t comm, vcclStream_t stream);

/** Receives count elements from rank peer. */
VCCL_EXPORT vcclResult_t vcclRecv(void* recvbuff, size_t count, vcclDataType_t datatype, int peer,
                                  vcclComm_t comm, vcclStream_t stream);

/** Starts a group: calls up to the matching vcclGroupEnd are collected and issued together. Nests. */
VCCL_EXPORT vcclResult_t vcclGroupStart(void);

/**
 * Ends a group; at the outermost level issues every collected call. With host buffers and NULL streams it
 * returns when all of them completed. A send whose receive is never posted ends with vcclTimeout after
 * VCCL_OP_TIMEOUT_MS.
 */
VCCL_EXPORT vcclResult_t vcclGroupEnd(void);

/* ------------------------------------------------------------------------------------------------ */
/* Memory. Any device memory works with every call; these make direct transfers cheaper.             */

/**
 * Allocates size bytes of device memory on the current device that peers on this host can map: CUDA VMM
 * memory (cuMemCreate, rounded up to the allocation granularity, exported to peers as a file descriptor),
 * or with VCCL_MEM_VMM=0 or a GPU without VMM, cudaMalloc memory in whole 2 MiB blocks (CUDA IPC). Readable
 * and writable from every GPU of the process that can access the current one as a peer. size 0 gives NULL.
 * Free it with vcclMemFree. vcclUnhandledCudaError when CUDA cannot allocate (or vccl was built without it).
 */
VCCL_EXPORT vcclResult_t vcclMemAlloc(void** ptr, size_t size);

/**
 * Frees memory from vcclMemAlloc, after waiting for the device as cudaFree does; any other pointer is
 * vcclInvalidArgument. NULL is a no-op. A peer that mapped the memory holds on to it until its communicator
 * maps a new buffer over that range or is destroyed.
 */
VCCL_EXPORT vcclResult_t vcclMemFree(void* ptr);

/**
 * Registers [buff, buff + size) with comm and returns a handle for vcclCommDeregister. A registered device
 * buffer's IPC export is taken once, here, so transfers into or out of it skip the driver queries each call
 * otherwise makes. Optional: unregistered buffers work the same. The buffer must stay allocated until it is
 * deregistered (or comm destroyed); registrations may overlap. Local (no other rank takes part).
 */
VCCL_EXPORT vcclResult_t vcclCommRegister(const vcclComm_t comm, void* buff, size_t size, void** handle);

/** Removes a registration of comm; a handle comm did not give is vcclInvalidArgument. */
VCCL_EXPORT vcclResult_t vcclCommDeregister(const vcclComm_t comm, void* handle);

/* ------------------------------------------------------------------------------------------------ */
/* Telemetry. Per path (a peer and a path index: 0 primary, 1 backup, 2 the device path between GPUs  */
/* of one host) the library keeps byte counts,                                                       */
/* outstanding work and the bandwidth of the last VCCL_TELEMETRY_WINDOW completions. See vccl(7)     */
/* (VCCL_TELEMETRY*) and vccl-telemetry(1) for the live shared-memory export and files.              */

/** Path states reported in vcclTelemetryPeer::state. */
typedef enum {
    vcclPathUp      = 0, /**< carrying traffic (or ready to) */
    vcclPathDown    = 1, /**< failed; traffic moved to another path */
    vcclPathStandby = 2, /**< healthy backup, idle */
    vcclPathUnused  = 3
} vcclPathState_t;

/** One path to one peer, as seen by the calling rank. Bandwidths are bytes per second over the window. */
typedef struct {
    int peer;                      /**< rank of the peer in the communicator */
    int path;                      /**< 0 primary, 1 backup (host transport); 2 device path (GPUs of one host) */
    int state;                     /**< a vcclPathState_t */
    uint64_t bytesSent;            /**< bytes of completed sends */
    uint64_t bytesReceived;        /**< bytes of completed receives */
    double sendBandwidth;          /**< current (window) send bandwidth, bytes/s; 0 before the first timed send
                                        (under 4 MiB one collective in VCCL_TELEMETRY_SAMPLE is timed) */
    double recvBandwidth;          /**< current (window) receive bandwidth, bytes/s */
    uint64_t outstandingRequests;  /**< posted and not yet completed, both directions */
    uint64_t outstandingBytes;
    uint64_t completions;          /**< completed sends plus receives */
    uint64_t failures;             /**< transfers that ended with an error */
    uint64_t lastCompletionNs;     /**< CLOCK_MONOTONIC time of the last completion, ns (0: none yet); for an
                                        untimed (sampled-out) one, when it was published: up to 1 ms late */
} vcclTelemetryPeer;

/**
 * Copies the calling rank's telemetry of comm's paths (every path that carried traffic or changed state,
 * ordered by peer, then path) into peers[0..maxPeers-1] and writes the number of such paths to *nPeers,
 * which may exceed maxPeers (call with maxPeers 0 and peers NULL to size the array). Lock free: may be
 * called from any thread while operations run. vcclInvalidUsage when telemetry is off for comm
 * (VCCL_TELEMETRY=0, or vcclConfig_t.telemetry=0 at creation).
 */
VCCL_EXPORT vcclResult_t vcclCommGetTelemetry(vcclComm_t comm, vcclTelemetryPeer* peers, int maxPeers, int* nPeers);

/**
 * One path with its latency and failover counts: vcclTelemetryPeer's fields first, then fields added later,
 * in the order they were added. Callers pass sizeof(vcclTelemetryPath) as they compiled it to
 * vcclCommGetTelemetryPaths, which fills that many bytes of each element: a program built against an
 * older vccl.h keeps working with a newer library, and sizeof(vcclTelemetryPeer) is accepted too.
 *
 * Latencies are post-to-completion times of timed sends (every send from 4 MiB on, one collective in
 * VCCL_TELEMETRY_SAMPLE below), from a histogram with power-of-two buckets from 1 us to 17 s: a percentile is
 * exact to its bucket (within a factor of two), interpolated linearly inside it; 0 when no send was timed.
 */
typedef struct {
    vcclTelemetryPeer base;         /**< as vcclCommGetTelemetry reports it */
    uint64_t latencySamples;        /**< timed sends on this path */
    uint64_t latencyP50Ns;          /**< median send latency, ns */
    uint64_t latencyP99Ns;
    uint64_t latencyP999Ns;         /**< 99.9th percentile */
    uint64_t failovers;             /**< times traffic left this path because it failed (any cause) */
    uint64_t failbacks;             /**< times traffic came back to this path (the primary) after it healed */
} vcclTelemetryPath;

/**
 * As vcclCommGetTelemetry, with latency percentiles and failover counts per path. pathSize: the size of one
 * element of paths as the caller compiled it (sizeof(vcclTelemetryPath)); at least sizeof(vcclTelemetryPeer),
 * else vcclInvalidArgument. Bytes of an element beyond what this library knows are left untouched.
 */
VCCL_EXPORT vcclResult_t vcclCommGetTelemetryPaths(vcclComm_t comm, void* paths, size_t pathSize, int maxPaths,
                                                   int* nPaths);

/**
 * Pauses (pause != 0) or resumes the calling rank's recording of comm's transfers: while paused they are neither
 * counted nor timed (the counters keep what they had; path state changes are still recorded). Lets a program
 * leave a phase out of its figures, or measure what recording costs (vccl-perf --baseline telemetry-paused).
 * Local, under the communicator's operation lock: waits for the rank's queued staged work to finish.
 * vcclInvalidUsage when telemetry is off for comm.
 */
VCCL_EXPORT vcclResult_t vcclCommPauseTelemetry(vcclComm_t comm, int pause);

#ifdef __cplusplus
}
#endif

#endif /* VCCL_H_ */
