/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-telemetry: subcommand dispatch and the file loader shared by report and plot. */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "tools/telemetry/tool.h"

namespace vtel {

namespace {

void usage(FILE* out) {
    fprintf(out,
            "usage: vccl-telemetry top [-i SECONDS] [--once] [--json] [--dir DIR]\n"
            "       vccl-telemetry report [--fraction F] [--late-us US] [--json] FILE...\n"
            "       vccl-telemetry plot [-o OUT.svg] [--title TEXT] FILE...\n"
            "       vccl-telemetry clean [--dry-run] [--dir DIR]\n"
            "       vccl-telemetry serve [--listen ADDR:PORT] [--job NAME] [--dir DIR] [--max-peers N] [--print]\n"
            "\n"
            "top     live per-link view of every vccl telemetry ring of this user in /dev/shm\n"
            "report  per-link and per-rank summary of VCCL_TELEMETRY_DIR files; flags slow links and late ranks\n"
            "plot    bandwidth over time per path, as SVG\n"
            "clean   remove the rings of processes that died without destroying their communicators\n"
            "serve   Prometheus metrics of the rings over HTTP (/metrics; --print: once to stdout)\n"
            "See vccl-telemetry(1).\n");
}

/* Flat JSON object: "key": "string" | number. Enough for the files the library writes. */
std::map<std::string, std::string> parse_json_line(const std::string& line) {
    std::map<std::string, std::string> out;
    size_t i = 0, n = line.size();
    auto skip = [&] { while (i < n && (line[i] == ' ' || line[i] == ',' || line[i] == '{' || line[i] == '}')) ++i; };
    auto str = [&](std::string* s) {
        if (i >= n || line[i] != '"') return false;
        ++i;
        while (i < n && line[i] != '"') {
            if (line[i] == '\\' && i + 1 < n) ++i;
            *s += line[i++];
        }
        ++i;
        return true;
    };
    while (true) {
        skip();
        std::string key, value;
        if (!str(&key)) break;
        while (i < n && (line[i] == ':' || line[i] == ' ')) ++i;
        if (i < n && line[i] == '"') {
            str(&value);
        } else {
            while (i < n && line[i] != ',' && line[i] != '}') value += line[i++];
        }
        out[key] = value;
    }
    return out;
}

int64_t to_i64(const std::string& s) { return strtoll(s.c_str(), nullptr, 10); }
uint64_t to_u64(const std::string& s) { return strtoull(s.c_str(), nullptr, 10); }

} // namespace

bool load_file(const std::string& path, std::vector<Row>* rows, uint64_t* dropped, std::string* why) {
    std::ifstream in(path);
    if (!in) {
        *why = strerror(errno);
        return false;
    }
    std::string line, comm;
    bool any_meta = false;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        if (line[0] == '{') { // JSON Lines
            auto kv = parse_json_line(line);
            const std::string& type = kv["type"];
            if (type == "meta") {
                comm = kv["comm"];
                any_meta = true;
            } else if (type == "dropped") {
                *dropped += to_u64(kv["count"]);
            } else if (type == "xfer" || type == "event") {
                Row r;
                r.comm = comm;
                r.event = type == "event";
                r.rank = int(to_i64(kv["rank"]));
                r.peer = int(to_i64(kv["peer"]));
                r.path = int(to_i64(kv["path"]));
                r.send = kv["dir"] == "send";
                r.bytes = to_u64(kv["bytes"]);
                r.post_ns = r.event ? to_i64(kv["time_ns"]) : to_i64(kv["post_ns"]);
                r.done_ns = to_i64(kv["done_ns"]);
                r.coll = kv["coll"];
                r.seq = to_u64(kv["seq"]);
                r.status = int(to_i64(kv["status"]));
                r.window_bw = strtod(kv["window_bw"].c_str(), nullptr);
                rows->push_back(r);
            }
            continue;
        }
        if (line[0] == '#') { // CSV comments: the meta line and "dropped N"
            std::istringstream ss(line);
            std::string tok;
            while (ss >> tok) {
                if (tok.compare(0, 5, "comm=") == 0) {
                    comm = tok.substr(5);
                    any_meta = true;
                }
            }
            if (line.compare(0, 10, "# dropped ") == 0) *dropped += to_u64(line.substr(10));
            continue;
        }
        std::vector<std::string> f;
        std::stringstream ss(line);
        std::string field;
        while (std::getline(ss, field, ',')) f.push_back(field);
        if (f.size() < 13 || (f[0] != "xfer" && f[0] != "event")) continue; // the column header
        Row r;
        r.comm = comm;
        r.event = f[0] == "event";
        r.rank = int(to_i64(f[1]));
        r.peer = int(to_i64(f[2]));
        r.path = int(to_i64(f[3]));
        r.send = f[4] == "send";
        r.bytes = to_u64(f[5]);
        r.post_ns = to_i64(f[6]);
        r.done_ns = to_i64(f[7]);
        r.coll = f[8];
        r.seq = to_u64(f[9]);
        r.status = int(to_i64(f[10]));
        r.window_bw = strtod(f[11].c_str(), nullptr);
        rows->push_back(r);
    }
    if (!any_meta) {
        *why = "not a vccl telemetry file (no meta line)";
        return false;
    }
    return true;
}

} // namespace vtel

int main(int argc, char** argv) {
    if (argc < 2) {
        vtel::usage(stderr);
        return 2;
    }
    std::string cmd = argv[1];
    if (cmd == "-h" || cmd == "--help" || cmd == "help") {
        vtel::usage(stdout);
        return 0;
    }
    if (cmd == "top") return vtel::cmd_top(argc - 1, argv + 1);
    if (cmd == "report") return vtel::cmd_report(argc - 1, argv + 1);
    if (cmd == "plot") return vtel::cmd_plot(argc - 1, argv + 1);
    if (cmd == "clean") return vtel::cmd_clean(argc - 1, argv + 1);
    if (cmd == "serve") return vtel::cmd_serve(argc - 1, argv + 1);
    fprintf(stderr, "vccl-telemetry: unknown command '%s'\n", cmd.c_str());
    vtel::usage(stderr);
    return 2;
}
