/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The device algorithms' registry: the list, and the default choice, one table. For each collective its rules are
 * tried in order and the first that holds picks the algorithm; the windows are the ones vccl-info -a prints and
 * vccl(7) documents, measured on 2x H200 (docs/PERFORMANCE.md):
 *
 *   allreduce      ll (fits the word sets) > chunked (up to VCCL_ALLREDUCE_KERNEL_BYTES) > one_shot (up to
 *                  VCCL_ALLREDUCE_SMALL_BYTES) > pieces (from 2 x VCCL_REDUCE_PIPELINE_BYTES) > rsag
 *   reducescatter  ll > chunked > pieces (from 2 x VCCL_REDUCE_PIPELINE_BYTES of input) > blocks
 *   allgather, broadcast, reduce, alltoall   ll > ce
 */
#include <algorithm>
#include <atomic>
#include <strings.h>

#include "algo/device/device_algo.h"
#include "algo/device/kernel_call.h"
#include "algo/device/pipeline.h"
#include "algo/device/reduce_pieces.h"
#include "core/dtype.h"
#include "core/log.h"

namespace vccl {

namespace {

const DeviceAlgorithm* const kTable[] = {
    &kDeviceAllReduceLl,         &kDeviceAllReduceChunked,    &kDeviceAllReduceOneShot, &kDeviceAllReduceRsag,
    &kDeviceAllReducePieces,     &kDeviceReduceScatterLl,     &kDeviceReduceScatterChunked,
    &kDeviceReduceScatterBlocks, &kDeviceReduceScatterPieces, &kDeviceAllGatherLl,      &kDeviceAllGatherCe,
    &kDeviceBroadcastLl,         &kDeviceBroadcastCe,         &kDeviceReduceLl,         &kDeviceReduceCe,
    &kDeviceAlltoAllLl,          &kDeviceAlltoAllCe,
};

size_t call_bytes(const Op& op) { return op.coll.count * dtype_size(op.coll.dtype); }

/* The chunked kernel's default window: up to VCCL_ALLREDUCE_KERNEL_BYTES, and for PreMulSum up to
 * VCCL_PREMULSUM_KERNEL_BYTES (above the limit its copy-engine path needs a scaling pass anyway), never less far than
 * Sum: premul_apply clears op.premul where its plan is not the kernel, and the call must then still not take the
 * kernel (nor device_coll_give_up, which sees the op unchanged, think otherwise). */
bool chunked_window(const DevicePath& dev, const Op& op) {
    const CollSettings& s = *dev.settings;
    const size_t limit = op.premul ? std::max(s.premul_kernel_bytes, s.kernel_bytes) : s.kernel_bytes;
    return call_bytes(op) <= limit && chunked_possible(dev, op);
}
bool at_most_small(const DevicePath& dev, const Op& op) { return call_bytes(op) <= dev.settings->small_bytes; }
bool allreduce_in_pieces(const DevicePath& dev, const Op& op) {
    return pipeline_pieces(dev, call_bytes(op), kAllReduceMaxPieces) > 1;
}
bool reducescatter_in_pieces(const DevicePath& dev, const Op& op) {
    return pipeline_pieces(dev, call_bytes(op) * size_t(dev.nranks), kReduceMaxPieces) > 1;
}
bool always(const DevicePath&, const Op&) { return true; }

struct DefaultRule {
    const DeviceAlgorithm* algo;
    bool (*when)(const DevicePath& dev, const Op& op);
};

/* The default choice. */
const DefaultRule kDefaults[] = {
    {&kDeviceAllReduceLl, ll_possible},
    {&kDeviceAllReduceChunked, chunked_window},
    {&kDeviceAllReduceOneShot, at_most_small},
    {&kDeviceAllReducePieces, allreduce_in_pieces},
    {&kDeviceAllReduceRsag, always},
    {&kDeviceReduceScatterLl, ll_possible},
    {&kDeviceReduceScatterChunked, chunked_window},
    {&kDeviceReduceScatterPieces, reducescatter_in_pieces},
    {&kDeviceReduceScatterBlocks, always},
    {&kDeviceAllGatherLl, ll_possible},
    {&kDeviceAllGatherCe, always},
    {&kDeviceBroadcastLl, ll_possible},
    {&kDeviceBroadcastCe, always},
    {&kDeviceReduceLl, ll_possible},
    {&kDeviceReduceCe, always},
    {&kDeviceAlltoAllLl, ll_possible},
    {&kDeviceAlltoAllCe, always},
};

} // namespace

const DeviceAlgorithm* const* device_algo_list(size_t* count) {
    *count = sizeof(kTable) / sizeof(kTable[0]);
    return kTable;
}

const DeviceAlgorithm* device_algo_find(CollType coll, const char* name) {
    for (const DeviceAlgorithm* a : kTable) {
        if (a->coll == coll && strcasecmp(a->name, name) == 0) return a;
    }
    return nullptr;
}

const DeviceAlgorithm* device_algo_default(const DevicePath& dev, const Op& op) {
    for (const DefaultRule& rule : kDefaults) {
        if (rule.algo->coll == op.coll.coll && rule.when(dev, op)) return rule.algo;
    }
    return nullptr; // not reached: every collective ends with a rule that always holds
}

const DeviceAlgorithm* device_algo_select(const DevicePath& dev, const Op& op) {
    // The one kernel whose replays need no host call (device_coll_capturable).
    if (op.captured) return device_algo_find(op.coll.coll, "ll");
    const DeviceAlgorithm* forced = dev.forced != nullptr ? dev.forced->device[int(op.coll.coll)] : nullptr;
    if (forced == nullptr) return device_algo_default(dev, op);
    if (forced->possible(dev, op)) return forced;
    // Said once per collective and process: a forced algorithm meets calls it cannot take in every sweep of sizes.
    static std::atomic<bool> told[int(CollType::kCount)];
    const DeviceAlgorithm* fallback = device_algo_default(dev, op);
    if (!told[int(op.coll.coll)].exchange(true)) {
        VCCL_INFO(kLogColl, "VCCL_ALGO=%s:%s cannot run a %s of %zu elements of %s (its limits: %s); %s:%s runs it, "
                  "and other such calls", coll_name(op.coll.coll), forced->name, coll_name(op.coll.coll),
                  op.coll.count, dtype_name(op.coll.dtype), forced->window, coll_name(op.coll.coll), fallback->name);
    }
    return fallback;
}

} // namespace vccl
