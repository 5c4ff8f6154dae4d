/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-diag's judgement, without MPI or hardware: the verdict on synthetic bandwidth matrices, PCIe link
 * parsing against a fake sysfs tree, and the path findings of synthetic telemetry rings. */
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tools/diag/diag.h"

using vdiag::analyze_matrix;
using vdiag::MatrixVerdict;
using Matrix = std::vector<std::vector<double>>;

namespace {

/* n ranks, every link at `fast` bytes/s, diagonal unmeasured. */
Matrix uniform(int n, double fast) {
    Matrix m(size_t(n), std::vector<double>(size_t(n), fast));
    for (int i = 0; i < n; ++i) m[size_t(i)][size_t(i)] = -1;
    return m;
}

} // namespace

TEST(DiagMatrix, UniformMatrixHasNoSlowLink) {
    MatrixVerdict v = analyze_matrix(uniform(4, 10e9), 0.5);
    EXPECT_DOUBLE_EQ(v.median, 10e9);
    EXPECT_TRUE(v.slow.empty());
    EXPECT_EQ(v.suspect_rank, -1);
    // Ties: the first link in (src, dst) order and the lowest rank, so that the verdict is reproducible.
    EXPECT_EQ(v.slowest.src, 0);
    EXPECT_EQ(v.slowest.dst, 1);
    EXPECT_EQ(v.slowest_rank, 0);
}

TEST(DiagMatrix, OneSlowLinkIsNamedButHasNoSuspect) {
    Matrix m = uniform(4, 10e9);
    m[1][3] = 2e9;
    MatrixVerdict v = analyze_matrix(m, 0.5);
    EXPECT_EQ(v.slowest.src, 1);
    EXPECT_EQ(v.slowest.dst, 3);
    EXPECT_DOUBLE_EQ(v.slowest.bw, 2e9);
    ASSERT_EQ(v.slow.size(), 1u);
    EXPECT_EQ(v.slow[0].src, 1);
    // One link has two ends: no single rank explains it.
    EXPECT_EQ(v.suspect_rank, -1);
    // Ranks 1 and 3 touch it equally; the lower one wins the tie.
    EXPECT_EQ(v.slowest_rank, 1);
}

TEST(DiagMatrix, RankWithSlowTransmitSideIsSuspectAndSlowest) {
    // The netns test's shape: rank 2 sends slowly to everyone, one unrelated link is noisy but not slow.
    Matrix m = {{-1, 0.78e9, 1.0e9}, {0.86e9, -1, 0.63e9}, {0.024e9, 0.023e9, -1}};
    MatrixVerdict v = analyze_matrix(m, 0.5);
    ASSERT_EQ(v.slow.size(), 2u);
    EXPECT_EQ(v.slow[0].src, 2); // slowest first
    EXPECT_EQ(v.slow[0].dst, 1);
    EXPECT_EQ(v.slow[1].dst, 0);
    EXPECT_EQ(v.suspect_rank, 2);
    EXPECT_EQ(v.slowest_rank, 2);
    EXPECT_EQ(v.slowest.src, 2);
}

TEST(DiagMatrix, SlowestRankIsNotHiddenByOneFastLink) {
    // An arithmetic mean would pick rank 0 (one slow link among slow-ish ones); the harmonic mean sees that
    // rank 2's two very slow links cost more time than anything rank 0 does.
    Matrix m = {{-1, 140e6, 311e6}, {112e6, -1, 531e6}, {8.4e6, 8.4e6, -1}};
    MatrixVerdict v = analyze_matrix(m, 0.5);
    EXPECT_EQ(v.slowest_rank, 2);
    EXPECT_EQ(v.suspect_rank, 2);
}

TEST(DiagMatrix, FractionIsTheThreshold) {
    Matrix m = uniform(3, 10e9);
    m[0][1] = 4.9e9; // below 0.5 x 10e9
    m[1][0] = 5.0e9; // exactly at 0.5 x median: not below
    MatrixVerdict v = analyze_matrix(m, 0.5);
    EXPECT_DOUBLE_EQ(v.median, 10e9);
    ASSERT_EQ(v.slow.size(), 1u);
    EXPECT_EQ(v.slow[0].src, 0);
    EXPECT_EQ(v.slow[0].dst, 1);
    EXPECT_TRUE(analyze_matrix(m, 0.0).slow.empty());        // 0: nothing is ever slow
    EXPECT_EQ(analyze_matrix(m, 0.9).slow.size(), 2u);       // stricter: both
    EXPECT_EQ(analyze_matrix(m, 0.9).suspect_rank, -1);      // 0->1 and 1->0: two candidates, no one
}

TEST(DiagMatrix, MedianOfEvenCountAveragesTheMiddle) {
    Matrix m = {{-1, 1e9}, {3e9, -1}};
    MatrixVerdict v = analyze_matrix(m, 0.5);
    EXPECT_DOUBLE_EQ(v.median, 2e9);
    EXPECT_TRUE(v.slow.empty()); // 1e9 is not below 0.5 x 2e9
    EXPECT_EQ(v.slowest.src, 0);
}

TEST(DiagMatrix, NothingMeasured) {
    MatrixVerdict v = analyze_matrix(uniform(1, 0), 0.5);
    EXPECT_EQ(v.slowest.src, -1);
    EXPECT_EQ(v.slowest_rank, -1);
    Matrix unmeasured = {{-1, -1}, {-1, -1}};
    EXPECT_EQ(analyze_matrix(unmeasured, 0.5).slowest.src, -1);
}

TEST(DiagMatrix, SectionJsonAndFindings) {
    Matrix m = uniform(3, 10e9);
    m[2][0] = m[2][1] = 1e9;
    vdiag::Section s;
    vdiag::matrix_section(m, analyze_matrix(m, 0.5), 1 << 20, 2, false, &s);
    EXPECT_EQ(s.name, "sweep");
    EXPECT_EQ(s.findings.size(), 3u); // two slow links and the suspect
    EXPECT_NE(s.json.find("\"matrix\":[[null,10000000000,10000000000],"), std::string::npos) << s.json;
    EXPECT_NE(s.json.find("\"suspect_rank\":2"), std::string::npos) << s.json;
    EXPECT_NE(s.json.find("\"slowest_rank\":{\"rank\":2,"), std::string::npos) << s.json;
    EXPECT_NE(s.text.find("slowest link 2 -> 0"), std::string::npos) << s.text;
}

TEST(DiagPcie, ParsesKernelSpeedTexts) {
    EXPECT_DOUBLE_EQ(vdiag::parse_link_speed("16.0 GT/s PCIe"), 16.0);
    EXPECT_DOUBLE_EQ(vdiag::parse_link_speed("8 GT/s"), 8.0);
    EXPECT_DOUBLE_EQ(vdiag::parse_link_speed("2.5 GT/s PCIe"), 2.5);
    EXPECT_DOUBLE_EQ(vdiag::parse_link_speed("Unknown"), 0.0);
    EXPECT_DOUBLE_EQ(vdiag::parse_link_speed(""), 0.0);
}

TEST(DiagPcie, ReadsAFakeSysfsTree) {
    char root[] = "/tmp/vccl-diag-sysfs-XXXXXX";
    ASSERT_NE(mkdtemp(root), nullptr);
    std::string dev = std::string(root) + "/bus/pci/devices/0000:1b:00.0";
    ASSERT_EQ(system(("mkdir -p " + dev).c_str()), 0);
    auto put = [&](const char* name, const char* text) { std::ofstream(dev + "/" + name) << text << "\n"; };
    put("current_link_width", "8");
    put("max_link_width", "16");
    put("current_link_speed", "16.0 GT/s PCIe");
    put("max_link_speed", "16.0 GT/s PCIe");
    vdiag::PcieLink l = vdiag::read_pcie_link(root, "0000:1b:00.0");
    EXPECT_TRUE(l.present);
    EXPECT_EQ(l.width, 8);
    EXPECT_EQ(l.max_width, 16);
    EXPECT_TRUE(l.width_degraded());
    EXPECT_FALSE(l.speed_degraded());
    EXPECT_FALSE(vdiag::read_pcie_link(root, "0000:99:00.0").present); // not there: not a finding
    EXPECT_EQ(system((std::string("rm -rf ") + root).c_str()), 0);
}

namespace {

vccl::telemetry::PathStats path(int peer, int p, vccl::telemetry::PathState state, uint64_t events) {
    vccl::telemetry::PathStats s{};
    s.peer = peer;
    s.path = p;
    s.state = uint32_t(state);
    s.used = 1;
    s.events = events;
    return s;
}

} // namespace

TEST(DiagPaths, DownPathAndSwitchEventsAreFindings) {
    using vccl::telemetry::PathState;
    vtel::RingView r;
    r.file = "vccl-job-abc-0";
    r.rank = 0;
    r.paths = {path(1, 0, PathState::Up, 0), path(1, 1, PathState::Standby, 0),     // healthy
               path(2, 0, PathState::Down, 1), path(2, 1, PathState::Up, 1)};       // failed over
    std::vector<std::string> f = vdiag::path_findings(r);
    ASSERT_EQ(f.size(), 2u);
    EXPECT_NE(f[0].find("path 0 to peer 2 is down"), std::string::npos) << f[0];
    EXPECT_NE(f[1].find("peer 2 had 2 path state change"), std::string::npos) << f[1];

    r.paths = {path(1, 0, PathState::Up, 0), path(1, 1, PathState::Standby, 0)};
    EXPECT_TRUE(vdiag::path_findings(r).empty());
}

TEST(DiagPaths, OnlyLiveRingsAreJudged) {
    using vccl::telemetry::PathState;
    vtel::RingView r;
    r.paths = {path(1, 0, PathState::Down, 3)};
    r.closed = true;
    EXPECT_TRUE(vdiag::path_findings(r).empty());
    r.closed = false;
    r.alive = false;
    EXPECT_TRUE(vdiag::path_findings(r).empty());
    r.alive = true;
    EXPECT_EQ(vdiag::path_findings(r).size(), 2u);
}
