/* SPDX-License-Identifier: BSD-3-Clause */
#include "core/scratch_arena.h"

namespace vccl {

void* ScratchArena::get(size_t bytes) {
    if (bytes == 0) bytes = 1; // a distinct, dereferenceable pointer even for empty requests
    if (used_ < blocks_.size()) {
        // This block is not handed out in the current collective, so it may be regrown freely.
        std::vector<char>& block = blocks_[used_];
        if (block.size() < bytes) {
            block.clear();
            block.shrink_to_fit();
            block.resize(bytes);
        }
        ++used_;
        return block.data();
    }
    // Moving the outer vector moves inner vectors without reallocating their storage: earlier pointers stay
    // valid.
    blocks_.emplace_back(bytes);
    ++used_;
    return blocks_.back().data();
}

} // namespace vccl
