/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Creating a communicator, blocking or not (vcclConfig_t.blocking = 0).
 *
 * A nonblocking creation hands the caller its communicator at once, registered and kCommCreating, and builds it
 * on a thread of its own: first the bootstrap (the TCP root's address table, where the slowest rank is waited
 * for; a split's group), then what a blocking creation does. vcclCommGetAsyncError answers vcclInProgress
 * meanwhile and other calls are refused with vcclInvalidUsage naming the state, as NCCL asks its callers to wait
 * for ncclSuccess first. A build that fails leaves the communicator kCommCreationFailed, its error for
 * vcclCommGetAsyncError; destroy and abort remain. Abort cancels the build (its bootstrap waits give up) and
 * then waits for the thread; destroy waits for the build to end (bounded by VCCL_BOOTSTRAP_TIMEOUT and the
 * transports' connection timeouts), then takes apart what was built.
 */
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <system_error>
#include <thread>

#include "comm/comm.h"
#include "comm/comm_ops.h"
#include "core/log.h"
#include "core/status.h"
#include "core/test_point.h"
#include "device/memory.h"

namespace vccl {

namespace {

/* The caller's config with its strings, for the creation thread: the caller may free them once the call returns.
 * A caller built against an older header passed a shorter struct: only its part is read, the rest stays at the
 * defaults, and `size` stays the caller's so that later fields read as absent. */
class ConfigCopy {
public:
    explicit ConfigCopy(const vcclConfig_t* given) : use_(given != nullptr) {
        if (!use_) return;
        memcpy(&config_, given, std::min(given->size, sizeof(config_)));
        has_net_name_ = given->netName != nullptr;
        has_comm_name_ = given->commName != nullptr;
        if (has_net_name_) net_name_ = given->netName;
        if (has_comm_name_) comm_name_ = given->commName;
    }
    const vcclConfig_t* get() {
        if (!use_) return nullptr;
        config_.netName = has_net_name_ ? net_name_.c_str() : nullptr;
        config_.commName = has_comm_name_ ? comm_name_.c_str() : nullptr;
        return &config_;
    }

private:
    bool use_;
    vcclConfig_t config_ = VCCL_CONFIG_INITIALIZER;
    std::string net_name_, comm_name_;
    bool has_net_name_ = false, has_comm_name_ = false;
};

/* The test points of a communicator that became ready (core/test_point.h). */
void note_ready(vcclComm* comm) {
    test_point(comm, TestPoint::CommCreated, comm->dev.ipc != nullptr ? 1 : 0);
    test_point(comm, TestPoint::LlBytes, comm->dev.ipc != nullptr ? (long long)comm->dev.ipc->ll_bytes() : 0);
}

/* The creation thread: the caller's GPU current, the bootstrap, the build; the outcome lands in `creation`. */
void build_on_thread(vcclComm* comm, BootstrapMaker make, std::shared_ptr<ConfigCopy> config, int device) {
    // The application may capture a CUDA graph in global mode meanwhile: this thread's CUDA calls must not
    // disturb it.
    relax_capture_for_this_thread();
    vcclResult_t r = vcclSuccess;
    if (device >= 0 && !make_device_current(device)) r = vcclUnhandledCudaError;
    const CancelScope cancel{&comm->aborted, nullptr};
    std::shared_ptr<Bootstrap> bootstrap;
    if (r == vcclSuccess) r = make(&cancel, &bootstrap);
    if (r == vcclSuccess) {
        std::lock_guard<std::mutex> lock(comm->error_mutex);
        comm->creation_bootstrap = bootstrap;
        // An abort that came while the bootstrap was being made had none to abort.
        if (comm->aborted.load()) bootstrap->abort();
    }
    if (r == vcclSuccess) r = comm_build(comm, std::move(bootstrap), config->get());
    if (r != vcclSuccess) {
        const std::string text = last_error_message();
        {
            std::lock_guard<std::mutex> lock(comm->error_mutex);
            if (comm->async_error.load() == vcclSuccess) {
                comm->async_error_text = "its creation failed: " + text;
                comm->async_error.store(r);
            }
        }
        if (comm->aborted.load()) { // the caller's abort: nothing to warn about
            VCCL_INFO(kLogInit, "nonblocking creation of communicator %p ended by abort: %s", static_cast<void*>(comm),
                      text.c_str());
        } else {
            VCCL_WARN(kLogInit, "nonblocking creation of communicator %p failed: %s", static_cast<void*>(comm),
                      text.c_str());
        }
        comm->creation.store(kCommCreationFailed);
        return;
    }
    note_ready(comm);
    VCCL_INFO(kLogInit, "%s: rank %d: nonblocking creation done", comm->name.c_str(), comm->rank);
    comm->creation.store(kCommReady);
}

} // namespace

vcclResult_t comm_create(vcclComm_t* out, BootstrapMaker make, const vcclConfig_t* config) {
    VCCL_RETURN_IF_ERROR(comm_check_config(config));
    auto comm = std::make_unique<vcclComm>();
    if (config == nullptr || config->blocking != 0) {
        std::shared_ptr<Bootstrap> bootstrap;
        VCCL_RETURN_IF_ERROR(make(nullptr, &bootstrap));
        VCCL_RETURN_IF_ERROR(comm_build(comm.get(), std::move(bootstrap), config));
        comm_register(comm.get());
        note_ready(comm.get());
        *out = comm.release();
        return vcclSuccess;
    }
    comm->nonblocking = true;
    comm->creation.store(kCommCreating);
    auto copy = std::make_shared<ConfigCopy>(config);
    vcclComm* handle = comm.get();
    comm_register(handle); // before the thread starts: it may finish at once
    try {
        comm->creation_thread = std::thread(build_on_thread, handle, std::move(make), std::move(copy), current_device());
    } catch (const std::system_error& e) {
        comm_unregister(handle);
        return set_last_error(vcclSystemError, "nonblocking creation: its thread could not start: %s", e.what());
    }
    *out = comm.release();
    VCCL_INFO(kLogInit, "nonblocking creation of communicator %p started", static_cast<void*>(handle));
    return vcclInProgress;
}

void comm_end_creation(vcclComm* comm, bool abort) {
    if (!comm->creation_thread.joinable()) return;
    if (abort && comm->creation.load() == kCommCreating) {
        std::shared_ptr<Bootstrap> bootstrap;
        {
            std::lock_guard<std::mutex> lock(comm->error_mutex);
            comm->aborted.store(true); // the bootstrap being made and the build's waits watch it
            bootstrap = comm->creation_bootstrap;
        }
        if (bootstrap) bootstrap->abort();
    }
    comm->creation_thread.join();
    std::lock_guard<std::mutex> lock(comm->error_mutex);
    comm->creation_bootstrap.reset();
}

} // namespace vccl
