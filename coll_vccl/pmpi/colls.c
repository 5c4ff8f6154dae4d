/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * colls.c - the blocking collectives: MPI_Allreduce, MPI_Reduce, MPI_Bcast, MPI_Allgather,
 * MPI_Reduce_scatter_block, MPI_Reduce_scatter, MPI_Alltoall, MPI_Barrier (and the MPI 4 large-count forms
 * where mpi.h declares them).
 *
 * Each call goes one of three ways (pmpi.h): vccl; the MPI library on host copies of this process's device
 * buffers ("staged"); the MPI library unchanged. Arguments MPI calls erroneous (count 0 is not, but it moves
 * nothing; MPI_IN_PLACE where it is not allowed, aliased buffers, an invalid root or datatype, mismatched
 * type sizes) never go to vccl, so the MPI library sees them and answers as it does without the interposer.
 * vccl runs on the legacy NULL stream; the call waits for it, so the buffer holds the result on return.
 */
#include "pmpi.h"

#include <string.h>

static const char kAllreduce[] = "MPI_Allreduce";
static const char kReduce[] = "MPI_Reduce";
static const char kBcast[] = "MPI_Bcast";
static const char kAllgather[] = "MPI_Allgather";
static const char kReduceScatterBlock[] = "MPI_Reduce_scatter_block";
static const char kReduceScatter[] = "MPI_Reduce_scatter";
static const char kAlltoall[] = "MPI_Alltoall";
static const char kBarrier[] = "MPI_Barrier";

static int enabled(void) { return pm_settings()->enabled; }
/* Host buffers only and VCCL_PMPI_HOST=0: the call is not the interposer's business. */
static int host_untouched(int dev) { return !dev && pm_settings()->host == PM_HOST_PMPI; }

static void log_route(const char* call, enum pm_route r, size_t bytes, int dev) {
    static const char* const names[PM_NUM_ROUTES] = {"vccl", "MPI", "MPI on host copies"};
    pm_log(2, "%s: %zu bytes, %s buffers -> %s", call, bytes, dev ? "device" : "host", names[r]);
}

/* ---- vccl with both buffers of one kind ---- */

/* vccl takes a call's two buffers in the same kind of memory: when only one is device memory, it is copied
 * to host memory around the call. */
typedef struct {
    pm_stage_t s, r;
    int device; /* the vccl call works on device memory: wait for the stream */
} pm_vcall_t;

static int vcall_begin(pm_vcall_t* v, const void** s, size_t sbytes, void** r, size_t rbytes) {
    memset(v, 0, sizeof *v);
    int sd = *s != NULL && pm_kind(*s) == PM_DEVICE;
    int rd = *r != NULL && pm_kind(*r) == PM_DEVICE;
    if (*r == NULL) rd = sd; /* MPI_Reduce away from the root: no receive buffer */
    if (sd == rd) {
        v->device = sd;
        if (sd) pm_device_prepare(*s);
        return 0;
    }
    if (sd) {
        void* h = pm_stage_in(&v->s, (void*)*s, MPI_BYTE, sbytes, 1);
        if (h == NULL) return -1;
        *s = h;
    } else {
        void* h = pm_stage_in(&v->r, *r, MPI_BYTE, rbytes, 1);
        if (h == NULL) return -1;
        *r = h;
    }
    return 0;
}

static int vcall_end(pm_vcall_t* v, MPI_Comm comm, const char* call, pm_comm_t* pc, vcclResult_t rc, size_t bytes) {
    int err = MPI_SUCCESS;
    if (rc == vcclSuccess && v->device && pm_device_sync() != 0)
        err = pm_raise(comm, call, MPI_ERR_INTERN, "waiting for vccl's device work failed");
    if (pm_stage_out(&v->r, rc == vcclSuccess) != 0 && rc == vcclSuccess && err == MPI_SUCCESS)
        err = pm_raise(comm, call, MPI_ERR_INTERN, "copying the result back to device memory failed");
    pm_stage_free(&v->s);
    if (rc != vcclSuccess) return pm_vccl_result(comm, call, rc, pc);
    pm_comm_count(pc, PM_ROUTE_VCCL);
    log_route(call, PM_ROUTE_VCCL, bytes, v->device);
    return err;
}

static int stage_failed(MPI_Comm comm, const char* call) {
    return pm_raise(comm, call, MPI_ERR_NO_MEM, "a host copy of a device buffer could not be made");
}

/* Both sides of a data movement as one vccl type and count: that of the types when they agree, bytes when
 * only their sizes do; -1 otherwise (the MPI library decides, e.g. a truncation error). */
static int move_pair(MPI_Datatype sdt, size_t scount, MPI_Datatype rdt, size_t rcount, vcclDataType_t* vdt, size_t* n) {
    vcclDataType_t st, rt;
    size_t sn, rn;
    if (pm_move_type(sdt, scount, &st, &sn) != 0 || pm_move_type(rdt, rcount, &rt, &rn) != 0) return -1;
    if (st == rt && sn == rn) {
        *vdt = st;
        *n = sn;
        return 0;
    }
    if (sn * pm_vtype_size(st) != rn * pm_vtype_size(rt)) return -1;
    *vdt = vcclUint8;
    *n = sn * pm_vtype_size(st);
    return 0;
}

/* ---- the MPI library, with int or MPI_Count counts as the application called it ---- */

static int pmpi_allreduce(const void* s, void* r, size_t n, MPI_Datatype dt, MPI_Op op, MPI_Comm c, int large) {
#if PM_HAVE_LARGE_COUNT
    if (large) return PMPI_Allreduce_c(s, r, (MPI_Count)n, dt, op, c);
#endif
    (void)large;
    return PMPI_Allreduce(s, r, (int)n, dt, op, c);
}
static int pmpi_reduce(const void* s, void* r, size_t n, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm c, int large) {
#if PM_HAVE_LARGE_COUNT
    if (large) return PMPI_Reduce_c(s, r, (MPI_Count)n, dt, op, root, c);
#endif
    (void)large;
    return PMPI_Reduce(s, r, (int)n, dt, op, root, c);
}
static int pmpi_bcast(void* b, size_t n, MPI_Datatype dt, int root, MPI_Comm c, int large) {
#if PM_HAVE_LARGE_COUNT
    if (large) return PMPI_Bcast_c(b, (MPI_Count)n, dt, root, c);
#endif
    (void)large;
    return PMPI_Bcast(b, (int)n, dt, root, c);
}
static int pmpi_allgather(const void* s, size_t sn, MPI_Datatype sdt, void* r, size_t rn, MPI_Datatype rdt,
                          MPI_Comm c, int large) {
#if PM_HAVE_LARGE_COUNT
    if (large) return PMPI_Allgather_c(s, (MPI_Count)sn, sdt, r, (MPI_Count)rn, rdt, c);
#endif
    (void)large;
    return PMPI_Allgather(s, (int)sn, sdt, r, (int)rn, rdt, c);
}
static int pmpi_alltoall(const void* s, size_t sn, MPI_Datatype sdt, void* r, size_t rn, MPI_Datatype rdt,
                         MPI_Comm c, int large) {
#if PM_HAVE_LARGE_COUNT
    if (large) return PMPI_Alltoall_c(s, (MPI_Count)sn, sdt, r, (MPI_Count)rn, rdt, c);
#endif
    (void)large;
    return PMPI_Alltoall(s, (int)sn, sdt, r, (int)rn, rdt, c);
}
static int pmpi_rsb(const void* s, void* r, size_t n, MPI_Datatype dt, MPI_Op op, MPI_Comm c, int large) {
#if PM_HAVE_LARGE_COUNT
    if (large) return PMPI_Reduce_scatter_block_c(s, r, (MPI_Count)n, dt, op, c);
#endif
    (void)large;
    return PMPI_Reduce_scatter_block(s, r, (int)n, dt, op, c);
}
/* counts: int[] (large 0) or MPI_Count[] (large 1) */
static int pmpi_rs(const void* s, void* r, const void* counts, MPI_Datatype dt, MPI_Op op, MPI_Comm c, int large) {
#if PM_HAVE_LARGE_COUNT
    if (large) return PMPI_Reduce_scatter_c(s, r, (const MPI_Count*)counts, dt, op, c);
#endif
    (void)large;
    return PMPI_Reduce_scatter(s, r, (const int*)counts, dt, op, c);
}

/* ---- MPI_Allreduce ---- */

static int allreduce_impl(const void* sbuf, void* rbuf, size_t count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                          int large) {
    const char* call = kAllreduce;
    int dev = pm_is_dev(pm_kind(sbuf)) || pm_is_dev(pm_kind(rbuf));
    if (host_untouched(dev)) {
        pm_count(PM_ROUTE_PMPI);
        return pmpi_allreduce(sbuf, rbuf, count, dt, op, comm, large);
    }
    vcclDataType_t vdt = vcclInt8;
    vcclRedOp_t vop = vcclSum;
    int ok = count > 0 && sbuf != NULL && rbuf != NULL && rbuf != MPI_IN_PLACE && sbuf != rbuf &&
             pm_reduce_type(dt, &vdt) == 0 && pm_reduce_op(op, &vop) == 0;
    pm_comm_t* pc = ok ? pm_comm_get(comm, call) : NULL;
    if (pc != NULL) {
        size_t bytes = count * pm_vtype_size(vdt);
        const void* s = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
        void* r = rbuf;
        pm_vcall_t v;
        if (vcall_begin(&v, &s, bytes, &r, bytes) != 0) return stage_failed(comm, call);
        vcclResult_t rc = vcclAllReduce(s, r, count, vdt, vop, pc->vcomm, NULL);
        return vcall_end(&v, comm, call, pc, rc, bytes);
    }
    if (!dev) {
        pm_count(PM_ROUTE_PMPI);
        log_route(call, PM_ROUTE_PMPI, 0, 0);
        return pmpi_allreduce(sbuf, rbuf, count, dt, op, comm, large);
    }
    pm_stage_t ss = {0}, sr = {0};
    void* hr = pm_stage_in(&sr, rbuf, dt, count, 1);
    const void* hs = sbuf == rbuf ? hr : pm_stage_in(&ss, (void*)sbuf, dt, count, 1);
    if ((hr == NULL && rbuf != NULL) || (hs == NULL && sbuf != NULL)) {
        pm_stage_free(&ss);
        pm_stage_free(&sr);
        return stage_failed(comm, call);
    }
    pm_count(PM_ROUTE_STAGED);
    log_route(call, PM_ROUTE_STAGED, 0, 1);
    int rc = pmpi_allreduce(hs, hr, count, dt, op, comm, large);
    pm_stage_free(&ss);
    if (pm_stage_out(&sr, rc == MPI_SUCCESS) != 0 && rc == MPI_SUCCESS) rc = stage_failed(comm, call);
    return rc;
}

PM_EXPORT int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                            MPI_Comm comm) {
    if (!enabled() || count < 0) return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    return allreduce_impl(sendbuf, recvbuf, (size_t)count, datatype, op, comm, 0);
}

/* ---- MPI_Reduce ---- */

static int reduce_impl(const void* sbuf, void* rbuf, size_t count, MPI_Datatype dt, MPI_Op op, int root,
                       MPI_Comm comm, int large) {
    const char* call = kReduce;
    int rank = 0, size = 0;
    if (pm_comm_rank_size(comm, &rank, &size) != 0) return pmpi_reduce(sbuf, rbuf, count, dt, op, root, comm, large);
    int is_root = rank == root;
    /* the receive buffer matters at the root only */
    int dev = pm_is_dev(pm_kind(sbuf)) || (is_root && pm_is_dev(pm_kind(rbuf)));
    if (host_untouched(dev)) {
        pm_count(PM_ROUTE_PMPI);
        return pmpi_reduce(sbuf, rbuf, count, dt, op, root, comm, large);
    }
    vcclDataType_t vdt = vcclInt8;
    vcclRedOp_t vop = vcclSum;
    int ok = count > 0 && root >= 0 && root < size && sbuf != NULL &&
             (is_root ? rbuf != NULL && rbuf != MPI_IN_PLACE && sbuf != rbuf : sbuf != MPI_IN_PLACE) &&
             pm_reduce_type(dt, &vdt) == 0 && pm_reduce_op(op, &vop) == 0;
    pm_comm_t* pc = ok ? pm_comm_get(comm, call) : NULL;
    if (pc != NULL) {
        size_t bytes = count * pm_vtype_size(vdt);
        const void* s = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
        void* r = is_root ? rbuf : NULL;
        pm_vcall_t v;
        if (vcall_begin(&v, &s, bytes, &r, bytes) != 0) return stage_failed(comm, call);
        vcclResult_t rc = vcclReduce(s, r, count, vdt, vop, root, pc->vcomm, NULL);
        return vcall_end(&v, comm, call, pc, rc, bytes);
    }
    if (!dev) {
        pm_count(PM_ROUTE_PMPI);
        log_route(call, PM_ROUTE_PMPI, 0, 0);
        return pmpi_reduce(sbuf, rbuf, count, dt, op, root, comm, large);
    }
    pm_stage_t ss = {0}, sr = {0};
    void* hr = rbuf;
    if (is_root) hr = pm_stage_in(&sr, rbuf, dt, count, 1);
    else if (pm_is_dev(pm_kind(rbuf))) hr = NULL; /* not significant here: no device pointer for the library */
    const void* hs = is_root && sbuf == rbuf ? hr : pm_stage_in(&ss, (void*)sbuf, dt, count, 1);
    if ((is_root && hr == NULL && rbuf != NULL) || (hs == NULL && sbuf != NULL)) {
        pm_stage_free(&ss);
        pm_stage_free(&sr);
        return stage_failed(comm, call);
    }
    pm_count(PM_ROUTE_STAGED);
    log_route(call, PM_ROUTE_STAGED, 0, 1);
    int rc = pmpi_reduce(hs, hr, count, dt, op, root, comm, large);
    pm_stage_free(&ss);
    if (pm_stage_out(&sr, rc == MPI_SUCCESS) != 0 && rc == MPI_SUCCESS) rc = stage_failed(comm, call);
    return rc;
}

PM_EXPORT int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                         MPI_Comm comm) {
    if (!enabled() || count < 0) return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
    return reduce_impl(sendbuf, recvbuf, (size_t)count, datatype, op, root, comm, 0);
}

/* ---- MPI_Bcast ---- */

static int bcast_impl(void* buf, size_t count, MPI_Datatype dt, int root, MPI_Comm comm, int large) {
    const char* call = kBcast;
    int dev = pm_is_dev(pm_kind(buf));
    if (host_untouched(dev)) {
        pm_count(PM_ROUTE_PMPI);
        return pmpi_bcast(buf, count, dt, root, comm, large);
    }
    int rank = 0, size = 0;
    if (pm_comm_rank_size(comm, &rank, &size) != 0) return pmpi_bcast(buf, count, dt, root, comm, large);
    vcclDataType_t vdt = vcclUint8;
    size_t n = 0;
    int ok = count > 0 && buf != NULL && buf != MPI_IN_PLACE && root >= 0 && root < size &&
             pm_move_type(dt, count, &vdt, &n) == 0 && n > 0;
    pm_comm_t* pc = ok ? pm_comm_get(comm, call) : NULL;
    if (pc != NULL) {
        size_t bytes = n * pm_vtype_size(vdt);
        const void* s = buf;
        void* r = buf;
        pm_vcall_t v;
        if (vcall_begin(&v, &s, bytes, &r, bytes) != 0) return stage_failed(comm, call);
        vcclResult_t rc = vcclBroadcast(s, r, n, vdt, root, pc->vcomm, NULL);
        return vcall_end(&v, comm, call, pc, rc, bytes);
    }
    if (!dev) {
        pm_count(PM_ROUTE_PMPI);
        log_route(call, PM_ROUTE_PMPI, 0, 0);
        return pmpi_bcast(buf, count, dt, root, comm, large);
    }
    pm_stage_t sb = {0};
    /* copied in everywhere: a derived type's holes come back unchanged */
    void* hb = pm_stage_in(&sb, buf, dt, count, 1);
    if (hb == NULL && buf != NULL) return stage_failed(comm, call);
    pm_count(PM_ROUTE_STAGED);
    log_route(call, PM_ROUTE_STAGED, 0, 1);
    int rc = pmpi_bcast(hb, count, dt, root, comm, large);
    if (pm_stage_out(&sb, rc == MPI_SUCCESS && rank != root) != 0 && rc == MPI_SUCCESS) rc = stage_failed(comm, call);
    return rc;
}

PM_EXPORT int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
    if (!enabled() || count < 0) return PMPI_Bcast(buffer, count, datatype, root, comm);
    return bcast_impl(buffer, (size_t)count, datatype, root, comm, 0);
}

/* ---- MPI_Allgather ---- */

static int allgather_impl(const void* sbuf, size_t scount, MPI_Datatype sdt, void* rbuf, size_t rcount,
                          MPI_Datatype rdt, MPI_Comm comm, int large) {
    const char* call = kAllgather;
    int dev = pm_is_dev(pm_kind(sbuf)) || pm_is_dev(pm_kind(rbuf));
    if (host_untouched(dev)) {
        pm_count(PM_ROUTE_PMPI);
        return pmpi_allgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm, large);
    }
    int rank = 0, size = 0;
    if (pm_comm_rank_size(comm, &rank, &size) != 0)
        return pmpi_allgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm, large);
    vcclDataType_t vdt = vcclUint8;
    size_t n = 0;
    int ok = rcount > 0 && sbuf != NULL && rbuf != NULL && rbuf != MPI_IN_PLACE && sbuf != rbuf &&
             (sbuf == MPI_IN_PLACE ? pm_move_type(rdt, rcount, &vdt, &n) == 0
                                   : move_pair(sdt, scount, rdt, rcount, &vdt, &n) == 0) &&
             n > 0;
    pm_comm_t* pc = ok ? pm_comm_get(comm, call) : NULL;
    if (pc != NULL) {
        size_t block = n * pm_vtype_size(vdt);
        const void* s = sbuf == MPI_IN_PLACE ? (const void*)((char*)rbuf + (size_t)rank * block) : sbuf;
        void* r = rbuf;
        pm_vcall_t v;
        if (vcall_begin(&v, &s, block, &r, block * (size_t)size) != 0) return stage_failed(comm, call);
        vcclResult_t rc = vcclAllGather(s, r, n, vdt, pc->vcomm, NULL);
        return vcall_end(&v, comm, call, pc, rc, block * (size_t)size);
    }
    if (!dev) {
        pm_count(PM_ROUTE_PMPI);
        log_route(call, PM_ROUTE_PMPI, 0, 0);
        return pmpi_allgather(sbuf, scount, sdt, rbuf, rcount, rdt, comm, large);
    }
    pm_stage_t ss = {0}, sr = {0};
    void* hr = pm_stage_in(&sr, rbuf, rdt, rcount * (size_t)size, 1);
    const void* hs = sbuf == rbuf ? hr : pm_stage_in(&ss, (void*)sbuf, sdt, scount, 1);
    if ((hr == NULL && rbuf != NULL) || (hs == NULL && sbuf != NULL)) {
        pm_stage_free(&ss);
        pm_stage_free(&sr);
        return stage_failed(comm, call);
    }
    pm_count(PM_ROUTE_STAGED);
    log_route(call, PM_ROUTE_STAGED, 0, 1);
    int rc = pmpi_allgather(hs, scount, sdt, hr, rcount, rdt, comm, large);
    pm_stage_free(&ss);
    if (pm_stage_out(&sr, rc == MPI_SUCCESS) != 0 && rc == MPI_SUCCESS) rc = stage_failed(comm, call);
    return rc;
}

PM_EXPORT int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                            MPI_Datatype recvtype, MPI_Comm comm) {
    if (!enabled() || sendcount < 0 || recvcount < 0)
        return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    return allgather_impl(sendbuf, (size_t)sendcount, sendtype, recvbuf, (size_t)recvcount, recvtype, comm, 0);
}

/* ---- MPI_Alltoall ---- */

static int alltoall_impl(const void* sbuf, size_t scount, MPI_Datatype sdt, void* rbuf, size_t rcount,
                         MPI_Datatype rdt, MPI_Comm comm, int large) {
    const char* call = kAlltoall;
    int dev = pm_is_dev(pm_kind(sbuf)) || pm_is_dev(pm_kind(rbuf));
    if (host_untouched(dev)) {
        pm_count(PM_ROUTE_PMPI);
        return pmpi_alltoall(sbuf, scount, sdt, rbuf, rcount, rdt, comm, large);
    }
    int rank = 0, size = 0;
    if (pm_comm_rank_size(comm, &rank, &size) != 0)
        return pmpi_alltoall(sbuf, scount, sdt, rbuf, rcount, rdt, comm, large);
    vcclDataType_t vdt = vcclUint8;
    size_t n = 0;
    int ok = rcount > 0 && sbuf != NULL && rbuf != NULL && rbuf != MPI_IN_PLACE && sbuf != rbuf &&
             (sbuf == MPI_IN_PLACE ? pm_move_type(rdt, rcount, &vdt, &n) == 0
                                   : move_pair(sdt, scount, rdt, rcount, &vdt, &n) == 0) &&
             n > 0;
    pm_comm_t* pc = ok ? pm_comm_get(comm, call) : NULL;
    if (pc != NULL) {
        size_t all = n * pm_vtype_size(vdt) * (size_t)size;
        const void* s = sbuf == MPI_IN_PLACE ? rbuf : sbuf; /* vccl's AlltoAll works in place */
        void* r = rbuf;
        pm_vcall_t v;
        if (vcall_begin(&v, &s, all, &r, all) != 0) return stage_failed(comm, call);
        vcclResult_t rc = vcclAlltoAll(s, r, n, vdt, pc->vcomm, NULL);
        return vcall_end(&v, comm, call, pc, rc, all);
    }
    if (!dev) {
        pm_count(PM_ROUTE_PMPI);
        log_route(call, PM_ROUTE_PMPI, 0, 0);
        return pmpi_alltoall(sbuf, scount, sdt, rbuf, rcount, rdt, comm, large);
    }
    pm_stage_t ss = {0}, sr = {0};
    void* hr = pm_stage_in(&sr, rbuf, rdt, rcount * (size_t)size, 1);
    const void* hs = sbuf == rbuf ? hr : pm_stage_in(&ss, (void*)sbuf, sdt, scount * (size_t)size, 1);
    if ((hr == NULL && rbuf != NULL) || (hs == NULL && sbuf != NULL)) {
        pm_stage_free(&ss);
        pm_stage_free(&sr);
        return stage_failed(comm, call);
    }
    pm_count(PM_ROUTE_STAGED);
    log_route(call, PM_ROUTE_STAGED, 0, 1);
    int rc = pmpi_alltoall(hs, scount, sdt, hr, rcount, rdt, comm, large);
    pm_stage_free(&ss);
    if (pm_stage_out(&sr, rc == MPI_SUCCESS) != 0 && rc == MPI_SUCCESS) rc = stage_failed(comm, call);
    return rc;
}

PM_EXPORT int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                           MPI_Datatype recvtype, MPI_Comm comm) {
    if (!enabled() || sendcount < 0 || recvcount < 0)
        return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    return alltoall_impl(sendbuf, (size_t)sendcount, sendtype, recvbuf, (size_t)recvcount, recvtype, comm, 0);
}

/* ---- MPI_Reduce_scatter_block and MPI_Reduce_scatter ---- */

/* rcount elements per rank through vccl. MPI_IN_PLACE: the input is the whole rbuf and MPI wants the result
 * at its start; vccl's in-place form leaves it at block rank, so it is moved down. */
static int rs_vccl(pm_comm_t* pc, MPI_Comm comm, const char* call, const void* sbuf, void* rbuf, size_t rcount,
                   vcclDataType_t vdt, vcclRedOp_t vop) {
    size_t block = rcount * pm_vtype_size(vdt);
    size_t total = block * (size_t)pc->size;
    if (sbuf == MPI_IN_PLACE) {
        const void* s = rbuf;
        void* r = rbuf;
        pm_vcall_t v;
        if (vcall_begin(&v, &s, total, &r, total) != 0) return stage_failed(comm, call);
        char* mine = (char*)r + (size_t)pc->rank * block;
        vcclResult_t rc = vcclReduceScatter(r, mine, rcount, vdt, vop, pc->vcomm, NULL);
        /* pm_copy orders a device-to-device move after vccl's work on the NULL stream and waits for it */
        if (rc == vcclSuccess && pc->rank != 0 && pm_copy(r, mine, block) != 0) {
            vcall_end(&v, comm, call, pc, rc, total);
            return pm_raise(comm, call, MPI_ERR_INTERN, "moving the result to the start of the buffer failed");
        }
        return vcall_end(&v, comm, call, pc, rc, total);
    }
    const void* s = sbuf;
    void* r = rbuf;
    pm_vcall_t v;
    if (vcall_begin(&v, &s, total, &r, block) != 0) return stage_failed(comm, call);
    vcclResult_t rc = vcclReduceScatter(s, r, rcount, vdt, vop, pc->vcomm, NULL);
    return vcall_end(&v, comm, call, pc, rc, total);
}

static int rsb_impl(const void* sbuf, void* rbuf, size_t rcount, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                    int large) {
    const char* call = kReduceScatterBlock;
    int dev = pm_is_dev(pm_kind(sbuf)) || pm_is_dev(pm_kind(rbuf));
    if (host_untouched(dev)) {
        pm_count(PM_ROUTE_PMPI);
        return pmpi_rsb(sbuf, rbuf, rcount, dt, op, comm, large);
    }
    int rank = 0, size = 0;
    if (pm_comm_rank_size(comm, &rank, &size) != 0) return pmpi_rsb(sbuf, rbuf, rcount, dt, op, comm, large);
    vcclDataType_t vdt = vcclInt8;
    vcclRedOp_t vop = vcclSum;
    int ok = rcount > 0 && sbuf != NULL && rbuf != NULL && rbuf != MPI_IN_PLACE && sbuf != rbuf &&
             pm_reduce_type(dt, &vdt) == 0 && pm_reduce_op(op, &vop) == 0;
    pm_comm_t* pc = ok ? pm_comm_get(comm, call) : NULL;
    if (pc != NULL) return rs_vccl(pc, comm, call, sbuf, rbuf, rcount, vdt, vop);
    if (!dev) {
        pm_count(PM_ROUTE_PMPI);
        log_route(call, PM_ROUTE_PMPI, 0, 0);
        return pmpi_rsb(sbuf, rbuf, rcount, dt, op, comm, large);
    }
    size_t total = rcount * (size_t)size;
    pm_stage_t ss = {0}, sr = {0};
    void* hr = pm_stage_in(&sr, rbuf, dt, sbuf == MPI_IN_PLACE ? total : rcount, 1);
    const void* hs = sbuf == rbuf ? hr : pm_stage_in(&ss, (void*)sbuf, dt, total, 1);
    if ((hr == NULL && rbuf != NULL) || (hs == NULL && sbuf != NULL)) {
        pm_stage_free(&ss);
        pm_stage_free(&sr);
        return stage_failed(comm, call);
    }
    pm_count(PM_ROUTE_STAGED);
    log_route(call, PM_ROUTE_STAGED, 0, 1);
    int rc = pmpi_rsb(hs, hr, rcount, dt, op, comm, large);
    pm_stage_free(&ss);
    if (pm_stage_out(&sr, rc == MPI_SUCCESS) != 0 && rc == MPI_SUCCESS) rc = stage_failed(comm, call);
    return rc;
}

PM_EXPORT int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype,
                                       MPI_Op op, MPI_Comm comm) {
    if (!enabled() || recvcount < 0) return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
    return rsb_impl(sendbuf, recvbuf, (size_t)recvcount, datatype, op, comm, 0);
}

/* counts: int[] (large 0) or MPI_Count[] (large 1), size entries */
static size_t count_at(const void* counts, int i, int large) {
#if PM_HAVE_LARGE_COUNT
    if (large) return (size_t)((const MPI_Count*)counts)[i];
#endif
    (void)large;
    return (size_t)((const int*)counts)[i];
}

static int count_negative(const void* counts, int i, int large) {
#if PM_HAVE_LARGE_COUNT
    if (large) return ((const MPI_Count*)counts)[i] < 0;
#endif
    (void)large;
    return ((const int*)counts)[i] < 0;
}

static int rs_impl(const void* sbuf, void* rbuf, const void* counts, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                   int large) {
    const char* call = kReduceScatter;
    int rank = 0, size = 0;
    if (counts == NULL || pm_comm_rank_size(comm, &rank, &size) != 0)
        return pmpi_rs(sbuf, rbuf, counts, dt, op, comm, large);
    size_t total = 0;
    int equal = 1;
    for (int i = 0; i < size; ++i) {
        if (count_negative(counts, i, large)) return pmpi_rs(sbuf, rbuf, counts, dt, op, comm, large);
        total += count_at(counts, i, large);
        equal = equal && count_at(counts, i, large) == count_at(counts, 0, large);
    }
    size_t mine = count_at(counts, rank, large);
    int dev = pm_is_dev(pm_kind(sbuf)) || pm_is_dev(pm_kind(rbuf));
    if (host_untouched(dev)) {
        pm_count(PM_ROUTE_PMPI);
        return pmpi_rs(sbuf, rbuf, counts, dt, op, comm, large);
    }
    vcclDataType_t vdt = vcclInt8;
    vcclRedOp_t vop = vcclSum;
    /* vccl reduce-scatters equal blocks only */
    int ok = equal && total > 0 && sbuf != NULL && rbuf != NULL && rbuf != MPI_IN_PLACE && sbuf != rbuf &&
             pm_reduce_type(dt, &vdt) == 0 && pm_reduce_op(op, &vop) == 0;
    pm_comm_t* pc = ok ? pm_comm_get(comm, call) : NULL;
    if (pc != NULL) return rs_vccl(pc, comm, call, sbuf, rbuf, mine, vdt, vop);
    if (!dev) {
        pm_count(PM_ROUTE_PMPI);
        log_route(call, PM_ROUTE_PMPI, 0, 0);
        return pmpi_rs(sbuf, rbuf, counts, dt, op, comm, large);
    }
    pm_stage_t ss = {0}, sr = {0};
    void* hr = pm_stage_in(&sr, rbuf, dt, sbuf == MPI_IN_PLACE ? total : mine, 1);
    const void* hs = sbuf == rbuf ? hr : pm_stage_in(&ss, (void*)sbuf, dt, total, 1);
    if ((hr == NULL && rbuf != NULL) || (hs == NULL && sbuf != NULL)) {
        pm_stage_free(&ss);
        pm_stage_free(&sr);
        return stage_failed(comm, call);
    }
    pm_count(PM_ROUTE_STAGED);
    log_route(call, PM_ROUTE_STAGED, 0, 1);
    int rc = pmpi_rs(hs, hr, counts, dt, op, comm, large);
    pm_stage_free(&ss);
    if (pm_stage_out(&sr, rc == MPI_SUCCESS) != 0 && rc == MPI_SUCCESS) rc = stage_failed(comm, call);
    return rc;
}

PM_EXPORT int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype,
                                 MPI_Op op, MPI_Comm comm) {
    if (!enabled()) return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
    return rs_impl(sendbuf, recvbuf, recvcounts, datatype, op, comm, 0);
}

/* ---- MPI_Barrier ---- */

/* A barrier has no buffer to say where it belongs: through vccl only with VCCL_PMPI_HOST (a one-element
 * allreduce), so that CI exercises the vccl communicators' ordering with barriers mixed in. */
PM_EXPORT int MPI_Barrier(MPI_Comm comm) {
    if (!enabled() || pm_settings()->host == PM_HOST_PMPI) return PMPI_Barrier(comm);
    pm_comm_t* pc = pm_comm_get(comm, kBarrier);
    if (pc == NULL) {
        pm_count(PM_ROUTE_PMPI);
        return PMPI_Barrier(comm);
    }
    int32_t token = 0;
    vcclResult_t rc = vcclAllReduce(&token, &token, 1, vcclInt32, vcclSum, pc->vcomm, NULL);
    if (rc != vcclSuccess) return pm_vccl_result(comm, kBarrier, rc, pc);
    pm_comm_count(pc, PM_ROUTE_VCCL);
    log_route(kBarrier, PM_ROUTE_VCCL, 0, 0);
    return MPI_SUCCESS;
}

/* ---- MPI 4 large counts ---- */
#if PM_HAVE_LARGE_COUNT
PM_EXPORT int MPI_Allreduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm) {
    if (!enabled() || count < 0) return PMPI_Allreduce_c(sendbuf, recvbuf, count, datatype, op, comm);
    return allreduce_impl(sendbuf, recvbuf, (size_t)count, datatype, op, comm, 1);
}
PM_EXPORT int MPI_Reduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
                           int root, MPI_Comm comm) {
    if (!enabled() || count < 0) return PMPI_Reduce_c(sendbuf, recvbuf, count, datatype, op, root, comm);
    return reduce_impl(sendbuf, recvbuf, (size_t)count, datatype, op, root, comm, 1);
}
PM_EXPORT int MPI_Bcast_c(void* buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm) {
    if (!enabled() || count < 0) return PMPI_Bcast_c(buffer, count, datatype, root, comm);
    return bcast_impl(buffer, (size_t)count, datatype, root, comm, 1);
}
PM_EXPORT int MPI_Allgather_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                              MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    if (!enabled() || sendcount < 0 || recvcount < 0)
        return PMPI_Allgather_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    return allgather_impl(sendbuf, (size_t)sendcount, sendtype, recvbuf, (size_t)recvcount, recvtype, comm, 1);
}
PM_EXPORT int MPI_Alltoall_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                             MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    if (!enabled() || sendcount < 0 || recvcount < 0)
        return PMPI_Alltoall_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    return alltoall_impl(sendbuf, (size_t)sendcount, sendtype, recvbuf, (size_t)recvcount, recvtype, comm, 1);
}
PM_EXPORT int MPI_Reduce_scatter_block_c(const void* sendbuf, void* recvbuf, MPI_Count recvcount,
                                         MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
    if (!enabled() || recvcount < 0)
        return PMPI_Reduce_scatter_block_c(sendbuf, recvbuf, recvcount, datatype, op, comm);
    return rsb_impl(sendbuf, recvbuf, (size_t)recvcount, datatype, op, comm, 1);
}
PM_EXPORT int MPI_Reduce_scatter_c(const void* sendbuf, void* recvbuf, const MPI_Count recvcounts[],
                                   MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
    if (!enabled()) return PMPI_Reduce_scatter_c(sendbuf, recvbuf, recvcounts, datatype, op, comm);
    return rs_impl(sendbuf, recvbuf, recvcounts, datatype, op, comm, 1);
}
#endif
