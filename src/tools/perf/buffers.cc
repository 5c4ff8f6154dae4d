/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vccl-perf: buffers, element encoding, and the data check.
 *
 * Inputs depend on the rank and the element index and are small integers chosen so that every partial
 * result of the reduction is exact in the datatype, whatever order an algorithm combines them in:
 *   sum, avg   values in [0, R) with R*nranks within the type's exact integer range
 *   prod       values 1 or 2; element i multiplies to 2^k(i) with k(i) small enough to stay exact
 *   max, min   and the non-reducing collectives: (7*rank + 13*index + 1) mod P
 * The expected result is computed here in double from the same formula, so it is independent of vccl.
 * Only avg may round (sum/nranks in the type); it is compared with a tolerance of a few ulps.
 */
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/dtype.h"
#include "tools/perf/perf.h"

namespace vperf {

namespace {

/* ---- fp16 and bf16 encodings (the tool keeps its own: it uses only the public API of libvccl) ---- */

uint16_t float_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    uint16_t sign = uint16_t((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return uint16_t(sign | 0x7e00u);  // NaN
    if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u); // rounds to infinity
    if (ax < 0x38800000u) {                                  // subnormal half (or zero)
        float a;
        memcpy(&a, &ax, sizeof(a));
        return uint16_t(sign | uint16_t(nearbyintf(a * 16777216.0f))); // units of 2^-24, ties to even
    }
    uint32_t r = ax + 0x0fffu + ((ax >> 13) & 1u); // round to nearest even at bit 13
    r -= 112u << 23;                               // rebias the exponent from 127 to 15
    return uint16_t(sign | uint16_t(r >> 13));
}

float half_to_float(uint16_t h) {
    int exp = (h >> 10) & 0x1f;
    int mant = h & 0x3ff;
    float v;
    if (exp == 0) v = ldexpf(float(mant), -24);
    else if (exp == 31) v = mant ? NAN : INFINITY;
    else v = ldexpf(float(mant + 1024), exp - 25);
    return (h & 0x8000) ? -v : v;
}

uint16_t float_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
}

float bf16_to_float(uint16_t b) {
    uint32_t u = uint32_t(b) << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

double load(const void* base, size_t i, vcclDataType_t t) {
    switch (t) {
    case vcclInt8: return static_cast<const int8_t*>(base)[i];
    case vcclUint8: return static_cast<const uint8_t*>(base)[i];
    case vcclInt32: return static_cast<const int32_t*>(base)[i];
    case vcclUint32: return static_cast<const uint32_t*>(base)[i];
    case vcclInt64: return double(static_cast<const int64_t*>(base)[i]);
    case vcclUint64: return double(static_cast<const uint64_t*>(base)[i]);
    case vcclFloat16: return half_to_float(static_cast<const uint16_t*>(base)[i]);
    case vcclFloat32: return static_cast<const float*>(base)[i];
    case vcclFloat64: return static_cast<const double*>(base)[i];
    case vcclBfloat16: return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
    case vcclFloat8e4m3: return vccl::fp8e4m3_to_float(static_cast<const uint8_t*>(base)[i]);
    case vcclFloat8e5m2: return vccl::fp8e5m2_to_float(static_cast<const uint8_t*>(base)[i]);
    default: return NAN;
    }
}

void store(void* base, size_t i, vcclDataType_t t, double v) {
    switch (t) {
    case vcclInt8: static_cast<int8_t*>(base)[i] = int8_t(v); break;
    case vcclUint8: static_cast<uint8_t*>(base)[i] = uint8_t(v); break;
    case vcclInt32: static_cast<int32_t*>(base)[i] = int32_t(v); break;
    case vcclUint32: static_cast<uint32_t*>(base)[i] = uint32_t(v); break;
    case vcclInt64: static_cast<int64_t*>(base)[i] = int64_t(v); break;
    case vcclUint64: static_cast<uint64_t*>(base)[i] = uint64_t(v); break;
    case vcclFloat16: static_cast<uint16_t*>(base)[i] = float_to_half(float(v)); break;
    case vcclFloat32: static_cast<float*>(base)[i] = float(v); break;
    case vcclFloat64: static_cast<double*>(base)[i] = v; break;
    case vcclBfloat16: static_cast<uint16_t*>(base)[i] = float_to_bf16(float(v)); break;
    case vcclFloat8e4m3: static_cast<uint8_t*>(base)[i] = vccl::float_to_fp8e4m3(float(v)); break;
    case vcclFloat8e5m2: static_cast<uint8_t*>(base)[i] = vccl::float_to_fp8e5m2(float(v)); break;
    default: break;
    }
}

/* Rounds v to the nearest value of the datatype. */
double in_type(double v, vcclDataType_t t) {
    unsigned char tmp[8];
    store(tmp, 0, t, v);
    return load(tmp, 0, t);
}

bool is_float(vcclDataType_t t) {
    return t == vcclFloat16 || t == vcclBfloat16 || t == vcclFloat32 || t == vcclFloat64 || t == vcclFloat8e4m3 ||
           t == vcclFloat8e5m2;
}

/* Largest integer every value up to which is exact (and, for integers, does not overflow). */
double exact_limit(vcclDataType_t t) {
    switch (t) {
    case vcclInt8: return 127;
    case vcclUint8: return 255;
    case vcclFloat16: return 2048;
    case vcclBfloat16: return 256;
    case vcclFloat8e4m3: return 16;
    case vcclFloat8e5m2: return 8;
    case vcclFloat32: return 16777216.0;
    case vcclInt32: case vcclUint32: case vcclInt64: case vcclUint64: case vcclFloat64: return 2147483647.0;
    default: return 1;
    }
}

/* The input generator for one run. */
class Gen {
public:
    Gen(const Options& o, int nranks) : op_(o.op), nranks_(nranks), reduce_(coll_has_op(o.coll)) {
        double limit = exact_limit(o.dtype);
        range_ = floor(limit / nranks);
        if (range_ > 16) range_ = 16;
        if (range_ < 1) range_ = 1;
        kmax_ = 0;
        while (kmax_ < nranks && ldexp(1.0, kmax_ + 1) <= limit) kmax_++;
        period_ = limit < 101 ? limit : 101;
    }

    double value(int rank, size_t index) const {
        if (reduce_ && (op_ == vcclSum || op_ == vcclAvg))
            return double((size_t(rank) * 5 + index * 3 + 1) % size_t(range_));
        if (reduce_ && op_ == vcclProd) {
            size_t k = index % size_t(kmax_ + 1);
            return (index + size_t(rank)) % size_t(nranks_) < k ? 2.0 : 1.0;
        }
        return double((size_t(rank) * 7 + index * 13 + 1) % size_t(period_));
    }

    /* The reduction over all ranks of value(r, index), before rounding to the datatype. */
    double reduced(size_t index) const {
        double acc = value(0, index);
        for (int r = 1; r < nranks_; ++r) {
            double v = value(r, index);
            switch (op_) {
            case vcclProd: acc *= v; break;
            case vcclMax: acc = v > acc ? v : acc; break;
            case vcclMin: acc = v < acc ? v : acc; break;
            default: acc += v; break;
            }
        }
        return acc;
    }

private:
    vcclRedOp_t op_;
    int nranks_;
    bool reduce_;
    double range_;
    int kmax_;
    double period_;
};

/* Compares one element. Non-avg results are exact by construction. */
bool matches(double got, double want, const Options& o, int nranks) {
    if (o.op != vcclAvg || !coll_has_op(o.coll)) return got == want;
    if (!is_float(o.dtype)) return got == floor(want / nranks);
    double expect = in_type(want / nranks, o.dtype);
    double eps = o.dtype == vcclFloat16 ? 1.0 / 512 : o.dtype == vcclBfloat16 ? 1.0 / 64
                 : o.dtype == vcclFloat8e4m3 ? 1.0 / 8 : o.dtype == vcclFloat8e5m2 ? 1.0 / 4
                 : o.dtype == vcclFloat32 ? 1e-6 : 1e-14;
    double scale = fabs(expect) > 1 ? fabs(expect) : 1;
    return fabs(got - expect) <= eps * scale;
}

void poison(void* p, size_t elems, vcclDataType_t t) {
    if (p != nullptr) memset(p, 0xa5, elems * type_size(t));
}

} // namespace

Buffers::Buffers(Memory memory, DeviceAlloc how, vcclDataType_t type) : memory_(memory), how_(how), type_(type) {}

Buffers::~Buffers() {
    if (memory_ == Memory::Cuda) {
        device_free(send_);
        device_free(recv_);
    }
    free(host_send_);
    free(host_recv_);
}

bool Buffers::allocate(size_t send_elems, size_t recv_elems, std::string* error) {
    size_t ts = type_size(type_);
    /* Both buffers get room for the larger side: in place, reducescatter and alltoall keep the whole
     * input in the receive buffer. At least one element so that pointers stay valid for empty steps. */
    size_t elems = send_elems > recv_elems ? send_elems : recv_elems;
    size_t bytes = (elems ? elems : 1) * ts;
    size_t rounded = (bytes + 4095) / 4096 * 4096;
    host_send_ = aligned_alloc(4096, rounded);
    host_recv_ = aligned_alloc(4096, rounded);
    if (host_send_ == nullptr || host_recv_ == nullptr) {
        *error = "out of host memory allocating 2 x " + std::to_string(rounded) + " bytes";
        return false;
    }
    memset(host_send_, 0, bytes);
    memset(host_recv_, 0, bytes);
    if (memory_ == Memory::Host) {
        send_ = host_send_;
        recv_ = host_recv_;
    } else {
        send_ = device_alloc(bytes, how_, error);
        if (send_ == nullptr) return false;
        recv_ = device_alloc(bytes, how_, error);
        if (recv_ == nullptr) return false;
        if (!device_copy(send_, host_send_, bytes, error) || !device_copy(recv_, host_recv_, bytes, error))
            return false;
    }
    capacity_ = elems;
    return true;
}

bool Buffers::fill(const Options& o, const Shape& shape, int rank, int nranks, bool in_place, std::string* error) {
    Gen gen(o, nranks);
    size_t ts = type_size(type_);
    size_t n = shape.count;
    size_t span = shape.send_elems > shape.recv_elems ? shape.send_elems : shape.recv_elems;
    poison(host_recv_, span, type_);
    if (!in_place) poison(host_send_, span, type_);
    switch (o.coll) {
    case Coll::AllGather: {
        /* In place the contribution sits at block `rank` of the receive buffer. */
        char* dst = in_place ? static_cast<char*>(host_recv_) + size_t(rank) * n * ts
                             : static_cast<char*>(host_send_);
        for (size_t i = 0; i < n; ++i) store(dst, i, type_, gen.value(rank, i));
        break;
    }
    default: {
        /* Everything else: the whole send buffer (n*count elements for reducescatter and alltoall); in
         * place that buffer is the receive buffer (reducescatter reads it whole, writes block `rank`). */
        void* dst = in_place ? host_recv_ : host_send_;
        size_t elems = shape.send_elems;
        for (size_t i = 0; i < elems; ++i) store(dst, i, type_, gen.value(rank, i));
        break;
    }
    }
    if (memory_ == Memory::Host) return true;
    size_t bytes = span * ts;
    if (!device_copy(recv_, host_recv_, bytes, error)) return false;
    return in_place || device_copy(send_, host_send_, bytes, error);
}

bool Buffers::check(const Options& o, const Shape& shape, int rank, int nranks, bool in_place,
                    uint64_t* wrong_out, std::string* error) {
    Gen gen(o, nranks);
    size_t n = shape.count;
    size_t ts = type_size(type_);
    size_t span = shape.send_elems > shape.recv_elems ? shape.send_elems : shape.recv_elems;
    if (memory_ == Memory::Cuda && !device_copy(host_recv_, recv_, span * ts, error)) return false;
    uint64_t wrong = 0;
    const char* out = static_cast<const char*>(host_recv_);
    switch (o.coll) {
    case Coll::AllReduce:
        for (size_t i = 0; i < n; ++i) wrong += !matches(load(out, i, type_), gen.reduced(i), o, nranks);
        break;
    case Coll::Reduce:
        if (rank != o.root) break;
        for (size_t i = 0; i < n; ++i) wrong += !matches(load(out, i, type_), gen.reduced(i), o, nranks);
        break;
    case Coll::Broadcast:
        for (size_t i = 0; i < n; ++i) wrong += load(out, i, type_) != gen.value(o.root, i);
        break;
    case Coll::AllGather:
        for (size_t i = 0; i < size_t(nranks) * n; ++i)
            wrong += load(out, i, type_) != gen.value(int(i / n), i % n);
        break;
    case Coll::ReduceScatter: {
        if (in_place) out += size_t(rank) * n * ts;
        for (size_t i = 0; i < n; ++i)
            wrong += !matches(load(out, i, type_), gen.reduced(size_t(rank) * n + i), o, nranks);
        break;
    }
    case Coll::AlltoAll:
        for (size_t i = 0; i < size_t(nranks) * n; ++i)
            wrong += load(out, i, type_) != gen.value(int(i / n), size_t(rank) * n + i % n);
        break;
    case Coll::SendRecv: {
        int prev = (rank + nranks - 1) % nranks;
        for (size_t i = 0; i < n; ++i) wrong += load(out, i, type_) != gen.value(prev, i);
        break;
    }
    }
    *wrong_out = wrong;
    return true;
}

} // namespace vperf
