/* SPDX-License-Identifier: BSD-3-Clause */
/* The settings that decide how a communicator's collectives cut their messages and pick their algorithms; read
 * from VCCL_* variables at creation and agreed by the ranks (comm/comm_init.cc). */
#ifndef VCCL_CORE_COLL_SETTINGS_H_
#define VCCL_CORE_COLL_SETTINGS_H_

#include <cstddef>
#include <cstdint>

#include "core/mem_type.h"

namespace vccl {

struct CollSettings {
    MemType mem = MemType::Host;
    size_t chunk_bytes = 1u << 20;   // pipelining unit of ring/chain algorithms
    size_t small_bytes = 64u << 10;  // allreduce at or below this uses the low-latency algorithm
    size_t reduce_pipeline_bytes = 32u << 20; // device reductions of one host: piece size (0: one piece)
    size_t reduce_scratch_bytes = 256u << 20; // ... more pieces where they would take more scratch (0: no limit)
    size_t kernel_bytes = 8u << 20;  // device collectives of one host: the chunked kernel's largest message (0: off)
    size_t premul_kernel_bytes = 32u << 20; // the same for PreMulSum ops
    int64_t op_timeout_ms = 0;       // 0: no limit
};

} // namespace vccl

#endif
