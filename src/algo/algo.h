/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Algorithm registry. Each algorithm lives in its own file, exports one descriptor and is listed in a registry:
 * host algorithms (over the host transport, host memory and staged device memory) in algo/host/<collective>/ and
 * registry.cc, device algorithms (device memory among the GPUs of one host) in algo/device/<collective>/ and
 * algo/device/registry.cc. VCCL_ALGO=coll:name[,coll:name] forces a choice for either kind (names are unique per
 * collective across both); otherwise each registry picks by size and rank count.
 */
#ifndef VCCL_ALGO_ALGO_H_
#define VCCL_ALGO_ALGO_H_

#include <cstddef>

#include "algo/host/coll_ctx.h"
#include "algo/host_groups.h"
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
    const char* window; // where the default choice gives it the call (vccl-info -a, vccl(7))
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
/* Across hosts (algo/twolevel/<collective>/twolevel.cc): one-host phases and per-rail phases between hosts. */
extern const Algorithm kAllReduceTwoLevel;
extern const Algorithm kBroadcastTwoLevel;
extern const Algorithm kReduceTwoLevel;
extern const Algorithm kAllGatherTwoLevel;
extern const Algorithm kReduceScatterTwoLevel;
extern const Algorithm kAlltoAllTwoLevel;

struct DeviceAlgorithm; // algo/device/device_algo.h

/* What VCCL_ALGO forces, per collective: a host and a device algorithm, or NULL for the default. */
struct AlgoChoice {
    const Algorithm* host[int(CollType::kCount)] = {};
    const DeviceAlgorithm* device[int(CollType::kCount)] = {};
};

/* Every registered host algorithm. */
const Algorithm* algo_list(size_t* count);
/* The host algorithm for this call: `forced`'s for the collective if any, else the default: the two-level one
 * where `hosts` (NULL: one host) allows two levels (HostGroups::two_level), else a flat one by size. */
const Algorithm* algo_select(const CollArgs& args, int nranks, const CollSettings& settings,
                             const AlgoChoice& forced = AlgoChoice(), const HostGroups* hosts = nullptr);
/* Parses a VCCL_ALGO value; false with a message in *error when a name is unknown. chosen[c] is the forced host
 * algorithm of collective c or nullptr, device_chosen[c] (when not NULL) the device one; valid entries are filled
 * in even when another entry is rejected. Collective names: the coll_name() spellings, plus "bcast";
 * case-insensitive. */
bool algo_parse_override(const char* spec, const Algorithm* chosen[int(CollType::kCount)], char* error,
                         size_t error_len, const DeviceAlgorithm* device_chosen[int(CollType::kCount)] = nullptr);
/* VCCL_ALGO as this process reads it (parsed once; what it does not recognise is reported once). */
const AlgoChoice& algo_choice_from_env();
/* A choice as one number, so that a communicator's ranks agree on rank 0's (comm_init): each collective's host and
 * device algorithm as its index in its list plus one (0: the default), 8 bits each, host in the low 48 bits. */
uint64_t algo_choice_encode(const AlgoChoice& choice);
AlgoChoice algo_choice_decode(uint64_t code);

} // namespace vccl

#endif
