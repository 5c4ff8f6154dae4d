/*
 * Algorithm registry. Each algorithm lives in its own file (algo/<collective>/<name>.cc), exports one
 * `Algorithm` descriptor, and is listed in registry.cc. VCCL_ALGO=coll:name[,coll:name] forces a choice;
 * otherwise select() picks by size and rank count.
 */
#ifndef VCCL_ALGO_ALGO_H_
#define VCCL_ALGO_ALGO_H_

#include <cstddef>

#include "algo/coll_ctx.h"
#include "vccl.h"

namespace vccl {

enum class CollType { AllReduce = 0, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll, kCount };

const char* coll_name(CollType coll); // "allreduce", "broadcast", "reduce", "allgather", "reducescatter", "alltoall"

/* Arguments as the API received them. count: elements per rank as each API defines it (AllGather: send
 * count, ReduceScatter: receive count, AlltoAll: count per peer). In-place is sendbuf == recvbuf (AllGather:
 * sendbuf == recvbuf + rank*count; ReduceScatter: recvbuf == sendbuf + rank*count). */
struct CollArgs {
    CollType coll;
    const void* sendbuf;
    void* recvbuf;
    size_t count;
    vcclDataType_t dtype;
    vcclRedOp_t op; // reductions only
    int root;       // Broadcast and Reduce only
};

struct Algorithm {
    CollType coll;
    const char* name;
    const char* description;
    vcclResult_t (*run)(CollCtx& ctx, const CollArgs& args);
};

/* The descriptors, one per file under algo/<collective>/. */
extern const Algorithm kAllReduceRing;              // allreduce/ring.cc
extern const Algorithm kAllReduceRecursiveDoubling; // allreduce/recursive_doubling.cc
extern const Algorithm kBroadcastBinomial;          // broadcast/binomial.cc
extern const Algorithm kBroadcastChain;             // broadcast/chain.cc
extern const Algorithm kReduceBinomial;             // reduce/binomial.cc
extern const Algorithm kReduceChain;                // reduce/chain.cc
extern const Algorithm kAllGatherRing;              // allgather/ring.cc
extern const Algorithm kReduceScatterRing;          // reducescatter/ring.cc
extern const Algorithm kAlltoAllPairwise;           // alltoall/pairwise.cc

/* Every registered algorithm. */
const Algorithm* algo_list(size_t* count);
/* The algorithm for this call: VCCL_ALGO's choice for the collective if any, else the default by size. */
const Algorithm* algo_select(const CollArgs& args, int nranks, const CollSettings& settings);
/* Parses a VCCL_ALGO value; false with a message in *error when a name is unknown (exposed for tests).
 * chosen[c] is the forced algorithm of collective c or nullptr; valid entries are filled in even when
 * another entry is rejected. Collective names: the coll_name() spellings, plus "bcast"; case-insensitive. */
bool algo_parse_override(const char* spec, const Algorithm* chosen[int(CollType::kCount)], char* error,
                         size_t error_len);

} // namespace vccl

#endif
