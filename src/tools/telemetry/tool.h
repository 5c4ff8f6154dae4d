/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-telemetry: live view of the shared-memory rings (top) and analysis of the files (report, plot). */
#ifndef VCCL_TOOLS_TELEMETRY_TOOL_H_
#define VCCL_TOOLS_TELEMETRY_TOOL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tools/telemetry/rings.h"

namespace vtel {

/* One line of a VCCL_TELEMETRY_DIR file (CSV or JSON Lines); times are Unix-epoch ns. */
struct Row {
    std::string comm;   // communicator hash (hex), from the file's meta line
    bool event = false; // a path event (state in status) instead of a transfer
    int rank = -1, peer = -1, path = 0;
    bool send = false;
    uint64_t bytes = 0;
    int64_t post_ns = 0, done_ns = 0;
    std::string coll;   // "p2p", "allreduce", ...
    uint64_t seq = 0;
    int status = 0;
    double window_bw = 0;
};

/* Appends the rows of a .csv or .jsonl file (by content, not by name); false with *why when unreadable. */
bool load_file(const std::string& path, std::vector<Row>* rows, uint64_t* dropped, std::string* why);

int cmd_top(int argc, char** argv);
int cmd_report(int argc, char** argv);
int cmd_plot(int argc, char** argv);
int cmd_clean(int argc, char** argv);
int cmd_serve(int argc, char** argv);

} // namespace vtel

#endif
