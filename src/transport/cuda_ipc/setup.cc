/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Creation: the settings and layout of the exported buffer, its allocation, and the exchange that maps
 * every peer's buffer and decides who reaches whom (the same answer on every rank).
 */
#include "transport/cuda_ipc/cuda_ipc_p2p.h"

#if VCCL_HAVE_CUDA

#include <errno.h>
#include <unistd.h>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "core/env.h"
#include "core/log.h"
#include "core/status.h"
#include "core/test_point.h"
#include "device/device_scope.h"
#include "device/vmm.h"

namespace vccl {

namespace {

/* The low-latency kernels are on by default: where they cannot be used, only a value the user set is worth a
 * warning. */
LogLevel ll_log_level() { return env::is_set(env::kAllreduceLlBytes) ? LogLevel::Warn : LogLevel::Info; }

} // namespace

vcclResult_t CudaIpcP2p::init(Bootstrap* bootstrap, const std::vector<uint64_t>& host_ids) {
    rank_ = bootstrap->rank();
    nranks_ = bootstrap->nranks();
    fail_clear_ns_.reset(new std::atomic<uint64_t>[size_t(nranks_)]);
    fail_seen_.reset(new std::atomic<bool>[size_t(nranks_)]);
    for (int p = 0; p < nranks_; ++p) {
        fail_clear_ns_[size_t(p)].store(0);
        fail_seen_[size_t(p)].store(false);
    }
    peer_flags_.assign(nranks_, nullptr);
    reach_.assign(nranks_, false);
    send_seq_.assign(nranks_, 0);
    ready_waited_.assign(nranks_, 0);
    recv_seq_.assign(nranks_, 0);
    done_waited_.assign(nranks_, 0);
    graph_sends_.assign(nranks_, 0);
    graph_recvs_.assign(nranks_, 0);
    mappings_.resize(nranks_);
    fifo_ok_.assign(nranks_, false);
    fifo_sent_.assign(nranks_, 0);
    fifo_recvd_.assign(nranks_, 0);
    fifo_credit_waited_.assign(nranks_, 0);
    fifo_full_waited_.assign(nranks_, 0);

    size_t fifo_total = 0, ll_total = 0;
    init_layout(host_ids, &fifo_total, &ll_total);
    // Every rank takes part in both exchanges of init_exchange, whatever it could set up: they are collective.
    std::vector<PeerInfo> infos(nranks_);
    PeerInfo& mine = infos[rank_];
    memset(&mine, 0, sizeof(mine));
    mine.pid = int64_t(getpid());
    init_allocate(fifo_total, ll_total, &mine);
    return init_exchange(bootstrap, host_ids, &infos);
}

void CudaIpcP2p::init_layout(const std::vector<uint64_t>& host_ids, size_t* fifo_total, size_t* ll_total) {
    // Staging FIFO geometry: one row of slots per rank of this host (by its index among them).
    local_index_.assign(nranks_, 0);
    size_t nlocal = 0;
    for (int r = 0; r < nranks_; ++r) {
        int index = 0;
        for (int q = 0; q < r; ++q) index += !host_ids.empty() && host_ids[q] == host_ids[r] ? 1 : 0;
        local_index_[r] = index;
        nlocal += host_ids.empty() || host_ids[r] == host_ids[rank_] ? 1 : 0;
    }
    nlocal_ = nlocal;
    int64_t max_mappings = env::get_int(env::kP2pMaxMappings);
    if (max_mappings < 1 || max_mappings > kMaxMappingsLimit) {
        VCCL_WARN(kLogDevice, "VCCL_P2P_MAX_MAPPINGS=%lld out of range (1-%lld): %zu", (long long)max_mappings,
                  (long long)kMaxMappingsLimit, max_mappings_);
    } else {
        max_mappings_ = size_t(max_mappings);
    }
    fifo_slot_bytes_ = size_t(env::get_size(env::kP2pFifoBytes));
    int64_t slots = env::get_int(env::kP2pFifoSlots);
    if (fifo_slot_bytes_ > kMaxFifoSlotBytes || slots < 0 || slots > kMaxFifoSlots) {
        VCCL_WARN(kLogDevice, "VCCL_P2P_FIFO_BYTES=%zu / VCCL_P2P_FIFO_SLOTS=%lld out of range (at most %zu bytes and "
                  "%lld slots): staging FIFO off", fifo_slot_bytes_, (long long)slots, kMaxFifoSlotBytes,
                  (long long)kMaxFifoSlots);
        slots = 0;
    }
    fifo_slots_ = fifo_slot_bytes_ > 0 ? size_t(slots) : 0;
    if (fifo_slots_ == 0) fifo_slot_bytes_ = 0;
    fifo_slot_stride_ = (fifo_slot_bytes_ + 255) / 256 * 256;
    credits_ = FifoCredits::for_slots(fifo_slots_);
    const size_t flag_bytes = flag_region_bytes();
    slots_offset_ = (flag_bytes + 4095) / 4096 * 4096;
    *fifo_total = nlocal * fifo_slots_ * fifo_slot_stride_;
    ll_bytes_ = size_t(env::get_size(env::kAllreduceLlBytes));
    if (ll_bytes_ > kMaxLlBytes || nranks_ > kMaxLlRanks) {
        VCCL_LOG(ll_log_level(), kLogDevice, "VCCL_ALLREDUCE_LL_BYTES=%zu with %d ranks: the low-latency collectives "
                 "take at most %zu bytes and %d ranks; off", ll_bytes_, nranks_, kMaxLlBytes, kMaxLlRanks);
        ll_bytes_ = 0;
    }
    // The largest message: what a rank stores into its peers (message x (n - 1)) stays within the setting.
    ll_message_bytes_ = nranks_ > 1 ? ll_bytes_ / size_t(nranks_ - 1) / 8 * 8 : ll_bytes_;
    if (ll_bytes_ > 0 && ll_message_bytes_ < 8) ll_bytes_ = ll_message_bytes_ = 0;
    // A header word and a spare one, then 4 data bytes per word; sets 256-byte aligned.
    ll_set_words_ = ll_bytes_ > 0 ? (kLlDataWord + (ll_message_bytes_ + 7) / 8 * 2 + 31) / 32 * 32 : 0;
    ll_offset_ = (slots_offset_ + *fifo_total + 4095) / 4096 * 4096;
    chunk_layout_ = chunk_layout(ll_set_words_);
    // Two sets per sender for the eager calls, two more for the calls captured into CUDA graphs.
    *ll_total = size_t(nranks_) * 4 * ll_set_words_ * sizeof(uint64_t);
}

void CudaIpcP2p::init_allocate(size_t fifo_total, size_t ll_total, PeerInfo* mine_out) {
    PeerInfo& mine = *mine_out;
    const size_t flag_bytes = flag_region_bytes();
    // Whole 2 MiB blocks: CUDA shares a block among small cudaMalloc allocations and maps an exported block
    // only once per process, so flags in a block shared with another communicator's flags (or with a receive
    // buffer) could not be mapped by a peer that mapped the other one: that communicator would silently lose
    // the direct path.
    auto whole_blocks = [](size_t bytes) { return (bytes + kIpcBlock - 1) / kIpcBlock * kIpcBlock; };
    bool allocated = false;
    if (driver().memops_ok && cudaGetDevice(&device_) == cudaSuccess) {
        if (cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device_) != cudaSuccess || sm_count_ < 1) {
            cudaGetLastError();
            sm_count_ = 1;
        }
        allocated = cudaMalloc(reinterpret_cast<void**>(&flags_), whole_blocks(ll_offset_ + ll_total)) == cudaSuccess;
        if (!allocated && fifo_total + ll_total > 0) { // no room for the slots: flags only
            cudaGetLastError();
            VCCL_WARN(kLogDevice, "rank %d: cannot allocate %zu bytes of FIFO slots and low-latency words: staging "
                      "FIFO and low-latency collectives off", rank_, fifo_total + ll_total);
            fifo_slots_ = fifo_slot_bytes_ = fifo_slot_stride_ = 0;
            ll_bytes_ = ll_message_bytes_ = ll_set_words_ = 0;
            allocated = cudaMalloc(reinterpret_cast<void**>(&flags_), whole_blocks(slots_offset_)) == cudaSuccess;
        }
    }
    if (allocated && ll_bytes_ > 0) {
        void* control = nullptr;
        if (cudaMemset(reinterpret_cast<char*>(flags_) + ll_offset_, 0, ll_total) == cudaSuccess &&
            cudaHostAlloc(&control, kLlControlWords * sizeof(int), cudaHostAllocMapped) == cudaSuccess) {
            memset(control, 0, kLlControlWords * sizeof(int));
            ll_control_ = static_cast<volatile int*>(control); // one address for host and device (UVA)
        } else {
            cudaGetLastError();
            VCCL_WARN(kLogDevice, "rank %d: cannot set up the low-latency collectives: off", rank_);
            ll_bytes_ = ll_message_bytes_ = 0;
        }
    }
    if (allocated && cudaMemset(flags_, 0, flag_bytes) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess &&
        cudaHostAlloc(reinterpret_cast<void**>(&flags_host_), kPrivateStreams * kRegions * sizeof(uint32_t) * nranks_,
                      cudaHostAllocDefault) ==
            cudaSuccess) {
        cudaIpcMemHandle_t handle;
        if (cudaIpcGetMemHandle(&handle, flags_) == cudaSuccess) {
            memcpy(mine.handle, &handle, sizeof(handle));
            mine.ok = 1;
            mine.device = device_;
            mine.fifo_slots = uint32_t(fifo_slots_);
            mine.fifo_slot_bytes = uint32_t(fifo_slot_bytes_);
            mine.ll_bytes = uint32_t(ll_bytes_);
            mine.ll_offset = uint32_t(ll_offset_);
            cudaDeviceProp prop;
            if (cudaGetDeviceProperties(&prop, device_) == cudaSuccess) memcpy(mine.uuid, &prop.uuid, sizeof(mine.uuid));
        }
    }
    cudaGetLastError();
    // Telemetry's note words (telemetry/device_flows.h): one per peer and direction, and one for the kernels.
    // Without them the device path is counted but not timed.
    if (mine.ok) {
        const size_t words = size_t(2) * size_t(nranks_) + 1;
        void* host = nullptr;
        void* dev = nullptr;
        if (cudaHostAlloc(&host, words * sizeof(uint32_t), cudaHostAllocMapped) == cudaSuccess) {
            memset(host, 0, words * sizeof(uint32_t));
            if (cudaHostGetDevicePointer(&dev, host, 0) == cudaSuccess) {
                notes_host_ = static_cast<uint32_t*>(host);
                notes_dev_ = reinterpret_cast<CUdeviceptr>(dev);
                notes_count_ = int(words);
            } else {
                cudaFreeHost(host);
            }
        }
        cudaGetLastError();
    }
    // The descriptor socket is only worth having where VMM buffers can be shared at all.
    if (mine.ok && vmm::supported(device_, nullptr)) {
        if (fds_.open(rank_)) {
            mine.fd_name = fds_.address().name;
            mine.fd_secret = fds_.address().secret;
        } else {
            VCCL_INFO(kLogDevice, "rank %d: no descriptor socket (%s): vcclMemAlloc buffers are received staged",
                      rank_, strerror(errno));
        }
    }
}

vcclResult_t CudaIpcP2p::init_exchange(Bootstrap* bootstrap, const std::vector<uint64_t>& host_ids,
                                       std::vector<PeerInfo>* all) {
    std::vector<PeerInfo>& infos = *all;
    const PeerInfo& mine = infos[rank_];
    VCCL_RETURN_IF_ERROR(bootstrap->allgather(infos.data(), sizeof(PeerInfo)));
    exporters_.resize(nranks_);
    for (int r = 0; r < nranks_; ++r) exporters_[r] = ipc_handles::Exporter{host_ids.empty() ? 0 : host_ids[r], infos[r].pid};
    {
        std::vector<FdChannel::Address> addresses(nranks_);
        for (int r = 0; r < nranks_; ++r) {
            bool same_host = !host_ids.empty() && host_ids[r] == host_ids[rank_];
            if (same_host && r != rank_) addresses[r] = FdChannel::Address{infos[r].fd_name, infos[r].fd_secret};
        }
        fds_.set_peers(addresses);
    }

    std::vector<uint8_t> opened(size_t(nranks_) * nranks_, 0); // row r: the peers rank r mapped
    if (mine.ok) {
        peer_flags_[rank_] = flags_;
        opened[size_t(rank_) * nranks_ + rank_] = 1;
        for (int r = 0; r < nranks_; ++r) {
            if (r == rank_ || !infos[r].ok || host_ids.empty() || host_ids[r] != host_ids[rank_]) continue;
            cudaIpcMemHandle_t handle;
            memcpy(&handle, infos[r].handle, sizeof(handle));
            void* ptr = nullptr;
            if (cudaIpcOpenMemHandle(&ptr, handle, cudaIpcMemLazyEnablePeerAccess) == cudaSuccess) {
                peer_flags_[r] = static_cast<uint32_t*>(ptr);
                opened[size_t(rank_) * nranks_ + r] = 1;
            } else {
                VCCL_WARN(kLogDevice, "rank %d: cannot map rank %d's flags (%s); transfers with it are staged",
                          rank_, r, cudaGetErrorString(cudaGetLastError()));
            }
        }
    }
    // Row exchange (each rank contributes its row): reachable only when both sides mapped each other.
    VCCL_RETURN_IF_ERROR(bootstrap->allgather(opened.data(), size_t(nranks_)));
    init_reach(infos, opened);
    return vcclSuccess;
}

void CudaIpcP2p::init_reach(const std::vector<PeerInfo>& infos, const std::vector<uint8_t>& opened) {
    const PeerInfo& mine = infos[rank_];
    int count = 0, fifo_count = 0;
    for (int r = 0; r < nranks_; ++r) {
        reach_[r] = opened[size_t(rank_) * nranks_ + r] && opened[size_t(r) * nranks_ + rank_];
        fifo_ok_[r] = reach_[r] && r != rank_ && fifo_slots_ > 0 && infos[r].fifo_slots == mine.fifo_slots &&
                      infos[r].fifo_slot_bytes == mine.fifo_slot_bytes;
        if (reach_[r] && r != rank_ && !fifo_ok_[r] && fifo_slots_ > 0) {
            VCCL_WARN(kLogDevice, "rank %d: rank %d's staging FIFO (%u slots of %u bytes) differs from this rank's (%zu of "
                      "%zu): small transfers with it take the rendezvous path (set VCCL_P2P_FIFO_* alike on every rank)",
                      rank_, r, infos[r].fifo_slots, infos[r].fifo_slot_bytes, fifo_slots_, fifo_slot_bytes_);
        }
        count += reach_[r] ? 1 : 0;
        fifo_count += fifo_ok_[r] ? 1 : 0;
    }
    everyone_reachable_ = true;
    for (size_t i = 0; i < opened.size(); ++i) everyone_reachable_ = everyone_reachable_ && opened[i] != 0;
    // Low-latency allreduce: every rank stores into every other's buffer, so every pair must have mapped each
    // other (the whole matrix, which every rank holds: the decision is the same everywhere) with equal sizes.
    ll_active_ = mine.ll_bytes > 0;
    for (int r = 0; r < nranks_ && ll_active_; ++r) {
        ll_active_ = infos[r].ok && infos[r].ll_bytes == mine.ll_bytes && infos[r].ll_offset == mine.ll_offset;
        for (int q = 0; q < nranks_ && ll_active_; ++q) ll_active_ = opened[size_t(r) * nranks_ + q] != 0;
    }
    const LogLevel ll_level = ll_log_level();
    if (mine.ll_bytes > 0 && !ll_active_) {
        VCCL_LOG(ll_level, kLogDevice, "rank %d: low-latency collectives off: not every rank is on this host with its "
                    "buffer mapped by every other, or VCCL_ALLREDUCE_LL_BYTES or the staging FIFO's size "
                    "(VCCL_P2P_FIFO_*) differs between ranks", rank_);
    }
    bool shared_gpu = false;
    for (int r = 0; r < nranks_; ++r) {
        for (int q = r + 1; q < nranks_; ++q) shared_gpu = shared_gpu || memcmp(infos[r].uuid, infos[q].uuid, 16) == 0;
    }
    if (ll_active_ && shared_gpu && !test_point(nullptr, TestPoint::LlOnSharedGpu)) {
        ll_active_ = false;
        VCCL_LOG(ll_level, kLogDevice, "rank %d: low-latency collectives off: ranks of this communicator share a GPU, "
                    "where its waiting kernels would take turns by time slices (about 2 ms per call)", rank_);
    }
    VCCL_INFO(kLogDevice, "rank %d: direct GPU send/recv with %d of %d ranks (device %d); staging FIFO (%zu slots of "
              "%zu bytes) with %d", rank_, count, nranks_, device_, fifo_slots_, fifo_slot_bytes_, fifo_count);
}

} // namespace vccl

#endif
