/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The test library: answers libvccl's test points (core/test_point.h) from what the tests asked for through
 * testing/test_hooks.h. State per communicator, keyed by its address (libvccl never frees a communicator object,
 * so an address names one communicator for the life of the process), under one lock.
 */
#include "testing/test_hooks.h"

#include <atomic>
#include <map>
#include <mutex>

#include "core/test_point.h"

namespace vccl {
namespace testing {

namespace {

struct CommState {
    bool direct_path = false;
    enum class Fail { None, Send, Recv } fail_direct = Fail::None;
    bool fail_kernel = false;
    unsigned chunked_stop = 0;
    bool fail_exchange = false;
    unsigned staging_skip = 0;
    long long ll_bytes = 0;
    long long direct_sends = 0, block_reopens = 0, evictions = 0, ll_calls = 0, chunked_calls = 0;
    std::map<int, long long> slow_link_milli; // peer -> factor x 1000
};

struct State {
    std::mutex mutex;
    std::map<const void*, CommState> comms;
    std::atomic<int> env_reloads{0};
    std::atomic<bool> ll_on_shared_gpu{false};
    std::atomic<int> teardown_hold_ms{0};
    std::atomic<unsigned long long> pmpi_routes[3] = {};
};

State& state() {
    static State* s = new State; // never destroyed: teardown threads may still ask at exit
    return *s;
}

/* Runs fn on comm's state under the lock; false when the library never reported comm. */
template <typename Fn> bool with_comm(const void* comm, Fn fn) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.comms.find(comm);
    if (it == s.comms.end()) return false;
    fn(it->second);
    return true;
}

vcclResult_t request(vcclComm_t comm, void (*fn)(CommState&, long long), long long arg) {
    bool known = with_comm(comm, [&](CommState& c) { fn(c, arg); });
    return known ? vcclSuccess : vcclInvalidArgument;
}

long long counter(vcclComm_t comm, long long CommState::*field) {
    long long v = -1;
    with_comm(comm, [&](CommState& c) { v = c.*field; });
    return v;
}

long long answer(const void* key, TestPoint point, long long arg) {
    State& s = state();
    switch (point) {
    case TestPoint::EnvReload: {
        int want = s.env_reloads.exchange(0);
        return want != 0 ? 1 : 0;
    }
    case TestPoint::LlOnSharedGpu: return s.ll_on_shared_gpu.load() ? 1 : 0;
    case TestPoint::TeardownHoldMs: return s.teardown_hold_ms.load();
    case TestPoint::PmpiRoute:
        if (arg >= 0 && arg < 3) s.pmpi_routes[arg].fetch_add(1);
        return 0;
    default: break;
    }
    std::lock_guard<std::mutex> lock(s.mutex);
    if (point == TestPoint::CommCreated) {
        CommState fresh;
        fresh.direct_path = arg != 0;
        s.comms[key] = fresh;
        return 0;
    }
    auto it = s.comms.find(key);
    if (it == s.comms.end()) return 0;
    CommState& c = it->second;
    auto take = [](auto& field) {
        auto v = field;
        field = {};
        return v;
    };
    switch (point) {
    case TestPoint::CommDestroyed: s.comms.erase(it); return 0;
    case TestPoint::FailDirectSend:
        if (c.fail_direct != CommState::Fail::Send) return 0;
        c.fail_direct = CommState::Fail::None;
        return 1;
    case TestPoint::FailDirectRecv:
        if (c.fail_direct != CommState::Fail::Recv) return 0;
        c.fail_direct = CommState::Fail::None;
        return 1;
    case TestPoint::FailKernelCall: return take(c.fail_kernel) ? 1 : 0;
    case TestPoint::ChunkedStop: return take(c.chunked_stop);
    case TestPoint::FailExchange: return take(c.fail_exchange) ? 1 : 0;
    case TestPoint::StagingSkip: return take(c.staging_skip);
    case TestPoint::LlBytes: c.ll_bytes = arg; return 0;
    case TestPoint::DirectSend: ++c.direct_sends; return 0;
    case TestPoint::LlCall: ++c.ll_calls; return 0;
    case TestPoint::ChunkedCall: ++c.chunked_calls; return 0;
    case TestPoint::IpcBlockReopen: ++c.block_reopens; return 0;
    case TestPoint::IpcEviction: ++c.evictions; return 0;
    case TestPoint::SlowLinkMilli: {
        auto f = c.slow_link_milli.find(int(arg));
        return f == c.slow_link_milli.end() ? 0 : f->second;
    }
    default: return 0;
    }
}

} // namespace

void reload_env() { state().env_reloads.fetch_add(1); }

vcclResult_t fail_next_direct(vcclComm_t comm, int send) {
    vcclResult_t r = vcclInvalidArgument;
    with_comm(comm, [&](CommState& c) {
        if (!c.direct_path) {
            r = vcclInvalidUsage;
            return;
        }
        c.fail_direct = send != 0 ? CommState::Fail::Send : CommState::Fail::Recv;
        r = vcclSuccess;
    });
    return r;
}

void allow_ll_on_shared_gpu(int allow) { state().ll_on_shared_gpu.store(allow != 0); }

vcclResult_t fail_next_ll(vcclComm_t comm) {
    return request(comm, [](CommState& c, long long) { c.fail_kernel = true; }, 0);
}

vcclResult_t stop_next_chunked(vcclComm_t comm, unsigned chunks) {
    return request(comm, [](CommState& c, long long n) { c.chunked_stop = unsigned(n); }, chunks);
}

vcclResult_t fail_next_exchange(vcclComm_t comm) {
    return request(comm, [](CommState& c, long long) { c.fail_exchange = true; }, 0);
}

vcclResult_t staging_skip_sequence(vcclComm_t comm, unsigned n) {
    return request(comm, [](CommState& c, long long k) { c.staging_skip = unsigned(k); }, n);
}

void hold_teardown_ms(int ms) { state().teardown_hold_ms.store(ms); }

vcclResult_t slow_link(vcclComm_t comm, int peer, double factor) {
    const long long milli = factor > 1.0 ? (long long)(factor * 1000.0 + 0.5) : 0;
    return with_comm(comm, [&](CommState& c) { c.slow_link_milli[peer] = milli; }) ? vcclSuccess : vcclInvalidArgument;
}

void pmpi_routes(unsigned long long* vccl_calls, unsigned long long* mpi_calls, unsigned long long* staged_calls) {
    State& s = state();
    *vccl_calls = s.pmpi_routes[0].load();
    *mpi_calls = s.pmpi_routes[1].load();
    *staged_calls = s.pmpi_routes[2].load();
}

long long direct_sends(vcclComm_t comm) { return counter(comm, &CommState::direct_sends); }
long long ipc_block_reopens(vcclComm_t comm) { return counter(comm, &CommState::block_reopens); }
long long ipc_evictions(vcclComm_t comm) { return counter(comm, &CommState::evictions); }
long long ll_bytes(vcclComm_t comm) { return counter(comm, &CommState::ll_bytes); }
long long ll_calls(vcclComm_t comm) { return counter(comm, &CommState::ll_calls); }
long long chunked_calls(vcclComm_t comm) { return counter(comm, &CommState::chunked_calls); }

} // namespace testing
} // namespace vccl

/* pmpi_routes for tests that are not C++ (tests/pmpi/mpi4py_cupy.py, through ctypes). */
extern "C" void vccl_testing_pmpi_routes(unsigned long long* vccl_calls, unsigned long long* mpi_calls,
                                         unsigned long long* staged_calls) {
    vccl::testing::pmpi_routes(vccl_calls, mpi_calls, staged_calls);
}

extern "C" long long vccl_test_point(const void* key, int point, long long arg) {
    return vccl::testing::answer(key, vccl::TestPoint(point), arg);
}
