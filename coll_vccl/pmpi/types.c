/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * types.c - MPI datatypes and reduction ops to vccl's.
 *
 * Reductions take only the pairs MPI itself defines (C and Fortran integers and floating point with SUM,
 * PROD, MAX, MIN), so that a call MPI rejects (MPI_SUM on MPI_CHAR or MPI_BYTE) still reaches the MPI library
 * and gets its error. The size of integers whose width is the platform's (long, MPI_AINT, Fortran INTEGER)
 * is read from the library, not assumed.
 */
#include "pmpi.h"

/* 1 signed integer, 2 unsigned integer, 3 floating point, 0 none. */
static int reduce_kind(MPI_Datatype d) {
    if (d == MPI_DATATYPE_NULL) return 0; /* an MPI may alias unsupported optional types to it */
    if (d == MPI_INT || d == MPI_LONG || d == MPI_LONG_LONG_INT || d == MPI_LONG_LONG || d == MPI_SIGNED_CHAR ||
        d == MPI_INT8_T || d == MPI_INT32_T || d == MPI_INT64_T || d == MPI_AINT || d == MPI_OFFSET ||
        d == MPI_COUNT || d == MPI_INTEGER || d == MPI_INTEGER1 || d == MPI_INTEGER4 || d == MPI_INTEGER8)
        return 1;
    if (d == MPI_UNSIGNED || d == MPI_UNSIGNED_LONG || d == MPI_UNSIGNED_LONG_LONG || d == MPI_UNSIGNED_CHAR ||
        d == MPI_UINT8_T || d == MPI_UINT32_T || d == MPI_UINT64_T)
        return 2;
    if (d == MPI_FLOAT || d == MPI_DOUBLE || d == MPI_REAL || d == MPI_DOUBLE_PRECISION || d == MPI_REAL4 ||
        d == MPI_REAL8)
        return 3;
    return 0;
}

int pm_reduce_type(MPI_Datatype dt, vcclDataType_t* out) {
    int kind = reduce_kind(dt);
    if (kind == 0) return -1;
    int size = 0;
    if (PMPI_Type_size(dt, &size) != MPI_SUCCESS) return -1;
    switch (kind * 100 + size) {
    case 101: *out = vcclInt8; return 0;
    case 104: *out = vcclInt32; return 0;
    case 108: *out = vcclInt64; return 0;
    case 201: *out = vcclUint8; return 0;
    case 204: *out = vcclUint32; return 0;
    case 208: *out = vcclUint64; return 0;
    case 304: *out = vcclFloat32; return 0;
    case 308: *out = vcclFloat64; return 0;
    default: return -1; /* e.g. 2-byte integers: vccl has no 16-bit integer type */
    }
}

int pm_reduce_op(MPI_Op op, vcclRedOp_t* out) {
    if (op == MPI_OP_NULL) return -1;
    if (op == MPI_SUM) *out = vcclSum;
    else if (op == MPI_PROD) *out = vcclProd;
    else if (op == MPI_MAX) *out = vcclMax;
    else if (op == MPI_MIN) *out = vcclMin;
    else return -1;
    return 0;
}

size_t pm_vtype_size(vcclDataType_t t) {
    static const size_t sizes[vcclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
    return (unsigned)t < vcclNumTypes ? sizes[t] : 0;
}

/* One element of dt is `size` bytes with no gap, starting at the buffer, laid out in type-map order, and
 * consecutive elements follow without a gap. Named types qualify when their extent equals their size
 * (MPI_DOUBLE_INT has a hole); duplicates and contiguous types of such a type qualify too. Other
 * constructors could reorder or skip bytes, so they are left to the MPI library. */
static int gap_free(MPI_Datatype dt, int depth) {
    if (dt == MPI_DATATYPE_NULL || depth > 8) return 0;
    int size = 0;
    MPI_Aint lb = 0, extent = 0, tlb = 0, textent = 0;
    if (PMPI_Type_size(dt, &size) != MPI_SUCCESS || PMPI_Type_get_extent(dt, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(dt, &tlb, &textent) != MPI_SUCCESS)
        return 0;
    if (size <= 0 || lb != 0 || tlb != 0 || extent != size || textent != size) return 0;
    int ni = 0, na = 0, nd = 0, combiner = 0;
    if (PMPI_Type_get_envelope(dt, &ni, &na, &nd, &combiner) != MPI_SUCCESS) return 0;
    if (combiner == MPI_COMBINER_NAMED) return 1;
    if ((combiner != MPI_COMBINER_DUP && combiner != MPI_COMBINER_CONTIGUOUS) || nd != 1 || ni > 1 || na != 0)
        return 0;
    int ints[1] = {0};
    MPI_Aint aints[1] = {0};
    MPI_Datatype child = MPI_DATATYPE_NULL;
    if (PMPI_Type_get_contents(dt, ni, na, nd, ints, aints, &child) != MPI_SUCCESS) return 0;
    int ok = gap_free(child, depth + 1);
    /* get_contents hands out derived children that the caller must free; named ones must not be freed */
    int cni = 0, cna = 0, cnd = 0, ccomb = 0;
    if (PMPI_Type_get_envelope(child, &cni, &cna, &cnd, &ccomb) == MPI_SUCCESS && ccomb != MPI_COMBINER_NAMED)
        PMPI_Type_free(&child);
    return ok;
}

int pm_move_type(MPI_Datatype dt, size_t count, vcclDataType_t* out, size_t* out_count) {
    if (pm_reduce_type(dt, out) == 0) {
        *out_count = count;
        return 0;
    }
    if (!gap_free(dt, 0)) return -1;
    int size = 0;
    PMPI_Type_size(dt, &size);
    *out = vcclUint8;
    *out_count = count * (size_t)size;
    return 0;
}

int pm_span(MPI_Datatype dt, size_t count, size_t* span, ptrdiff_t* lb) {
    if (dt == MPI_DATATYPE_NULL) return -1;
    MPI_Aint l = 0, extent = 0, tlb = 0, textent = 0;
    if (PMPI_Type_get_extent(dt, &l, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(dt, &tlb, &textent) != MPI_SUCCESS)
        return -1;
    if (count == 0) {
        *span = 0;
        *lb = 0;
        return 0;
    }
    /* elements sit at i * extent (i < count); a negative extent puts the last one lowest */
    MPI_Aint last = (MPI_Aint)(count - 1) * extent;
    MPI_Aint lo = tlb + (last < 0 ? last : 0);
    MPI_Aint hi = tlb + textent + (last > 0 ? last : 0);
    *span = (size_t)(hi - lo);
    *lb = (ptrdiff_t)lo;
    return 0;
}
