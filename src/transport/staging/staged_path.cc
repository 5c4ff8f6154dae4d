/* SPDX-License-Identifier: BSD-3-Clause */
#include "transport/staging/staged_path.h"

#include "core/status.h"
#include "device/copies.h"

namespace vccl {

vcclResult_t StagedPath::post(const std::vector<const Transfer*>& batch, std::vector<const Transfer*>* rest,
                              std::string* mismatch) {
    rest->clear();
    mismatch->clear();
    for (const Transfer* t : batch) {
        if (t->mem == MemType::Host) VCCL_RETURN_IF_ERROR(env.stream_wait(t->stream));
    }
    if (batch.empty()) return vcclSuccess;
    // Sends are copied out first, receives copied in at the end.
    size_t total = 0;
    for (const Transfer* t : batch) total += t->mem == MemType::Cuda ? t->bytes : 0;
    if (total == 0) return host_batch_run(env.host, batch);
    void* host = nullptr;
    VCCL_RETURN_IF_ERROR(env.staging->get(total, &host));
    std::vector<Transfer> staged;
    staged.reserve(batch.size());
    char* cursor = static_cast<char*>(host);
    for (const Transfer* t : batch) {
        Transfer s = *t;
        if (t->mem == MemType::Cuda) {
            VCCL_RETURN_IF_ERROR(env.stream_wait(t->stream));
            if (t->kind == Transfer::Send) {
                VCCL_RETURN_IF_ERROR(copy_device_to_host(cursor, t->sendbuf, t->bytes, t->stream));
                s.sendbuf = cursor;
            } else {
                s.recvbuf = cursor;
            }
            s.mem = MemType::Host;
            cursor += t->bytes;
        }
        staged.push_back(s);
    }
    std::vector<const Transfer*> ptrs;
    for (const Transfer& s : staged) ptrs.push_back(&s);
    VCCL_RETURN_IF_ERROR(host_batch_run(env.host, ptrs));
    for (size_t i = 0; i < batch.size(); ++i) {
        if (batch[i]->mem == MemType::Cuda && batch[i]->kind == Transfer::Recv) {
            VCCL_RETURN_IF_ERROR(copy_host_to_device(batch[i]->recvbuf, staged[i].recvbuf, batch[i]->bytes, batch[i]->stream));
        }
    }
    return vcclSuccess;
}

} // namespace vccl
