/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers shared by the multi-rank tests: communicator creation (MPI and TCP unique id), datatypes
 * (sizes, names, an independent fp16/bf16 encoder) and buffers with guard zones.
 * Everything here uses only the public API (vccl.h, vccl_mpi.h).
 */
#ifndef VCCL_TESTS_MPI_TEST_UTIL_H_
#define VCCL_TESTS_MPI_TEST_UTIL_H_

#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../common/fp8_reference.h"
#include "vccl.h"
#if defined(__has_include)
#if __has_include("vccl_mpi.h")
#include "vccl_mpi.h"
#define VTEST_HAVE_VCCL_MPI_H 1
#endif
#endif
#ifndef VTEST_HAVE_VCCL_MPI_H
/* vccl_mpi.h is being written in parallel; this is the declaration it will carry. */
extern "C" vcclResult_t vcclCommInitMPI(vcclComm_t* comm, MPI_Comm mpicomm, const vcclConfig_t* config);
#endif

#include "mpi_gtest_main.h"

namespace vtest {

/* ---------------------------------------------------------------------------------------------- */
/* Communicators                                                                                    */

enum class CommKind { Mpi, UniqueId };

inline const char* comm_kind_name(CommKind k) { return k == CommKind::Mpi ? "Mpi" : "Uid"; }

/* Collective over MPI_COMM_WORLD: a new communicator of every rank, or NULL on this rank's failure
 * (*rc tells why). */
inline vcclComm_t make_comm(CommKind kind, vcclResult_t* rc_out = nullptr) {
    vcclComm_t comm = nullptr;
    vcclResult_t rc;
    if (kind == CommKind::Mpi) {
        rc = vcclCommInitMPI(&comm, MPI_COMM_WORLD, nullptr);
    } else {
        vcclUniqueId id;
        memset(&id, 0, sizeof id);
        vcclResult_t idrc = vcclSuccess;
        if (world_rank() == 0) idrc = vcclGetUniqueId(&id);
        int idok = idrc == vcclSuccess;
        MPI_Bcast(&idok, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, MPI_COMM_WORLD);
        if (!idok)
            rc = idrc == vcclSuccess ? vcclSystemError : idrc;
        else
            rc = vcclCommInitRank(&comm, world_size(), id, world_rank());
    }
    if (rc_out != nullptr) *rc_out = rc;
    return rc == vcclSuccess ? comm : nullptr;
}

/* A communicator of MPI_COMM_WORLD kept for the whole program (created on first use, collectively). */
inline vcclComm_t shared_comm(CommKind kind) {
    static vcclComm_t comms[2] = {nullptr, nullptr};
    static bool tried[2] = {false, false};
    int i = kind == CommKind::Mpi ? 0 : 1;
    if (!tried[i]) {
        tried[i] = true;
        comms[i] = make_comm(kind);
        vcclComm_t c = comms[i];
        if (c != nullptr) on_finalize([c]() { vcclCommDestroy(c); });
    }
    return comms[i];
}

/* ---------------------------------------------------------------------------------------------- */
/* Datatypes                                                                                        */

constexpr vcclDataType_t kAllTypes[] = {vcclInt8,    vcclUint8,    vcclInt32,   vcclUint32,     vcclInt64,
                                        vcclUint64,  vcclFloat16,  vcclBfloat16, vcclFloat32, vcclFloat64,
                                        vcclFloat8e4m3, vcclFloat8e5m2};
constexpr vcclRedOp_t kAllOps[] = {vcclSum, vcclProd, vcclMax, vcclMin, vcclAvg};

inline size_t type_size(vcclDataType_t t) {
    switch (t) {
    case vcclInt8: case vcclUint8: case vcclFloat8e4m3: case vcclFloat8e5m2: return 1;
    case vcclFloat16: case vcclBfloat16: return 2;
    case vcclInt32: case vcclUint32: case vcclFloat32: return 4;
    case vcclInt64: case vcclUint64: case vcclFloat64: return 8;
    default: return 0;
    }
}
inline bool is_fp8(vcclDataType_t t) { return t == vcclFloat8e4m3 || t == vcclFloat8e5m2; }
inline const char* type_name(vcclDataType_t t) {
    switch (t) {
    case vcclInt8: return "Int8";
    case vcclUint8: return "Uint8";
    case vcclInt32: return "Int32";
    case vcclUint32: return "Uint32";
    case vcclInt64: return "Int64";
    case vcclUint64: return "Uint64";
    case vcclFloat16: return "Float16";
    case vcclBfloat16: return "Bfloat16";
    case vcclFloat32: return "Float32";
    case vcclFloat64: return "Float64";
    case vcclFloat8e4m3: return "Float8e4m3";
    case vcclFloat8e5m2: return "Float8e5m2";
    default: return "BadType";
    }
}
inline const char* op_name(vcclRedOp_t op) {
    switch (op) {
    case vcclSum: return "Sum";
    case vcclProd: return "Prod";
    case vcclMax: return "Max";
    case vcclMin: return "Min";
    case vcclAvg: return "Avg";
    default: return "BadOp";
    }
}
inline bool is_float(vcclDataType_t t) {
    return t == vcclFloat16 || t == vcclBfloat16 || t == vcclFloat32 || t == vcclFloat64 || is_fp8(t);
}
inline bool is_unsigned(vcclDataType_t t) { return t == vcclUint8 || t == vcclUint32 || t == vcclUint64; }

/* Independent double -> binary16 conversion, round to nearest even (not the library's code). */
inline uint16_t double_to_half(double d) {
    uint16_t sign = std::signbit(d) ? 0x8000 : 0;
    double a = std::fabs(d);
    if (std::isnan(d)) return 0x7e00;
    if (a >= 65520.0) return uint16_t(sign | 0x7c00); // rounds to infinity
    if (a < std::ldexp(1.0, -25)) return sign;        // rounds to zero (ties to even: 2^-25 -> 0)
    int e;
    std::frexp(a, &e); // a = m * 2^e, m in [0.5, 1)
    int exp = e - 1;   // a = 1.xxx * 2^exp
    if (exp < -14) exp = -14; // subnormal range: fixed quantum 2^-24
    double quantum = std::ldexp(1.0, exp - 10);
    double q = std::nearbyint(a / quantum); // default rounding mode: to nearest even
    double r = q * quantum;
    if (r >= 65520.0) return uint16_t(sign | 0x7c00);
    int re;
    std::frexp(r, &re);
    int rexp = re - 1;
    if (rexp < -14) { // subnormal
        return uint16_t(sign | uint16_t(r / std::ldexp(1.0, -24)));
    }
    uint16_t mant = uint16_t(std::ldexp(r, -rexp) * 1024.0 - 1024.0);
    return uint16_t(sign | uint16_t((rexp + 15) << 10) | mant);
}
inline double half_to_double(uint16_t h) {
    int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v;
    if (exp == 0)
        v = std::ldexp(double(mant), -24);
    else if (exp == 31)
        v = mant ? NAN : INFINITY;
    else
        v = std::ldexp(double(mant + 1024), exp - 25);
    return sign ? -v : v;
}
/* Independent double -> bfloat16 (8 significant bits, float's exponent range), round to nearest even. */
inline uint16_t double_to_bf16(double d) {
    float f = float(d); // exact for the values the tests use (at most 8 significant bits or an Avg)
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t lower = u & 0xffffu, upper = u >> 16;
    if (lower > 0x8000u || (lower == 0x8000u && (upper & 1u))) ++upper;
    return uint16_t(upper);
}
inline double bf16_to_double(uint16_t b) {
    uint32_t u = uint32_t(b) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Stores an integer value (wrapped modulo 2^bits for integer types) or a double into element i. */
inline void store_int(void* buf, size_t i, vcclDataType_t t, int64_t v) {
    switch (t) {
    case vcclInt8: static_cast<int8_t*>(buf)[i] = int8_t(uint8_t(uint64_t(v))); break;
    case vcclUint8: static_cast<uint8_t*>(buf)[i] = uint8_t(uint64_t(v)); break;
    case vcclInt32: static_cast<int32_t*>(buf)[i] = int32_t(uint32_t(uint64_t(v))); break;
    case vcclUint32: static_cast<uint32_t*>(buf)[i] = uint32_t(uint64_t(v)); break;
    case vcclInt64: static_cast<int64_t*>(buf)[i] = v; break;
    case vcclUint64: static_cast<uint64_t*>(buf)[i] = uint64_t(v); break;
    case vcclFloat16: static_cast<uint16_t*>(buf)[i] = double_to_half(double(v)); break;
    case vcclBfloat16: static_cast<uint16_t*>(buf)[i] = double_to_bf16(double(v)); break;
    case vcclFloat32: static_cast<float*>(buf)[i] = float(v); break;
    case vcclFloat64: static_cast<double*>(buf)[i] = double(v); break;
    case vcclFloat8e4m3: static_cast<uint8_t*>(buf)[i] = fp8ref::double_to_e4m3(double(v)); break;
    case vcclFloat8e5m2: static_cast<uint8_t*>(buf)[i] = fp8ref::double_to_e5m2(double(v)); break;
    default: break;
    }
}
inline void store_double(void* buf, size_t i, vcclDataType_t t, double v) {
    switch (t) {
    case vcclFloat16: static_cast<uint16_t*>(buf)[i] = double_to_half(v); break;
    case vcclBfloat16: static_cast<uint16_t*>(buf)[i] = double_to_bf16(v); break;
    case vcclFloat32: static_cast<float*>(buf)[i] = float(v); break;
    case vcclFloat64: static_cast<double*>(buf)[i] = v; break;
    case vcclFloat8e4m3: static_cast<uint8_t*>(buf)[i] = fp8ref::double_to_e4m3(v); break;
    case vcclFloat8e5m2: static_cast<uint8_t*>(buf)[i] = fp8ref::double_to_e5m2(v); break;
    default: store_int(buf, i, t, int64_t(v)); break;
    }
}
/* Reads element i as a double (integers up to 2^53 exactly; the tests stay far below). */
inline double load(const void* buf, size_t i, vcclDataType_t t) {
    switch (t) {
    case vcclInt8: return static_cast<const int8_t*>(buf)[i];
    case vcclUint8: return static_cast<const uint8_t*>(buf)[i];
    case vcclInt32: return static_cast<const int32_t*>(buf)[i];
    case vcclUint32: return static_cast<const uint32_t*>(buf)[i];
    case vcclInt64: return double(static_cast<const int64_t*>(buf)[i]);
    case vcclUint64: return double(static_cast<const uint64_t*>(buf)[i]);
    case vcclFloat16: return half_to_double(static_cast<const uint16_t*>(buf)[i]);
    case vcclBfloat16: return bf16_to_double(static_cast<const uint16_t*>(buf)[i]);
    case vcclFloat32: return static_cast<const float*>(buf)[i];
    case vcclFloat64: return static_cast<const double*>(buf)[i];
    case vcclFloat8e4m3: return fp8ref::e4m3_to_double(static_cast<const uint8_t*>(buf)[i]);
    case vcclFloat8e5m2: return fp8ref::e5m2_to_double(static_cast<const uint8_t*>(buf)[i]);
    default: return NAN;
    }
}
/* One unit in the last place of the type at magnitude |x| (x != 0). */
inline double type_ulp(vcclDataType_t t, double x) {
    int e;
    std::frexp(std::fabs(x), &e);
    int bits = t == vcclFloat16 ? 11 : t == vcclBfloat16 ? 8 : t == vcclFloat32 ? 24
               : t == vcclFloat8e4m3 ? 4 : t == vcclFloat8e5m2 ? 3 : 53;
    int minexp = t == vcclFloat16 ? -13 : t == vcclBfloat16 ? -125 : t == vcclFloat32 ? -125
                 : t == vcclFloat8e4m3 ? -5 : t == vcclFloat8e5m2 ? -13 : -1021;
    if (e < minexp) e = minexp;
    return std::ldexp(1.0, e - bits);
}

/* ---------------------------------------------------------------------------------------------- */
/* Buffers with guard zones                                                                         */

constexpr size_t kGuardBytes = 64;
constexpr uint8_t kGuardByte = 0xA5;
constexpr uint8_t kUnwrittenByte = 0x5A; // fills result regions before a call

/* bytes of payload between two guard zones; the payload starts 64-byte aligned. */
class GuardedBuffer {
public:
    explicit GuardedBuffer(size_t bytes, uint8_t fill = kUnwrittenByte) : bytes_(bytes), store_(bytes + 2 * kGuardBytes + 64) {
        uintptr_t base = reinterpret_cast<uintptr_t>(store_.data());
        offset_ = size_t(((base + kGuardBytes + 63) & ~uintptr_t(63)) - base); // in [64, 127]
        memset(store_.data(), kGuardByte, store_.size());
        memset(data(), fill, bytes);
    }
    uint8_t* data() { return store_.data() + offset_; }
    const uint8_t* data() const { return store_.data() + offset_; }
    size_t bytes() const { return bytes_; }
    /* True when both guard zones still hold the guard pattern. */
    bool guards_intact() const {
        for (size_t i = offset_ - kGuardBytes; i < offset_; ++i)
            if (store_[i] != kGuardByte) return false;
        for (size_t i = offset_ + bytes_; i < offset_ + bytes_ + kGuardBytes; ++i)
            if (store_[i] != kGuardByte) return false;
        return true;
    }

private:
    size_t bytes_;
    std::vector<uint8_t> store_;
    size_t offset_ = 0;
};

inline std::string result_str(vcclResult_t r) {
    return std::to_string(int(r)) + " (" + (vcclGetErrorString(r) ? vcclGetErrorString(r) : "NULL") + ")";
}

} // namespace vtest

#endif
