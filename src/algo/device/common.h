/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the device algorithms share: building their transfers, the reduction scratch and its READY-free reuse,
 * reductions and local copies on the device, and the blocks of a call split across ranks.
 */
#ifndef VCCL_ALGO_DEVICE_COMMON_H_
#define VCCL_ALGO_DEVICE_COMMON_H_

#include <cstddef>
#include <vector>

#include "algo/device/device_algo.h"
#include "device/kernels/premul_arg.h"
#include "transport/transfer.h"

namespace vccl {

/* A transfer of collective op with `peer`, on op's stream. */
Transfer device_send(const Op& op, const void* sendbuf, size_t bytes, int peer);
Transfer device_recv(const Op& op, void* recvbuf, size_t bytes, int peer);

/* A send of an AllReduce's all-gather (its block, or its part of a piece, reduced): it needs no READY from the
 * peer. This stream waited, before its reduction, for the peer's DONE of the reduce-scatter of the same part,
 * which the peer's stream wrote after it had reached this collective (so the peer's earlier work on its receive
 * buffer is done) and after its copy had read that part of its input (which in place is the receive buffer this
 * send writes). Between that DONE and its all-gather the peer's stream writes only its own block. Saves one flag
 * crossing between the GPUs on the critical path of every copy-engine AllReduce. */
Transfer all_gather_send(const Op& op, const void* sendbuf, size_t bytes, int peer);
/* A send into a peer's reduction scratch (device_scratch). Its READY says only that the peer's earlier reductions
 * have read that scratch. `peers_free`: known already (take_peers_scratch_free). */
Transfer scratch_send(const Op& op, const void* sendbuf, size_t bytes, int peer, bool peers_free);

/* Whether the peers' scratch is free for this call's first transfers into it, with no READY. Only reductions of
 * the device algorithms read the scratch, each peer's on its own streams, and a copy-engine AllReduce ends with
 * this stream waiting for every peer's all-gather DONE, which that peer's stream wrote after its last reduction (the
 * pieces' reductions on its second stream included: its all-gather waits for them). So until the next device
 * collective, the peers' scratch is not read. A call on another stream is ordered after the AllReduce too
 * (StreamOrder; a group's operations on several streams run on one), so the same stream is required only as a
 * safeguard. Taken once: every device collective clears it, and only such an AllReduce sets it again. */
bool take_peers_scratch_free(DevicePath& dev, const Op& op);
void set_peers_scratch_waited(DevicePath& dev, const Op& op);

/* Runs a batch of the call's transfers (exec/p2p_batch.h). */
vcclResult_t run_batch(DevicePath& dev, const std::vector<Transfer>& batch);

/* The reduction scratch, at least `bytes`. Growing frees the old block after the stream's earlier work
 * (DeviceScratch, MappedByPeers); that wait is the communicator's (the NULL stream too), which gives up when the
 * communicator is aborted or a peer has failed, so a stream blocked by a dead peer cannot hold this call, and with
 * it vcclCommAbort, which needs the lock, for ever. */
vcclResult_t reduction_scratch(DevicePath& dev, size_t bytes, vcclStream_t stream, void** out);

/* dst = the reduction of srcs (count elements each, in rank order, so every rank computes the same bits) on
 * `stream`; srcs[0] is this rank's own block (own_input): PreMulSum's reductions scale it as they read it. */
vcclResult_t device_reduce_into(DevicePath& dev, const Op& op, vcclStream_t stream, void* dst,
                                const std::vector<const void*>& srcs, size_t count);
/* PreMulSum's scalar for a kernel (device/kernels/premul_arg.h); off for every other op. */
PreMulArg premul_arg(const Op& op);
/* Where the reductions read this rank's own block: the caller's input, whose block they scale as they read it, when
 * the rest of a PreMulSum's input was scaled into a copy (PreMulPlan::OwnBlock); else `send` (the same layout). */
const char* own_input(const Op& op, const char* send);

/* A device-to-device copy on `stream` (nothing when dst == src or bytes == 0). */
vcclResult_t local_copy(void* dst, const void* src, size_t bytes, vcclStream_t stream);
/* A local copy of 1 MiB or more goes on the second stream, beside the batch that follows it; the caller joins the
 * second stream into its stream after the batch (*beside says so). Smaller ones stay on the caller's stream: the
 * fork and join cost more host time than the copy takes. */
vcclResult_t local_copy_beside(DevicePath& dev, void* dst, const void* src, size_t bytes, vcclStream_t stream,
                               bool* beside);
/* After the batch that follows local_copy_beside: the caller's stream waits for the copy; the first error wins. */
vcclResult_t join_beside(DevicePath& dev, const Op& op, bool beside, vcclResult_t batch_status);

/* Block i of count elements split across n ranks, in bytes. */
void block_bytes(size_t count, int n, int i, size_t ts, size_t* offset, size_t* bytes);

} // namespace vccl

#endif
