/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * colls.c - the intercepted collectives.
 *
 * Routing of each call, decided from arguments that all ranks share (datatype, op, message size) plus the
 * memory kind of this rank's buffers:
 *   - host buffers, coll_vccl_host=0       -> previous module (tuned, basic, ...)
 *   - vccl can do it (predefined datatype and op, contiguous data, equal counts, >= coll_vccl_min_bytes)
 *     and the buffers are on the device (or coll_vccl_host=1) -> vccl, on the communicator made lazily
 *   - otherwise, device buffers            -> staged through host memory around the previous module, so a
 *     device pointer never reaches a component that is not CUDA-aware
 * Inside vccl (its MPI bootstrap runs collectives) every call goes to the previous module.
 * All ranks must use the same memory kind for one call unless coll_vccl_host=1 (see coll_vccl(7)).
 */
#include "coll_vccl.h"

#include <stdlib.h>
#include <string.h>

#define MOD(module) ((mca_coll_vccl_module_t*)(module))

static size_t vtype_size(vcclDataType_t t) {
    static const size_t sizes[vcclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
    return (unsigned)t < vcclNumTypes ? sizes[t] : 0;
}

static int from_vccl(mca_coll_vccl_module_t* m, vcclResult_t rc, const char* what) {
    if (rc == vcclSuccess) {
        m->n_vccl++;
        if (mca_coll_vccl_sync_device() != 0) {
            mca_coll_vccl_log(0, "cid %u %s: waiting for the device work failed", m->cid, what);
            return OMPI_ERROR;
        }
        return OMPI_SUCCESS;
    }
    mca_coll_vccl_log(0, "cid %u %s: %s (%s)", m->cid, what, vcclGetErrorString(rc), vcclGetLastError(m->vcomm));
    return OMPI_ERROR;
}

/* ------------------------------------------------------------------------------------------------ */
/* Host staging of a device buffer                                                                  */

typedef struct {
    void* user;    /* the device buffer */
    char* tmp;     /* host copy of the bytes count elements span */
    size_t span;
    ptrdiff_t off; /* true lower bound: tmp holds [user + off, user + off + span) */
} stage_t;

/* Returns the host pointer to use in place of user (user itself when it is not device memory); copies the
 * device contents in. *failed is set on allocation or copy failure. */
static void* stage_in(stage_t* s, void* user, struct ompi_datatype_t* dt, size_t count, int* failed) {
    s->user = NULL;
    s->tmp = NULL;
    if (user == NULL || user == MPI_IN_PLACE || !mca_coll_vccl_is_device(user)) return user;
    s->span = mca_coll_vccl_span(dt, count, &s->off);
    s->tmp = malloc(s->span > 0 ? s->span : 1);
    if (s->tmp == NULL || mca_coll_vccl_memcpy(s->tmp, (char*)user + s->off, s->span) != 0) {
        free(s->tmp);
        s->tmp = NULL;
        *failed = 1;
        return user;
    }
    s->user = user;
    return s->tmp - s->off;
}

/* Copies the host copy back to the device when copy_back, and frees it. */
static int stage_out(stage_t* s, int copy_back) {
    int rc = 0;
    if (s->tmp == NULL) return 0;
    if (copy_back) rc = mca_coll_vccl_memcpy((char*)s->user + s->off, s->tmp, s->span);
    free(s->tmp);
    s->tmp = NULL;
    return rc;
}

static int staged_error(mca_coll_vccl_module_t* m, const char* what) {
    mca_coll_vccl_log(0, "cid %u %s: staging through host memory failed", m->cid, what);
    return OMPI_ERR_OUT_OF_RESOURCE;
}

/* ------------------------------------------------------------------------------------------------ */
/* Routing                                                                                          */

enum route { ROUTE_PREV, ROUTE_STAGE, ROUTE_VCCL };

static const char* route_name(enum route r) {
    return r == ROUTE_VCCL ? "vccl" : r == ROUTE_STAGE ? "previous module, staged" : "previous module";
}

/* dev: this rank's buffers include device memory; ok: vccl can do the call; bytes: message size. */
static enum route decide(mca_coll_vccl_module_t* m, const char* what, int dev, int ok, size_t bytes) {
    enum route r;
    if (mca_coll_vccl_in_vccl()) {
        r = dev ? ROUTE_STAGE : ROUTE_PREV;
    } else if (!dev && !mca_coll_vccl_component.host) {
        r = ROUTE_PREV;
    } else if (!ok || bytes < (size_t)(mca_coll_vccl_component.min_bytes > 0 ? mca_coll_vccl_component.min_bytes : 0)) {
        r = dev ? ROUTE_STAGE : ROUTE_PREV;
    } else if (mca_coll_vccl_get_comm(m, what) == NULL) {
        r = dev ? ROUTE_STAGE : ROUTE_PREV;
    } else {
        r = ROUTE_VCCL;
    }
    if (r == ROUTE_PREV) m->n_prev++;
    if (r == ROUTE_STAGE) m->n_staged++;
    if (!mca_coll_vccl_in_vccl())
        mca_coll_vccl_log(2, "cid %u %s: %zu bytes, %s buffers -> %s", m->cid, what, bytes, dev ? "device" : "host",
                          route_name(r));
    return r;
}

/* Both sides of a data movement as one vccl type and count (bytes when the two differ). */
static int move_pair(struct ompi_datatype_t* sdt, size_t scount, struct ompi_datatype_t* rdt, size_t rcount,
                     vcclDataType_t* vdt, size_t* n) {
    vcclDataType_t st, rt;
    size_t sn, rn;
    if (mca_coll_vccl_map_move(sdt, scount, &st, &sn) != 0 || mca_coll_vccl_map_move(rdt, rcount, &rt, &rn) != 0)
        return -1;
    if (st == rt && sn == rn) {
        *vdt = st;
        *n = sn;
        return 0;
    }
    if (sn * vtype_size(st) != rn * vtype_size(rt)) return -1;
    *vdt = vcclUint8;
    *n = sn * vtype_size(st);
    return 0;
}

/* When this rank's two buffers differ in memory kind vccl refuses the call: the device one is staged. */
typedef struct {
    stage_t s, r;
} mixed_t;

static int unmix(mixed_t* x, const void** sbuf, void** rbuf, size_t sbytes, size_t rbytes, int* failed) {
    x->s.tmp = x->r.tmp = NULL;
    if (*sbuf == NULL || *rbuf == NULL || *sbuf == *rbuf) return 0;
    int sd = mca_coll_vccl_is_device(*sbuf), rd = mca_coll_vccl_is_device(*rbuf);
    if (sd == rd) return 0;
    if (sd) *sbuf = stage_in(&x->s, (void*)*sbuf, MPI_BYTE, sbytes, failed);
    else *rbuf = stage_in(&x->r, *rbuf, MPI_BYTE, rbytes, failed);
    return *failed ? -1 : 0;
}

static int remix(mixed_t* x) {
    int rc = stage_out(&x->r, 1);
    stage_out(&x->s, 0);
    return rc;
}

/* ------------------------------------------------------------------------------------------------ */

int mca_coll_vccl_allreduce(const void* sbuf, void* rbuf, int count, struct ompi_datatype_t* dtype,
                            struct ompi_op_t* op, struct ompi_communicator_t* comm, mca_coll_base_module_t* module) {
    mca_coll_vccl_module_t* m = MOD(module);
    vcclDataType_t vdt = vcclInt8;
    vcclRedOp_t vop = vcclSum;
    int ok = mca_coll_vccl_map_dtype(dtype, &vdt) == 0 && mca_coll_vccl_map_op(op, &vop) == 0;
    int dev = mca_coll_vccl_is_device(sbuf) || mca_coll_vccl_is_device(rbuf);
    size_t bytes = ok ? (size_t)count * vtype_size(vdt) : 0;
    switch (decide(m, "allreduce", dev, ok, bytes)) {
    case ROUTE_PREV: return m->prev_allreduce(sbuf, rbuf, count, dtype, op, comm, m->prev_allreduce_module);
    case ROUTE_STAGE: {
        int failed = 0, rc;
        stage_t s, r;
        const void* hs = stage_in(&s, (void*)sbuf, dtype, (size_t)count, &failed);
        void* hr = stage_in(&r, rbuf, dtype, (size_t)count, &failed);
        rc = failed ? staged_error(m, "allreduce")
                    : m->prev_allreduce(hs, hr, count, dtype, op, comm, m->prev_allreduce_module);
        if (stage_out(&r, rc == OMPI_SUCCESS) != 0 && rc == OMPI_SUCCESS) rc = staged_error(m, "allreduce");
        stage_out(&s, 0);
        return rc;
    }
    case ROUTE_VCCL: break;
    }
    if (count == 0) return OMPI_SUCCESS;
    const void* s = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    mixed_t x;
    int failed = 0;
    if (unmix(&x, &s, &rbuf, bytes, bytes, &failed) != 0) return staged_error(m, "allreduce");
    mca_coll_vccl_enter_vccl();
    vcclResult_t vr = vcclAllReduce(s, rbuf, (size_t)count, vdt, vop, m->vcomm, NULL);
    mca_coll_vccl_leave_vccl();
    if (remix(&x) != 0) return staged_error(m, "allreduce");
    return from_vccl(m, vr, "vcclAllReduce");
}

int mca_coll_vccl_bcast(void* buf, int count, struct ompi_datatype_t* dtype, int root,
                        struct ompi_communicator_t* comm, mca_coll_base_module_t* module) {
    mca_coll_vccl_module_t* m = MOD(module);
    vcclDataType_t vdt = vcclUint8;
    size_t n = 0;
    int ok = mca_coll_vccl_map_move(dtype, (size_t)count, &vdt, &n) == 0;
    int dev = mca_coll_vccl_is_device(buf);
    size_t bytes = ok ? n * vtype_size(vdt) : 0;
    switch (decide(m, "bcast", dev, ok, bytes)) {
    case ROUTE_PREV: return m->prev_bcast(buf, count, dtype, root, comm, m->prev_bcast_module);
    case ROUTE_STAGE: {
        int failed = 0, rc;
        stage_t b;
        void* hb = stage_in(&b, buf, dtype, (size_t)count, &failed);
        rc = failed ? staged_error(m, "bcast") : m->prev_bcast(hb, count, dtype, root, comm, m->prev_bcast_module);
        if (stage_out(&b, rc == OMPI_SUCCESS) != 0 && rc == OMPI_SUCCESS) rc = staged_error(m, "bcast");
        return rc;
    }
    case ROUTE_VCCL: break;
    }
    if (n == 0) return OMPI_SUCCESS;
    mca_coll_vccl_enter_vccl();
    vcclResult_t vr = vcclBroadcast(buf, buf, n, vdt, root, m->vcomm, NULL);
    mca_coll_vccl_leave_vccl();
    return from_vccl(m, vr, "vcclBroadcast");
}

int mca_coll_vccl_reduce(const void* sbuf, void* rbuf, int count, struct ompi_datatype_t* dtype,
                         struct ompi_op_t* op, int root, struct ompi_communicator_t* comm,
                         mca_coll_base_module_t* module) {
    mca_coll_vccl_module_t* m = MOD(module);
    int rank = ompi_comm_rank(comm);
    void* r_used = rank == root ? rbuf : NULL; /* recvbuf is not significant elsewhere */
    vcclDataType_t vdt = vcclInt8;
    vcclRedOp_t vop = vcclSum;
    int ok = mca_coll_vccl_map_dtype(dtype, &vdt) == 0 && mca_coll_vccl_map_op(op, &vop) == 0;
    int dev = mca_coll_vccl_is_device(sbuf) || mca_coll_vccl_is_device(r_used);
    size_t bytes = ok ? (size_t)count * vtype_size(vdt) : 0;
    switch (decide(m, "reduce", dev, ok, bytes)) {
    case ROUTE_PREV: return m->prev_reduce(sbuf, rbuf, count, dtype, op, root, comm, m->prev_reduce_module);
    case ROUTE_STAGE: {
        int failed = 0, rc;
        stage_t s, r;
        const void* hs = stage_in(&s, (void*)sbuf, dtype, (size_t)count, &failed);
        void* hr = stage_in(&r, r_used, dtype, (size_t)count, &failed);
        if (rank != root && mca_coll_vccl_is_device(rbuf)) hr = NULL;
        else if (rank != root) hr = rbuf;
        rc = failed ? staged_error(m, "reduce")
                    : m->prev_reduce(hs, hr, count, dtype, op, root, comm, m->prev_reduce_module);
        if (stage_out(&r, rc == OMPI_SUCCESS) != 0 && rc == OMPI_SUCCESS) rc = staged_error(m, "reduce");
        stage_out(&s, 0);
        return rc;
    }
    case ROUTE_VCCL: break;
    }
    if (count == 0) return OMPI_SUCCESS;
    const void* s = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    mixed_t x;
    int failed = 0;
    if (unmix(&x, &s, &r_used, bytes, bytes, &failed) != 0) return staged_error(m, "reduce");
    mca_coll_vccl_enter_vccl();
    vcclResult_t vr = vcclReduce(s, r_used, (size_t)count, vdt, vop, root, m->vcomm, NULL);
    mca_coll_vccl_leave_vccl();
    if (remix(&x) != 0) return staged_error(m, "reduce");
    return from_vccl(m, vr, "vcclReduce");
}

int mca_coll_vccl_allgather(const void* sbuf, int scount, struct ompi_datatype_t* sdtype, void* rbuf, int rcount,
                            struct ompi_datatype_t* rdtype, struct ompi_communicator_t* comm,
                            mca_coll_base_module_t* module) {
    mca_coll_vccl_module_t* m = MOD(module);
    int size = ompi_comm_size(comm), rank = ompi_comm_rank(comm);
    vcclDataType_t vdt = vcclUint8;
    size_t n = 0;
    int ok = sbuf == MPI_IN_PLACE ? mca_coll_vccl_map_move(rdtype, (size_t)rcount, &vdt, &n) == 0
                                  : move_pair(sdtype, (size_t)scount, rdtype, (size_t)rcount, &vdt, &n) == 0;
    int dev = mca_coll_vccl_is_device(sbuf) || mca_coll_vccl_is_device(rbuf);
    size_t bytes = ok ? n * vtype_size(vdt) * (size_t)size : 0;
    switch (decide(m, "allgather", dev, ok, bytes)) {
    case ROUTE_PREV:
        return m->prev_allgather(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm, m->prev_allgather_module);
    case ROUTE_STAGE: {
        int failed = 0, rc;
        stage_t s, r;
        const void* hs = stage_in(&s, (void*)sbuf, sdtype, (size_t)scount, &failed);
        void* hr = stage_in(&r, rbuf, rdtype, (size_t)rcount * (size_t)size, &failed);
        rc = failed ? staged_error(m, "allgather")
                    : m->prev_allgather(hs, scount, sdtype, hr, rcount, rdtype, comm, m->prev_allgather_module);
        if (stage_out(&r, rc == OMPI_SUCCESS) != 0 && rc == OMPI_SUCCESS) rc = staged_error(m, "allgather");
        stage_out(&s, 0);
        return rc;
    }
    case ROUTE_VCCL: break;
    }
    if (n == 0) return OMPI_SUCCESS;
    size_t block = n * vtype_size(vdt);
    const void* s = sbuf == MPI_IN_PLACE ? (const void*)((char*)rbuf + (size_t)rank * block) : sbuf;
    mixed_t x;
    int failed = 0;
    if (unmix(&x, &s, &rbuf, block, block * (size_t)size, &failed) != 0) return staged_error(m, "allgather");
    mca_coll_vccl_enter_vccl();
    vcclResult_t vr = vcclAllGather(s, rbuf, n, vdt, m->vcomm, NULL);
    mca_coll_vccl_leave_vccl();
    if (remix(&x) != 0) return staged_error(m, "allgather");
    return from_vccl(m, vr, "vcclAllGather");
}

/* Reduce-scatter with rcount elements per rank through vccl. MPI_IN_PLACE: the input is the whole rbuf and
 * the result goes to its start; vccl's in-place form leaves it at block rank, so it is moved down. */
static int rs_vccl(mca_coll_vccl_module_t* m, const void* sbuf, void* rbuf, size_t rcount, vcclDataType_t vdt,
                   vcclRedOp_t vop, int rank, int size) {
    if (rcount == 0) return OMPI_SUCCESS;
    size_t block = rcount * vtype_size(vdt);
    vcclResult_t vr;
    if (sbuf == MPI_IN_PLACE) {
        char* mine = (char*)rbuf + (size_t)rank * block;
        mca_coll_vccl_enter_vccl();
        vr = vcclReduceScatter(rbuf, mine, rcount, vdt, vop, m->vcomm, NULL);
        mca_coll_vccl_leave_vccl();
        if (vr == vcclSuccess && rank != 0 && mca_coll_vccl_memcpy(rbuf, mine, block) != 0)
            return staged_error(m, "reduce_scatter");
    } else {
        mixed_t x;
        int failed = 0;
        if (unmix(&x, &sbuf, &rbuf, block * (size_t)size, block, &failed) != 0)
            return staged_error(m, "reduce_scatter");
        mca_coll_vccl_enter_vccl();
        vr = vcclReduceScatter(sbuf, rbuf, rcount, vdt, vop, m->vcomm, NULL);
        mca_coll_vccl_leave_vccl();
        if (remix(&x) != 0) return staged_error(m, "reduce_scatter");
    }
    return from_vccl(m, vr, "vcclReduceScatter");
}

int mca_coll_vccl_reduce_scatter_block(const void* sbuf, void* rbuf, int rcount, struct ompi_datatype_t* dtype,
                                       struct ompi_op_t* op, struct ompi_communicator_t* comm,
                                       mca_coll_base_module_t* module) {
    mca_coll_vccl_module_t* m = MOD(module);
    int size = ompi_comm_size(comm), rank = ompi_comm_rank(comm);
    vcclDataType_t vdt = vcclInt8;
    vcclRedOp_t vop = vcclSum;
    int ok = mca_coll_vccl_map_dtype(dtype, &vdt) == 0 && mca_coll_vccl_map_op(op, &vop) == 0;
    int dev = mca_coll_vccl_is_device(sbuf) || mca_coll_vccl_is_device(rbuf);
    size_t total = (size_t)rcount * (size_t)size;
    size_t bytes = ok ? total * vtype_size(vdt) : 0;
    switch (decide(m, "reduce_scatter_block", dev, ok, bytes)) {
    case ROUTE_PREV:
        return m->prev_reduce_scatter_block(sbuf, rbuf, rcount, dtype, op, comm, m->prev_reduce_scatter_block_module);
    case ROUTE_STAGE: {
        int failed = 0, rc;
        stage_t s, r;
        const void* hs = stage_in(&s, (void*)sbuf, dtype, total, &failed);
        void* hr = stage_in(&r, rbuf, dtype, sbuf == MPI_IN_PLACE ? total : (size_t)rcount, &failed);
        rc = failed ? staged_error(m, "reduce_scatter_block")
                    : m->prev_reduce_scatter_block(hs, hr, rcount, dtype, op, comm,
                                                   m->prev_reduce_scatter_block_module);
        if (stage_out(&r, rc == OMPI_SUCCESS) != 0 && rc == OMPI_SUCCESS) rc = staged_error(m, "reduce_scatter_block");
        stage_out(&s, 0);
        return rc;
    }
    case ROUTE_VCCL: break;
    }
    return rs_vccl(m, sbuf, rbuf, (size_t)rcount, vdt, vop, rank, size);
}

int mca_coll_vccl_reduce_scatter(const void* sbuf, void* rbuf, const int* rcounts, struct ompi_datatype_t* dtype,
                                 struct ompi_op_t* op, struct ompi_communicator_t* comm,
                                 mca_coll_base_module_t* module) {
    mca_coll_vccl_module_t* m = MOD(module);
    int size = ompi_comm_size(comm), rank = ompi_comm_rank(comm);
    vcclDataType_t vdt = vcclInt8;
    vcclRedOp_t vop = vcclSum;
    int ok = mca_coll_vccl_map_dtype(dtype, &vdt) == 0 && mca_coll_vccl_map_op(op, &vop) == 0;
    size_t total = 0;
    for (int i = 0; i < size; ++i) {
        total += (size_t)rcounts[i];
        if (rcounts[i] != rcounts[0]) ok = 0; /* vccl reduce-scatters equal blocks only */
    }
    int dev = mca_coll_vccl_is_device(sbuf) || mca_coll_vccl_is_device(rbuf);
    size_t bytes = ok ? total * vtype_size(vdt) : 0;
    switch (decide(m, "reduce_scatter", dev, ok, bytes)) {
    case ROUTE_PREV:
        return m->prev_reduce_scatter(sbuf, rbuf, rcounts, dtype, op, comm, m->prev_reduce_scatter_module);
    case ROUTE_STAGE: {
        int failed = 0, rc;
        stage_t s, r;
        const void* hs = stage_in(&s, (void*)sbuf, dtype, total, &failed);
        void* hr = stage_in(&r, rbuf, dtype, sbuf == MPI_IN_PLACE ? total : (size_t)rcounts[rank], &failed);
        rc = failed ? staged_error(m, "reduce_scatter")
                    : m->prev_reduce_scatter(hs, hr, rcounts, dtype, op, comm, m->prev_reduce_scatter_module);
        if (stage_out(&r, rc == OMPI_SUCCESS) != 0 && rc == OMPI_SUCCESS) rc = staged_error(m, "reduce_scatter");
        stage_out(&s, 0);
        return rc;
    }
    case ROUTE_VCCL: break;
    }
    return rs_vccl(m, sbuf, rbuf, (size_t)rcounts[0], vdt, vop, rank, size);
}

int mca_coll_vccl_alltoall(const void* sbuf, int scount, struct ompi_datatype_t* sdtype, void* rbuf, int rcount,
                           struct ompi_datatype_t* rdtype, struct ompi_communicator_t* comm,
                           mca_coll_base_module_t* module) {
    mca_coll_vccl_module_t* m = MOD(module);
    int size = ompi_comm_size(comm);
    vcclDataType_t vdt = vcclUint8;
    size_t n = 0;
    int ok = sbuf == MPI_IN_PLACE ? mca_coll_vccl_map_move(rdtype, (size_t)rcount, &vdt, &n) == 0
                                  : move_pair(sdtype, (size_t)scount, rdtype, (size_t)rcount, &vdt, &n) == 0;
    int dev = mca_coll_vccl_is_device(sbuf) || mca_coll_vccl_is_device(rbuf);
    size_t bytes = ok ? n * vtype_size(vdt) * (size_t)size : 0;
    switch (decide(m, "alltoall", dev, ok, bytes)) {
    case ROUTE_PREV:
        return m->prev_alltoall(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm, m->prev_alltoall_module);
    case ROUTE_STAGE: {
        int failed = 0, rc;
        stage_t s, r;
        const void* hs = stage_in(&s, (void*)sbuf, sdtype, (size_t)scount * (size_t)size, &failed);
        void* hr = stage_in(&r, rbuf, rdtype, (size_t)rcount * (size_t)size, &failed);
        rc = failed ? staged_error(m, "alltoall")
                    : m->prev_alltoall(hs, scount, sdtype, hr, rcount, rdtype, comm, m->prev_alltoall_module);
        if (stage_out(&r, rc == OMPI_SUCCESS) != 0 && rc == OMPI_SUCCESS) rc = staged_error(m, "alltoall");
        stage_out(&s, 0);
        return rc;
    }
    case ROUTE_VCCL: break;
    }
    if (n == 0) return OMPI_SUCCESS;
    const void* s = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    size_t all = n * vtype_size(vdt) * (size_t)size;
    mixed_t x;
    int failed = 0;
    if (unmix(&x, &s, &rbuf, all, all, &failed) != 0) return staged_error(m, "alltoall");
    mca_coll_vccl_enter_vccl();
    vcclResult_t vr = vcclAlltoAll(s, rbuf, n, vdt, m->vcomm, NULL);
    mca_coll_vccl_leave_vccl();
    if (remix(&x) != 0) return staged_error(m, "alltoall");
    return from_vccl(m, vr, "vcclAlltoAll");
}

/* A barrier through vccl (coll_vccl_host=1 only: a barrier has no buffer to say where it belongs) is a
 * one-element allreduce. */
int mca_coll_vccl_barrier(struct ompi_communicator_t* comm, mca_coll_base_module_t* module) {
    mca_coll_vccl_module_t* m = MOD(module);
    if (decide(m, "barrier", 0, 1, 0) != ROUTE_VCCL) return m->prev_barrier(comm, m->prev_barrier_module);
    int32_t token = 0;
    mca_coll_vccl_enter_vccl();
    vcclResult_t vr = vcclAllReduce(&token, &token, 1, vcclInt32, vcclSum, m->vcomm, NULL);
    mca_coll_vccl_leave_vccl();
    return from_vccl(m, vr, "barrier (vcclAllReduce)");
}
