/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A Bootstrap over the functions of an external bootstrap (vcclBootstrap_t in vccl.h): how vcclCommInitBootstrap,
 * and through it vcclCommInitMPI, plug a channel of the caller's into the communicator.
 */
#ifndef VCCL_BOOTSTRAP_EXTERNAL_BOOTSTRAP_H_
#define VCCL_BOOTSTRAP_EXTERNAL_BOOTSTRAP_H_

#include <memory>

#include "bootstrap/bootstrap.h"
#include "vccl.h"

namespace vccl {

/* Checks *ops (version, rank, size, the required functions) and wraps a copy; on failure destroys ops's ctx (the
 * caller handed it over) and returns the error. */
vcclResult_t external_bootstrap_create(const vcclBootstrap_t* ops, std::shared_ptr<Bootstrap>* out);

} // namespace vccl

#endif
