/* Datatypes and reduction ops: sizes, names, validity, and fp16/bf16 conversions. */
#ifndef VCCL_CORE_DTYPE_H_
#define VCCL_CORE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "vccl.h"

namespace vccl {

bool dtype_valid(vcclDataType_t type);
bool op_valid(vcclRedOp_t op);
/* Bytes per element; 0 for an invalid type. */
size_t dtype_size(vcclDataType_t type);
const char* dtype_name(vcclDataType_t type);
const char* op_name(vcclRedOp_t op);
/* Parses names as vccl-perf accepts them ("float", "float32", "half", "bf16", "sum", ...); -1 if unknown. */
int dtype_from_name(const char* name);
int op_from_name(const char* name);

/* IEEE binary16 <-> float, round to nearest even. */
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
/* bfloat16 <-> float, round to nearest even; NaN stays NaN. */
inline float bf16_to_float(uint16_t b) {
    uint32_t u = uint32_t(b) << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}
inline uint16_t float_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40); // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
}

} // namespace vccl

#endif
