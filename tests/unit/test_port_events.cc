/* Verbs port events of the failover paths (src/transport/failover/port_events.h): the state each event
 * leads to, device-list parsing, and what happens where no RDMA device exists (CI). A real port going down
 * needs RDMA hardware: not covered here. */
#include <gtest/gtest.h>

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
