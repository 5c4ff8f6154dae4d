/* SPDX-License-Identifier: BSD-3-Clause */
/* ops.c - MPI datatypes and reduction ops to vccl's. */
#include "coll_vccl.h"

int mca_coll_vccl_map_dtype(struct ompi_datatype_t* dt, vcclDataType_t* out) {
    MPI_Datatype d = dt;
    if (d == MPI_INT8_T || d == MPI_CHAR || d == MPI_SIGNED_CHAR) {
        *out = vcclInt8;
    } else if (d == MPI_UINT8_T || d == MPI_UNSIGNED_CHAR || d == MPI_BYTE) {
        *out = vcclUint8;
    } else if (d == MPI_INT || d == MPI_INT32_T) {
        *out = vcclInt32;
    } else if (d == MPI_UNSIGNED || d == MPI_UINT32_T) {
        *out = vcclUint32;
    } else if (d == MPI_INT64_T || d == MPI_LONG_LONG || d == MPI_LONG_LONG_INT ||
               (d == MPI_LONG && sizeof(long) == 8)) {
        *out = vcclInt64;
    } else if (d == MPI_UINT64_T || d == MPI_UNSIGNED_LONG_LONG || (d == MPI_UNSIGNED_LONG && sizeof(long) == 8)) {
        *out = vcclUint64;
    } else if (d == MPI_FLOAT) {
        *out = vcclFloat32;
    } else if (d == MPI_DOUBLE) {
        *out = vcclFloat64;
    } else {
        return -1;
    }
    return 0;
}

int mca_coll_vccl_map_op(struct ompi_op_t* op, vcclRedOp_t* out) {
    MPI_Op o = op;
    if (o == MPI_SUM) {
        *out = vcclSum;
    } else if (o == MPI_PROD) {
        *out = vcclProd;
    } else if (o == MPI_MAX) {
        *out = vcclMax;
    } else if (o == MPI_MIN) {
        *out = vcclMin;
    } else {
        return -1;
    }
    return 0;
}

int mca_coll_vccl_map_move(struct ompi_datatype_t* dt, size_t count, vcclDataType_t* out, size_t* out_count) {
    if (mca_coll_vccl_map_dtype(dt, out) == 0) {
        *out_count = count;
        return 0;
    }
    if (count > (size_t)INT32_MAX) return -1;
    ptrdiff_t lb = 0, extent = 0, true_lb = 0, true_extent = 0;
    size_t size = 0;
    ompi_datatype_get_extent(dt, &lb, &extent);
    ompi_datatype_get_true_extent(dt, &true_lb, &true_extent);
    ompi_datatype_type_size(dt, &size);
    /* count elements form one gap-free block that starts at the buffer pointer */
    if (true_lb != 0 || lb != 0 || (size_t)extent != size || (size_t)true_extent != size) return -1;
    if (!ompi_datatype_is_contiguous_memory_layout(dt, (int32_t)count)) return -1;
    *out = vcclUint8;
    *out_count = count * size;
    return 0;
}

size_t mca_coll_vccl_span(struct ompi_datatype_t* dt, size_t count, ptrdiff_t* lb_off) {
    ptrdiff_t lb = 0, extent = 0, true_lb = 0, true_extent = 0;
    ompi_datatype_get_extent(dt, &lb, &extent);
    ompi_datatype_get_true_extent(dt, &true_lb, &true_extent);
    *lb_off = true_lb;
    if (count == 0) return 0;
    ptrdiff_t reach = extent * (ptrdiff_t)(count - 1);
    if (reach < 0) { /* negative extent: the elements run downwards from the buffer pointer */
        *lb_off = true_lb + reach;
        reach = -reach;
    }
    return (size_t)(reach + true_extent);
}
