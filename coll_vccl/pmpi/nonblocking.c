/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nonblocking.c - MPI_Iallreduce, MPI_Ireduce, MPI_Ibcast, MPI_Iallgather, MPI_Ireduce_scatter_block,
 * MPI_Ireduce_scatter, MPI_Ialltoall on device buffers, and the completion calls that finish them.
 *
 * They do not use vccl: a vccl collective blocks the calling thread until its peers join (host memory,
 * peers on other hosts), and a nonblocking MPI call must not. Instead the device buffers are copied to host
 * memory, the MPI library's own nonblocking collective runs on the copies, and the result is copied back to
 * the device when the request completes - in MPI_Wait, MPI_Test and the other completion calls, which the
 * interposer defines for that. A device pointer never reaches the MPI library. This is said once per job
 * (on world rank 0; on every rank with VCCL_PMPI_VERBOSE >= 1). Host buffers go to the library unchanged,
 * whatever VCCL_PMPI_HOST says (=2 stages them like device buffers, for tests).
 *
 * The completion calls look at their requests only while staged ones are in flight; otherwise they are a
 * plain call of the PMPI_ version.
 */
#include "pmpi.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

volatile int pm_pending_requests = 0;

typedef struct pm_req {
    MPI_Request req;
    pm_stage_t s, r;
    int copied;      /* result already copied back (MPI_Request_get_status saw it complete) */
    struct pm_req* next;
} pm_req_t;

static pthread_mutex_t req_lock = PTHREAD_MUTEX_INITIALIZER;
static pm_req_t* req_head = NULL;

static int enabled(void) { return pm_settings()->enabled; }

static void say_staged_once(const char* call) {
    static int said = 0;
    if (__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED)) return;
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0 || pm_settings()->verbose >= 1)
        pm_log(0, "%s on device memory: nonblocking collectives run in the MPI library on host copies of device "
               "buffers (copied back when the request completes), not through vccl; this is said once", call);
}

static pm_req_t* new_req(void) { return calloc(1, sizeof(pm_req_t)); }

static void drop_req(pm_req_t* q) {
    pm_stage_free(&q->s);
    pm_stage_free(&q->r);
    free(q);
}

/* Records a staged call whose MPI request was created; frees everything when it was not. */
static int submit(pm_req_t* q, const char* call, int rc, MPI_Request* req) {
    if (rc != MPI_SUCCESS || req == NULL || *req == MPI_REQUEST_NULL) {
        drop_req(q);
        return rc;
    }
    q->req = *req;
    pthread_mutex_lock(&req_lock);
    q->next = req_head;
    req_head = q;
    __atomic_add_fetch(&pm_pending_requests, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&req_lock);
    pm_count(PM_ROUTE_STAGED);
    pm_log(2, "%s: device buffers -> MPI on host copies (nonblocking)", call);
    return rc;
}

static int stage_failed(pm_req_t* q, MPI_Comm comm, const char* call) {
    drop_req(q);
    return pm_raise(comm, call, MPI_ERR_NO_MEM, "a host copy of a device buffer could not be made");
}

/* ---- completion ---- */

static pm_req_t* find_locked(MPI_Request h, pm_req_t*** link) {
    for (pm_req_t** p = &req_head; *p != NULL; p = &(*p)->next) {
        if ((*p)->req == h) {
            if (link != NULL) *link = p;
            return *p;
        }
    }
    return NULL;
}

static pm_req_t* take(MPI_Request h) {
    pthread_mutex_lock(&req_lock);
    pm_req_t** link = NULL;
    pm_req_t* q = find_locked(h, &link);
    if (q != NULL) {
        *link = q->next;
        __atomic_sub_fetch(&pm_pending_requests, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&req_lock);
    return q;
}

/* The request completed: the result goes back to the device buffer. */
static int finish(pm_req_t* q) {
    int rc = MPI_SUCCESS;
    if (!q->copied && pm_stage_out(&q->r, 1) != 0) {
        pm_log(0, "copying the result of a nonblocking collective back to device memory failed");
        rc = MPI_ERR_INTERN;
    }
    drop_req(q);
    return rc;
}

static int pending(void) { return __atomic_load_n(&pm_pending_requests, __ATOMIC_ACQUIRE) != 0; }

/* Requests that the completion call turned into MPI_REQUEST_NULL completed (non-persistent requests, which
 * nonblocking collectives are). */
static int after(const MPI_Request* saved, const MPI_Request* now, int n, int rc) {
    for (int i = 0; i < n; ++i) {
        if (saved[i] == MPI_REQUEST_NULL || now[i] != MPI_REQUEST_NULL) continue;
        pm_req_t* q = take(saved[i]);
        if (q != NULL && finish(q) != MPI_SUCCESS && rc == MPI_SUCCESS) rc = MPI_ERR_INTERN;
    }
    return rc;
}

#define PM_SAVE(n, reqs)                                                                   \
    MPI_Request saved_small_[16];                                                          \
    MPI_Request* saved_ = (n) <= 16 ? saved_small_ : malloc(sizeof(MPI_Request) * (size_t)(n)); \
    if (saved_ != NULL && (n) > 0) memcpy(saved_, (reqs), sizeof(MPI_Request) * (size_t)(n))
#define PM_RELEASE() \
    if (saved_ != saved_small_) free(saved_)

PM_EXPORT int MPI_Wait(MPI_Request* request, MPI_Status* status) {
    if (!pending() || request == NULL) return PMPI_Wait(request, status);
    MPI_Request h = *request;
    int rc = PMPI_Wait(request, status);
    return after(&h, request, 1, rc);
}

PM_EXPORT int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
    if (!pending() || request == NULL) return PMPI_Test(request, flag, status);
    MPI_Request h = *request;
    int rc = PMPI_Test(request, flag, status);
    return after(&h, request, 1, rc);
}

PM_EXPORT int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[]) {
    if (!pending() || count <= 0 || array_of_requests == NULL)
        return PMPI_Waitall(count, array_of_requests, array_of_statuses);
    PM_SAVE(count, array_of_requests);
    if (saved_ == NULL) return PMPI_Waitall(count, array_of_requests, array_of_statuses);
    int rc = PMPI_Waitall(count, array_of_requests, array_of_statuses);
    rc = after(saved_, array_of_requests, count, rc);
    PM_RELEASE();
    return rc;
}

PM_EXPORT int MPI_Testall(int count, MPI_Request array_of_requests[], int* flag, MPI_Status array_of_statuses[]) {
    if (!pending() || count <= 0 || array_of_requests == NULL)
        return PMPI_Testall(count, array_of_requests, flag, array_of_statuses);
    PM_SAVE(count, array_of_requests);
    if (saved_ == NULL) return PMPI_Testall(count, array_of_requests, flag, array_of_statuses);
    int rc = PMPI_Testall(count, array_of_requests, flag, array_of_statuses);
    rc = after(saved_, array_of_requests, count, rc);
    PM_RELEASE();
    return rc;
}

PM_EXPORT int MPI_Waitany(int count, MPI_Request array_of_requests[], int* index, MPI_Status* status) {
    if (!pending() || count <= 0 || array_of_requests == NULL)
        return PMPI_Waitany(count, array_of_requests, index, status);
    PM_SAVE(count, array_of_requests);
    if (saved_ == NULL) return PMPI_Waitany(count, array_of_requests, index, status);
    int rc = PMPI_Waitany(count, array_of_requests, index, status);
    rc = after(saved_, array_of_requests, count, rc);
    PM_RELEASE();
    return rc;
}

PM_EXPORT int MPI_Testany(int count, MPI_Request array_of_requests[], int* index, int* flag, MPI_Status* status) {
    if (!pending() || count <= 0 || array_of_requests == NULL)
        return PMPI_Testany(count, array_of_requests, index, flag, status);
    PM_SAVE(count, array_of_requests);
    if (saved_ == NULL) return PMPI_Testany(count, array_of_requests, index, flag, status);
    int rc = PMPI_Testany(count, array_of_requests, index, flag, status);
    rc = after(saved_, array_of_requests, count, rc);
    PM_RELEASE();
    return rc;
}

PM_EXPORT int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int* outcount, int array_of_indices[],
                           MPI_Status array_of_statuses[]) {
    if (!pending() || incount <= 0 || array_of_requests == NULL)
        return PMPI_Waitsome(incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
    PM_SAVE(incount, array_of_requests);
    if (saved_ == NULL) return PMPI_Waitsome(incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
    int rc = PMPI_Waitsome(incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
    rc = after(saved_, array_of_requests, incount, rc);
    PM_RELEASE();
    return rc;
}

PM_EXPORT int MPI_Testsome(int incount, MPI_Request array_of_requests[], int* outcount, int array_of_indices[],
                           MPI_Status array_of_statuses[]) {
    if (!pending() || incount <= 0 || array_of_requests == NULL)
        return PMPI_Testsome(incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
    PM_SAVE(incount, array_of_requests);
    if (saved_ == NULL) return PMPI_Testsome(incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
    int rc = PMPI_Testsome(incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
    rc = after(saved_, array_of_requests, incount, rc);
    PM_RELEASE();
    return rc;
}

/* Completion without freeing the request: the result must be in the device buffer once flag is true, and
 * is copied only once (the application may write the buffer before it frees the request). */
PM_EXPORT int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
    int rc = PMPI_Request_get_status(request, flag, status);
    if (!pending() || rc != MPI_SUCCESS || flag == NULL || !*flag) return rc;
    pthread_mutex_lock(&req_lock);
    pm_req_t* q = find_locked(request, NULL);
    if (q != NULL && !q->copied) {
        q->copied = 1;
        if (pm_stage_out(&q->r, 1) != 0) rc = MPI_ERR_INTERN;
    }
    pthread_mutex_unlock(&req_lock);
    return rc;
}

/* Freeing an active nonblocking collective's request is erroneous; if the library allows it anyway, the
 * host copies must outlive the operation, whose end nobody will see: they are left allocated. */
PM_EXPORT int MPI_Request_free(MPI_Request* request) {
    if (!pending() || request == NULL) return PMPI_Request_free(request);
    MPI_Request h = *request;
    int rc = PMPI_Request_free(request);
    if (rc == MPI_SUCCESS) {
        pm_req_t* q = take(h);
        if (q != NULL) pm_log(0, "MPI_Request_free on a nonblocking collective staged through host memory: its "
                              "result never reaches the device buffer");
    }
    return rc;
}

/* ---- the calls ---- */

static const char kIallreduce[] = "MPI_Iallreduce";
static const char kIreduce[] = "MPI_Ireduce";
static const char kIbcast[] = "MPI_Ibcast";
static const char kIallgather[] = "MPI_Iallgather";
static const char kIalltoall[] = "MPI_Ialltoall";
static const char kIrsb[] = "MPI_Ireduce_scatter_block";
static const char kIrs[] = "MPI_Ireduce_scatter";

static int dev2(const void* a, const void* b) { return pm_is_dev(pm_kind(a)) || pm_is_dev(pm_kind(b)); }

/* Stages the receive buffer (copied in: MPI_IN_PLACE input, derived types' holes) and the send buffer
 * (the receive buffer's copy when the two alias); 0 on success. */
static int stage_pair(pm_req_t* q, const void* sbuf, MPI_Datatype sdt, size_t scount, void* rbuf, MPI_Datatype rdt,
                      size_t rcount, const void** hs, void** hr) {
    *hr = pm_stage_in(&q->r, rbuf, rdt, rcount, 1);
    if (*hr == NULL && rbuf != NULL) return -1;
    *hs = sbuf == rbuf ? *hr : pm_stage_in(&q->s, (void*)sbuf, sdt, scount, 1);
    if (*hs == NULL && sbuf != NULL) return -1;
    return 0;
}

static int iallreduce_impl(const void* sbuf, void* rbuf, size_t count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                           MPI_Request* req, int large) {
    say_staged_once(kIallreduce);
    pm_req_t* q = new_req();
    const void* hs = NULL;
    void* hr = NULL;
    if (q == NULL) return pm_raise(comm, kIallreduce, MPI_ERR_NO_MEM, "out of memory");
    if (stage_pair(q, sbuf, dt, count, rbuf, dt, count, &hs, &hr) != 0) return stage_failed(q, comm, kIallreduce);
    int rc;
#if PM_HAVE_LARGE_COUNT
    if (large) rc = PMPI_Iallreduce_c(hs, hr, (MPI_Count)count, dt, op, comm, req);
    else
#endif
        rc = PMPI_Iallreduce(hs, hr, (int)count, dt, op, comm, req);
    (void)large;
    return submit(q, kIallreduce, rc, req);
}

PM_EXPORT int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm, MPI_Request* request) {
    if (!enabled() || count < 0 || !dev2(sendbuf, recvbuf))
        return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
    return iallreduce_impl(sendbuf, recvbuf, (size_t)count, datatype, op, comm, request, 0);
}

static int ireduce_impl(const void* sbuf, void* rbuf, size_t count, MPI_Datatype dt, MPI_Op op, int root,
                        MPI_Comm comm, MPI_Request* req, int large) {
    say_staged_once(kIreduce);
    int rank = -1, size = 0;
    pm_comm_rank_size(comm, &rank, &size);
    pm_req_t* q = new_req();
    const void* hs = NULL;
    void* hr = NULL;
    if (q == NULL) return pm_raise(comm, kIreduce, MPI_ERR_NO_MEM, "out of memory");
    if (rank == root) {
        if (stage_pair(q, sbuf, dt, count, rbuf, dt, count, &hs, &hr) != 0) return stage_failed(q, comm, kIreduce);
    } else {
        hr = pm_is_dev(pm_kind(rbuf)) ? NULL : rbuf; /* not significant away from the root */
        hs = pm_stage_in(&q->s, (void*)sbuf, dt, count, 1);
        if (hs == NULL && sbuf != NULL) return stage_failed(q, comm, kIreduce);
    }
    int rc;
#if PM_HAVE_LARGE_COUNT
    if (large) rc = PMPI_Ireduce_c(hs, hr, (MPI_Count)count, dt, op, root, comm, req);
    else
#endif
        rc = PMPI_Ireduce(hs, hr, (int)count, dt, op, root, comm, req);
    (void)large;
    return submit(q, kIreduce, rc, req);
}

PM_EXPORT int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                          MPI_Comm comm, MPI_Request* request) {
    if (!enabled() || count < 0 || !dev2(sendbuf, recvbuf))
        return PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, request);
    return ireduce_impl(sendbuf, recvbuf, (size_t)count, datatype, op, root, comm, request, 0);
}

static int ibcast_impl(void* buf, size_t count, MPI_Datatype dt, int root, MPI_Comm comm, MPI_Request* req,
                       int large) {
    say_staged_once(kIbcast);
    pm_req_t* q = new_req();
    if (q == NULL) return pm_raise(comm, kIbcast, MPI_ERR_NO_MEM, "out of memory");
    void* hb = pm_stage_in(&q->r, buf, dt, count, 1);
    if (hb == NULL && buf != NULL) return stage_failed(q, comm, kIbcast);
    int rank = -1, size = 0;
    pm_comm_rank_size(comm, &rank, &size);
    if (rank == root) q->copied = 1; /* the root's buffer is only read */
    int rc;
#if PM_HAVE_LARGE_COUNT
    if (large) rc = PMPI_Ibcast_c(hb, (MPI_Count)count, dt, root, comm, req);
    else
#endif
        rc = PMPI_Ibcast(hb, (int)count, dt, root, comm, req);
    (void)large;
    return submit(q, kIbcast, rc, req);
}

PM_EXPORT int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                         MPI_Request* request) {
    if (!enabled() || count < 0 || !pm_is_dev(pm_kind(buffer)))
        return PMPI_Ibcast(buffer, count, datatype, root, comm, request);
    return ibcast_impl(buffer, (size_t)count, datatype, root, comm, request, 0);
}

static int iallgather_impl(const void* sbuf, size_t scount, MPI_Datatype sdt, void* rbuf, size_t rcount,
                           MPI_Datatype rdt, MPI_Comm comm, MPI_Request* req, int large) {
    say_staged_once(kIallgather);
    int rank = 0, size = 0;
    pm_comm_rank_size(comm, &rank, &size);
    pm_req_t* q = new_req();
    const void* hs = NULL;
    void* hr = NULL;
    if (q == NULL) return pm_raise(comm, kIallgather, MPI_ERR_NO_MEM, "out of memory");
    if (stage_pair(q, sbuf, sdt, scount, rbuf, rdt, rcount * (size_t)(size > 0 ? size : 0), &hs, &hr) != 0)
        return stage_failed(q, comm, kIallgather);
    int rc;
#if PM_HAVE_LARGE_COUNT
    if (large) rc = PMPI_Iallgather_c(hs, (MPI_Count)scount, sdt, hr, (MPI_Count)rcount, rdt, comm, req);
    else
#endif
        rc = PMPI_Iallgather(hs, (int)scount, sdt, hr, (int)rcount, rdt, comm, req);
    (void)large;
    return submit(q, kIallgather, rc, req);
}

PM_EXPORT int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                             MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
    if (!enabled() || sendcount < 0 || recvcount < 0 || !dev2(sendbuf, recvbuf))
        return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
    return iallgather_impl(sendbuf, (size_t)sendcount, sendtype, recvbuf, (size_t)recvcount, recvtype, comm, request, 0);
}

static int ialltoall_impl(const void* sbuf, size_t scount, MPI_Datatype sdt, void* rbuf, size_t rcount,
                          MPI_Datatype rdt, MPI_Comm comm, MPI_Request* req, int large) {
    say_staged_once(kIalltoall);
    int rank = 0, size = 0;
    pm_comm_rank_size(comm, &rank, &size);
    size_t n = (size_t)(size > 0 ? size : 0);
    pm_req_t* q = new_req();
    const void* hs = NULL;
    void* hr = NULL;
    if (q == NULL) return pm_raise(comm, kIalltoall, MPI_ERR_NO_MEM, "out of memory");
    if (stage_pair(q, sbuf, sdt, scount * n, rbuf, rdt, rcount * n, &hs, &hr) != 0)
        return stage_failed(q, comm, kIalltoall);
    int rc;
#if PM_HAVE_LARGE_COUNT
    if (large) rc = PMPI_Ialltoall_c(hs, (MPI_Count)scount, sdt, hr, (MPI_Count)rcount, rdt, comm, req);
    else
#endif
        rc = PMPI_Ialltoall(hs, (int)scount, sdt, hr, (int)rcount, rdt, comm, req);
    (void)large;
    return submit(q, kIalltoall, rc, req);
}

PM_EXPORT int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                            MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
    if (!enabled() || sendcount < 0 || recvcount < 0 || !dev2(sendbuf, recvbuf))
        return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
    return ialltoall_impl(sendbuf, (size_t)sendcount, sendtype, recvbuf, (size_t)recvcount, recvtype, comm, request, 0);
}

static int irsb_impl(const void* sbuf, void* rbuf, size_t rcount, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                     MPI_Request* req, int large) {
    say_staged_once(kIrsb);
    int rank = 0, size = 0;
    pm_comm_rank_size(comm, &rank, &size);
    size_t total = rcount * (size_t)(size > 0 ? size : 0);
    pm_req_t* q = new_req();
    const void* hs = NULL;
    void* hr = NULL;
    if (q == NULL) return pm_raise(comm, kIrsb, MPI_ERR_NO_MEM, "out of memory");
    if (stage_pair(q, sbuf, dt, total, rbuf, dt, sbuf == MPI_IN_PLACE ? total : rcount, &hs, &hr) != 0)
        return stage_failed(q, comm, kIrsb);
    int rc;
#if PM_HAVE_LARGE_COUNT
    if (large) rc = PMPI_Ireduce_scatter_block_c(hs, hr, (MPI_Count)rcount, dt, op, comm, req);
    else
#endif
        rc = PMPI_Ireduce_scatter_block(hs, hr, (int)rcount, dt, op, comm, req);
    (void)large;
    return submit(q, kIrsb, rc, req);
}

PM_EXPORT int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype,
                                        MPI_Op op, MPI_Comm comm, MPI_Request* request) {
    if (!enabled() || recvcount < 0 || !dev2(sendbuf, recvbuf))
        return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request);
    return irsb_impl(sendbuf, recvbuf, (size_t)recvcount, datatype, op, comm, request, 0);
}

/* counts: int[] (large 0) or MPI_Count[] (large 1) */
static int irs_impl(const void* sbuf, void* rbuf, const void* counts, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                    MPI_Request* req, int large) {
    say_staged_once(kIrs);
    int rank = 0, size = 0;
    pm_comm_rank_size(comm, &rank, &size);
    size_t total = 0, mine = 0;
    for (int i = 0; counts != NULL && i < size; ++i) {
#if PM_HAVE_LARGE_COUNT
        size_t c = large ? (size_t)((const MPI_Count*)counts)[i] : (size_t)((const int*)counts)[i];
#else
        size_t c = (size_t)((const int*)counts)[i];
#endif
        total += c;
        if (i == rank) mine = c;
    }
    pm_req_t* q = new_req();
    const void* hs = NULL;
    void* hr = NULL;
    if (q == NULL) return pm_raise(comm, kIrs, MPI_ERR_NO_MEM, "out of memory");
    if (stage_pair(q, sbuf, dt, total, rbuf, dt, sbuf == MPI_IN_PLACE ? total : mine, &hs, &hr) != 0)
        return stage_failed(q, comm, kIrs);
    int rc;
#if PM_HAVE_LARGE_COUNT
    if (large) rc = PMPI_Ireduce_scatter_c(hs, hr, (const MPI_Count*)counts, dt, op, comm, req);
    else
#endif
        rc = PMPI_Ireduce_scatter(hs, hr, (const int*)counts, dt, op, comm, req);
    (void)large;
    return submit(q, kIrs, rc, req);
}

static int any_negative(const int* counts, MPI_Comm comm) {
    int rank = 0, size = 0;
    if (counts == NULL || pm_comm_rank_size(comm, &rank, &size) != 0) return 1;
    for (int i = 0; i < size; ++i)
        if (counts[i] < 0) return 1;
    return 0;
}

PM_EXPORT int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype,
                                  MPI_Op op, MPI_Comm comm, MPI_Request* request) {
    if (!enabled() || !dev2(sendbuf, recvbuf) || any_negative(recvcounts, comm))
        return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request);
    return irs_impl(sendbuf, recvbuf, recvcounts, datatype, op, comm, request, 0);
}

#if PM_HAVE_LARGE_COUNT
PM_EXPORT int MPI_Iallreduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
                               MPI_Comm comm, MPI_Request* request) {
    if (!enabled() || count < 0 || !dev2(sendbuf, recvbuf))
        return PMPI_Iallreduce_c(sendbuf, recvbuf, count, datatype, op, comm, request);
    return iallreduce_impl(sendbuf, recvbuf, (size_t)count, datatype, op, comm, request, 1);
}
PM_EXPORT int MPI_Ireduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
                            int root, MPI_Comm comm, MPI_Request* request) {
    if (!enabled() || count < 0 || !dev2(sendbuf, recvbuf))
        return PMPI_Ireduce_c(sendbuf, recvbuf, count, datatype, op, root, comm, request);
    return ireduce_impl(sendbuf, recvbuf, (size_t)count, datatype, op, root, comm, request, 1);
}
PM_EXPORT int MPI_Ibcast_c(void* buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm,
                           MPI_Request* request) {
    if (!enabled() || count < 0 || !pm_is_dev(pm_kind(buffer)))
        return PMPI_Ibcast_c(buffer, count, datatype, root, comm, request);
    return ibcast_impl(buffer, (size_t)count, datatype, root, comm, request, 1);
}
PM_EXPORT int MPI_Iallgather_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                               MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
    if (!enabled() || sendcount < 0 || recvcount < 0 || !dev2(sendbuf, recvbuf))
        return PMPI_Iallgather_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
    return iallgather_impl(sendbuf, (size_t)sendcount, sendtype, recvbuf, (size_t)recvcount, recvtype, comm, request, 1);
}
PM_EXPORT int MPI_Ialltoall_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                              MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
    if (!enabled() || sendcount < 0 || recvcount < 0 || !dev2(sendbuf, recvbuf))
        return PMPI_Ialltoall_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
    return ialltoall_impl(sendbuf, (size_t)sendcount, sendtype, recvbuf, (size_t)recvcount, recvtype, comm, request, 1);
}
PM_EXPORT int MPI_Ireduce_scatter_block_c(const void* sendbuf, void* recvbuf, MPI_Count recvcount,
                                          MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
    if (!enabled() || recvcount < 0 || !dev2(sendbuf, recvbuf))
        return PMPI_Ireduce_scatter_block_c(sendbuf, recvbuf, recvcount, datatype, op, comm, request);
    return irsb_impl(sendbuf, recvbuf, (size_t)recvcount, datatype, op, comm, request, 1);
}
PM_EXPORT int MPI_Ireduce_scatter_c(const void* sendbuf, void* recvbuf, const MPI_Count recvcounts[],
                                    MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
    int negative = 1, rank = 0, size = 0;
    if (recvcounts != NULL && pm_comm_rank_size(comm, &rank, &size) == 0) {
        negative = 0;
        for (int i = 0; i < size; ++i) negative = negative || recvcounts[i] < 0;
    }
    if (!enabled() || !dev2(sendbuf, recvbuf) || negative)
        return PMPI_Ireduce_scatter_c(sendbuf, recvbuf, recvcounts, datatype, op, comm, request);
    return irs_impl(sendbuf, recvbuf, recvcounts, datatype, op, comm, request, 1);
}
#endif
