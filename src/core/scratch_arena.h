/* SPDX-License-Identifier: BSD-3-Clause */
/* Host memory reused across operations: blocks handed out for one operation, kept for the next. */
#ifndef VCCL_CORE_SCRATCH_ARENA_H_
#define VCCL_CORE_SCRATCH_ARENA_H_

#include <cstddef>
#include <vector>

namespace vccl {

/* Memory an operation (a collective, a batch of sends) may use until it ends; owned by the communicator. */
class ScratchArena {
public:
    /* Returns at least `bytes`; earlier pointers from this arena stay valid until reset(). */
    void* get(size_t bytes);
    void reset() { used_ = 0; }
    /* Frees every block (a destroyed communicator's). */
    void release() {
        std::vector<std::vector<char>>().swap(blocks_);
        used_ = 0;
    }
private:
    std::vector<std::vector<char>> blocks_;
    size_t used_ = 0; // blocks handed out in the current collective
};

} // namespace vccl

#endif
