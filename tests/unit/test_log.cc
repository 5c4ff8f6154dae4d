/* SPDX-License-Identifier: BSD-3-Clause */
#include <gtest/gtest.h>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
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

/* VCCL_DEBUG_TIMESTAMPS=1: every line starts "host:pid [SECONDS.MICROS]" in wall-clock time; off by default. */
TEST(Log, WallClockTimestampsOnRequest) {
    std::string path = "/tmp/vccl-test-log-ts-" + std::to_string(getpid()) + ".txt";
    for (int on = 0; on < 2; ++on) {
        unlink(path.c_str());
        if (on) setenv("VCCL_DEBUG_TIMESTAMPS", "1", 1);
        setenv("VCCL_DEBUG_FILE", path.c_str(), 1);
        env::reload();
        log_reinit();
        /* The same clock the log reads: time() reads the kernel's coarse clock, which can trail
         * CLOCK_REALTIME by a tick, so across a second boundary the stamp looked "after" the bound. */
        timespec before = {}, after = {};
        clock_gettime(CLOCK_REALTIME, &before);
        VCCL_WARN(kLogNet, "stamped %d", on);
        clock_gettime(CLOCK_REALTIME, &after);
        unsetenv("VCCL_DEBUG_TIMESTAMPS");
        unsetenv("VCCL_DEBUG_FILE");
        env::reload();
        log_reinit();
        std::ifstream in(path);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        unlink(path.c_str());
        std::string prefix = ":" + std::to_string(getpid());
        size_t at = text.find(prefix);
        ASSERT_NE(at, std::string::npos) << text;
        std::string rest = text.substr(at + prefix.size());
        if (!on) {
            EXPECT_EQ(rest.rfind(" vccl WARN NET stamped 0", 0), 0u) << text;
            continue;
        }
        long long sec = 0;
        long micros = -1;
        char tail[64] = {};
        ASSERT_EQ(sscanf(rest.c_str(), " [%lld.%6ld] %63[^\n]", &sec, &micros, tail), 3) << text;
        EXPECT_EQ(rest.find("] vccl WARN NET stamped 1"), rest.find(']')) << text;
        EXPECT_GE(sec, (long long)before.tv_sec);
        EXPECT_LE(sec, (long long)after.tv_sec);
        EXPECT_GE(micros, 0);
        EXPECT_LT(micros, 1000000);
        EXPECT_EQ(rest.substr(rest.find('.') + 1, 7).back(), ']') << "six digits of microseconds: " << text;
    }
}

/* VCCL_DEBUG_FILE hardening: the log path is often predictable and in a shared directory. */
class LogFile : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/vccl-test-logfile-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        path_ = dir_ + "/vccl.log";
    }
    void TearDown() override {
        unsetenv("VCCL_DEBUG_FILE");
        env::reload();
        log_reinit(); // back to stderr, closes any file we opened
        unlink(path_.c_str());
        unlink(target_.c_str());
        rmdir(dir_.c_str());
    }
    /* Points VCCL_DEBUG_FILE at path_, reinitialises logging, logs one warning; returns what reached stderr. */
    std::string log_one_warning(const char* text) {
        setenv("VCCL_DEBUG_FILE", path_.c_str(), 1);
        env::reload();
        testing::internal::CaptureStderr();
        log_reinit();
        VCCL_WARN(kLogInit, "%s", text);
        return testing::internal::GetCapturedStderr();
    }
    static std::string read_file(const std::string& path) {
        std::ifstream in(path);
        std::stringstream text;
        text << in.rdbuf();
        return text.str();
    }
    std::string dir_, path_, target_;
};

TEST_F(LogFile, PlantedSymlinkIsRefusedAndLoggingFallsBackToStderr) {
    target_ = dir_ + "/victim";
    {
        std::ofstream victim(target_);
        victim << "precious\n";
    }
    ASSERT_EQ(chmod(target_.c_str(), 0644), 0);
    ASSERT_EQ(symlink(target_.c_str(), path_.c_str()), 0);
    std::string err = log_one_warning("symlink-fallback-marker");
    EXPECT_NE(err.find("cannot use VCCL_DEBUG_FILE " + path_), std::string::npos) << err;
    EXPECT_NE(err.find("symbolic link"), std::string::npos) << err;
    EXPECT_NE(err.find("vccl WARN INIT symlink-fallback-marker"), std::string::npos) << err; // the fallback
    EXPECT_EQ(read_file(target_), "precious\n");
    struct stat st;
    ASSERT_EQ(stat(target_.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0644u);
    ASSERT_EQ(lstat(path_.c_str(), &st), 0);
    EXPECT_TRUE(S_ISLNK(st.st_mode)); // left in place, not replaced
}

TEST_F(LogFile, DanglingSymlinkCreatesNothing) {
    target_ = dir_ + "/would-be-created";
    ASSERT_EQ(symlink(target_.c_str(), path_.c_str()), 0);
    std::string err = log_one_warning("dangling-marker");
    EXPECT_NE(err.find("symbolic link"), std::string::npos) << err;
    EXPECT_NE(err.find("dangling-marker"), std::string::npos) << err;
    struct stat st;
    EXPECT_NE(stat(target_.c_str(), &st), 0); // O_CREAT did not create the link's target
}

TEST_F(LogFile, NewFileIsMode0600WhateverTheUmask) {
    mode_t old = umask(0); // a permissive umask must not widen the mode
    std::string err = log_one_warning("mode-marker");
    umask(old);
    EXPECT_EQ(err, "");
    struct stat st;
    ASSERT_EQ(lstat(path_.c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    EXPECT_EQ(st.st_uid, geteuid());
    EXPECT_NE(read_file(path_).find("vccl WARN INIT mode-marker"), std::string::npos);
}

TEST_F(LogFile, PlantedFifoDoesNotBlock) {
    ASSERT_EQ(mkfifo(path_.c_str(), 0666), 0);
    std::string err = log_one_warning("fifo-marker"); // would hang in open() without O_NONBLOCK
    EXPECT_NE(err.find("cannot use VCCL_DEBUG_FILE"), std::string::npos) << err;
    EXPECT_NE(err.find("fifo-marker"), std::string::npos) << err;
}

TEST_F(LogFile, FileOfAnotherUserIsRefused) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to give the file to another user";
    {
        std::ofstream other(path_);
        other << "theirs\n";
    }
    ASSERT_EQ(chmod(path_.c_str(), 0666), 0);
    ASSERT_EQ(chown(path_.c_str(), 65534, 65534), 0);
    std::string err = log_one_warning("owner-marker");
    EXPECT_NE(err.find("belongs to another user"), std::string::npos) << err;
    EXPECT_NE(err.find("owner-marker"), std::string::npos) << err;
    EXPECT_EQ(read_file(path_), "theirs\n");
}
