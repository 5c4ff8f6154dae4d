/*
 * Host reductions. The type and op are resolved once per call (one switch), then a template loop runs with
 * no branch per element so the compiler can vectorise it. Integer arithmetic is done in the unsigned type
 * of the same width: overflow wraps (as the GPU kernels do) instead of being undefined behaviour.
 * fp16/bf16 have no native host arithmetic: they are widened to float in small blocks, reduced with the
 * float loop, and rounded back once.
 */
#include "core/reduce.h"

#include <cstdint>
#include <type_traits>

#include "core/dtype.h"

namespace vccl {

namespace {

/* Wrapping integer arithmetic; plain arithmetic for floating point. */
template <typename T, bool kInt = std::is_integral<T>::value>
struct Arith {
    static T add(T a, T b) { return a + b; }
    static T mul(T a, T b) { return a * b; }
};
template <typename T>
struct Arith<T, true> {
    /* uint32/uint64 arithmetic is modular; int8/uint8 promote to int, which cannot overflow for two
     * 8-bit operands, and the conversion back is modular. */
    using U = typename std::make_unsigned<T>::type;
    static T add(T a, T b) { return T(U(U(a) + U(b))); }
    static T mul(T a, T b) { return T(U(U(a) * U(b))); }
};

template <typename T>
struct OpSum {
    static T apply(T a, T b) { return Arith<T>::add(a, b); }
};
template <typename T>
struct OpProd {
    static T apply(T a, T b) { return Arith<T>::mul(a, b); }
};
/* a > b ? a : b maps onto maxps/maxpd (and pmax for integers). */
template <typename T>
struct OpMax {
    static T apply(T a, T b) { return a > b ? a : b; }
};
template <typename T>
struct OpMin {
    static T apply(T a, T b) { return a < b ? a : b; }
};

template <typename T, template <typename> class Op>
void reduce_loop(T* dst, const T* a, const T* b, size_t count) {
    for (size_t i = 0; i < count; ++i) dst[i] = Op<T>::apply(a[i], b[i]);
}

template <typename T>
void reduce_typed(void* dst, const void* a, const void* b, size_t count, vcclRedOp_t op) {
    T* d = static_cast<T*>(dst);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    switch (op) {
    case vcclSum:
    case vcclAvg: reduce_loop<T, OpSum>(d, x, y, count); break;
    case vcclProd: reduce_loop<T, OpProd>(d, x, y, count); break;
    case vcclMax: reduce_loop<T, OpMax>(d, x, y, count); break;
    case vcclMin: reduce_loop<T, OpMin>(d, x, y, count); break;
    default: break;
    }
}

/* Elements widened per block: small enough to stay in L1, large enough to amortise the loop overhead. */
constexpr size_t kWideBlock = 512;

struct HalfCodec {
    static float to_float(uint16_t v) { return half_to_float(v); }
    static uint16_t from_float(float f) { return float_to_half(f); }
};
struct Bf16Codec {
    static float to_float(uint16_t v) { return bf16_to_float(v); }
    static uint16_t from_float(float f) { return float_to_bf16(f); }
};

template <typename Codec>
void reduce_16bit(void* dst, const void* a, const void* b, size_t count, vcclRedOp_t op) {
    uint16_t* d = static_cast<uint16_t*>(dst);
    const uint16_t* x = static_cast<const uint16_t*>(a);
    const uint16_t* y = static_cast<const uint16_t*>(b);
    float fa[kWideBlock], fb[kWideBlock];
    for (size_t base = 0; base < count; base += kWideBlock) {
        size_t n = count - base < kWideBlock ? count - base : kWideBlock;
        for (size_t i = 0; i < n; ++i) {
            fa[i] = Codec::to_float(x[base + i]);
            fb[i] = Codec::to_float(y[base + i]);
        }
        // Both inputs are read before dst is written, so dst may alias a or b.
        reduce_typed<float>(fa, fa, fb, n, op);
        for (size_t i = 0; i < n; ++i) d[base + i] = Codec::from_float(fa[i]);
    }
}

template <typename T>
void scale_typed(void* buf, size_t count, int nranks) {
    T* p = static_cast<T*>(buf);
    // Divide by the int itself: T(nranks) would truncate for 8-bit types once nranks exceeds their range.
    // (8-bit values promote to int; wider ones convert nranks to T, which holds any positive int.)
    for (size_t i = 0; i < count; ++i) p[i] = T(p[i] / nranks);
}

template <typename Codec>
void scale_16bit(void* buf, size_t count, int nranks) {
    uint16_t* p = static_cast<uint16_t*>(buf);
    const float n = float(nranks);
    for (size_t i = 0; i < count; ++i) p[i] = Codec::from_float(Codec::to_float(p[i]) / n);
}

} // namespace

void reduce_host(void* dst, const void* a, const void* b, size_t count, vcclDataType_t type, vcclRedOp_t op) {
    switch (type) {
    case vcclInt8: reduce_typed<int8_t>(dst, a, b, count, op); break;
    case vcclUint8: reduce_typed<uint8_t>(dst, a, b, count, op); break;
    case vcclInt32: reduce_typed<int32_t>(dst, a, b, count, op); break;
    case vcclUint32: reduce_typed<uint32_t>(dst, a, b, count, op); break;
    case vcclInt64: reduce_typed<int64_t>(dst, a, b, count, op); break;
    case vcclUint64: reduce_typed<uint64_t>(dst, a, b, count, op); break;
    case vcclFloat16: reduce_16bit<HalfCodec>(dst, a, b, count, op); break;
    case vcclFloat32: reduce_typed<float>(dst, a, b, count, op); break;
    case vcclFloat64: reduce_typed<double>(dst, a, b, count, op); break;
    case vcclBfloat16: reduce_16bit<Bf16Codec>(dst, a, b, count, op); break;
    default: break;
    }
}

void scale_avg_host(void* buf, size_t count, vcclDataType_t type, int nranks) {
    if (nranks <= 1) return; // dividing by one changes nothing
    switch (type) {
    case vcclInt8: scale_typed<int8_t>(buf, count, nranks); break;
    case vcclUint8: scale_typed<uint8_t>(buf, count, nranks); break;
    case vcclInt32: scale_typed<int32_t>(buf, count, nranks); break;
    case vcclUint32: scale_typed<uint32_t>(buf, count, nranks); break;
    case vcclInt64: scale_typed<int64_t>(buf, count, nranks); break;
    case vcclUint64: scale_typed<uint64_t>(buf, count, nranks); break;
    case vcclFloat16: scale_16bit<HalfCodec>(buf, count, nranks); break;
    case vcclFloat32: scale_typed<float>(buf, count, nranks); break;
    case vcclFloat64: scale_typed<double>(buf, count, nranks); break;
    case vcclBfloat16: scale_16bit<Bf16Codec>(buf, count, nranks); break;
    default: break;
    }
}

} // namespace vccl
