/* SPDX-License-Identifier: BSD-3-Clause */
#include "comm/group.h"

#include <thread>
#include <vector>

#include "core/status.h"

namespace vccl {

namespace {

struct GroupState {
    int depth = 0;
    std::vector<Op> ops;
};

thread_local GroupState t_group;

} // namespace

bool group_active() { return t_group.depth > 0; }

void group_add(const Op& op) { t_group.ops.push_back(op); }

vcclResult_t group_start() {
    t_group.depth++;
    return vcclSuccess;
}

vcclResult_t group_end() {
    if (t_group.depth == 0) {
        return set_last_error(vcclInvalidUsage, "vcclGroupEnd called without a matching vcclGroupStart");
    }
    if (--t_group.depth > 0) return vcclSuccess;
    std::vector<Op> ops;
    ops.swap(t_group.ops);

    // Split by communicator, keeping each one's posting order.
    std::vector<vcclComm*> comms;
    std::vector<std::vector<Op>> per_comm;
    for (const Op& op : ops) {
        size_t i = 0;
        while (i < comms.size() && comms[i] != op.comm) i++;
        if (i == comms.size()) {
            comms.push_back(op.comm);
            per_comm.emplace_back();
        }
        per_comm[i].push_back(op);
    }
    for (vcclComm* comm : comms) {
        if (!comm_is_live(comm)) {
            return set_last_error(vcclInvalidUsage, "a communicator used inside the group was destroyed before "
                                                    "vcclGroupEnd");
        }
    }
    if (comms.size() == 1) return run_comm_ops(comms[0], per_comm[0]);

    // Several communicators (e.g. one thread driving several ranks): each must progress while the others
    // wait, so each runs on its own thread.
    std::vector<vcclResult_t> results(comms.size(), vcclSuccess);
    std::vector<std::string> errors(comms.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < comms.size(); ++i) {
        threads.emplace_back([&, i] {
            results[i] = run_comm_ops(comms[i], per_comm[i]);
            if (results[i] != vcclSuccess) errors[i] = last_error_message();
        });
    }
    for (std::thread& t : threads) t.join();
    for (size_t i = 0; i < comms.size(); ++i) {
        if (results[i] != vcclSuccess) return set_last_error(results[i], "%s", errors[i].c_str());
    }
    return vcclSuccess;
}

} // namespace vccl
