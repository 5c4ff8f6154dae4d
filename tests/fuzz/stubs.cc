/* SPDX-License-Identifier: BSD-3-Clause */
// Link stubs for the fuzz targets: src/core/status.cc names results through the public vcclGetErrorString,
// which lives in src/api/error_api.cc together with entry points that pull in the whole communicator. The
// fuzz targets only need a name for log lines.
#include <strings.h>

#include "algo/device/device_algo.h"
#include "vccl.h"

extern "C" const char* vcclGetErrorString(vcclResult_t result) { return result == vcclSuccess ? "success" : "error"; }

// The device registry as VCCL_ALGO's parser sees it: names per collective (the algorithms never run here).
namespace vccl {
namespace {
const DeviceAlgorithm kFakes[] = {
    {CollType::AllReduce, "ll", "", "", true, PreMulPlan::Kernel, nullptr, nullptr},
    {CollType::AllReduce, "pieces", "", "", false, PreMulPlan::OwnBlock, nullptr, nullptr},
    {CollType::AllGather, "ce", "", "", false, PreMulPlan::ScaledCopy, nullptr, nullptr},
    {CollType::AlltoAll, "ll", "", "", true, PreMulPlan::Kernel, nullptr, nullptr},
};
const DeviceAlgorithm* const kFakeTable[] = {&kFakes[0], &kFakes[1], &kFakes[2], &kFakes[3]};
} // namespace
const DeviceAlgorithm* const* device_algo_list(size_t* count) {
    *count = sizeof(kFakeTable) / sizeof(kFakeTable[0]);
    return kFakeTable;
}
const DeviceAlgorithm* device_algo_find(CollType coll, const char* name) {
    for (const DeviceAlgorithm* a : kFakeTable) {
        if (a->coll == coll && strcasecmp(a->name, name) == 0) return a;
    }
    return nullptr;
}
} // namespace vccl
