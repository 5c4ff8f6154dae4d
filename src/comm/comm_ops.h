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
vcclResult_t comm_split(vcclComm* comm, int color, int key, vcclComm_t* out, const vcclConfig_t* config);
/* vcclCommShrink: `members` are comm's ranks that remain, ascending (the caller among them). */
vcclResult_t comm_shrink(vcclComm* comm, const std::vector<int>& members, bool abort_pending, vcclComm_t* out,
                         const vcclConfig_t* config);
/* Unregisters and frees comm. abort: stop pending work first and bound every wait to well under a second. */
vcclResult_t comm_destroy(vcclComm* comm, bool abort);

} // namespace vccl

#endif
