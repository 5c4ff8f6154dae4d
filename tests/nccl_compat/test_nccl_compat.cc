/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_nccl_compat: libvccl-nccl.so.2 as an NCCL program sees it. The library is dlopen'ed by path
 * ($VCCL_NCCL_LIB, default: the build tree's src/nccl_compat/libvccl-nccl.so.2), never linked, so the test
 * exercises exactly the exported ABI. No GPU needed: buffers are host memory with a NULL stream.
 *
 * Run alone it uses 1-rank communicators. Under mpirun with 2 ranks (tests/nccl_compat/np2_nccl_compat.sh)
 * it also runs the MultiRank tests; rank 0 passes the unique id to the other rank through the file named
 * by $VCCL_NCCL_TEST_ID_FILE (no MPI library is linked).
 */
#include <dlfcn.h>
#include <elf.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "vccl.h"

#if defined(__has_include)
#if __has_include(<nccl.h>)
#include <nccl.h>
#define VCCL_TEST_HAVE_NCCL_H 1
#endif
#endif

#define VCCL_NCCL_ABI_TYPES_ONLY 1
namespace ours {
#include "nccl_compat/nccl_abi.h"
}
#if VCCL_TEST_HAVE_NCCL_H
/* Every enum value and ncclConfig_t offset of ours and vccl's against the real nccl.h. */
#include "nccl_compat/abi_asserts.h"
#endif

#ifndef VCCL_NCCL_LIB_DEFAULT
#define VCCL_NCCL_LIB_DEFAULT "src/nccl_compat/libvccl-nccl.so.2"
#endif

namespace {

namespace o = ours;
using Res = o::ncclResult_t;
using Comm = o::ncclComm_t;
using Stream = o::vncclStream_t;

int g_rank = 0, g_size = 1;

std::string lib_path() {
    const char* env = getenv("VCCL_NCCL_LIB");
    return env != nullptr && *env ? env : VCCL_NCCL_LIB_DEFAULT;
}

/* The API as function pointers, resolved from the dlopen'ed library. */
struct Api {
    void* lib = nullptr;
    Res (*GetVersion)(int*);
    const char* (*GetErrorString)(Res);
    const char* (*GetLastError)(Comm);
    Res (*GetUniqueId)(o::ncclUniqueId*);
    Res (*CommInitRank)(Comm*, int, o::ncclUniqueId, int);
    Res (*CommInitRankConfig)(Comm*, int, o::ncclUniqueId, int, o::ncclConfig_t*);
    Res (*CommInitAll)(Comm*, int, const int*);
    Res (*CommSplit)(Comm, int, int, Comm*, o::ncclConfig_t*);
    Res (*CommShrink)(Comm, int*, int, Comm*, o::ncclConfig_t*, int);
    Res (*CommRevoke)(Comm, int);
    Res (*CommGetUniqueId)(Comm, o::ncclUniqueId*);
    Res (*CommGrow)(Comm, int, const o::ncclUniqueId*, int, Comm*, o::ncclConfig_t*);
    Res (*CommFinalize)(Comm);
    Res (*CommDestroy)(Comm);
    Res (*CommAbort)(Comm);
    Res (*CommGetAsyncError)(Comm, Res*);
    Res (*CommCount)(Comm, int*);
    Res (*CommCuDevice)(Comm, int*);
    Res (*CommUserRank)(Comm, int*);
    Res (*MemAlloc)(void**, size_t);
    Res (*MemFree)(void*);
    Res (*CommRegister)(Comm, void*, size_t, void**);
    Res (*CommDeregister)(Comm, void*);
    Res (*CommWindowRegister)(Comm, void*, size_t, o::ncclWindow_t*, int);
    Res (*CommWindowDeregister)(Comm, o::ncclWindow_t);
    Res (*RedOpCreatePreMulSum)(o::ncclRedOp_t*, void*, o::ncclDataType_t, o::ncclScalarResidence_t, Comm);
    Res (*RedOpDestroy)(o::ncclRedOp_t, Comm);
    Res (*AllReduce)(const void*, void*, size_t, o::ncclDataType_t, o::ncclRedOp_t, Comm, Stream);
    Res (*Reduce)(const void*, void*, size_t, o::ncclDataType_t, o::ncclRedOp_t, int, Comm, Stream);
    Res (*Broadcast)(const void*, void*, size_t, o::ncclDataType_t, int, Comm, Stream);
    Res (*Bcast)(void*, size_t, o::ncclDataType_t, int, Comm, Stream);
    Res (*AllGather)(const void*, void*, size_t, o::ncclDataType_t, Comm, Stream);
    Res (*ReduceScatter)(const void*, void*, size_t, o::ncclDataType_t, o::ncclRedOp_t, Comm, Stream);
    Res (*AlltoAll)(const void*, void*, size_t, o::ncclDataType_t, Comm, Stream);
    Res (*Gather)(const void*, void*, size_t, o::ncclDataType_t, int, Comm, Stream);
    Res (*Scatter)(const void*, void*, size_t, o::ncclDataType_t, int, Comm, Stream);
    Res (*Send)(const void*, size_t, o::ncclDataType_t, int, Comm, Stream);
    Res (*Recv)(void*, size_t, o::ncclDataType_t, int, Comm, Stream);
    Res (*GroupStart)();
    Res (*GroupEnd)();
    Res (*GroupSimulateEnd)(o::ncclSimInfo_t*);
};
Api api;
std::string g_load_error;

template <typename F>
void bind(F* fn, const char* name) {
    *fn = reinterpret_cast<F>(dlsym(api.lib, name));
    if (*fn == nullptr) g_load_error += std::string(" ") + name;
}

bool load() {
    api.lib = dlopen(lib_path().c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api.lib == nullptr) {
        g_load_error = dlerror();
        return false;
    }
    bind(&api.GetVersion, "ncclGetVersion");
    bind(&api.GetErrorString, "ncclGetErrorString");
    bind(&api.GetLastError, "ncclGetLastError");
    bind(&api.GetUniqueId, "ncclGetUniqueId");
    bind(&api.CommInitRank, "ncclCommInitRank");
    bind(&api.CommInitRankConfig, "ncclCommInitRankConfig");
    bind(&api.CommInitAll, "ncclCommInitAll");
    bind(&api.CommSplit, "ncclCommSplit");
    bind(&api.CommShrink, "ncclCommShrink");
    bind(&api.CommRevoke, "ncclCommRevoke");
    bind(&api.CommGetUniqueId, "ncclCommGetUniqueId");
    bind(&api.CommGrow, "ncclCommGrow");
    bind(&api.CommFinalize, "ncclCommFinalize");
    bind(&api.CommDestroy, "ncclCommDestroy");
    bind(&api.CommAbort, "ncclCommAbort");
    bind(&api.CommGetAsyncError, "ncclCommGetAsyncError");
    bind(&api.CommCount, "ncclCommCount");
    bind(&api.CommCuDevice, "ncclCommCuDevice");
    bind(&api.CommUserRank, "ncclCommUserRank");
    bind(&api.MemAlloc, "ncclMemAlloc");
    bind(&api.MemFree, "ncclMemFree");
    bind(&api.CommRegister, "ncclCommRegister");
    bind(&api.CommDeregister, "ncclCommDeregister");
    bind(&api.CommWindowRegister, "ncclCommWindowRegister");
    bind(&api.CommWindowDeregister, "ncclCommWindowDeregister");
    bind(&api.RedOpCreatePreMulSum, "ncclRedOpCreatePreMulSum");
    bind(&api.RedOpDestroy, "ncclRedOpDestroy");
    bind(&api.AllReduce, "ncclAllReduce");
    bind(&api.Reduce, "ncclReduce");
    bind(&api.Broadcast, "ncclBroadcast");
    bind(&api.Bcast, "ncclBcast");
    bind(&api.AllGather, "ncclAllGather");
    bind(&api.ReduceScatter, "ncclReduceScatter");
    bind(&api.AlltoAll, "ncclAlltoAll");
    bind(&api.Gather, "ncclGather");
    bind(&api.Scatter, "ncclScatter");
    bind(&api.Send, "ncclSend");
    bind(&api.Recv, "ncclRecv");
    bind(&api.GroupStart, "ncclGroupStart");
    bind(&api.GroupEnd, "ncclGroupEnd");
    bind(&api.GroupSimulateEnd, "ncclGroupSimulateEnd");
    return g_load_error.empty();
}

/* Reads DT_SONAME from the file's dynamic section. */
std::string read_soname(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::vector<char> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (data.size() < sizeof(Elf64_Ehdr)) return "<short file>";
    auto* eh = reinterpret_cast<const Elf64_Ehdr*>(data.data());
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64) return "<not ELF64>";
    auto* sh = reinterpret_cast<const Elf64_Shdr*>(data.data() + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; ++i) {
        if (sh[i].sh_type != SHT_DYNAMIC) continue;
        const Elf64_Shdr& strtab = sh[sh[i].sh_link];
        auto* dyn = reinterpret_cast<const Elf64_Dyn*>(data.data() + sh[i].sh_offset);
        for (size_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Dyn); ++k) {
            if (dyn[k].d_tag == DT_SONAME) return std::string(data.data() + strtab.sh_offset + dyn[k].d_un.d_val);
        }
    }
    return "<no SONAME>";
}

/* A 1-rank communicator (or, under mpirun with 2 ranks, the world) for one test. */
Comm make_self_comm() {
    o::ncclUniqueId id;
    if (api.GetUniqueId(&id) != o::ncclSuccess) return nullptr;
    Comm c = nullptr;
    if (api.CommInitRank(&c, 1, id, 0) != o::ncclSuccess) return nullptr;
    return c;
}

Comm make_world_comm() {
    const char* file = getenv("VCCL_NCCL_TEST_ID_FILE");
    if (file == nullptr) return nullptr;
    o::ncclUniqueId id;
    static int generation = 0;
    std::string path = std::string(file) + "." + std::to_string(generation++);
    if (g_rank == 0) {
        if (api.GetUniqueId(&id) != o::ncclSuccess) return nullptr;
        std::string tmp = path + ".tmp";
        FILE* f = fopen(tmp.c_str(), "wb");
        if (f == nullptr || fwrite(&id, sizeof id, 1, f) != 1) return nullptr;
        fclose(f);
        if (rename(tmp.c_str(), path.c_str()) != 0) return nullptr;
    } else {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        for (;;) {
            FILE* f = fopen(path.c_str(), "rb");
            if (f != nullptr) {
                size_t n = fread(&id, sizeof id, 1, f);
                fclose(f);
                if (n == 1) break;
            }
            if (std::chrono::steady_clock::now() > deadline) return nullptr;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }
    Comm c = nullptr;
    if (api.CommInitRank(&c, g_size, id, g_rank) != o::ncclSuccess) return nullptr;
    return c;
}

/* What NCCL_CONFIG_INITIALIZER gives. */
void init_config(o::ncclConfig_t* cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->size = sizeof *cfg;
    cfg->magic = VNCCL_CONFIG_MAGIC;
    cfg->version = 22803;
    int* fields[] = {&cfg->blocking, &cfg->cgaClusterSize, &cfg->minCTAs, &cfg->maxCTAs, &cfg->splitShare,
                     &cfg->trafficClass, &cfg->collnetEnable, &cfg->CTAPolicy, &cfg->shrinkShare, &cfg->nvlsCTAs,
                     &cfg->nChannelsPerNetPeer, &cfg->nvlinkCentricSched};
    for (int* f : fields) *f = VNCCL_CONFIG_UNDEF_INT;
}

class Loaded : public ::testing::Test {
  protected:
    void SetUp() override { ASSERT_TRUE(api.lib != nullptr && g_load_error.empty()) << g_load_error; }
};

using Library = Loaded;
using SingleRank = Loaded;
using BadInput = Loaded;
using MultiRank = Loaded;
using Group = Loaded;
using Nonblocking = Loaded;
using Windows = Loaded;

TEST(LibraryFile, SonameIsLibnccl2) { EXPECT_EQ(read_soname(lib_path()), "libnccl.so.2") << lib_path(); }

TEST(LibraryFile, EverySymbolResolves) {
    ASSERT_TRUE(api.lib != nullptr) << "dlopen " << lib_path() << ": " << g_load_error;
    EXPECT_EQ(g_load_error, "") << "missing symbols:" << g_load_error;
    const char* names[] = {"GetVersion", "GetUniqueId", "CommInitRank", "CommInitRankConfig", "CommInitAll",
                           "CommInitRankScalable", "CommSplit", "CommShrink", "CommRevoke", "CommGetUniqueId", "CommGrow", "CommAbort",
                           "CommDestroy", "CommFinalize", "CommGetAsyncError", "GetErrorString", "GetLastError",
                           "AllReduce", "Broadcast", "Bcast", "Reduce", "AllGather", "ReduceScatter", "AlltoAll",
                           "Gather", "Scatter", "Send", "Recv", "GroupStart", "GroupEnd", "GroupSimulateEnd",
                           "MemAlloc", "MemFree", "CommRegister", "CommDeregister", "CommWindowRegister",
                           "CommWindowDeregister", "CommCount", "CommCuDevice", "CommUserRank",
                           "RedOpCreatePreMulSum", "RedOpDestroy", "ResetDebugInit"};
    for (const char* n : names) {
        for (const char* prefix : {"nccl", "pnccl"}) {
            std::string sym = std::string(prefix) + n;
            EXPECT_NE(dlsym(api.lib, sym.c_str()), nullptr) << sym;
        }
    }
    // pncclX is an alias of ncclX.
    EXPECT_EQ(dlsym(api.lib, "pncclAllReduce"), dlsym(api.lib, "ncclAllReduce"));
    // Nothing of vccl itself leaks out.
    EXPECT_EQ(dlsym(api.lib, "vcclAllReduce"), nullptr);
    EXPECT_EQ(dlsym(api.lib, "vcclCommInitRank"), nullptr);
}

/* Loaded by path, the library answers to its SONAME: a later DT_NEEDED or dlopen of libnccl.so.2 binds to it
 * (this is what makes LD_PRELOAD and LD_LIBRARY_PATH work for programs linked against NCCL). */
TEST(LibraryFile, AnswersToLibnccl2) {
    ASSERT_TRUE(api.lib != nullptr);
    void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(h, nullptr) << "dlopen(libnccl.so.2, RTLD_NOLOAD) did not find the loaded library";
    EXPECT_EQ(dlsym(h, "ncclAllReduce"), dlsym(api.lib, "ncclAllReduce"));
    dlclose(h);
}

TEST(Abi, EnumsMatchNcclH) {
#if VCCL_TEST_HAVE_NCCL_H
    // The static_asserts of abi_asserts.h already ran at compile time; record what they checked against.
    RecordProperty("nccl_h_version", NCCL_VERSION_CODE);
    SUCCEED() << "checked against nccl.h " << NCCL_VERSION_CODE;
#else
    GTEST_SKIP() << "no nccl.h on this machine: enum values checked only against nccl_abi.h";
#endif
    static_assert(int(o::ncclFloat8e4m3) == int(vcclFloat8e4m3) && int(o::ncclFloat8e5m2) == int(vcclFloat8e5m2),
                  "FP8 has NCCL's values");
    static_assert(int(o::ncclNumTypes) == int(vcclNumTypes), "types");
    static_assert(int(o::ncclNumOps) == int(vcclNumOps), "ops");
}

TEST_F(Library, VersionAndErrorStrings) {
    int v = 0;
    ASSERT_EQ(api.GetVersion(&v), o::ncclSuccess);
    EXPECT_EQ(v, 22803);
    EXPECT_EQ(api.GetVersion(nullptr), o::ncclInvalidArgument);
    std::set<std::string> seen;
    for (int r = 0; r < int(o::ncclNumResults); ++r) {
        const char* s = api.GetErrorString(o::ncclResult_t(r));
        ASSERT_NE(s, nullptr) << r;
        EXPECT_GT(strlen(s), 0u) << r;
        seen.insert(s);
    }
    EXPECT_EQ(seen.size(), size_t(o::ncclNumResults)) << "every code has its own string";
    EXPECT_STREQ(api.GetErrorString(o::ncclResult_t(99)), "unknown result code");
    EXPECT_NE(api.GetLastError(nullptr), nullptr);
}

TEST_F(SingleRank, CommQueries) {
    Comm c = make_self_comm();
    ASSERT_NE(c, nullptr);
    int n = -1, r = -1, dev = -2;
    EXPECT_EQ(api.CommCount(c, &n), o::ncclSuccess);
    EXPECT_EQ(n, 1);
    EXPECT_EQ(api.CommUserRank(c, &r), o::ncclSuccess);
    EXPECT_EQ(r, 0);
    EXPECT_EQ(api.CommCuDevice(c, &dev), o::ncclSuccess);
    EXPECT_GE(dev, -1); // -1: no CUDA device was current at init (host-only machine)
    Res async = o::ncclInternalError;
    EXPECT_EQ(api.CommGetAsyncError(c, &async), o::ncclSuccess);
    EXPECT_EQ(async, o::ncclSuccess);
    EXPECT_EQ(api.CommFinalize(c), o::ncclSuccess);
    EXPECT_EQ(api.CommDestroy(c), o::ncclSuccess);
    // A destroyed handle is refused, not dereferenced.
    EXPECT_EQ(api.CommCount(c, &n), o::ncclInvalidUsage);
    EXPECT_EQ(api.CommDestroy(c), o::ncclInvalidUsage);
    EXPECT_EQ(api.CommAbort(nullptr), o::ncclSuccess);
}

/* ncclCommRevoke maps to vcclCommRevoke: flags other than NCCL_REVOKE_DEFAULT are refused; once revoked, calls
 * are refused, and a shrink that excludes nobody gives a communicator whose results are right. */
TEST_F(SingleRank, RevokeThenShrink) {
    Comm c = make_self_comm();
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(api.CommRevoke(c, 1), o::ncclInvalidArgument);
    EXPECT_EQ(api.CommRevoke(nullptr, 0), o::ncclInvalidArgument);
    int32_t in[3] = {7, -3, 11}, out[3] = {0, 0, 0};
    EXPECT_EQ(api.AllReduce(in, out, 3, o::ncclInt32, o::ncclSum, c, nullptr), o::ncclSuccess);
    EXPECT_EQ(api.CommRevoke(c, 0), o::ncclSuccess);
    EXPECT_EQ(api.CommRevoke(c, 0), o::ncclSuccess) << "a second revoke is a no-op";
    EXPECT_EQ(api.AllReduce(in, out, 3, o::ncclInt32, o::ncclSum, c, nullptr), o::ncclInvalidUsage);
    Comm split = nullptr;
    EXPECT_EQ(api.CommSplit(c, 0, 0, &split, nullptr), o::ncclInvalidUsage);
    EXPECT_EQ(split, nullptr);
    Comm shrunk = nullptr;
    ASSERT_EQ(api.CommShrink(c, nullptr, 0, &shrunk, nullptr, 0), o::ncclSuccess) << api.GetLastError(nullptr);
    ASSERT_NE(shrunk, nullptr);
    int32_t out2[3] = {0, 0, 0};
    EXPECT_EQ(api.AllReduce(in, out2, 3, o::ncclInt32, o::ncclMax, shrunk, nullptr), o::ncclSuccess);
    EXPECT_EQ(out2[0], 7);
    EXPECT_EQ(out2[1], -3);
    EXPECT_EQ(out2[2], 11);
    EXPECT_EQ(api.CommDestroy(shrunk), o::ncclSuccess);
    EXPECT_EQ(api.CommDestroy(c), o::ncclSuccess);
}

/* ncclCommGrow from one rank to two in one process: the existing rank (the coordinator, with the id from
 * ncclCommGetUniqueId) and a new one on a thread of its own; an AllReduce on the two is checked. */
TEST_F(SingleRank, GrowFromOneRankToTwo) {
    Comm c = make_self_comm();
    ASSERT_NE(c, nullptr);
    o::ncclUniqueId id;
    ASSERT_EQ(api.CommGetUniqueId(c, &id), o::ncclSuccess) << api.GetLastError(nullptr);
    Comm grown[2] = {nullptr, nullptr};
    Res rc[2] = {o::ncclInternalError, o::ncclInternalError};
    std::thread joiner([&] { rc[1] = api.CommGrow(nullptr, 2, &id, 1, &grown[1], nullptr); });
    rc[0] = api.CommGrow(c, 2, &id, -1, &grown[0], nullptr);
    joiner.join();
    ASSERT_EQ(rc[0], o::ncclSuccess);
    ASSERT_EQ(rc[1], o::ncclSuccess);
    int n = 0, r = -1;
    EXPECT_EQ(api.CommCount(grown[1], &n), o::ncclSuccess);
    EXPECT_EQ(api.CommUserRank(grown[1], &r), o::ncclSuccess);
    EXPECT_EQ(n, 2);
    EXPECT_EQ(r, 1);
    std::vector<int64_t> in[2], out[2];
    for (int k = 0; k < 2; ++k) {
        in[k].assign(1001, 0);
        out[k].assign(1001, -1);
        for (size_t i = 0; i < in[k].size(); ++i) in[k][i] = int64_t(i) * (k + 1) - 7;
    }
    std::thread second([&] {
        rc[1] = api.AllReduce(in[1].data(), out[1].data(), 1001, o::ncclInt64, o::ncclSum, grown[1], nullptr);
    });
    rc[0] = api.AllReduce(in[0].data(), out[0].data(), 1001, o::ncclInt64, o::ncclSum, grown[0], nullptr);
    second.join();
    EXPECT_EQ(rc[0], o::ncclSuccess);
    EXPECT_EQ(rc[1], o::ncclSuccess);
    size_t bad = 0;
    for (int k = 0; k < 2; ++k) {
        for (size_t i = 0; i < out[k].size(); ++i) bad += out[k][i] != int64_t(i) * 3 - 14;
    }
    EXPECT_EQ(bad, 0u);
    // The grow id served its one grow; the parent is still usable, then every communicator is freed.
    int32_t x = 5, y = 0;
    EXPECT_EQ(api.AllReduce(&x, &y, 1, o::ncclInt32, o::ncclSum, c, nullptr), o::ncclSuccess);
    EXPECT_EQ(y, 5);
    for (Comm g : grown) EXPECT_EQ(api.CommDestroy(g), o::ncclSuccess);
    EXPECT_EQ(api.CommDestroy(c), o::ncclSuccess);
}

TEST_F(SingleRank, CollectivesOnHostMemory) {
    Comm c = make_self_comm();
    ASSERT_NE(c, nullptr);
    const size_t n = 1000;
    std::vector<float> a(n), b(n, -1.0f);
    for (size_t i = 0; i < n; ++i) a[i] = float(i) * 0.5f;

    ASSERT_EQ(api.AllReduce(a.data(), b.data(), n, o::ncclFloat, o::ncclSum, c, nullptr), o::ncclSuccess);
    EXPECT_EQ(a, b);
    std::vector<float> inplace = a;
    ASSERT_EQ(api.AllReduce(inplace.data(), inplace.data(), n, o::ncclFloat, o::ncclMax, c, nullptr), o::ncclSuccess);
    EXPECT_EQ(inplace, a);
    std::fill(b.begin(), b.end(), -1.0f);
    ASSERT_EQ(api.AllReduce(a.data(), b.data(), n, o::ncclFloat, o::ncclAvg, c, nullptr), o::ncclSuccess);
    EXPECT_EQ(a, b);

    std::fill(b.begin(), b.end(), -1.0f);
    ASSERT_EQ(api.Broadcast(a.data(), b.data(), n, o::ncclFloat, 0, c, nullptr), o::ncclSuccess);
    EXPECT_EQ(a, b);
    ASSERT_EQ(api.Bcast(b.data(), n, o::ncclFloat, 0, c, nullptr), o::ncclSuccess);
    EXPECT_EQ(a, b);

    std::fill(b.begin(), b.end(), -1.0f);
    ASSERT_EQ(api.Reduce(a.data(), b.data(), n, o::ncclFloat, o::ncclSum, 0, c, nullptr), o::ncclSuccess);
    EXPECT_EQ(a, b);

    std::vector<int64_t> ia(n), ib(n, -1);
    for (size_t i = 0; i < n; ++i) ia[i] = int64_t(i) * 3 - 7;
    ASSERT_EQ(api.AllGather(ia.data(), ib.data(), n, o::ncclInt64, c, nullptr), o::ncclSuccess);
    EXPECT_EQ(ia, ib);
    std::fill(ib.begin(), ib.end(), -1);
    ASSERT_EQ(api.ReduceScatter(ia.data(), ib.data(), n, o::ncclInt64, o::ncclSum, c, nullptr), o::ncclSuccess);
    EXPECT_EQ(ia, ib);
    std::fill(ib.begin(), ib.end(), -1);
    ASSERT_EQ(api.AlltoAll(ia.data(), ib.data(), n, o::ncclInt64, c, nullptr), o::ncclSuccess);
    EXPECT_EQ(ia, ib);
    std::fill(ib.begin(), ib.end(), -1);
    ASSERT_EQ(api.Gather(ia.data(), ib.data(), n, o::ncclInt64, 0, c, nullptr), o::ncclSuccess);
    EXPECT_EQ(ia, ib);
    std::fill(ib.begin(), ib.end(), -1);
    ASSERT_EQ(api.Scatter(ia.data(), ib.data(), n, o::ncclInt64, 0, c, nullptr), o::ncclSuccess);
    EXPECT_EQ(ia, ib);

    // Send and receive to self inside a group.
    std::vector<uint8_t> sa(4097), sb(4097, 0);
    for (size_t i = 0; i < sa.size(); ++i) sa[i] = uint8_t(i * 7 + 1);
    ASSERT_EQ(api.GroupStart(), o::ncclSuccess);
    ASSERT_EQ(api.Send(sa.data(), sa.size(), o::ncclUint8, 0, c, nullptr), o::ncclSuccess);
    ASSERT_EQ(api.Recv(sb.data(), sb.size(), o::ncclUint8, 0, c, nullptr), o::ncclSuccess);
    ASSERT_EQ(api.GroupEnd(), o::ncclSuccess);
    EXPECT_EQ(sa, sb);

    // bfloat16 and half travel as 2-byte types.
    std::vector<uint16_t> ha(64, 0x3c00 /* 1.0 in fp16 */), hb(64, 0);
    ASSERT_EQ(api.AllReduce(ha.data(), hb.data(), 64, o::ncclHalf, o::ncclSum, c, nullptr), o::ncclSuccess);
    EXPECT_EQ(ha, hb);

    // FP8 travels as 1-byte types; PreMulSum's scalar is one FP8 element, the product saturates (0x7E is 448 in
    // e4m3, its largest finite value: times 2 it stays 448; 0x38 is 1.0, times 2 is 0x40).
    for (o::ncclDataType_t t8 : {o::ncclFloat8e4m3, o::ncclFloat8e5m2}) {
        const bool e4 = t8 == o::ncclFloat8e4m3;
        const uint8_t one = e4 ? 0x38 : 0x3c, two = e4 ? 0x40 : 0x40, maxv = e4 ? 0x7e : 0x7b;
        std::vector<uint8_t> fa(33, one), fb(33, 0);
        fa[0] = maxv;
        fa[1] = uint8_t(0x80 | maxv);
        ASSERT_EQ(api.AllReduce(fa.data(), fb.data(), fa.size(), t8, o::ncclSum, c, nullptr), o::ncclSuccess);
        EXPECT_EQ(fa, fb);
        o::ncclRedOp_t twice = o::ncclSum;
        uint8_t factor = two;
        ASSERT_EQ(api.RedOpCreatePreMulSum(&twice, &factor, t8, o::ncclScalarHostImmediate, c), o::ncclSuccess);
        ASSERT_EQ(api.AllReduce(fa.data(), fb.data(), fa.size(), t8, twice, c, nullptr), o::ncclSuccess);
        EXPECT_EQ(fb[0], maxv) << "saturates";
        EXPECT_EQ(fb[1], uint8_t(0x80 | maxv)) << "saturates";
        for (size_t i = 2; i < fb.size(); ++i) ASSERT_EQ(fb[i], two) << i;
        EXPECT_EQ(api.RedOpDestroy(twice, c), o::ncclSuccess);
    }

    // PreMulSum (what PyTorch's ReduceOp.PREMUL_SUM calls): the scalar is read at creation.
    o::ncclRedOp_t premul = o::ncclSum;
    float scalar = 0.25f;
    ASSERT_EQ(api.RedOpCreatePreMulSum(&premul, &scalar, o::ncclFloat, o::ncclScalarHostImmediate, c), o::ncclSuccess);
    EXPECT_GE(int(premul), int(o::ncclNumOps));
    scalar = 8.0f;
    std::fill(b.begin(), b.end(), -1.0f);
    ASSERT_EQ(api.AllReduce(a.data(), b.data(), n, o::ncclFloat, premul, c, nullptr), o::ncclSuccess);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(b[i], a[i] * 0.25f) << i;
    EXPECT_EQ(api.AllReduce(ia.data(), ib.data(), n, o::ncclInt64, premul, c, nullptr), o::ncclInvalidArgument)
        << "made for float";
    EXPECT_EQ(api.RedOpDestroy(premul, c), o::ncclSuccess);
    EXPECT_EQ(api.RedOpDestroy(premul, c), o::ncclInvalidArgument) << "destroyed twice";
    EXPECT_EQ(api.RedOpCreatePreMulSum(nullptr, &scalar, o::ncclFloat, o::ncclScalarHostImmediate, c),
              o::ncclInvalidArgument);
    EXPECT_EQ(api.CommDestroy(c), o::ncclSuccess);
}

TEST_F(SingleRank, ConfigAndSplit) {
    o::ncclUniqueId id;
    ASSERT_EQ(api.GetUniqueId(&id), o::ncclSuccess);
    o::ncclConfig_t cfg;
    init_config(&cfg);
    cfg.splitShare = 1;     // a hint: ignored
    cfg.cgaClusterSize = 4; // a hint: ignored
    cfg.commName = "nccl-compat-test";
    Comm c = nullptr;
    ASSERT_EQ(api.CommInitRankConfig(&c, 1, id, 0, &cfg), o::ncclSuccess);
    ASSERT_NE(c, nullptr);

    Comm child = nullptr;
    ASSERT_EQ(api.CommSplit(c, 3, 0, &child, nullptr), o::ncclSuccess);
    ASSERT_NE(child, nullptr);
    int n = 0, dev_parent = -2, dev_child = -3;
    EXPECT_EQ(api.CommCount(child, &n), o::ncclSuccess);
    EXPECT_EQ(n, 1);
    EXPECT_EQ(api.CommCuDevice(c, &dev_parent), o::ncclSuccess);
    EXPECT_EQ(api.CommCuDevice(child, &dev_child), o::ncclSuccess);
    EXPECT_EQ(dev_parent, dev_child);
    Comm none = reinterpret_cast<Comm>(0x1);
    EXPECT_EQ(api.CommSplit(c, VNCCL_SPLIT_NOCOLOR, 0, &none, nullptr), o::ncclSuccess);
    EXPECT_EQ(none, nullptr);

    // Registration is a no-op that hands back a handle.
    std::vector<char> buf(1 << 16);
    void* handle = nullptr;
    ASSERT_EQ(api.CommRegister(c, buf.data(), buf.size(), &handle), o::ncclSuccess);
    EXPECT_NE(handle, nullptr);
    EXPECT_EQ(api.CommDeregister(child, handle), o::ncclInvalidArgument) << "a handle of another communicator";
    EXPECT_EQ(api.CommDeregister(c, handle), o::ncclSuccess);
    EXPECT_EQ(api.CommDeregister(c, handle), o::ncclInvalidArgument) << "twice";
    void* leaked = nullptr; // freed with the communicator
    ASSERT_EQ(api.CommRegister(c, buf.data(), buf.size(), &leaked), o::ncclSuccess);

    // ncclCommShrink goes to vcclCommShrink: excluding nobody gives a working copy.
    Comm shrunk = nullptr;
    ASSERT_EQ(api.CommShrink(c, nullptr, 0, &shrunk, nullptr, 0), o::ncclSuccess) << api.GetLastError(nullptr);
    ASSERT_NE(shrunk, nullptr);
    int shrunk_n = 0, dev_shrunk = -4;
    EXPECT_EQ(api.CommCount(shrunk, &shrunk_n), o::ncclSuccess);
    EXPECT_EQ(shrunk_n, 1);
    EXPECT_EQ(api.CommCuDevice(shrunk, &dev_shrunk), o::ncclSuccess);
    EXPECT_EQ(dev_shrunk, dev_parent);
    Comm bad = nullptr;
    EXPECT_EQ(api.CommShrink(c, nullptr, 0, &bad, nullptr, 0x10), o::ncclInvalidArgument) << "unknown flags";
    EXPECT_EQ(api.CommDestroy(shrunk), o::ncclSuccess);

    EXPECT_EQ(api.CommDestroy(child), o::ncclSuccess);
    EXPECT_EQ(api.CommAbort(c), o::ncclSuccess);
}

TEST_F(BadInput, ArgumentsAndUsage) {
    Comm c = make_self_comm();
    ASSERT_NE(c, nullptr);
    float x[4] = {1, 2, 3, 4}, y[4];
    EXPECT_EQ(api.AllReduce(x, y, 4, o::ncclFloat, o::ncclSum, nullptr, nullptr), o::ncclInvalidArgument);
    EXPECT_EQ(api.AllReduce(x, y, 4, o::ncclDataType_t(99), o::ncclSum, c, nullptr), o::ncclInvalidArgument);
    EXPECT_EQ(api.AllReduce(x, y, 4, o::ncclDataType_t(-1), o::ncclSum, c, nullptr), o::ncclInvalidArgument);
    EXPECT_EQ(api.AllReduce(x, y, 4, o::ncclNumTypes, o::ncclSum, c, nullptr), o::ncclInvalidArgument)
        << "the first value past FP8";
    EXPECT_EQ(api.AllReduce(x, y, 4, o::ncclFloat, o::ncclRedOp_t(-1), c, nullptr), o::ncclInvalidArgument);
    EXPECT_EQ(api.AllReduce(x, y, 4, o::ncclFloat, o::ncclRedOp_t(o::ncclNumOps), c, nullptr), o::ncclInvalidArgument)
        << "a PreMulSum op value the communicator never made";
    EXPECT_EQ(api.AllReduce(nullptr, y, 4, o::ncclFloat, o::ncclSum, c, nullptr), o::ncclInvalidArgument);
    EXPECT_EQ(api.Broadcast(x, y, 4, o::ncclFloat, 1, c, nullptr), o::ncclInvalidArgument) << "root out of range";
    EXPECT_EQ(api.Send(x, 4, o::ncclFloat, 5, c, nullptr), o::ncclInvalidArgument) << "peer out of range";
    EXPECT_EQ(api.Gather(x, y, 4, o::ncclFloat, 2, c, nullptr), o::ncclInvalidArgument);
    EXPECT_STRNE(api.GetLastError(nullptr), "");

    Comm out = nullptr;
    o::ncclUniqueId id;
    memset(&id, 0, sizeof id);
    EXPECT_EQ(api.CommInitRank(nullptr, 1, id, 0), o::ncclInvalidArgument);
    EXPECT_EQ(api.CommInitRank(&out, 0, id, 0), o::ncclInvalidArgument);
    EXPECT_EQ(api.CommInitRank(&out, 2, id, 2), o::ncclInvalidArgument);
    EXPECT_EQ(api.GetUniqueId(nullptr), o::ncclInvalidArgument);
    int n = 0;
    EXPECT_EQ(api.CommCount(nullptr, &n), o::ncclInvalidArgument);
    EXPECT_EQ(api.CommCount(c, nullptr), o::ncclInvalidArgument);
    EXPECT_EQ(api.CommCount(reinterpret_cast<Comm>(&n), &n), o::ncclInvalidUsage) << "not a communicator";
    EXPECT_EQ(api.CommSplit(c, -5, 0, &out, nullptr), o::ncclInvalidArgument);
    EXPECT_EQ(api.CommInitAll(nullptr, 1, nullptr), o::ncclInvalidArgument);
    EXPECT_EQ(api.CommInitAll(&out, 0, nullptr), o::ncclInvalidArgument);
    int bad_dev = 4096;
    EXPECT_EQ(api.CommInitAll(&out, 1, &bad_dev), o::ncclInvalidArgument);
    EXPECT_EQ(api.MemAlloc(nullptr, 16), o::ncclInvalidArgument);
    EXPECT_EQ(api.MemFree(nullptr), o::ncclSuccess);

    // Configurations.
    o::ncclConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.size = sizeof cfg;
    cfg.magic = 0x1234;
    EXPECT_EQ(api.CommInitRankConfig(&out, 1, id, 0, &cfg), o::ncclInvalidArgument) << "bad magic";
    cfg.magic = VNCCL_CONFIG_MAGIC;
    cfg.size = 8;
    EXPECT_EQ(api.CommInitRankConfig(&out, 1, id, 0, &cfg), o::ncclInvalidArgument) << "too small";
    // A config of a newer NCCL with a field we do not know set to a non-default value.
    struct Bigger {
        o::ncclConfig_t base;
        int future_field;
        int pad;
    } big;
    memset(&big, 0, sizeof big);
    init_config(&big.base);
    big.base.size = sizeof big;
    big.future_field = 7;
    o::ncclUniqueId fresh;
    ASSERT_EQ(api.GetUniqueId(&fresh), o::ncclSuccess);
    EXPECT_EQ(api.CommInitRankConfig(&out, 1, fresh, 0, &big.base), o::ncclInvalidUsage);
    EXPECT_NE(std::string(api.GetLastError(nullptr)).find("does not know"), std::string::npos)
        << api.GetLastError(nullptr);
    big.future_field = VNCCL_CONFIG_UNDEF_INT; // defaults are fine
    EXPECT_EQ(api.CommInitRankConfig(&out, 1, fresh, 0, &big.base), o::ncclSuccess);
    EXPECT_EQ(api.CommDestroy(out), o::ncclSuccess);

    EXPECT_EQ(api.CommDestroy(c), o::ncclSuccess);
}

TEST_F(BadInput, UnsupportedCallsSayInvalidUsage) {
    Comm c = make_self_comm();
    ASSERT_NE(c, nullptr);
    Comm out = nullptr;
    int exclude = 0;
    EXPECT_EQ(api.CommShrink(c, &exclude, 1, &out, nullptr, 0), o::ncclInvalidUsage) << "excludes the caller";
    EXPECT_EQ(out, nullptr);
    o::ncclSimInfo_t sim = {sizeof(o::ncclSimInfo_t), VNCCL_SIM_INFO_MAGIC, 22803, -1.0f};
    EXPECT_EQ(api.GroupSimulateEnd(&sim), o::ncclInvalidUsage);
    EXPECT_NE(std::string(api.GetLastError(nullptr)).find("not supported"), std::string::npos);
    EXPECT_EQ(api.CommDestroy(c), o::ncclSuccess);
}

/* Windows on one rank: registration, bad arguments, deregistration, and windows left to the communicator. */
TEST_F(Windows, OneRank) {
    Comm c = make_self_comm();
    ASSERT_NE(c, nullptr);
    Comm other = make_self_comm();
    ASSERT_NE(other, nullptr);
    std::vector<float> a(1000), b(1000, -1.0f);
    for (size_t i = 0; i < a.size(); ++i) a[i] = float(i) * 0.5f;
    o::ncclWindow_t wa = nullptr, wb = nullptr, bad = nullptr;
    ASSERT_EQ(api.CommWindowRegister(c, a.data(), a.size() * sizeof(float), &wa, VNCCL_WIN_COLL_SYMMETRIC), o::ncclSuccess)
        << api.GetLastError(nullptr);
    ASSERT_NE(wa, nullptr);
    ASSERT_EQ(api.CommWindowRegister(c, b.data(), b.size() * sizeof(float), &wb, VNCCL_WIN_DEFAULT), o::ncclSuccess);
    EXPECT_EQ(api.CommWindowRegister(c, a.data(), 64, nullptr, 0), o::ncclInvalidArgument) << "win NULL";
    EXPECT_EQ(api.CommWindowRegister(c, nullptr, 64, &bad, 0), o::ncclInvalidArgument) << "buff NULL";
    EXPECT_EQ(api.CommWindowRegister(c, a.data(), 0, &bad, 0), o::ncclInvalidArgument) << "size 0";
    EXPECT_EQ(api.CommWindowRegister(c, a.data(), 64, &bad, 0x4), o::ncclInvalidArgument) << "unknown flag";
    EXPECT_EQ(bad, nullptr);
    ASSERT_EQ(api.AllReduce(a.data(), b.data(), a.size(), o::ncclFloat, o::ncclSum, c, nullptr), o::ncclSuccess);
    EXPECT_EQ(a, b) << "a collective between windows";
    EXPECT_EQ(api.CommWindowDeregister(other, wa), o::ncclInvalidArgument) << "a window of another communicator";
    EXPECT_EQ(api.CommWindowDeregister(c, wa), o::ncclSuccess);
    EXPECT_EQ(api.CommWindowDeregister(c, wa), o::ncclInvalidArgument) << "twice";
    EXPECT_EQ(api.CommWindowDeregister(c, nullptr), o::ncclInvalidArgument);
    EXPECT_EQ(api.CommDestroy(c), o::ncclSuccess) << "wb is released with its communicator";
    EXPECT_EQ(api.CommWindowDeregister(other, wb), o::ncclInvalidArgument) << "released with c";
    EXPECT_EQ(api.CommDestroy(other), o::ncclSuccess);
}

/* Windows are collective: two ranks (one thread each) agree, or both get ncclInvalidUsage when their calls
 * differ, and stay in step for the next call. */
TEST_F(Windows, TwoRanksMustAgree) {
    o::ncclUniqueId id;
    ASSERT_EQ(api.GetUniqueId(&id), o::ncclSuccess);
    Comm c[2] = {nullptr, nullptr};
    ASSERT_EQ(api.GroupStart(), o::ncclSuccess);
    ASSERT_EQ(api.CommInitRank(&c[0], 2, id, 0), o::ncclSuccess);
    ASSERT_EQ(api.CommInitRank(&c[1], 2, id, 1), o::ncclSuccess);
    ASSERT_EQ(api.GroupEnd(), o::ncclSuccess) << api.GetLastError(nullptr);
    const size_t n = 333;
    std::vector<int32_t> in[2], out[2];
    o::ncclWindow_t w[2][2] = {{nullptr, nullptr}, {nullptr, nullptr}};
    Res res[2];
    auto both = [&](auto&& call) {
        std::thread t([&] { res[1] = call(1); });
        res[0] = call(0);
        t.join();
    };
    for (int r = 0; r < 2; ++r) {
        in[r].resize(n);
        out[r].assign(n, -1);
        for (size_t i = 0; i < n; ++i) in[r][i] = int32_t(i) * (r + 1) - 50;
    }
    // Different flags: refused on both ranks.
    both([&](int r) {
        return api.CommWindowRegister(c[r], in[r].data(), n * sizeof(int32_t), &w[r][0], r == 0 ? VNCCL_WIN_COLL_SYMMETRIC : 0);
    });
    EXPECT_EQ(res[0], o::ncclInvalidUsage);
    EXPECT_EQ(res[1], o::ncclInvalidUsage);
    EXPECT_EQ(w[0][0], nullptr);
    // Then the same call on both, sizes differing (allowed).
    both([&](int r) {
        Res x = api.CommWindowRegister(c[r], in[r].data(), n * sizeof(int32_t) - size_t(r) * 4, &w[r][0], 0);
        if (x != o::ncclSuccess) return x;
        return api.CommWindowRegister(c[r], out[r].data(), n * sizeof(int32_t), &w[r][1], 0);
    });
    ASSERT_EQ(res[0], o::ncclSuccess) << api.GetLastError(nullptr);
    ASSERT_EQ(res[1], o::ncclSuccess);
    both([&](int r) { return api.AllReduce(in[r].data(), out[r].data(), n, o::ncclInt32, o::ncclSum, c[r], nullptr); });
    ASSERT_EQ(res[0], o::ncclSuccess);
    ASSERT_EQ(res[1], o::ncclSuccess);
    for (int r = 0; r < 2; ++r)
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[r][i], in[0][i] + in[1][i]) << "rank " << r << " at " << i;
    // Deregistering different windows: refused on both, the windows stay.
    both([&](int r) { return api.CommWindowDeregister(c[r], w[r][r]); });
    EXPECT_EQ(res[0], o::ncclInvalidUsage);
    EXPECT_EQ(res[1], o::ncclInvalidUsage);
    both([&](int r) {
        Res x = api.CommWindowDeregister(c[r], w[r][1]);
        return x != o::ncclSuccess ? x : api.CommWindowDeregister(c[r], w[r][0]);
    });
    EXPECT_EQ(res[0], o::ncclSuccess) << api.GetLastError(nullptr);
    EXPECT_EQ(res[1], o::ncclSuccess);
    for (int r = 0; r < 2; ++r) EXPECT_EQ(api.CommDestroy(c[r]), o::ncclSuccess);
}

/* One thread creating the communicators of two ranks between ncclGroupStart and ncclGroupEnd, as nccl-tests
 * does with one GPU per rank: created one after the other, the first would wait for the second until the
 * bootstrap timeout. Host buffers; the two ranks then run collectives from two threads. */
TEST_F(Group, SeveralRanksCreatedInOneGroup) {
    o::ncclUniqueId id;
    ASSERT_EQ(api.GetUniqueId(&id), o::ncclSuccess);
    Comm c[2] = {nullptr, nullptr};
    o::ncclConfig_t cfg;
    init_config(&cfg);
    std::string name = "group-created";
    cfg.commName = name.c_str();
    ASSERT_EQ(api.GroupStart(), o::ncclSuccess);
    ASSERT_EQ(api.CommInitRank(&c[0], 2, id, 0), o::ncclSuccess);
    ASSERT_EQ(api.CommInitRankConfig(&c[1], 2, id, 1, &cfg), o::ncclSuccess);
    name.assign(64, 'x'); // the config's strings may change before ncclGroupEnd: they were copied
    ASSERT_NE(c[0], nullptr);
    ASSERT_NE(c[1], nullptr);
    int n = -1;
    Res async = o::ncclSuccess;
    EXPECT_EQ(api.CommCount(c[0], &n), o::ncclInvalidUsage) << "not usable before ncclGroupEnd";
    EXPECT_NE(std::string(api.GetLastError(nullptr)).find("ncclGroupEnd"), std::string::npos)
        << api.GetLastError(nullptr);
    EXPECT_EQ(api.CommGetAsyncError(c[0], &async), o::ncclSuccess);
    EXPECT_EQ(async, o::ncclInProgress);
    EXPECT_EQ(api.CommDestroy(c[1]), o::ncclInvalidUsage) << "still being created";
    float x = 1.0f, y = 0.0f;
    EXPECT_EQ(api.AllReduce(&x, &y, 1, o::ncclFloat, o::ncclSum, c[0], nullptr), o::ncclInvalidUsage);
    EXPECT_EQ(api.CommInitRank(&c[0], 2, id, 2), o::ncclInvalidArgument) << "a bad rank is refused at once";
    ASSERT_EQ(api.GroupEnd(), o::ncclSuccess) << api.GetLastError(nullptr);

    for (int r = 0; r < 2; ++r) {
        int count = -1, rank = -1;
        EXPECT_EQ(api.CommCount(c[r], &count), o::ncclSuccess);
        EXPECT_EQ(api.CommUserRank(c[r], &rank), o::ncclSuccess);
        EXPECT_EQ(count, 2);
        EXPECT_EQ(rank, r);
        EXPECT_EQ(api.CommGetAsyncError(c[r], &async), o::ncclSuccess);
        EXPECT_EQ(async, o::ncclSuccess);
    }
    // Allreduce of 1001 odd-sized values, one rank per thread, against a sum computed here.
    const size_t count = 1001;
    std::vector<double> in[2], out[2];
    for (int r = 0; r < 2; ++r) {
        in[r].resize(count);
        out[r].assign(count, -1.0);
        for (size_t i = 0; i < count; ++i) in[r][i] = double(i) * (r + 1) + 0.25;
    }
    Res res[2] = {o::ncclInternalError, o::ncclInternalError};
    std::thread t1([&] {
        res[1] = api.AllReduce(in[1].data(), out[1].data(), count, o::ncclDouble, o::ncclSum, c[1], nullptr);
    });
    res[0] = api.AllReduce(in[0].data(), out[0].data(), count, o::ncclDouble, o::ncclSum, c[0], nullptr);
    t1.join();
    ASSERT_EQ(res[0], o::ncclSuccess);
    ASSERT_EQ(res[1], o::ncclSuccess);
    for (int r = 0; r < 2; ++r)
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[r][i], in[0][i] + in[1][i]) << "rank " << r << " at " << i;

    // Splits in a group: rank 0 keeps a communicator of its own, rank 1 takes part with no color.
    Comm s[2] = {nullptr, reinterpret_cast<Comm>(0x1)};
    ASSERT_EQ(api.GroupStart(), o::ncclSuccess);
    ASSERT_EQ(api.CommSplit(c[0], 4, 0, &s[0], nullptr), o::ncclSuccess);
    ASSERT_EQ(api.CommSplit(c[1], VNCCL_SPLIT_NOCOLOR, 0, &s[1], nullptr), o::ncclSuccess);
    EXPECT_EQ(s[1], nullptr);
    ASSERT_EQ(api.GroupEnd(), o::ncclSuccess) << api.GetLastError(nullptr);
    ASSERT_NE(s[0], nullptr);
    EXPECT_EQ(api.CommCount(s[0], &n), o::ncclSuccess);
    EXPECT_EQ(n, 1);
    EXPECT_EQ(api.CommDestroy(s[0]), o::ncclSuccess);
    EXPECT_EQ(api.CommDestroy(c[0]), o::ncclSuccess);
    EXPECT_EQ(api.CommDestroy(c[1]), o::ncclSuccess);
}

/* A creation that fails at ncclGroupEnd: the group's end says so, the handle reports the error and can be
 * destroyed, nothing else is left behind. */
TEST_F(Group, CreationThatFailsAtGroupEnd) {
    o::ncclUniqueId garbage;
    memset(&garbage, 0, sizeof garbage); // no root listens behind it
    Comm c = nullptr;
    ASSERT_EQ(api.GroupStart(), o::ncclSuccess);
    ASSERT_EQ(api.CommInitRank(&c, 1, garbage, 0), o::ncclSuccess);
    ASSERT_NE(c, nullptr);
    Res end = api.GroupEnd();
    EXPECT_NE(end, o::ncclSuccess);
    EXPECT_NE(std::string(api.GetLastError(nullptr)).find("ncclGroupEnd"), std::string::npos)
        << api.GetLastError(nullptr);
    Res async = o::ncclSuccess;
    EXPECT_EQ(api.CommGetAsyncError(c, &async), o::ncclSuccess);
    EXPECT_EQ(async, end);
    int n = 0;
    EXPECT_EQ(api.CommCount(c, &n), o::ncclInvalidUsage);
    EXPECT_EQ(api.CommDestroy(c), o::ncclSuccess);
    EXPECT_EQ(api.CommCount(c, &n), o::ncclInvalidUsage) << "released";
    // Groups nest: creations wait for the outermost end.
    o::ncclUniqueId id;
    ASSERT_EQ(api.GetUniqueId(&id), o::ncclSuccess);
    ASSERT_EQ(api.GroupStart(), o::ncclSuccess);
    ASSERT_EQ(api.GroupStart(), o::ncclSuccess);
    ASSERT_EQ(api.CommInitRank(&c, 1, id, 0), o::ncclSuccess);
    ASSERT_EQ(api.GroupEnd(), o::ncclSuccess);
    EXPECT_EQ(api.CommCount(c, &n), o::ncclInvalidUsage) << "the outer group is still open";
    ASSERT_EQ(api.GroupEnd(), o::ncclSuccess);
    EXPECT_EQ(api.CommCount(c, &n), o::ncclSuccess);
    EXPECT_EQ(n, 1);
    EXPECT_EQ(api.CommAbort(c), o::ncclSuccess);
}

/* Polls ncclCommGetAsyncError until the communicator's state is no longer ncclInProgress (10 s at most). */
Res wait_ready(Comm c) {
    Res async = o::ncclInProgress;
    for (int i = 0; i < 10000 && async == o::ncclInProgress; ++i) {
        if (api.CommGetAsyncError(c, &async) != o::ncclSuccess) return o::ncclInternalError;
        if (async == o::ncclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return async;
}

/* Nonblocking communicators (config.blocking = 0): one thread creates both ranks, which works only if the
 * first creation returns before it is done. Rank 0's creation cannot finish before rank 1's starts, so its
 * state is ncclInProgress then, for certain. */
TEST_F(Nonblocking, InitSplitAndCollectives) {
    o::ncclUniqueId id;
    ASSERT_EQ(api.GetUniqueId(&id), o::ncclSuccess);
    o::ncclConfig_t cfg;
    init_config(&cfg);
    cfg.blocking = 0;
    Comm c[2] = {nullptr, nullptr};
    ASSERT_EQ(api.CommInitRankConfig(&c[0], 2, id, 0, &cfg), o::ncclInProgress);
    ASSERT_NE(c[0], nullptr);
    Res async = o::ncclSuccess;
    EXPECT_EQ(api.CommGetAsyncError(c[0], &async), o::ncclSuccess);
    EXPECT_EQ(async, o::ncclInProgress);
    int n = -1;
    EXPECT_EQ(api.CommCount(c[0], &n), o::ncclInvalidUsage) << "not usable while being created";
    EXPECT_NE(std::string(api.GetLastError(nullptr)).find("ncclCommGetAsyncError"), std::string::npos)
        << api.GetLastError(nullptr);
    ASSERT_EQ(api.CommInitRankConfig(&c[1], 2, id, 1, &cfg), o::ncclInProgress);
    ASSERT_EQ(wait_ready(c[0]), o::ncclSuccess) << api.GetLastError(nullptr);
    ASSERT_EQ(wait_ready(c[1]), o::ncclSuccess) << api.GetLastError(nullptr);
    for (int r = 0; r < 2; ++r) {
        int count = -1, rank = -1;
        EXPECT_EQ(api.CommCount(c[r], &count), o::ncclSuccess);
        EXPECT_EQ(api.CommUserRank(c[r], &rank), o::ncclSuccess);
        EXPECT_EQ(count, 2);
        EXPECT_EQ(rank, r);
    }
    // A collective on the two ranks from two threads, against a sum computed here.
    const size_t count = 257;
    std::vector<int64_t> in[2], out[2];
    for (int r = 0; r < 2; ++r) {
        in[r].resize(count);
        out[r].assign(count, -1);
        for (size_t i = 0; i < count; ++i) in[r][i] = int64_t(i) * (r + 3) - 7;
    }
    Res res[2] = {o::ncclInternalError, o::ncclInternalError};
    std::thread t1([&] {
        res[1] = api.AllReduce(in[1].data(), out[1].data(), count, o::ncclInt64, o::ncclSum, c[1], nullptr);
    });
    res[0] = api.AllReduce(in[0].data(), out[0].data(), count, o::ncclInt64, o::ncclSum, c[0], nullptr);
    t1.join();
    ASSERT_EQ(res[0], o::ncclSuccess);
    ASSERT_EQ(res[1], o::ncclSuccess);
    for (int r = 0; r < 2; ++r)
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[r][i], in[0][i] + in[1][i]) << "rank " << r << " at " << i;

    // A split without a config inherits nonblocking: both ranks' splits return at once.
    Comm s[2] = {nullptr, nullptr};
    ASSERT_EQ(api.CommSplit(c[0], 0, 1, &s[0], nullptr), o::ncclInProgress);
    ASSERT_NE(s[0], nullptr);
    EXPECT_EQ(api.CommGetAsyncError(s[0], &async), o::ncclSuccess);
    EXPECT_EQ(async, o::ncclInProgress) << "rank 1 has not split yet";
    ASSERT_EQ(api.CommSplit(c[1], 0, 0, &s[1], nullptr), o::ncclInProgress);
    ASSERT_EQ(wait_ready(s[0]), o::ncclSuccess) << api.GetLastError(nullptr);
    ASSERT_EQ(wait_ready(s[1]), o::ncclSuccess) << api.GetLastError(nullptr);
    int rank0 = -1, rank1 = -1;
    EXPECT_EQ(api.CommUserRank(s[0], &rank0), o::ncclSuccess);
    EXPECT_EQ(api.CommUserRank(s[1], &rank1), o::ncclSuccess);
    EXPECT_EQ(rank0, 1) << "key 1 puts rank 0 second";
    EXPECT_EQ(rank1, 0);
    // A blocking config makes a blocking child of a nonblocking parent.
    o::ncclConfig_t blocking;
    init_config(&blocking);
    blocking.blocking = 1;
    Comm b[2] = {nullptr, nullptr};
    Res bres = o::ncclInternalError;
    std::thread t2([&] { bres = api.CommSplit(c[1], 5, 0, &b[1], &blocking); });
    EXPECT_EQ(api.CommSplit(c[0], 5, 0, &b[0], &blocking), o::ncclSuccess);
    t2.join();
    EXPECT_EQ(bres, o::ncclSuccess);
    for (Comm x : {s[0], s[1], b[0], b[1], c[0], c[1]}) EXPECT_EQ(api.CommDestroy(x), o::ncclSuccess);
}

/* A nonblocking creation that fails: the state turns from ncclInProgress into the error, the handle refuses
 * use and can be destroyed; destroying one still being created waits for it instead of leaking it. */
TEST_F(Nonblocking, FailedCreationAndEarlyDestroy) {
    o::ncclUniqueId garbage;
    memset(&garbage, 0, sizeof garbage); // no root listens behind it
    o::ncclConfig_t cfg;
    init_config(&cfg);
    cfg.blocking = 0;
    Comm c = nullptr;
    ASSERT_EQ(api.CommInitRankConfig(&c, 1, garbage, 0, &cfg), o::ncclInProgress);
    Res state = wait_ready(c);
    EXPECT_NE(state, o::ncclSuccess);
    EXPECT_NE(state, o::ncclInProgress);
    int n = 0;
    EXPECT_EQ(api.CommCount(c, &n), o::ncclInvalidUsage);
    EXPECT_EQ(api.CommDestroy(c), o::ncclSuccess);
    EXPECT_EQ(api.CommCount(c, &n), o::ncclInvalidUsage) << "released";

    o::ncclUniqueId id;
    ASSERT_EQ(api.GetUniqueId(&id), o::ncclSuccess);
    Comm d = nullptr;
    ASSERT_EQ(api.CommInitRankConfig(&d, 1, id, 0, &cfg), o::ncclInProgress);
    EXPECT_EQ(api.CommDestroy(d), o::ncclSuccess) << "waits for the creation, then destroys it";
    Comm e = nullptr;
    ASSERT_EQ(api.GetUniqueId(&id), o::ncclSuccess);
    ASSERT_EQ(api.CommInitRankConfig(&e, 1, id, 0, &cfg), o::ncclInProgress);
    EXPECT_EQ(api.CommAbort(e), o::ncclSuccess);
}

/* ---- 2 ranks under mpirun (np2_nccl_compat.sh) ---- */

TEST_F(MultiRank, CollectivesAndSendRecv) {
    if (g_size < 2) GTEST_SKIP() << "needs 2 ranks (tests/nccl_compat/np2_nccl_compat.sh)";
    Comm c = make_world_comm();
    ASSERT_NE(c, nullptr);
    const int P = g_size, R = g_rank;
    const size_t n = 513;
    std::vector<double> a(n), b(n);
    for (size_t i = 0; i < n; ++i) a[i] = double(R + 1) * double(i);
    ASSERT_EQ(api.AllReduce(a.data(), b.data(), n, o::ncclDouble, o::ncclSum, c, nullptr), o::ncclSuccess);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(b[i], double(P * (P + 1) / 2) * double(i)) << i;

    std::vector<int32_t> x(n), y(n, -1);
    for (size_t i = 0; i < n; ++i) x[i] = R == 1 ? int32_t(i) + 100 : -5;
    ASSERT_EQ(api.Broadcast(x.data(), y.data(), n, o::ncclInt32, 1, c, nullptr), o::ncclSuccess);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(y[i], int32_t(i) + 100);

    std::vector<int32_t> g(n * P, -1);
    for (size_t i = 0; i < n; ++i) x[i] = R * 1000 + int32_t(i);
    ASSERT_EQ(api.AllGather(x.data(), g.data(), n, o::ncclInt32, c, nullptr), o::ncclSuccess);
    for (int p = 0; p < P; ++p)
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(g[p * n + i], p * 1000 + int32_t(i));

    std::vector<int32_t> rs_in(n * P), rs_out(n, -1);
    for (size_t i = 0; i < n * P; ++i) rs_in[i] = int32_t(i) + R;
    ASSERT_EQ(api.ReduceScatter(rs_in.data(), rs_out.data(), n, o::ncclInt32, o::ncclSum, c, nullptr), o::ncclSuccess);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(rs_out[i], P * int32_t(R * n + i) + P * (P - 1) / 2);

    std::vector<int32_t> aa_in(n * P), aa_out(n * P, -1);
    for (int p = 0; p < P; ++p)
        for (size_t i = 0; i < n; ++i) aa_in[p * n + i] = R * 100000 + p * 1000 + int32_t(i);
    ASSERT_EQ(api.AlltoAll(aa_in.data(), aa_out.data(), n, o::ncclInt32, c, nullptr), o::ncclSuccess);
    for (int p = 0; p < P; ++p)
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(aa_out[p * n + i], p * 100000 + R * 1000 + int32_t(i));

    // Ring exchange in a group.
    std::vector<int32_t> s(n, R), r(n, -1);
    ASSERT_EQ(api.GroupStart(), o::ncclSuccess);
    ASSERT_EQ(api.Send(s.data(), n, o::ncclInt32, (R + 1) % P, c, nullptr), o::ncclSuccess);
    ASSERT_EQ(api.Recv(r.data(), n, o::ncclInt32, (R + P - 1) % P, c, nullptr), o::ncclSuccess);
    ASSERT_EQ(api.GroupEnd(), o::ncclSuccess);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(r[i], (R + P - 1) % P);

    // FP8 sums: P ones give P (exact in both formats up to 16 ranks); the largest finite value, summed, saturates.
    for (o::ncclDataType_t t8 : {o::ncclFloat8e4m3, o::ncclFloat8e5m2}) {
        const bool e4 = t8 == o::ncclFloat8e4m3;
        const uint8_t one = e4 ? 0x38 : 0x3c, maxv = e4 ? 0x7e : 0x7b;
        std::vector<uint8_t> fa(n, one), fb(n, 0);
        fa[0] = maxv;
        ASSERT_EQ(api.AllReduce(fa.data(), fb.data(), n, t8, o::ncclSum, c, nullptr), o::ncclSuccess);
        EXPECT_EQ(fb[0], maxv);
        // P as fp8: exponent and mantissa of a small integer (P <= 16 is exact in both formats).
        int e = 0;
        while ((P >> (e + 1)) != 0) ++e;
        const int mbits = e4 ? 3 : 2, bias = e4 ? 7 : 15;
        const uint8_t want = uint8_t(((e + bias) << mbits) | ((P << mbits >> e) & ((1 << mbits) - 1)));
        if (P <= (e4 ? 16 : 8)) {
            for (size_t i = 1; i < n; ++i) ASSERT_EQ(fb[i], want) << i;
        }
    }

    // Split into singletons.
    Comm child = nullptr;
    ASSERT_EQ(api.CommSplit(c, R, 0, &child, nullptr), o::ncclSuccess);
    int cn = 0;
    EXPECT_EQ(api.CommCount(child, &cn), o::ncclSuccess);
    EXPECT_EQ(cn, 1);
    EXPECT_EQ(api.CommDestroy(child), o::ncclSuccess);
    EXPECT_EQ(api.CommFinalize(c), o::ncclSuccess);
    EXPECT_EQ(api.CommDestroy(c), o::ncclSuccess);
}

int env_int(const char* a, const char* b, int dflt) {
    const char* v = getenv(a);
    if (v == nullptr) v = getenv(b);
    return v != nullptr ? atoi(v) : dflt;
}

} // namespace

int main(int argc, char** argv) {
    g_rank = env_int("OMPI_COMM_WORLD_RANK", "PMI_RANK", 0);
    g_size = env_int("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", 1);
    if (g_size > 1 && getenv("VCCL_NCCL_TEST_ID_FILE") == nullptr) {
        fprintf(stderr, "test_nccl_compat: %d ranks need VCCL_NCCL_TEST_ID_FILE (see np2_nccl_compat.sh)\n", g_size);
        return 99;
    }
    if (g_rank != 0) unsetenv("GTEST_OUTPUT"); // rank 0 writes the XML report
    ::testing::InitGoogleTest(&argc, argv);
    if (g_rank != 0) ::testing::GTEST_FLAG(output) = "";
    load(); // failures are reported by the tests
    return RUN_ALL_TESTS();
}
