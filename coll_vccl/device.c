/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * device.c - device-pointer detection and copies through the CUDA driver API, loaded at run time with
 * dlopen("libcuda.so.1") so that the component links no CUDA library and loads on machines without GPUs.
 */
#include "coll_vccl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

/* The few driver API definitions used here (values from cuda.h). */
typedef int CUresult;
typedef uintptr_t CUdeviceptr;
typedef void* CUcontext;
#define VCCL_CU_POINTER_ATTRIBUTE_CONTEXT 1
#define VCCL_CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define VCCL_CU_MEMORYTYPE_DEVICE 2
#define VCCL_CU_MEMORYTYPE_UNIFIED 4

static struct {
    pthread_once_t once;
    void* lib;
    int ok;
    CUresult (*cuInit)(unsigned int);
    CUresult (*cuPointerGetAttribute)(void*, int, CUdeviceptr);
    CUresult (*cuMemcpy)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*cuCtxGetCurrent)(CUcontext*);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuStreamSynchronize)(void*);
} cu = {.once = PTHREAD_ONCE_INIT};

static void load_cuda(void) {
    cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (cu.lib == NULL) {
        mca_coll_vccl_log(2, "libcuda.so.1 not loadable (%s): every buffer is host memory", dlerror());
        return;
    }
    *(void**)&cu.cuInit = dlsym(cu.lib, "cuInit");
    *(void**)&cu.cuPointerGetAttribute = dlsym(cu.lib, "cuPointerGetAttribute");
    *(void**)&cu.cuMemcpy = dlsym(cu.lib, "cuMemcpy");
    *(void**)&cu.cuCtxGetCurrent = dlsym(cu.lib, "cuCtxGetCurrent");
    *(void**)&cu.cuCtxSetCurrent = dlsym(cu.lib, "cuCtxSetCurrent");
    *(void**)&cu.cuStreamSynchronize = dlsym(cu.lib, "cuStreamSynchronize");
    if (cu.cuInit == NULL || cu.cuPointerGetAttribute == NULL || cu.cuMemcpy == NULL ||
        cu.cuCtxGetCurrent == NULL || cu.cuCtxSetCurrent == NULL || cu.cuStreamSynchronize == NULL ||
        cu.cuInit(0) != 0) {
        mca_coll_vccl_log(2, "CUDA driver not usable: every buffer is host memory");
        return;
    }
    cu.ok = 1;
}

int mca_coll_vccl_is_device(const void* ptr) {
    if (ptr == NULL || ptr == MPI_IN_PLACE) return 0;
    pthread_once(&cu.once, load_cuda);
    if (!cu.ok) return 0;
    unsigned int type = 0;
    if (cu.cuPointerGetAttribute(&type, VCCL_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)ptr) != 0) return 0;
    return type == VCCL_CU_MEMORYTYPE_DEVICE || type == VCCL_CU_MEMORYTYPE_UNIFIED;
}

/* Makes the context that owns ptr current when the thread has none (cuMemcpy needs one). */
static void ensure_context(const void* ptr) {
    CUcontext cur = NULL;
    if (cu.cuCtxGetCurrent(&cur) == 0 && cur != NULL) return;
    CUcontext ctx = NULL;
    if (cu.cuPointerGetAttribute(&ctx, VCCL_CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)ptr) == 0 && ctx != NULL)
        (void)cu.cuCtxSetCurrent(ctx);
}

int mca_coll_vccl_memcpy(void* dst, const void* src, size_t bytes) {
    if (bytes == 0 || dst == src) return 0;
    int dd = mca_coll_vccl_is_device(dst), sd = mca_coll_vccl_is_device(src);
    if (!dd && !sd) {
        memmove(dst, src, bytes);
        return 0;
    }
    ensure_context(dd ? dst : src);
    /* unified addressing: cuMemcpy infers the direction from the pointers */
    return cu.cuMemcpy((CUdeviceptr)dst, (CUdeviceptr)src, bytes) == 0 ? 0 : -1;
}

void mca_coll_vccl_device_fini(void) {
    /* libcuda stays loaded: vccl and the application may hold contexts of it. */
}

int mca_coll_vccl_sync_device(void) {
    pthread_once(&cu.once, load_cuda);
    if (!cu.ok) return 0;
    CUcontext cur = NULL;
    if (cu.cuCtxGetCurrent(&cur) != 0 || cur == NULL) return 0; /* no context: no device work was issued */
    /* vccl orders device work on the (legacy) NULL stream and returns; MPI collectives are blocking. */
    return cu.cuStreamSynchronize(NULL) == 0 ? 0 : -1;
}
