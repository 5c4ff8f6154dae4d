/* SPDX-License-Identifier: BSD-3-Clause */
/* Live communicator handles: the API checks membership so a destroyed communicator gives vcclInvalidUsage
 * instead of a use-after-free. */
#include <mutex>
#include <unordered_set>

#include "comm/comm.h"
#include "core/log.h"

namespace vccl {

namespace {
std::mutex& registry_mutex() {
    static std::mutex* m = new std::mutex();
    return *m;
}
std::unordered_set<const vcclComm*>& registry() {
    static auto* s = new std::unordered_set<const vcclComm*>();
    return *s;
}
} // namespace

void comm_register(vcclComm* comm) {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry().insert(comm);
}

void comm_unregister(vcclComm* comm) {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry().erase(comm);
}

bool comm_is_live(const vcclComm* comm) {
    std::lock_guard<std::mutex> lock(registry_mutex());
    return registry().count(comm) != 0;
}

void comm_set_async_error(vcclComm* comm, vcclResult_t error, const std::string& text) {
    std::lock_guard<std::mutex> lock(comm->error_mutex);
    if (comm->async_error.load() != vcclSuccess) return;
    comm->async_error_text = text;
    comm->async_error.store(error);
    VCCL_WARN(kLogColl, "communicator %s (rank %d/%d) failed: %s", comm->name.c_str(), comm->rank, comm->nranks,
              text.c_str());
}

} // namespace vccl
