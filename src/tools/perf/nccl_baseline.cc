/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vccl-perf: --baseline nccl runs the same collective through the system's NCCL on the same device buffers
 * and stream. libnccl.so.2 is loaded at run time (--nccl-lib PATH overrides the name), so vccl-perf needs
 * no NCCL to build. vccl's own NCCL shim (same SONAME) is refused: found first in the search path, it would
 * make the baseline vccl itself, with figures identical to vccl's. NCCL's enums have the values vccl mirrors, so types and ops pass through unchanged.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "tools/perf/perf.h"

namespace vperf {

namespace {

struct NcclUniqueId {
    char internal[128];
};
using ncclComm_t = void*;
using Result = int; // ncclResult_t: 0 is success

struct NcclApi {
    void* lib = nullptr;
    Result (*GetUniqueId)(NcclUniqueId*) = nullptr;
    Result (*CommInitRank)(ncclComm_t*, int, NcclUniqueId, int) = nullptr;
    Result (*CommDestroy)(ncclComm_t) = nullptr;
    const char* (*GetErrorString)(Result) = nullptr;
    Result (*GetVersion)(int*) = nullptr;
    Result (*AllReduce)(const void*, void*, size_t, int, int, ncclComm_t, void*) = nullptr;
    Result (*Broadcast)(const void*, void*, size_t, int, int, ncclComm_t, void*) = nullptr;
    Result (*Reduce)(const void*, void*, size_t, int, int, int, ncclComm_t, void*) = nullptr;
    Result (*AllGather)(const void*, void*, size_t, int, ncclComm_t, void*) = nullptr;
    Result (*ReduceScatter)(const void*, void*, size_t, int, int, ncclComm_t, void*) = nullptr;
    Result (*AlltoAll)(const void*, void*, size_t, int, ncclComm_t, void*) = nullptr; // newer NCCL only
    Result (*Send)(const void*, size_t, int, int, ncclComm_t, void*) = nullptr;
    Result (*Recv)(void*, size_t, int, int, ncclComm_t, void*) = nullptr;
    Result (*GroupStart)() = nullptr;
    Result (*GroupEnd)() = nullptr;
    Result (*RedOpCreatePreMulSum)(int*, void*, int, int, ncclComm_t) = nullptr; // NCCL 2.11 on
    ncclComm_t comm = nullptr;
    int premul_op[vcclNumTypes] = {}; // -o premulsum: NCCL's op of scalar 1 per datatype (0: not made yet)
    int version = 0;
    std::string path; // the file loaded, as the loader resolved it
};

NcclApi g_nccl;

/* Whether the library file at `path` is vccl's NCCL shim: it carries a marker string (src/nccl_compat/error.cc) and
 * exports nothing beyond NCCL's API, so the file is searched for the marker. */
bool is_vccl_shim(const std::string& path) {
    if (path.empty()) return false;
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st;
    bool found = false;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        void* map = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
        if (map != MAP_FAILED) {
            static const char kMarker[] = "vccl-nccl-shim: ";
            found = memmem(map, size_t(st.st_size), kMarker, sizeof(kMarker) - 1) != nullptr;
            munmap(map, size_t(st.st_size));
        }
    }
    close(fd);
    return found;
}

template <typename F>
bool resolve(F* fn, const char* name, bool required, std::string* error) {
    *fn = reinterpret_cast<F>(dlsym(g_nccl.lib, name));
    if (*fn == nullptr && required) {
        *error = std::string("libnccl has no symbol ") + name;
        return false;
    }
    return true;
}

Result grouped_sendrecv(const Shape& shape, const CallBuffers& cb, int rank, int nranks, vcclDataType_t t,
                        void* stream, bool alltoall) {
    size_t block = shape.count * type_size(t);
    Result r = g_nccl.GroupStart();
    if (alltoall) {
        for (int p = 0; p < nranks && r == 0; ++p) {
            r = g_nccl.Send(static_cast<const char*>(cb.send) + p * block, shape.count, t, p, g_nccl.comm, stream);
            if (r == 0) r = g_nccl.Recv(static_cast<char*>(cb.recv) + p * block, shape.count, t, p, g_nccl.comm, stream);
        }
    } else {
        int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
        r = g_nccl.Send(cb.send, shape.count, t, next, g_nccl.comm, stream);
        if (r == 0) r = g_nccl.Recv(cb.recv, shape.count, t, prev, g_nccl.comm, stream);
    }
    Result e = g_nccl.GroupEnd();
    return r != 0 ? r : e;
}

} // namespace

NcclLoad nccl_baseline_load(const std::string& lib_path, std::string* error) {
    const char* name = lib_path.empty() ? "libnccl.so.2" : lib_path.c_str();
    g_nccl.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (g_nccl.lib == nullptr) {
        *error = std::string("cannot load ") + name + ": " + dlerror();
        return NcclLoad::Failed;
    }
    // The file the loader chose (a name without a slash goes through the search path).
    Dl_info info;
    void* probe = dlsym(g_nccl.lib, "ncclGetVersion");
    if (probe != nullptr && dladdr(probe, &info) != 0 && info.dli_fname != nullptr) {
        char* real = realpath(info.dli_fname, nullptr);
        g_nccl.path = real != nullptr ? real : info.dli_fname;
        free(real);
    }
    // vccl's own NCCL shim has the same SONAME: taken as the baseline it would compare vccl with itself.
    if (is_vccl_shim(g_nccl.path)) {
        *error = std::string(name) + " loaded " + (g_nccl.path.empty() ? std::string("a library") : g_nccl.path) +
                 ", which is vccl's NCCL shim (libvccl-nccl), not NCCL: the baseline would measure vccl against "
                 "itself. Take that directory out of LD_LIBRARY_PATH or name NVIDIA's library with --nccl-lib PATH";
        dlclose(g_nccl.lib);
        g_nccl.lib = nullptr;
        return NcclLoad::IsVccl;
    }
    if (!resolve(&g_nccl.GetUniqueId, "ncclGetUniqueId", true, error) ||
        !resolve(&g_nccl.CommInitRank, "ncclCommInitRank", true, error) ||
        !resolve(&g_nccl.CommDestroy, "ncclCommDestroy", true, error) ||
        !resolve(&g_nccl.GetErrorString, "ncclGetErrorString", true, error) ||
        !resolve(&g_nccl.GetVersion, "ncclGetVersion", true, error) ||
        !resolve(&g_nccl.AllReduce, "ncclAllReduce", true, error) ||
        !resolve(&g_nccl.Broadcast, "ncclBroadcast", true, error) ||
        !resolve(&g_nccl.Reduce, "ncclReduce", true, error) ||
        !resolve(&g_nccl.AllGather, "ncclAllGather", true, error) ||
        !resolve(&g_nccl.ReduceScatter, "ncclReduceScatter", true, error) ||
        !resolve(&g_nccl.AlltoAll, "ncclAlltoAll", false, error) ||
        !resolve(&g_nccl.RedOpCreatePreMulSum, "ncclRedOpCreatePreMulSum", false, error) ||
        !resolve(&g_nccl.Send, "ncclSend", true, error) || !resolve(&g_nccl.Recv, "ncclRecv", true, error) ||
        !resolve(&g_nccl.GroupStart, "ncclGroupStart", true, error) ||
        !resolve(&g_nccl.GroupEnd, "ncclGroupEnd", true, error)) {
        return NcclLoad::Failed;
    }
    g_nccl.GetVersion(&g_nccl.version);
    return NcclLoad::Ok;
}

bool nccl_baseline_init(int rank, int nranks, std::string* error) {
    NcclUniqueId id;
    memset(&id, 0, sizeof(id));
    if (rank == 0 && g_nccl.GetUniqueId(&id) != 0) {
        *error = "ncclGetUniqueId failed";
        return false;
    }
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    Result r = g_nccl.CommInitRank(&g_nccl.comm, nranks, id, rank);
    if (r != 0) {
        *error = std::string("ncclCommInitRank failed: ") + g_nccl.GetErrorString(r);
        return false;
    }
    return true;
}

int nccl_baseline_version() { return g_nccl.version; }

const std::string& nccl_baseline_path() { return g_nccl.path; }

void nccl_baseline_finalize() {
    if (g_nccl.comm != nullptr) g_nccl.CommDestroy(g_nccl.comm); // its ops go with it
    g_nccl.comm = nullptr;
    for (int& op : g_nccl.premul_op) op = 0;
}

const char* nccl_baseline_unsupported(const Options& o) {
    if (o.memory != Memory::Cuda) return "NCCL needs device buffers (-m cuda)";
    return nullptr;
}

int run_nccl(const Options& o, const Shape& shape, const CallBuffers& cb, int rank, int nranks, void* stream,
             std::string* error) {
    int t = int(o.dtype), op = int(o.op);
    Result r = 0;
    if (o.premul && (o.coll == Coll::AllReduce || o.coll == Coll::Reduce || o.coll == Coll::ReduceScatter)) {
        // ncclScalarHostImmediate (1): read at creation. Made once per datatype on the one baseline communicator.
        if (g_nccl.RedOpCreatePreMulSum == nullptr) {
            *error = "this NCCL has no ncclRedOpCreatePreMulSum";
            return 1;
        }
        if (g_nccl.premul_op[t] == 0) {
            uint64_t one = one_element_bits(o.dtype);
            r = g_nccl.RedOpCreatePreMulSum(&g_nccl.premul_op[t], &one, t, 1, g_nccl.comm);
            if (r != 0) {
                *error = std::string("ncclRedOpCreatePreMulSum failed: ") + g_nccl.GetErrorString(r);
                return r;
            }
        }
        op = g_nccl.premul_op[t];
    }
    switch (o.coll) {
    case Coll::AllReduce: r = g_nccl.AllReduce(cb.send, cb.recv, shape.count, t, op, g_nccl.comm, stream); break;
    case Coll::Broadcast: r = g_nccl.Broadcast(cb.send, cb.recv, shape.count, t, o.root, g_nccl.comm, stream); break;
    case Coll::Reduce: r = g_nccl.Reduce(cb.send, cb.recv, shape.count, t, op, o.root, g_nccl.comm, stream); break;
    case Coll::AllGather: r = g_nccl.AllGather(cb.send, cb.recv, shape.count, t, g_nccl.comm, stream); break;
    case Coll::ReduceScatter: r = g_nccl.ReduceScatter(cb.send, cb.recv, shape.count, t, op, g_nccl.comm, stream); break;
    case Coll::AlltoAll:
        r = g_nccl.AlltoAll != nullptr ? g_nccl.AlltoAll(cb.send, cb.recv, shape.count, t, g_nccl.comm, stream)
                                       : grouped_sendrecv(shape, cb, rank, nranks, o.dtype, stream, true);
        break;
    case Coll::SendRecv: r = grouped_sendrecv(shape, cb, rank, nranks, o.dtype, stream, false); break;
    }
    if (r != 0) *error = std::string("NCCL call failed: ") + g_nccl.GetErrorString(r);
    return r;
}

} // namespace vperf
