/* SPDX-License-Identifier: BSD-3-Clause */
#include "core/names.h"

#include <strings.h>

namespace vccl {

namespace {

struct Named {
    const char* name;
    int value;
};

/* Every spelling accepted for each type; the first one of a type is its canonical name. */
const Named kTypeNames[] = {
    {"int8", vcclInt8},       {"char", vcclInt8},
    {"uint8", vcclUint8},
    {"int32", vcclInt32},     {"int", vcclInt32},
    {"uint32", vcclUint32},
    {"int64", vcclInt64},
    {"uint64", vcclUint64},
    {"half", vcclFloat16},    {"float16", vcclFloat16}, {"fp16", vcclFloat16},
    {"float", vcclFloat32},   {"float32", vcclFloat32}, {"fp32", vcclFloat32},
    {"double", vcclFloat64},  {"float64", vcclFloat64}, {"fp64", vcclFloat64},
    {"bfloat16", vcclBfloat16}, {"bf16", vcclBfloat16},
    {"f8e4m3", vcclFloat8e4m3}, {"float8e4m3", vcclFloat8e4m3}, {"fp8e4m3", vcclFloat8e4m3}, {"e4m3", vcclFloat8e4m3},
    {"f8e5m2", vcclFloat8e5m2}, {"float8e5m2", vcclFloat8e5m2}, {"fp8e5m2", vcclFloat8e5m2}, {"e5m2", vcclFloat8e5m2},
};

const Named kOpNames[] = {
    {"sum", vcclSum}, {"prod", vcclProd}, {"max", vcclMax}, {"min", vcclMin}, {"avg", vcclAvg},
};

template <size_t N>
const char* name_of(const Named (&table)[N], int value) {
    for (const Named& n : table) {
        if (n.value == value) return n.name;
    }
    return "invalid";
}

template <size_t N>
int value_of(const Named (&table)[N], const char* name) {
    if (name == nullptr) return -1;
    for (const Named& n : table) {
        if (strcasecmp(name, n.name) == 0) return n.value;
    }
    return -1;
}

} // namespace

bool dtype_valid(vcclDataType_t type) { return int(type) >= 0 && int(type) < int(vcclNumTypes); }

bool op_valid(vcclRedOp_t op) { return int(op) >= 0 && int(op) < int(vcclNumOps); }

size_t dtype_size(vcclDataType_t type) {
    switch (type) {
    case vcclInt8: case vcclUint8: case vcclFloat8e4m3: case vcclFloat8e5m2: return 1;
    case vcclFloat16: case vcclBfloat16: return 2;
    case vcclInt32: case vcclUint32: case vcclFloat32: return 4;
    case vcclInt64: case vcclUint64: case vcclFloat64: return 8;
    default: return 0;
    }
}

const char* dtype_name(vcclDataType_t type) { return name_of(kTypeNames, int(type)); }

const char* op_name(vcclRedOp_t op) { return name_of(kOpNames, int(op)); }

int dtype_from_name(const char* name) { return value_of(kTypeNames, name); }

int op_from_name(const char* name) { return value_of(kOpNames, name); }

} // namespace vccl
