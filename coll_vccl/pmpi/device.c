/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * device.c - which buffers are device memory, copies between host and device, and waiting for the device.
 *
 * The CUDA driver is used only once the process itself has loaded it: a process that never loaded
 * libcuda.so.1 cannot hold device memory, so host-only programs pay no CUDA initialisation and no pointer
 * query. Whether new objects were loaded is read from the dynamic loader's counter (dl_iterate_phdr's
 * dlpi_adds, one callback), so the check costs next to nothing until libcuda appears.
 *
 * Device ranges are cached by allocation (CU_POINTER_ATTRIBUTE_RANGE_START_ADDR/RANGE_SIZE, which
 * cudaPointerGetAttributes does not give). The break heap and the caller's stack are host memory without a
 * query (surely_host). Other host answers are not cached: a host address could later be device memory, and
 * a device pointer taken for host memory would crash an MPI library that cannot read it; a stale device
 * entry is harmless, as vccl and cuMemcpy read host memory too.
 */
#define _GNU_SOURCE
#include "pmpi.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

/* The few driver API definitions used here (values from cuda.h). */
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void* CUcontext;
enum {
    PM_CU_POINTER_ATTRIBUTE_CONTEXT = 1,
    PM_CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
    PM_CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
    PM_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
    PM_CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
    PM_CU_MEMORYTYPE_DEVICE = 2,
    PM_CU_MEMORYTYPE_UNIFIED = 4
};

static struct {
    pthread_mutex_t lock;
    int state; /* 0: libcuda not loaded (yet), 1: usable, -1: loaded but unusable */
    unsigned long long adds_seen;
    CUresult (*cuInit)(unsigned int);
    CUresult (*cuPointerGetAttributes)(unsigned int, int*, void**, CUdeviceptr);
    CUresult (*cuPointerGetAttribute)(void*, int, CUdeviceptr);
    CUresult (*cuMemcpy)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*cuCtxGetCurrent)(CUcontext*);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuStreamSynchronize)(void*);
} cu = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int adds_cb(struct dl_phdr_info* info, size_t size, void* data) {
    (void)size;
    *(unsigned long long*)data = info->dlpi_adds;
    return 1; /* the counter is the same in every entry: one is enough */
}

static void load_cuda_locked(void) {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (lib == NULL) return;
    *(void**)&cu.cuInit = dlsym(lib, "cuInit");
    *(void**)&cu.cuPointerGetAttributes = dlsym(lib, "cuPointerGetAttributes");
    *(void**)&cu.cuPointerGetAttribute = dlsym(lib, "cuPointerGetAttribute");
    *(void**)&cu.cuMemcpy = dlsym(lib, "cuMemcpy");
    *(void**)&cu.cuCtxGetCurrent = dlsym(lib, "cuCtxGetCurrent");
    *(void**)&cu.cuCtxSetCurrent = dlsym(lib, "cuCtxSetCurrent");
    *(void**)&cu.cuStreamSynchronize = dlsym(lib, "cuStreamSynchronize");
    int ok = cu.cuInit != NULL && cu.cuPointerGetAttributes != NULL && cu.cuPointerGetAttribute != NULL &&
             cu.cuMemcpy != NULL && cu.cuCtxGetCurrent != NULL && cu.cuCtxSetCurrent != NULL &&
             cu.cuStreamSynchronize != NULL && cu.cuInit(0) == 0;
    __atomic_store_n(&cu.state, ok ? 1 : -1, __ATOMIC_RELEASE);
    pm_log(1, ok ? "the CUDA driver is loaded: device buffers are recognised from now on"
                 : "libcuda.so.1 is loaded but not usable: every buffer is taken for host memory");
}

/* 1 when the driver can be queried. */
static int cuda_usable(void) {
    int st = __atomic_load_n(&cu.state, __ATOMIC_ACQUIRE);
    if (st != 0) return st > 0;
    unsigned long long adds = 0;
    dl_iterate_phdr(adds_cb, &adds);
    if (adds == __atomic_load_n(&cu.adds_seen, __ATOMIC_RELAXED)) return 0;
    pthread_mutex_lock(&cu.lock);
    if (cu.state == 0 && adds != cu.adds_seen) {
        cu.adds_seen = adds;
        load_cuda_locked();
    }
    st = cu.state;
    pthread_mutex_unlock(&cu.lock);
    return st > 0;
}

/* ---- device ranges seen (by allocation) ---- */
#define PM_RANGE_SLOTS 32
static struct {
    pthread_mutex_t lock;
    uintptr_t start[PM_RANGE_SLOTS], end[PM_RANGE_SLOTS];
    unsigned next;
} ranges = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int range_hit(uintptr_t p) {
    int hit = 0;
    pthread_mutex_lock(&ranges.lock);
    for (unsigned i = 0; i < PM_RANGE_SLOTS && !hit; ++i) hit = p >= ranges.start[i] && p < ranges.end[i];
    pthread_mutex_unlock(&ranges.lock);
    return hit;
}

static void range_add(uintptr_t start, size_t size) {
    if (size == 0) return;
    pthread_mutex_lock(&ranges.lock);
    unsigned i = ranges.next++ % PM_RANGE_SLOTS;
    ranges.start[i] = start;
    ranges.end[i] = start + size;
    pthread_mutex_unlock(&ranges.lock);
}

/* ---- memory the driver can never map device memory into ---- */
/* The program break heap (glibc's main arena) above where it ended when this library was loaded: the break
 * only grows into address space no mapping holds, so nothing else lives there, CUDA's memory included. The
 * calling thread's own stack: a buffer on it lives no longer than the thread. Buffers in either are host
 * memory without a driver query, which covers most small MPI calls (scalars on the stack, small malloc'd
 * buffers); anything else (mmap'd, other threads' arenas, pinned memory) still gets the query. */
static uintptr_t heap_floor;
__attribute__((constructor)) static void note_heap_floor(void) { heap_floor = (uintptr_t)sbrk(0); }

static int surely_host(uintptr_t p) {
    uintptr_t brk_now = (uintptr_t)sbrk(0);
    if (heap_floor != 0 && heap_floor != (uintptr_t)-1 && p >= heap_floor && p < brk_now) return 1;
    static __thread uintptr_t stack_lo, stack_hi;
    if (stack_hi == 0) {
        pthread_attr_t attr;
        void* addr = NULL;
        size_t size = 0;
        stack_hi = 1; /* no range known: never matches */
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            if (pthread_attr_getstack(&attr, &addr, &size) == 0 && size != 0) {
                stack_lo = (uintptr_t)addr;
                stack_hi = (uintptr_t)addr + size;
            }
            pthread_attr_destroy(&attr);
        }
    }
    return p >= stack_lo && p < stack_hi;
}

static int is_device_memory(const void* ptr) {
    if (!cuda_usable()) return 0;
    uintptr_t p = (uintptr_t)ptr;
    if (surely_host(p)) return 0;
    if (range_hit(p)) return 1;
    unsigned int type = 0, managed = 0;
    CUdeviceptr start = 0;
    size_t size = 0;
    int attrs[4] = {PM_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, PM_CU_POINTER_ATTRIBUTE_IS_MANAGED,
                    PM_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, PM_CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    void* data[4] = {&type, &managed, &start, &size};
    /* Unlike the singular form, an unknown (host) pointer is not an error here: its attributes read 0. */
    if (cu.cuPointerGetAttributes(4, attrs, data, (CUdeviceptr)p) != 0) return 0;
    int dev = type == PM_CU_MEMORYTYPE_DEVICE || type == PM_CU_MEMORYTYPE_UNIFIED || managed != 0;
    if (dev) range_add((uintptr_t)start, size);
    return dev;
}

enum pm_kind pm_kind(const void* ptr) {
    if (ptr == NULL || ptr == MPI_IN_PLACE) return PM_HOST;
    if (is_device_memory(ptr)) return PM_DEVICE;
    return pm_settings()->host == PM_HOST_AS_DEVICE ? PM_HOST_AS_DEV : PM_HOST;
}

/* The thread needs a current context for copies and for vccl's stream work: the buffer's own when none. */
static void ensure_context(const void* ptr) {
    CUcontext cur = NULL;
    if (cu.cuCtxGetCurrent(&cur) == 0 && cur != NULL) return;
    CUcontext ctx = NULL;
    if (cu.cuPointerGetAttribute(&ctx, PM_CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)(uintptr_t)ptr) == 0 &&
        ctx != NULL)
        (void)cu.cuCtxSetCurrent(ctx);
}

int pm_copy(void* dst, const void* src, size_t bytes) {
    if (bytes == 0 || dst == src) return 0;
    int dd = is_device_memory(dst), sd = is_device_memory(src);
    if (!dd && !sd) {
        memmove(dst, src, bytes);
        return 0;
    }
    ensure_context(dd ? dst : src);
    /* Unified addressing: cuMemcpy takes the direction from the pointers. Into device memory it may return
     * before the data landed (device to device; from pageable host memory once the data is staged), and
     * the MPI call that follows promises the result is in place: wait for the NULL stream it used. */
    if (cu.cuMemcpy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes) != 0) return -1;
    if (dd && cu.cuStreamSynchronize(NULL) != 0) return -1;
    return 0;
}

int pm_device_prepare(const void* ptr) {
    if (is_device_memory(ptr)) ensure_context(ptr);
    return 0;
}

int pm_device_sync(void) {
    if (!cuda_usable()) return 0;
    CUcontext cur = NULL;
    if (cu.cuCtxGetCurrent(&cur) != 0 || cur == NULL) return 0; /* no context: no device work was issued */
    /* vccl orders device work on the legacy NULL stream it was given and may return before it ran; an MPI
     * call returns with the result in place. */
    return cu.cuStreamSynchronize(NULL) == 0 ? 0 : -1;
}
