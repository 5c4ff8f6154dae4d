/* SPDX-License-Identifier: BSD-3-Clause */
/* GoogleTest main for MPI programs: see mpi_gtest_main.h. */
#include "mpi_gtest_main.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace vtest {

namespace {

int g_rank = 0;
int g_size = 1;
unsigned g_timeout_s = 120;
char g_current[512] = "startup";
std::vector<std::function<void()>>& finalizers() {
    static std::vector<std::function<void()>> v;
    return v;
}

void append(char* buf, size_t cap, size_t* len, const char* s) {
    while (*s != '\0' && *len + 1 < cap) buf[(*len)++] = *s++;
    buf[*len] = '\0';
}

void append_uint(char* buf, size_t cap, size_t* len, unsigned long v) {
    char tmp[32];
    int n = 0;
    do {
        tmp[n++] = char('0' + v % 10);
        v /= 10;
    } while (v != 0 && n < 31);
    char out[32];
    for (int i = 0; i < n; ++i) out[i] = tmp[n - 1 - i];
    out[n] = '\0';
    append(buf, cap, len, out);
}

/* Async-signal-safe enough: formats with no allocation, writes with write(2). MPI_Abort is not
 * async-signal-safe, but the process is past saving at this point; a second alarm _exits if it hangs. */
void on_alarm(int) {
    static volatile sig_atomic_t fired = 0;
    if (fired) _exit(124);
    fired = 1;
    char msg[768];
    size_t len = 0;
    append(msg, sizeof msg, &len, "\n[rank ");
    append_uint(msg, sizeof msg, &len, unsigned(g_rank));
    append(msg, sizeof msg, &len, "] TIMEOUT: ");
    append(msg, sizeof msg, &len, g_current);
    append(msg, sizeof msg, &len, " ran longer than ");
    append_uint(msg, sizeof msg, &len, g_timeout_s);
    append(msg, sizeof msg, &len, " s (VCCL_TEST_TIMEOUT_S); aborting the job\n");
    ssize_t ignored = write(2, msg, len);
    (void)ignored;
    alarm(10);
    MPI_Abort(MPI_COMM_WORLD, 124);
    _exit(124);
}

void set_current(const char* what) {
    size_t len = 0;
    g_current[0] = '\0';
    append(g_current, sizeof g_current, &len, what);
}

class Watchdog : public ::testing::EmptyTestEventListener {
    void OnTestSuiteStart(const ::testing::TestSuite& suite) override {
        std::string what = std::string("set-up of test suite ") + suite.name();
        watchdog_arm(g_timeout_s, what.c_str());
    }
    void OnTestStart(const ::testing::TestInfo& info) override {
        std::string what = std::string("test ") + info.test_suite_name() + "." + info.name();
        watchdog_arm(g_timeout_s, what.c_str());
    }
    void OnTestEnd(const ::testing::TestInfo& info) override {
        std::string what = std::string("after test ") + info.test_suite_name() + "." + info.name();
        watchdog_arm(g_timeout_s, what.c_str());
    }
    void OnTestSuiteEnd(const ::testing::TestSuite& suite) override {
        std::string what = std::string("tear-down of test suite ") + suite.name();
        watchdog_arm(g_timeout_s, what.c_str());
    }
};

/* On ranks other than 0: print failures, except the collective ones that rank 0 reports already. */
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
    void OnTestPartResult(const ::testing::TestPartResult& r) override {
        if (!r.failed()) return;
        const char* msg = r.message() != nullptr ? r.message() : "";
        if (strstr(msg, "[all-ranks]") != nullptr) return;
        const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
        fprintf(stderr, "[rank %d] %s%s%s: %s:%d: Failure\n%s\n", g_rank, info ? info->test_suite_name() : "",
                info ? "." : "", info ? info->name() : "", r.file_name() ? r.file_name() : "?",
                r.line_number(), msg);
        fflush(stderr);
    }
};

} // namespace

int world_rank() { return g_rank; }
int world_size() { return g_size; }

double now_s() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

void watchdog_arm(unsigned seconds, const char* what) {
    alarm(0);
    set_current(what);
    if (seconds > 0) alarm(seconds);
}

bool all_ranks_ok(bool local_ok) {
    int in = local_ok ? 1 : 0, out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return out != 0;
}

RankCheck check_all_ranks(bool local_ok, const std::string& why) {
    RankCheck result{all_ranks_ok(local_ok), std::string()};
    if (result.ok) return result;
    /* Gather each rank's ok flag and explanation to rank 0. */
    std::string mine = local_ok ? std::string() : why.substr(0, 2000);
    int ok = local_ok ? 1 : 0;
    int len = int(mine.size());
    const size_t nr = static_cast<size_t>(g_size);
    std::vector<int> oks(nr), lens(nr), displs(nr);
    MPI_Gather(&ok, 1, MPI_INT, oks.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    int total = 0;
    for (int i = 0; i < g_size; ++i) {
        displs[size_t(i)] = total;
        total += lens[size_t(i)];
    }
    std::vector<char> all(size_t(total) + 1);
    MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
    if (g_rank != 0) return result;
    std::string ranks, whys;
    for (int i = 0; i < g_size; ++i) {
        if (oks[size_t(i)]) continue;
        if (!ranks.empty()) ranks += ",";
        ranks += std::to_string(i);
        if (lens[size_t(i)] > 0)
            whys += "\n  [rank " + std::to_string(i) + "] " +
                    std::string(all.data() + displs[size_t(i)], size_t(lens[size_t(i)]));
    }
    result.detail = "on rank(s) " + ranks + " of " + std::to_string(g_size) + whys;
    return result;
}

void on_finalize(std::function<void()> fn) { finalizers().push_back(std::move(fn)); }

} // namespace vtest

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &vtest::g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &vtest::g_size);
    setvbuf(stdout, nullptr, _IOLBF, 0);

    if (const char* t = getenv("VCCL_TEST_TIMEOUT_S")) {
        long v = strtol(t, nullptr, 10);
        if (v >= 0) vtest::g_timeout_s = unsigned(v);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = vtest::on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, nullptr);

    /* Ranks other than 0 must not write the XML report: drop GTEST_OUTPUT and --gtest_output before
     * gtest reads them, then also clear the flag and release the listeners in case they were installed. */
    if (vtest::g_rank != 0) {
        unsetenv("GTEST_OUTPUT");
        int out = 1;
        for (int i = 1; i < argc; ++i)
            if (strncmp(argv[i], "--gtest_output", 14) != 0) argv[out++] = argv[i];
        argv[out] = nullptr;
        argc = out;
    }
    ::testing::InitGoogleTest(&argc, argv);
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    if (vtest::g_rank != 0) {
        GTEST_FLAG_SET(output, "");
        delete listeners.Release(listeners.default_result_printer());
        delete listeners.Release(listeners.default_xml_generator());
        listeners.Append(new vtest::RankFailurePrinter);
    }
    listeners.Append(new vtest::Watchdog);

    vtest::watchdog_arm(vtest::g_timeout_s, "the tests");
    int rc = RUN_ALL_TESTS();

    vtest::watchdog_arm(vtest::g_timeout_s, "clean-up after the tests");
    auto& fins = vtest::finalizers();
    for (auto it = fins.rbegin(); it != fins.rend(); ++it) (*it)();
    fins.clear();

    /* Every rank exits with the same status: failed if any rank failed. */
    int any = 0;
    MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    vtest::watchdog_arm(vtest::g_timeout_s, "MPI_Finalize");
    MPI_Finalize();
    alarm(0);
    return any != 0 ? 1 : 0;
}
