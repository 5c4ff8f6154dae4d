/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The one interface of the transports that move a batch of sends and receives with the peers they reach: "move
 * these bytes to that peer, ordered on this stream". The executor (exec/p2p_batch.h) hands a batch to each in turn,
 * the direct GPU path first (transport/cuda_ipc/direct_path.h), then host staging over the host transport
 * (transport/staging/staged_path.h), which takes all that is left.
 *
 * post() enqueues device work on the transfers' streams and returns without waiting for the device; receives into
 * host memory are done when it returns. Every rank posts the transfers of one batch to the same transport: the
 * choice goes by what both sides can do (descriptors are exchanged where it matters), never by timing.
 */
#ifndef VCCL_TRANSPORT_STREAM_TRANSPORT_H_
#define VCCL_TRANSPORT_STREAM_TRANSPORT_H_

#include <string>
#include <vector>

#include "transport/transfer.h"
#include "vccl.h"

namespace vccl {

class StreamTransport {
public:
    virtual ~StreamTransport() = default;
    virtual const char* name() const = 0;
    /* Posts the transfers of `batch` this transport carries and leaves the others in *rest (in order). A send whose
     * size the receiver found different is described in *mismatch (empty when none), for the caller to report
     * once the rest of the batch is done, so that no peer is left waiting. */
    virtual vcclResult_t post(const std::vector<const Transfer*>& batch, std::vector<const Transfer*>* rest,
                              std::string* mismatch) = 0;
};

} // namespace vccl

#endif
