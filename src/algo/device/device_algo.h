/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device algorithms: collectives on device buffers among the GPUs of one host, built from batches of direct
 * transfers (copy engines into the peers' buffers, ordered on the caller's stream by stream memory operations,
 * exec/p2p_batch.h), compact reduction kernels, and kernels that store into the peers' memory
 * (device/kernels/). One file per algorithm under algo/device/<collective>/, each exporting one descriptor;
 * registry.cc lists them and holds the default choice, one table by size (documented in vccl(7), printed by
 * vccl-info -a). VCCL_ALGO=COLLECTIVE:NAME forces one where it can run the call (possible()); elsewhere the
 * default runs it.
 *
 * The choice is the same on every rank of a correct program: the settings and VCCL_ALGO are agreed at creation
 * and the choice goes by the call's sizes only, never by its buffers' addresses (ranks taking different algorithms
 * would wait for each other until they abort).
 */
#ifndef VCCL_ALGO_DEVICE_DEVICE_ALGO_H_
#define VCCL_ALGO_DEVICE_DEVICE_ALGO_H_

#include <cstddef>

#include "algo/op.h"
#include "exec/device_path.h"

namespace vccl {

/* How an algorithm takes a PreMulSum collective's scaling (algo/premul.h). */
struct PreMulPlan {
    enum Kind {
        ScaledCopy, // the collective reads a copy of the whole input, multiplied in a pass of its own
        Kernel,     // the low-latency or chunked kernel multiplies each element where it reads it: no pass, no copy
        // The copy-engine reductions (AllReduce's reduce-scatter + all-gather, ReduceScatter): the blocks sent to the
        // peers come from a copy scaled outside [own_begin, own_end) (elements of the input), and the reduction
        // kernel multiplies this rank's own block as it reads it: a pass over (n - 1) / n of the input, not all.
        OwnBlock,
    };
    Kind kind = ScaledCopy;
    size_t own_begin = 0;
    size_t own_end = 0;
};

struct DeviceAlgorithm {
    CollType coll;
    const char* name;        // for VCCL_ALGO (unique per collective among host and device algorithms)
    const char* description;
    const char* window;      // where the default choice gives it the call (vccl-info -a, vccl(7))
    bool kernel;             // runs in one kernel launch that takes a call number of the kernels' word sets
    PreMulPlan::Kind premul; // how it takes a PreMulSum call (reductions)
    /* Whether it can run op at all (its hard limits: word set sizes, alignment, rank count); agreed on every rank. */
    bool (*possible)(const DevicePath& dev, const Op& op);
    /* Runs op; `peers_free`: the peers' reduction scratch is free for this call's first transfers into it
     * (algo/device/common.h, take_peers_scratch_free). */
    vcclResult_t (*run)(DevicePath& dev, const Op& op, bool peers_free);
};

/* The descriptors, one per file under algo/device/<collective>/. */
extern const DeviceAlgorithm kDeviceAllReduceLl;         // allreduce/ll.cc
extern const DeviceAlgorithm kDeviceAllReduceChunked;    // allreduce/chunked.cc
extern const DeviceAlgorithm kDeviceAllReduceOneShot;    // allreduce/one_shot.cc
extern const DeviceAlgorithm kDeviceAllReduceRsag;       // allreduce/rsag.cc
extern const DeviceAlgorithm kDeviceAllReducePieces;     // allreduce/pieces.cc
extern const DeviceAlgorithm kDeviceReduceScatterLl;     // reducescatter/ll.cc
extern const DeviceAlgorithm kDeviceReduceScatterChunked; // reducescatter/chunked.cc
extern const DeviceAlgorithm kDeviceReduceScatterBlocks; // reducescatter/blocks.cc
extern const DeviceAlgorithm kDeviceReduceScatterPieces; // reducescatter/pieces.cc
extern const DeviceAlgorithm kDeviceAllGatherLl;         // allgather/ll.cc
extern const DeviceAlgorithm kDeviceAllGatherCe;         // allgather/ce.cc
extern const DeviceAlgorithm kDeviceBroadcastLl;         // broadcast/ll.cc
extern const DeviceAlgorithm kDeviceBroadcastCe;         // broadcast/ce.cc
extern const DeviceAlgorithm kDeviceReduceLl;            // reduce/ll.cc
extern const DeviceAlgorithm kDeviceReduceCe;            // reduce/ce.cc
extern const DeviceAlgorithm kDeviceAlltoAllLl;          // alltoall/ll.cc
extern const DeviceAlgorithm kDeviceAlltoAllCe;          // alltoall/ce.cc

/* Every device algorithm. */
const DeviceAlgorithm* const* device_algo_list(size_t* count);
/* The algorithm for op (a collective with count > 0 on device buffers the direct path takes): the one VCCL_ALGO
 * forces (dev.forced, agreed at creation) where it is possible, else the default table's. Never NULL. */
const DeviceAlgorithm* device_algo_select(const DevicePath& dev, const Op& op);
/* The default choice alone (the table in registry.cc). */
const DeviceAlgorithm* device_algo_default(const DevicePath& dev, const Op& op);
/* Looks a device algorithm up by collective and name (case-insensitive); NULL when there is none. */
const DeviceAlgorithm* device_algo_find(CollType coll, const char* name);

} // namespace vccl

#endif
