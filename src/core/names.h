/* SPDX-License-Identifier: BSD-3-Clause */
/* Data types and reduction operations: validity, sizes and names. One table for the library and the tools:
 * this code is pure and stateless and lives in libvccl_util, which libvccl_core embeds and the tools that see
 * only the public API (vccl-perf) link directly. */
#ifndef VCCL_CORE_NAMES_H_
#define VCCL_CORE_NAMES_H_

#include <cstddef>

#include "vccl.h"

namespace vccl {

bool dtype_valid(vcclDataType_t type);
/* True for the built-in operations only (vcclSum .. vcclAvg), not for those a communicator created. */
bool op_valid(vcclRedOp_t op);
/* Bytes per element; 0 for an invalid type. */
size_t dtype_size(vcclDataType_t type);
/* The canonical name of a type, as vccl-perf prints it (nccl-tests spelling: "int8", "uint8", "int32",
 * "uint32", "int64", "uint64", "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"); "invalid" for an invalid
 * type. */
const char* dtype_name(vcclDataType_t type);
/* "sum", "prod", "max", "min", "avg"; "invalid" for anything else. */
const char* op_name(vcclRedOp_t op);
/* Any accepted spelling, case-insensitive: the canonical names and "char", "int", "float16", "fp16",
 * "float32", "fp32", "float64", "fp64", "bf16", "float8e4m3", "fp8e4m3", "e4m3" (and e5m2 likewise); -1 if
 * unknown (or null). */
int dtype_from_name(const char* name);
int op_from_name(const char* name);

} // namespace vccl

#endif
