#include <gtest/gtest.h>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <sys/stat.h>

#include "core/env.h"
#include "core/log.h"

using namespace vccl;

TEST(Log, ParseSubsys) {
    EXPECT_EQ(log_parse_subsys("ALL"), uint32_t(kLogAll));
    EXPECT_EQ(log_parse_subsys("INIT,NET"), uint32_t(kLogInit | kLogNet));
    EXPECT_EQ(log_parse_subsys("^COLL"), ~uint32_t(kLogColl));
    EXPECT_EQ(log_parse_subsys("bogus"), 0u);
}

TEST(Log, ExpandPath) {
    char out[256];
    log_expand_path("/tmp/vccl.%h.%p.log", out, sizeof(out));
    char host[64] = {};
    gethostname(host, sizeof(host) - 1);
    std::string expect = std::string("/tmp/vccl.") + host + "." + std::to_string(getpid()) + ".log";
    EXPECT_EQ(expect, out);
}

TEST(Log, LevelsSubsystemsAndFileWithPrivateMode) {
    std::string path = "/tmp/vccl-test-log-" + std::to_string(getpid()) + ".txt";
    unlink(path.c_str());
    setenv("VCCL_DEBUG", "INFO", 1);
    setenv("VCCL_DEBUG_SUBSYS", "NET", 1);
    setenv("VCCL_DEBUG_FILE", path.c_str(), 1);
    env::reload();
    log_reinit();
    EXPECT_TRUE(log_enabled(LogLevel::Info, kLogNet));
    EXPECT_FALSE(log_enabled(LogLevel::Info, kLogColl));
    EXPECT_TRUE(log_enabled(LogLevel::Warn, kLogColl)); // warnings always pass the subsystem filter
    EXPECT_FALSE(log_enabled(LogLevel::Trace, kLogNet));
    VCCL_INFO(kLogNet, "hello %d", 42);
    VCCL_INFO(kLogColl, "filtered out");
    unsetenv("VCCL_DEBUG");
    unsetenv("VCCL_DEBUG_SUBSYS");
    unsetenv("VCCL_DEBUG_FILE");
    env::reload();
    log_reinit(); // closes the file
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NE(text.str().find("vccl INFO NET hello 42"), std::string::npos) << text.str();
    EXPECT_EQ(text.str().find("filtered out"), std::string::npos);
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    unlink(path.c_str());
}
