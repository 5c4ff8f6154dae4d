/* SPDX-License-Identifier: BSD-3-Clause */
/* Communicator operations behind the API: split, destroy/abort, and running collectives and p2p. */
#ifndef VCCL_COMM_COMM_OPS_H_
#define VCCL_COMM_COMM_OPS_H_

#include <vector>

#include "algo/algo.h"
#include "comm/comm.h"

namespace vccl {

/* Validates a caller's vcclConfig_t (NULL is valid); done before any bootstrap traffic. */
vcclResult_t comm_check_config(const vcclConfig_t* config);
/* config->telemetry where the caller's struct has the field, else VCCL_CONFIG_UNDEF_INT. */
int config_telemetry(const vcclConfig_t* config);
/* config->opTimeoutMs where the caller's struct has the field, else VCCL_CONFIG_UNDEF_INT. */
int config_op_timeout_ms(const vcclConfig_t* config);
vcclResult_t comm_split(vcclComm* comm, int color, int key, vcclComm_t* out, const vcclConfig_t* config);
/* vcclCommShrink: `members` are comm's ranks that remain, ascending (the caller among them). */
vcclResult_t comm_shrink(vcclComm* comm, const std::vector<int>& members, bool abort_pending, vcclComm_t* out,
                         const vcclConfig_t* config);
/* A child's config: `given`, or with NULL the parent's settings (netName, maxCtas, telemetry, opTimeoutMs) in
 * `storage`. The caller holds the parent's operation lock. */
const vcclConfig_t* comm_child_config(const vcclComm* parent, const vcclConfig_t* given, vcclConfig_t* storage);
/* vcclCommGetUniqueId: a grow id whose bootstrap root runs in this process. */
vcclResult_t comm_grow_unique_id(vcclComm* comm, vcclUniqueId* id);
/* vcclCommGrow on a rank of comm (collective over comm): exactly one rank passes `id`, every rank the same nranks. */
vcclResult_t comm_grow(vcclComm* comm, int nranks, const vcclUniqueId* id, vcclComm_t* out, const vcclConfig_t* config);
/* vcclCommGrow on a new rank: joins the grown communicator as `rank`. */
vcclResult_t comm_grow_join(int nranks, const vcclUniqueId& id, int rank, vcclComm_t* out, const vcclConfig_t* config);
/* vcclCommRevoke: ends this rank's operations in flight and refuses later ones, keeping what a shrink needs. */
vcclResult_t comm_revoke(vcclComm* comm);
/* Unregisters and frees comm. abort: stop pending work first and bound every wait to well under a second. */
vcclResult_t comm_destroy(vcclComm* comm, bool abort);

} // namespace vccl

#endif
