/* SPDX-License-Identifier: BSD-3-Clause */
/* Collectives on device buffers among the GPUs of one host: the entry the communicator's dispatch calls, which picks
 * a device algorithm (algo/device/device_algo.h) and runs it. */
#ifndef VCCL_ALGO_DEVICE_DEVICE_COLL_H_
#define VCCL_ALGO_DEVICE_DEVICE_COLL_H_

#include "algo/device/device_algo.h"

namespace vccl {

/* True when op (a collective on device buffers) can run on the direct path: every rank on this host, all mapped
 * (and, in a build without CUDA, never). Symmetric across ranks. */
bool device_coll_direct_possible(const DevicePath& dev, const Op& op);
/* True when op, a call on a stream being captured into a CUDA graph, can be captured: a collective on device buffers
 * that the direct path runs in the low-latency kernel (device/kernels/ll_collectives.h: its replays take their
 * numbers on the device), or one with nothing to move. Symmetric across ranks. Captured ops (Op::captured) always
 * take that kernel, whatever VCCL_ALGO says. */
bool device_coll_capturable(const DevicePath& dev, const Op& op);
/* Runs op (device_coll_direct_possible): the calling thread never waits for the device (except when the
 * reduction scratch grows). */
vcclResult_t run_device_coll_direct(DevicePath& dev, const Op& op);
/* How the direct path takes a PreMulSum collective's scaling, decided from the call's sizes and the agreed
 * settings, as the choice of algorithm is. */
PreMulPlan device_coll_premul_plan(const DevicePath& dev, const Op& op);
/* op, which the direct path would have run, will not run on this rank (an earlier part of its call failed): if its
 * algorithm runs in one kernel, its call number is taken, the peers are told so that they neither wait for it nor
 * pair it with a later call, and the communicator fails here too (algo/device/kernel_call.h). */
void device_coll_give_up(DevicePath& dev, const Op& op);

} // namespace vccl

#endif
