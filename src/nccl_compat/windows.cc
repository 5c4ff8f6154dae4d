/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libvccl-nccl: NCCL 2.27's symmetric memory windows (ncclCommWindowRegister/ncclCommWindowDeregister).
 *
 * A window is a vccl registration (vcclCommRegister: the buffer's export taken once, peers' mappings of it
 * cached after their first transfer) made collectively. Both calls are collective over the communicator, as in
 * NCCL: the ranks exchange what they pass (the window's place in the communicator's order of windows, its flags
 * and size) on the host before anything is registered or released, so a rank that calls with different flags,
 * deregisters another window or calls out of order gets ncclInvalidUsage on every rank instead of a hang or a
 * mismatch later. Sizes may differ between ranks (NCCL allows it). Windows left registered are released with
 * their communicator.
 */
#include <cinttypes>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "nccl_compat/compat.h"

/* The handle behind ncclWindow_t. */
struct ncclWindow_vidmem {
    uint64_t magic = kMagic;
    const ncclComm* comm = nullptr;
    void* base = nullptr;
    size_t size = 0;
    int flags = 0;
    uint64_t seq = 0;     /* place in its communicator's order of windows, the same on every rank */
    void* reg = nullptr;  /* vcclCommRegister's handle */
    static constexpr uint64_t kMagic = 0x6e63636c77696e64ull; /* "ncclwind" */
};

namespace vccl {
namespace nccl_compat {

namespace {

constexpr int kKnownFlags = VNCCL_WIN_COLL_SYMMETRIC;

std::mutex g_windows_mutex;
std::unordered_set<const ncclWindow_vidmem*>& live_windows() {
    static auto* s = new std::unordered_set<const ncclWindow_vidmem*>(); // never destroyed: usable from atexit
    return *s;
}
std::map<const ncclComm*, uint64_t>& next_seq() { // per communicator: the next window's place
    static auto* m = new std::map<const ncclComm*, uint64_t>();
    return *m;
}

/* What each rank passes to a window call, compared across ranks before acting. */
struct WindowCall {
    uint64_t op;    /* 1 register, 2 deregister */
    uint64_t seq;
    uint64_t size;
    int64_t flags;
};

/* Exchanges this rank's call with every rank's; ncclInvalidUsage on all of them when the calls differ. */
ncclResult_t agree(vcclComm_t vc, const char* fn, const WindowCall& mine, bool compare_size) {
    int nranks = 0;
    vcclResult_t v = vcclCommCount(vc, &nranks);
    if (v != vcclSuccess) return fail(to_nccl(v), "%s: %s", fn, vcclGetLastError(vc));
    std::vector<WindowCall> all(static_cast<size_t>(nranks));
    v = vcclAllGather(&mine, all.data(), sizeof(WindowCall), vcclUint8, vc, nullptr);
    if (v != vcclSuccess) {
        return fail(to_nccl(v), "%s: exchanging the window call with the other ranks failed: %s", fn,
                    vcclGetLastError(vc));
    }
    for (int r = 0; r < nranks; ++r) {
        const WindowCall& o = all[size_t(r)];
        if (o.op != mine.op || o.seq != mine.seq || o.flags != mine.flags || (compare_size && o.size != mine.size)) {
            return fail(ncclInvalidUsage,
                        "%s: rank %d called %s window #%" PRIu64 " with flags 0x%" PRIx64 ", this rank %s window #%" PRIu64
                        " with flags 0x%" PRIx64 ": window calls are collective and must match, in the same order, on every rank",
                        fn, r, o.op == 1 ? "register for" : "deregister of", o.seq, uint64_t(o.flags),
                        mine.op == 1 ? "register for" : "deregister of", mine.seq, uint64_t(mine.flags));
        }
    }
    return ncclSuccess;
}

} // namespace

void drop_windows(const ncclComm* comm) {
    std::lock_guard<std::mutex> lock(g_windows_mutex);
    for (auto it = live_windows().begin(); it != live_windows().end();) {
        if ((*it)->comm == comm) {
            const ncclWindow_vidmem* w = *it;
            it = live_windows().erase(it);
            delete w; // its registration goes with the vccl communicator
        } else {
            ++it;
        }
    }
    next_seq().erase(comm);
}

} // namespace nccl_compat
} // namespace vccl

using namespace vccl::nccl_compat;

extern "C" {

VNCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
          int winFlags) {
    const char* fn = "ncclCommWindowRegister";
    vcclComm_t vc = nullptr;
    ncclResult_t r = lookup(comm, fn, &vc);
    if (r != ncclSuccess) return r;
    if (win == nullptr) return fail(ncclInvalidArgument, "%s: win is NULL", fn);
    *win = nullptr;
    if (buff == nullptr || size == 0) return fail(ncclInvalidArgument, "%s: buff %p, size %zu: a window needs memory", fn, buff, size);
    if ((winFlags & ~kKnownFlags) != 0) {
        return fail(ncclInvalidArgument, "%s: unknown winFlags 0x%x (NCCL_WIN_DEFAULT or NCCL_WIN_COLL_SYMMETRIC)", fn,
                    winFlags);
    }
    if (in_group()) return fail(ncclInvalidUsage, "%s: not inside ncclGroupStart/ncclGroupEnd", fn);
    uint64_t seq;
    {
        std::lock_guard<std::mutex> lock(g_windows_mutex);
        seq = next_seq()[comm];
    }
    // The place advances on every rank whether or not the call succeeds, so that the ranks stay in step.
    r = agree(vc, fn, WindowCall{1, seq, uint64_t(size), winFlags}, false);
    {
        std::lock_guard<std::mutex> lock(g_windows_mutex);
        next_seq()[comm] = seq + 1;
    }
    if (r != ncclSuccess) return r;
    auto* w = new (std::nothrow) ncclWindow_vidmem();
    if (w == nullptr) return fail(ncclSystemError, "%s: out of memory", fn);
    vcclResult_t v = vcclCommRegister(vc, buff, size, &w->reg);
    if (v != vcclSuccess) {
        delete w;
        return fail(to_nccl(v), "%s: %s", fn, vcclGetLastError(vc));
    }
    w->comm = comm;
    w->base = buff;
    w->size = size;
    w->flags = winFlags;
    w->seq = seq;
    {
        std::lock_guard<std::mutex> lock(g_windows_mutex);
        live_windows().insert(w);
    }
    *win = w;
    return ncclSuccess;
}

VNCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
    const char* fn = "ncclCommWindowDeregister";
    vcclComm_t vc = nullptr;
    ncclResult_t r = lookup(comm, fn, &vc);
    if (r != ncclSuccess) return r;
    uint64_t seq = 0;
    int flags = 0;
    void* reg = nullptr;
    {
        std::lock_guard<std::mutex> lock(g_windows_mutex);
        if (win == nullptr || live_windows().count(win) == 0) {
            return fail(ncclInvalidArgument, "%s: win %p is not a registered window", fn, static_cast<void*>(win));
        }
        if (win->comm != comm) {
            return fail(ncclInvalidArgument, "%s: win %p belongs to another communicator", fn, static_cast<void*>(win));
        }
        seq = win->seq;
        flags = win->flags;
        reg = win->reg;
    }
    if (in_group()) return fail(ncclInvalidUsage, "%s: not inside ncclGroupStart/ncclGroupEnd", fn);
    r = agree(vc, fn, WindowCall{2, seq, 0, flags}, false);
    if (r != ncclSuccess) return r;
    vcclResult_t v = vcclCommDeregister(vc, reg);
    {
        std::lock_guard<std::mutex> lock(g_windows_mutex);
        live_windows().erase(win);
    }
    delete win;
    if (v != vcclSuccess) return fail(to_nccl(v), "%s: %s", fn, vcclGetLastError(vc));
    return ncclSuccess;
}

} // extern "C"
