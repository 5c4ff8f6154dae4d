/* SPDX-License-Identifier: BSD-3-Clause */
/* Verbs port events of the failover paths (src/transport/failover/port_events.h): the state each event
 * leads to, device-list parsing, and what happens where no RDMA device exists (CI). A real port going down
 * needs RDMA hardware: not covered here. */
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "transport/failover/link_monitor.h"
#include "transport/failover/port_events.h"

using vccl::failover::apply_port_event;
using vccl::failover::parse_rdma_device;
using vccl::failover::PortEvent;
using vccl::failover::PortEvents;
using vccl::failover::PortWatch;

TEST(PortEvents, ErrorAndActiveOfTheWatchedPortOnly) {
    PortWatch w;
    w.device = "mlx5_0";
    w.port = 2;
    EXPECT_FALSE(apply_port_event(&w, PortEvent::kPortError, 1)); // another port of the same device
    EXPECT_TRUE(w.up);
    EXPECT_TRUE(apply_port_event(&w, PortEvent::kPortError, 2));
    EXPECT_FALSE(w.up);
    EXPECT_FALSE(apply_port_event(&w, PortEvent::kPortError, 2)); // repeated: no change
    EXPECT_FALSE(apply_port_event(&w, PortEvent::kPortActive, 1));
    EXPECT_FALSE(w.up);
    EXPECT_FALSE(apply_port_event(&w, PortEvent::kOther, 2));
    EXPECT_FALSE(w.up);
    EXPECT_TRUE(apply_port_event(&w, PortEvent::kPortActive, 2));
    EXPECT_TRUE(w.up);
}

TEST(PortEvents, DeviceFatalIsForGood) {
    PortWatch w;
    EXPECT_TRUE(apply_port_event(&w, PortEvent::kDeviceFatal, 0));
    EXPECT_FALSE(w.up);
    EXPECT_FALSE(apply_port_event(&w, PortEvent::kPortActive, 1)); // the context is dead: stays down
    EXPECT_FALSE(w.up);
}

TEST(PortEvents, ParsesTheFirstEntryOfADeviceList) {
    std::string dev;
    int port = 0;
    ASSERT_TRUE(parse_rdma_device("mlx5_0:1", &dev, &port));
    EXPECT_EQ("mlx5_0", dev);
    EXPECT_EQ(1, port);
    ASSERT_TRUE(parse_rdma_device("mlx5_3:2,mlx5_4:1", &dev, &port));
    EXPECT_EQ("mlx5_3", dev);
    EXPECT_EQ(2, port);
    ASSERT_TRUE(parse_rdma_device("ibp12s0", &dev, &port));
    EXPECT_EQ("ibp12s0", dev);
    EXPECT_EQ(1, port);
    EXPECT_FALSE(parse_rdma_device("", &dev, &port));
    EXPECT_FALSE(parse_rdma_device(":1", &dev, &port));
    EXPECT_FALSE(parse_rdma_device("mlx5_0:", &dev, &port));
    EXPECT_FALSE(parse_rdma_device("mlx5_0:x", &dev, &port));
    EXPECT_FALSE(parse_rdma_device("mlx5_0:0", &dev, &port));
}

TEST(PortEvents, DevicesThatDoNotExistAreNotWatchedAndCountAsUp) {
    PortEvents ports({"vccl_no_such_rdma0:1", "", "lo"});
    for (int path = 0; path < 3; ++path) {
        EXPECT_FALSE(ports.watched(path));
        EXPECT_TRUE(ports.up(path));
        EXPECT_EQ("", ports.name(path));
    }
    EXPECT_FALSE(ports.poll());
}

TEST(PortEvents, LinkMonitorWithAnUnknownRdmaNameLeavesThePathUp) {
    vccl::failover::LinkMonitor links({"vccl_no_such_rdma0:1", "lo"});
    EXPECT_FALSE(links.poll());
    EXPECT_TRUE(links.up(0));
    EXPECT_EQ("", links.device(0));
    EXPECT_EQ("lo", links.device(1)); // a netdev: watched through netlink
    EXPECT_TRUE(links.up(1));
}

/* A rail device that disappears (unplugged, its VF unbound, moved to another namespace) must read as down: the
 * direct query after the RTM_DELLINK event finds no device, and that must not report it up again. Needs root and
 * iproute2 to make a veth pair (CI has both); skipped otherwise. */
TEST(LinkMonitorDevices, RemovedDeviceIsDown) {
    std::string a = "vccltd" + std::to_string(getpid() % 100000), b = a + "p";
    std::string add = "ip link add " + a + " type veth peer name " + b + " >/dev/null 2>&1 && ip link set " + a +
                      " up >/dev/null 2>&1 && ip link set " + b + " up >/dev/null 2>&1";
    if (system(add.c_str()) != 0) {
        system(("ip link del " + a + " >/dev/null 2>&1").c_str());
        GTEST_SKIP() << "cannot create a veth pair here (needs root and iproute2)";
    }
    vccl::failover::LinkMonitor links({a});
    bool up = false;
    for (int i = 0; i < 200 && !up; ++i) { // the carrier comes up shortly after both ends are up
        links.poll();
        up = links.up(0);
        if (!up) usleep(10000);
    }
    EXPECT_TRUE(up) << a << " never came up";
    ASSERT_EQ(system(("ip link del " + a + " >/dev/null 2>&1").c_str()), 0);
    bool down = false;
    for (int i = 0; i < 200 && !down; ++i) {
        links.poll();
        down = !links.up(0);
        if (!down) usleep(10000);
    }
    EXPECT_TRUE(down) << "a deleted device still reads as up";
}
