/* SPDX-License-Identifier: BSD-3-Clause */
/* The size parser of the library (VCCL_* size variables) and of the tools' options (vccl-perf -b/-e/-i,
 * vccl-diag --bytes). Pure and stateless: in libvccl_util with core/names.h. */
#ifndef VCCL_CORE_PARSE_SIZE_H_
#define VCCL_CORE_PARSE_SIZE_H_

#include <cstdint>

namespace vccl {

/* A byte count in decimal with an optional suffix k/K, m/M or g/G (powers of 1024, as nccl-tests), which
 * may be followed by b/B: "0", "64", "4K", "1M", "2GB". Returns false, leaving *out untouched, for empty or
 * null text, a leading '-', a missing number, any other suffix or trailing character, and a value that
 * does not fit in 64 bits. */
bool parse_size(const char* text, uint64_t* out);

} // namespace vccl

#endif
