/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The chunked collectives' view of a low-latency word set (chunk_layout in src/device/kernels/chunked_collectives.h),
 * checked without a GPU over every set size the communicator can make (VCCL_ALLREDUCE_LL_BYTES 16K-8M, 2-64 ranks,
 * with the set formula of transport/cuda_ipc/): the flags, credits and slots fit in the set, data starts on a
 * 128-byte boundary after the credits, chunks are whole 16-byte vectors of 4-64 KiB, and a set that holds fewer than
 * two chunks turns the path off.
 */
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "device/kernels/chunked_collectives.h"

namespace {

using vccl::chunk_layout;
using vccl::ChunkLayout;

/* Words of one (sender, set) for a low-latency limit and rank count, as CudaIpcP2p::init sizes them. */
size_t set_words_for(size_t ll_bytes, int ranks) {
    const size_t message = ll_bytes / size_t(ranks - 1) / 8 * 8;
    return (vccl::kLlDataWord + (message + 7) / 8 * 2 + 31) / 32 * 32;
}

std::string check(const ChunkLayout& l, size_t set_words) {
    const size_t set_bytes = set_words * 8;
    if (l.slots == 0) return set_bytes >= 2 * (4096 + 16) + 256 ? "off although two 4 KiB chunks fit" : "";
    if (l.slots < 2 || l.slots > 1024) return "slots " + std::to_string(l.slots);
    if (l.chunk_bytes < 4096 || l.chunk_bytes > 65536 || l.chunk_bytes % 16 != 0) return "chunk " + std::to_string(l.chunk_bytes);
    if (l.data_word % 16 != 0) return "data not on a 128-byte boundary";
    if (l.data_word < vccl::kLlDataWord + 2 * l.slots) return "data overlaps the flags or credits";
    if (size_t(l.data_word) * 8 + size_t(l.slots) * l.chunk_bytes > set_bytes) return "slots run past the set";
    if (l.slots < 8 && l.chunk_bytes > 4096) return "fewer than 8 slots with chunks that could be smaller";
    return "";
}

TEST(ChunkLayout, FitsEverySetTheCommunicatorMakes) {
    int cases = 0;
    for (size_t ll = 16u << 10; ll <= vccl::kMaxLlBytes; ll *= 2) {
        for (int ranks = 2; ranks <= vccl::kMaxLlRanks; ++ranks) {
            const size_t words = set_words_for(ll, ranks);
            const ChunkLayout l = chunk_layout(words);
            std::string why = check(l, words);
            EXPECT_TRUE(why.empty()) << "VCCL_ALLREDUCE_LL_BYTES " << ll << ", " << ranks << " ranks: " << why;
            ++cases;
        }
    }
    EXPECT_EQ(cases, 10 * 63);
}

TEST(ChunkLayout, DefaultAndSmallSets) {
    // The default 2 MiB with 2 ranks: a 4 MiB set of 64 KiB chunks.
    const ChunkLayout big = chunk_layout(set_words_for(2u << 20, 2));
    EXPECT_EQ(big.chunk_bytes, 65536u);
    EXPECT_GE(big.slots, 60u);
    // 64 KiB with 2 ranks (the GPU tests' small sets): 128 KiB, chunks halved until 8 fit.
    const ChunkLayout small = chunk_layout(set_words_for(64u << 10, 2));
    EXPECT_EQ(small.chunk_bytes, 16384u);
    EXPECT_EQ(small.slots, 8u);
    // Too small for two chunks: off.
    EXPECT_EQ(chunk_layout(1024).slots, 0u); // 8 KiB
    EXPECT_EQ(chunk_layout(0).slots, 0u);
    // Any set between those: either off or consistent.
    for (size_t words = 0; words < 40000; words += 7) EXPECT_EQ(check(chunk_layout(words), words), "") << words;
}

TEST(ChunkLayout, HeaderHoldsTheLargestMessageAndEveryKind) {
    // kind << 28 | bytes: every low-latency kind, every chunked kind (kChunkedKind | LlKind, for the two reductions
    // that have one) and the abandoned marker (15) stay distinct from one another and from the bytes.
    using vccl::LlKind;
    EXPECT_LT(vccl::kMaxChunkedBytes, size_t(1) << 28);
    const LlKind low_latency[] = {LlKind::AllReduce, LlKind::ReduceScatter, LlKind::AllGather,
                                  LlKind::AlltoAll,  LlKind::Broadcast,     LlKind::Reduce};
    std::vector<uint32_t> kinds;
    for (LlKind k : low_latency) kinds.push_back(uint32_t(k));
    for (LlKind k : {LlKind::AllReduce, LlKind::ReduceScatter}) kinds.push_back(vccl::kChunkedKind | uint32_t(k));
    for (size_t i = 0; i < kinds.size(); ++i) {
        EXPECT_LT(kinds[i], 15u) << "kind " << kinds[i] << " is the abandoned marker's or does not fit 4 bits";
        for (size_t j = i + 1; j < kinds.size(); ++j) EXPECT_NE(kinds[i], kinds[j]) << i << " and " << j;
        const uint32_t header = (kinds[i] << 28) | uint32_t(vccl::kMaxChunkedBytes);
        EXPECT_EQ(header >> 28, kinds[i]);
        EXPECT_NE(header, vccl::kLlAbandonedBytes);
    }
}

} // namespace
