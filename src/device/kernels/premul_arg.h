/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * PreMulSum's scalar as the kernels take it (algo/premul.h): the kernel that first reads this rank's input multiplies
 * each element by it there, instead of a separate pass over the input before the collective.
 */
#ifndef VCCL_DEVICE_KERNELS_PREMUL_ARG_H_
#define VCCL_DEVICE_KERNELS_PREMUL_ARG_H_

#include <cstdint>

namespace vccl {

struct PreMulArg {
    const void* device_scalar = nullptr; // vcclScalarDevice: read on the device when the kernel runs
    uint64_t host_bits = 0;              // vcclScalarHostImmediate: the element, in its low bytes
    int on = 0;                          // 0: this rank's input is taken as it is
};

} // namespace vccl

#endif
