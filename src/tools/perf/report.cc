/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-perf: aggregation of times across ranks, the nccl-tests style table, its footer and JSON output. */
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "tools/perf/perf.h"

namespace vperf {

namespace {

const char* kAverageNames[] = {"rank 0", "mean", "min", "max"};

const char* memory_name(Memory m) { return m == Memory::Host ? "host" : "cuda"; }
const char* bootstrap_name(Bootstrap b) { return b == Bootstrap::Mpi ? "mpi" : "tcp"; }
const char* ratio_label(Baseline b) {
    return b == Baseline::Mpi ? "v/mpi" : b == Baseline::Nccl ? "v/nccl" : b == Baseline::Self ? "a/a" : "on/off";
}

/* nccl-tests prints times with two decimals below 10 ms and none above. */
void format_time(char* out, size_t len, double us) {
    snprintf(out, len, us < 10000 ? "%.2f" : "%.0f", us);
}

void format_wrong(char* out, size_t len, long long wrong) {
    if (wrong < 0) snprintf(out, len, "N/A");
    else snprintf(out, len, "%lld", wrong);
}

void print_group(FILE* out, const Measure& m) {
    char t[32], w[32];
    format_time(t, sizeof(t), m.time_us);
    format_wrong(w, sizeof(w), m.wrong);
    fprintf(out, "  %7s  %6.2f  %6.2f  %6s", t, m.algbw, m.busbw, w);
}

void json_measure(FILE* f, const Measure& m) {
    fprintf(f, "{\"time_us\": %.3f, \"algbw_gbs\": %.6f, \"busbw_gbs\": %.6f, \"wrong\": ", m.time_us, m.algbw,
            m.busbw);
    if (m.wrong < 0) fprintf(f, "null");
    else fprintf(f, "%lld", m.wrong);
    if (m.call_us >= 0) fprintf(f, ", \"call_us\": %.3f", m.call_us);
    if (m.cpu.process_pct >= 0)
        fprintf(f, ", \"cpu_pct\": %.2f, \"other_threads_cpu_pct\": %.2f", m.cpu.process_pct, m.cpu.others_pct);
    fputc('}', f);
}

/* The GEMM's figures beside one library's transfers, as "NAME_tflops" and friends. */
void json_gemm(FILE* f, const char* name, const GemmFigures& g) {
    fprintf(f, ", \"%s_tflops\": %.3f, \"%s_min_pct\": %.3f, \"%s_min_pct_with_tail\": %.3f, \"%s_transfer_ms\": %.4f, "
               "\"%s_gemm_idle_pct\": %.3f",
            name, g.tflops, name, g.min_pct, name, g.min_pct_with_tail, name, g.transfer_ms, name, g.idle_pct);
}

/* JSON string with the few escapes a path or host name may need. */
void json_string(FILE* f, const char* s) {
    fputc('"', f);
    for (; *s; ++s) {
        unsigned char c = static_cast<unsigned char>(*s);
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* --cpu columns: the process's and the other threads' processor use, percent of one core. */
void print_cpu(FILE* out, const CpuUse& u) {
    if (u.process_pct < 0) fprintf(out, "  %6s  %6s", "n/a", "n/a");
    else fprintf(out, "  %6.1f  %6.1f", u.process_pct, u.others_pct);
}

std::string centered(const char* text, size_t width) {
    size_t len = strlen(text);
    if (len >= width) return text;
    size_t left = (width - len) / 2;
    return std::string(left, ' ') + text + std::string(width - len - left, ' ');
}

} // namespace

double aggregate_time(double local_us, int average, MPI_Comm comm) {
    double result = local_us;
    int nranks = 1;
    MPI_Comm_size(comm, &nranks);
    switch (average) {
    case 0: MPI_Bcast(&result, 1, MPI_DOUBLE, 0, comm); break;
    case 1:
        MPI_Allreduce(&local_us, &result, 1, MPI_DOUBLE, MPI_SUM, comm);
        result /= nranks;
        break;
    case 2: MPI_Allreduce(&local_us, &result, 1, MPI_DOUBLE, MPI_MIN, comm); break;
    default: MPI_Allreduce(&local_us, &result, 1, MPI_DOUBLE, MPI_MAX, comm); break;
    }
    return result;
}

Measure make_measure(Coll coll, const Shape& shape, double time_us, long long wrong, int nranks) {
    Measure m;
    m.time_us = time_us;
    m.algbw = time_us > 0 ? double(shape.bytes) / 1e9 / (time_us * 1e-6) : 0.0;
    m.busbw = m.algbw * bus_factor(coll, nranks);
    m.wrong = wrong;
    return m;
}

void print_header(FILE* out, const Options& o, int nranks, const std::vector<std::string>& rank_lines) {
    int version = 0;
    vcclGetVersion(&version);
    fprintf(out, "# vccl-perf %d.%d.%d (library %d): %s\n", VCCL_MAJOR, VCCL_MINOR, VCCL_PATCH, version,
            coll_name(o.coll));
    fprintf(out, "# nranks %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d validation: %d\n",
            nranks, o.min_bytes, o.max_bytes, o.step_bytes ? o.step_bytes : o.step_factor,
            o.step_bytes ? "bytes" : "factor", o.warmup, o.iters, o.check);
    fprintf(out, "# datatype %s op %s root %d memory %s%s%s bootstrap %s time across ranks: %s baseline: %s\n",
            type_name(o.dtype), coll_has_op(o.coll) ? op_label(o) : "none", coll_has_root(o.coll) ? o.root : -1,
            memory_name(o.memory), o.memory == Memory::Cuda ? " alloc " : "",
            o.memory == Memory::Cuda ? device_alloc_name(o.device_alloc) : "", bootstrap_name(o.bootstrap),
            kAverageNames[o.average], baseline_name(o.baseline));
    if (o.high_priority) fprintf(out, "# stream priority: high (the greatest the GPU offers)\n");
    fprintf(out, "#\n# Using ranks\n");
    for (const std::string& line : rank_lines) fprintf(out, "%s\n", line.c_str());
    fprintf(out, "#\n");
    bool mpi = o.baseline != Baseline::None;
    char banner[256];
    std::string cpu_banner;
    if (o.cpu) {
        cpu_banner = " " + centered("cpu, vccl", 15);
        if (mpi) cpu_banner += " " + centered("cpu, baseline", 15);
    }
    snprintf(banner, sizeof(banner), "# %50s%s%s%s%s", "", centered("out-of-place", 33).c_str(),
             centered("in-place", 33).c_str(), mpi ? centered((std::string(baseline_name(o.baseline)) + " (out-of-place)").c_str(), 25).c_str() : "",
             cpu_banner.c_str());
    fprintf(out, "%s\n", banner);
    fprintf(out, "# %10s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
    for (int g = 0; g < 2; ++g) fprintf(out, "  %7s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
    if (mpi) fprintf(out, "  %7s  %6s  %6s", "time", "busbw", "ratio");
    int cpu_groups = o.cpu ? (mpi ? 2 : 1) : 0;
    for (int g = 0; g < cpu_groups; ++g) fprintf(out, "  %6s  %6s", "all", "others");
    fprintf(out, "\n# %10s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
    for (int g = 0; g < 2; ++g) fprintf(out, "  %7s  %6s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "");
    if (mpi) fprintf(out, "  %7s  %6s  %6s", "(us)", "(GB/s)", ratio_label(o.baseline));
    for (int g = 0; g < cpu_groups; ++g) fprintf(out, "  %6s  %6s", "(%)", "(%)");
    fprintf(out, "\n");
    fflush(out);
}

void print_row(FILE* out, const Options& o, const Row& row) {
    fprintf(out, "%12zu  %12zu  %8s  %6s  %6d", row.shape.bytes, row.shape.total_count, type_name(o.dtype),
            coll_has_op(o.coll) ? op_label(o) : "none", coll_has_root(o.coll) ? o.root : -1);
    print_group(out, row.out_of_place);
    print_group(out, row.in_place);
    if (row.has_mpi) {
        if (!row.mpi_supported) {
            fprintf(out, "  %7s  %6s  %6s", "n/a", "n/a", "n/a");
        } else {
            char t[32];
            format_time(t, sizeof(t), row.mpi.time_us);
            if (row.mpi.busbw > 0) {
                fprintf(out, "  %7s  %6.2f  %6.2f", t, row.mpi.busbw, row.out_of_place.busbw / row.mpi.busbw);
            } else {
                fprintf(out, "  %7s  %6.2f  %6s", t, row.mpi.busbw, "n/a");
            }
        }
    }
    if (o.cpu) {
        print_cpu(out, row.out_of_place.cpu);
        if (row.has_mpi) print_cpu(out, row.mpi_supported ? row.mpi.cpu : CpuUse());
    }
    fprintf(out, "\n");
    if (!row.gemm_solos.empty()) {
        std::string solos;
        for (double t : row.gemm_solos) solos += (solos.empty() ? "" : " / ") + std::to_string(int(t + 0.5));
        fprintf(out, "#   GEMM %dx%dx%d bf16 beside it: alone %s TFLOP/s (solo runs before%s the passes); during vccl %.1f "
                     "(lowest rank %.1f%% of the solo runs either side, %.1f%% with the 0.5 s after it; transfer %.3f ms/op, "
                     "GEMM idle %.1f%%)", o.gemm_n, o.gemm_n, o.gemm_n, solos.c_str(),
                row.gemm_solos.size() > 2 ? ", between and after" : " and after", row.gemm_vccl.tflops,
                row.gemm_vccl.min_pct, row.gemm_vccl.min_pct_with_tail, row.gemm_vccl.transfer_ms, row.gemm_vccl.idle_pct);
        if (row.gemm_base.tflops >= 0)
            fprintf(out, "; during %s %.1f (lowest rank %.1f%%, %.1f%% with the 0.5 s after it; transfer %.3f ms/op, "
                         "GEMM idle %.1f%%)", baseline_name(o.baseline), row.gemm_base.tflops, row.gemm_base.min_pct,
                    row.gemm_base.min_pct_with_tail, row.gemm_base.transfer_ms, row.gemm_base.idle_pct);
        fprintf(out, "\n");
    }
    fflush(out);
}

double average_busbw(const std::vector<Row>& rows) {
    /* As nccl-tests: the mean of the out-of-place and in-place bus bandwidths over all sizes. */
    double sum = 0;
    for (const Row& r : rows) sum += r.out_of_place.busbw + r.in_place.busbw;
    return rows.empty() ? 0.0 : sum / (2.0 * double(rows.size()));
}

long long total_wrong(const std::vector<Row>& rows) {
    long long n = 0;
    for (const Row& r : rows) {
        if (r.out_of_place.wrong > 0) n += r.out_of_place.wrong;
        if (r.in_place.wrong > 0) n += r.in_place.wrong;
    }
    return n;
}

void print_footer(FILE* out, const Options& o, const std::vector<Row>& rows) {
    long long wrong = total_wrong(rows);
    fprintf(out, "# Out of bounds values : %lld %s\n", wrong, wrong == 0 ? "OK" : "FAILED");
    fprintf(out, "# Avg bus bandwidth : %g\n", average_busbw(rows));
    fprintf(out, "#\n");
    fflush(out);
}

bool write_json(const std::string& path, const Options& o, int nranks, const std::vector<Row>& rows,
                std::string* error) {
    FILE* f = fopen(path.c_str(), "w");
    if (f == nullptr) {
        *error = "cannot open " + path + " for writing: " + strerror(errno);
        return false;
    }
    int version = 0;
    vcclGetVersion(&version);
    fprintf(f, "{\n  \"tool\": \"vccl-perf\",\n  \"library_version\": %d,\n  \"collective\": \"%s\",\n", version,
            coll_name(o.coll));
    fprintf(f, "  \"nranks\": %d,\n  \"datatype\": \"%s\",\n  \"op\": \"%s\",\n  \"root\": %d,\n", nranks,
            type_name(o.dtype), coll_has_op(o.coll) ? op_label(o) : "none", coll_has_root(o.coll) ? o.root : -1);
    fprintf(f, "  \"memory\": \"%s\",\n  \"alloc\": \"%s\",\n  \"bootstrap\": \"%s\",\n  \"baseline\": \"%s\",\n",
            memory_name(o.memory), o.memory == Memory::Cuda ? device_alloc_name(o.device_alloc) : "host",
            bootstrap_name(o.bootstrap), baseline_name(o.baseline));
    fprintf(f, "  \"stream_priority\": \"%s\",\n", o.high_priority ? "high" : "default");
    fprintf(f, "  \"min_bytes\": %zu,\n  \"max_bytes\": %zu,\n  \"step_factor\": %zu,\n  \"step_bytes\": %zu,\n",
            o.min_bytes, o.max_bytes, o.step_factor, o.step_bytes);
    fprintf(f, "  \"iters\": %d,\n  \"warmup_iters\": %d,\n  \"check\": %d,\n  \"time_across_ranks\": ", o.iters,
            o.warmup, o.check);
    json_string(f, kAverageNames[o.average]);
    fprintf(f, ",\n  \"results\": [");
    for (size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        fprintf(f, "%s\n    {\"size\": %zu, \"count\": %zu, \"out_of_place\": ", i ? "," : "", r.shape.bytes,
                r.shape.total_count);
        json_measure(f, r.out_of_place);
        fprintf(f, ", \"in_place\": ");
        json_measure(f, r.in_place);
        if (r.has_mpi && r.mpi_supported) {
            fprintf(f, ", \"%s\": ", baseline_name(o.baseline));
            json_measure(f, r.mpi);
        } else if (r.has_mpi) {
            fprintf(f, ", \"%s\": null", baseline_name(o.baseline));
        }
        if (!r.gemm_solos.empty()) {
            fprintf(f, ", \"gemm\": {\"n\": %d, \"solo_runs_tflops\": [", o.gemm_n);
            for (size_t i = 0; i < r.gemm_solos.size(); ++i) fprintf(f, "%s%.3f", i ? ", " : "", r.gemm_solos[i]);
            fprintf(f, "]");
            json_gemm(f, "vccl", r.gemm_vccl);
            if (r.gemm_base.tflops >= 0) json_gemm(f, baseline_name(o.baseline), r.gemm_base);
            fprintf(f, "}");
        }
        fprintf(f, "}");
    }
    long long wrong = total_wrong(rows);
    fprintf(f, "\n  ],\n  \"out_of_bounds\": %lld,\n  \"avg_busbw_gbs\": %.6f\n}\n", wrong, average_busbw(rows));
    bool ok = ferror(f) == 0;
    if (fclose(f) != 0) ok = false;
    if (!ok) *error = "error writing " + path + ": " + strerror(errno);
    return ok;
}

} // namespace vperf
