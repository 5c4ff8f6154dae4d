/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Compile-time ABI check of libvccl-nccl against the real nccl.h, when the build can see one (the CUDA
 * include directory often carries it). The library never includes nccl.h otherwise and never links NCCL.
 */
#if defined(__has_include)
#if __has_include(<nccl.h>)
#include <nccl.h>

#include "vccl.h"
#define VCCL_NCCL_ABI_TYPES_ONLY 1
namespace ours {
#include "nccl_compat/nccl_abi.h"
}
#include "nccl_compat/abi_asserts.h"
#endif
#endif

namespace vccl {
namespace nccl_compat {
/* Keeps this translation unit non-empty when nccl.h is absent. */
extern const int abi_checked_against_nccl_h;
#if defined(NCCL_VERSION_CODE)
const int abi_checked_against_nccl_h = NCCL_VERSION_CODE;
#else
const int abi_checked_against_nccl_h = 0;
#endif
} // namespace nccl_compat
} // namespace vccl
