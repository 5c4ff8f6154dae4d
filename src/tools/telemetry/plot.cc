/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-telemetry plot: window bandwidth over time, one polyline per rank, peer, path and direction (SVG). */
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "tools/telemetry/tool.h"

namespace vtel {

namespace {

std::string esc(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '<') out += "&lt;";
        else if (c == '>') out += "&gt;";
        else if (c == '&') out += "&amp;";
        else out += c;
    }
    return out;
}

/* A round tick step giving about `n` ticks over `span`. */
double tick_step(double span, int n) {
    if (span <= 0) return 1;
    double raw = span / n, p = std::pow(10.0, std::floor(std::log10(raw)));
    double m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

} // namespace

int cmd_plot(int argc, char** argv) {
    std::string out = "telemetry.svg", title = "vccl telemetry: window bandwidth per path";
    std::vector<std::string> files;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if ((a == "-o" || a == "--output") && i + 1 < argc) {
            out = argv[++i];
        } else if (a == "--title" && i + 1 < argc) {
            title = argv[++i];
        } else if (a == "-h" || a == "--help") {
            printf("usage: vccl-telemetry plot [-o OUT.svg] [--title TEXT] FILE...\n");
            return 0;
        } else if (!a.empty() && a[0] == '-') {
            fprintf(stderr, "vccl-telemetry plot: unknown option '%s'\n", a.c_str());
            return 2;
        } else {
            files.push_back(a);
        }
    }
    if (files.empty()) {
        fprintf(stderr, "vccl-telemetry plot: no files\n");
        return 2;
    }
    std::map<std::tuple<int, int, int, bool>, std::vector<std::pair<double, double>>> series;
    int64_t t0 = INT64_MAX;
    std::vector<Row> rows;
    uint64_t dropped = 0;
    for (const std::string& f : files) {
        std::string why;
        if (f.size() > 4 && f.compare(f.size() - 4, 4, ".csv") == 0) {
            // A rank's .csv and .jsonl carry the same records: plot the .jsonl when both are given.
            std::string twin = f.substr(0, f.size() - 4) + ".jsonl";
            if (std::find(files.begin(), files.end(), twin) != files.end()) continue;
        }
        if (!load_file(f, &rows, &dropped, &why)) {
            fprintf(stderr, "vccl-telemetry plot: %s: %s\n", f.c_str(), why.c_str());
            return 1;
        }
    }
    for (const Row& r : rows) {
        if (!r.event && r.status == 0 && r.done_ns > 0) t0 = std::min(t0, r.done_ns);
    }
    double xmax = 0, ymax = 0;
    for (const Row& r : rows) {
        if (r.event || r.status != 0 || r.done_ns <= 0) continue;
        double x = double(r.done_ns - t0) / 1e9, y = r.window_bw / 1e9;
        series[std::make_tuple(r.rank, r.peer, r.path, r.send)].push_back({x, y});
        xmax = std::max(xmax, x);
        ymax = std::max(ymax, y);
    }
    if (series.empty()) {
        fprintf(stderr, "vccl-telemetry plot: no completed transfers in the files\n");
        return 1;
    }
    if (xmax <= 0) xmax = 1e-6;
    if (ymax <= 0) ymax = 1;
    const double W = 960, H = 540, L = 80, R = 230, T = 50, B = 60;
    const double pw = W - L - R, ph = H - T - B;
    double ystep = tick_step(ymax, 5), xstep = tick_step(xmax, 8);
    ymax = std::ceil(ymax / ystep) * ystep;
    auto X = [&](double x) { return L + x / xmax * pw; };
    auto Y = [&](double y) { return T + ph - y / ymax * ph; };

    FILE* f = fopen(out.c_str(), "w");
    if (f == nullptr) {
        perror(out.c_str());
        return 1;
    }
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
               "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
            W, H, W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"28\" font-size=\"16\">%s</text>\n", L, esc(title).c_str());
    for (double y = 0; y <= ymax + ystep / 2; y += ystep) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, Y(y), L + pw, Y(y));
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", L - 6, Y(y) + 4, y);
    }
    for (double x = 0; x <= xmax + xstep / 2; x += xstep) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", X(x), T, X(x), T + ph);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", X(x), T + ph + 18, x);
    }
    fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"black\"/>\n", L, T, pw, ph);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">time (s)</text>\n", L + pw / 2, H - 15);
    fprintf(f, "<text transform=\"translate(20 %.1f) rotate(-90)\" text-anchor=\"middle\">bandwidth (GB/s)</text>\n",
            T + ph / 2);
    static const char* const colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                         "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
    int k = 0;
    for (const auto& kv : series) {
        const char* color = colors[k % 10];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s points=\"", color,
                std::get<3>(kv.first) ? "" : " stroke-dasharray=\"5 3\"");
        for (const auto& p : kv.second) fprintf(f, "%.1f,%.1f ", X(p.first), Y(p.second));
        fprintf(f, "\"/>\n");
        if (k < 30) {
            double ly = T + 10 + k * 16;
            fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>\n",
                    L + pw + 12, ly, L + pw + 36, ly, color, std::get<3>(kv.first) ? "" : " stroke-dasharray=\"5 3\"");
            fprintf(f, "<text x=\"%.0f\" y=\"%.1f\">rank %d %s %d path %d</text>\n", L + pw + 42, ly + 4,
                    std::get<0>(kv.first), std::get<3>(kv.first) ? "-&gt;" : "&lt;-", std::get<1>(kv.first),
                    std::get<2>(kv.first));
        }
        ++k;
    }
    if (k > 30) fprintf(f, "<text x=\"%.0f\" y=\"%.1f\">... %d more</text>\n", L + pw + 12, T + 10 + 30 * 16.0, k - 30);
    fprintf(f, "</svg>\n");
    fclose(f);
    printf("vccl-telemetry plot: %zu path(s), %.3f s, wrote %s\n", series.size(), xmax, out.c_str());
    return 0;
}

} // namespace vtel
