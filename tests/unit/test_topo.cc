/* SPDX-License-Identifier: BSD-3-Clause */
/* src/topo: discovery, path classes and rail choice on the hand-made machines of tests/topo/ (written by
 * tests/topo/gen_topologies.py), the overrides, and the live topology of whatever machine runs the test. */
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/env.h"
#include "topo/topo.h"

using namespace vccl;

namespace {

const char* const kOverrideVars[] = {"VCCL_TOPO_FILE", "VCCL_NET_DEVICES", "VCCL_BACKUP_NET_DEVICES",
                                     "VCCL_PROXY_CPUS"};

class Topo : public ::testing::Test {
protected:
    void SetUp() override { clear_env(); }
    void TearDown() override { clear_env(); }
    static void clear_env() {
        for (const char* var : kOverrideVars) unsetenv(var);
        env::reload();
    }
    static void set_env(const char* var, const char* value) {
        setenv(var, value, 1);
        env::reload();
    }
    static std::unique_ptr<Topology> load(const std::string& name, TopoOptions options = {}) {
        options.xml_file = std::string(VCCL_TOPO_DIR) + "/" + name;
        std::unique_ptr<Topology> topo;
        EXPECT_EQ(topo_load(options, &topo), vcclSuccess) << name;
        return topo;
    }
    static RailChoice choose(const Topology& topo, int rank, int size) {
        RailChoice choice;
        EXPECT_EQ(topo_choose(topo, rank, size, &choice), vcclSuccess);
        return choice;
    }
    static std::string nic_name(const Topology& topo, int nic) { return topo.nics()[nic].ucx_name(); }
};

TEST_F(Topo, Dgx8Inventory) {
    auto topo = load("dgx8.xml");
    ASSERT_TRUE(topo);
    ASSERT_EQ(topo->gpus().size(), 8u);
    ASSERT_EQ(topo->nics().size(), 9u); // 8 InfiniBand ports + the management Ethernet port
    EXPECT_EQ(topo->numa_nodes().size(), 2u);
    EXPECT_EQ(topo->switches().size(), 4u);
    EXPECT_EQ(topo->gpus()[0].busid, "0000:13:00.0");
    EXPECT_EQ(topo->gpus()[7].busid, "0000:75:00.0");
    for (int i = 0; i < 8; ++i) {
        const TopoNic& nic = topo->nics()[i];
        EXPECT_EQ(nic.device, "mlx5_" + std::to_string(i));
        EXPECT_EQ(nic.port, 1);
        EXPECT_TRUE(nic.rdma);
        EXPECT_EQ(nic.link_layer, "InfiniBand");
        EXPECT_EQ(nic.pci_switch, i / 2);
        EXPECT_EQ(nic.numa, i / 4);
        EXPECT_EQ(topo->gpus()[i].pci_switch, i / 2);
        EXPECT_EQ(topo->gpus()[i].numa, i / 4);
    }
    EXPECT_EQ(topo->nics()[0].netdev, "ibp20s0");
    EXPECT_EQ(topo->nics()[8].device, "eno1");
    EXPECT_FALSE(topo->nics()[8].rdma);
    EXPECT_EQ(topo->nics()[8].ucx_name(), "eno1");
    EXPECT_EQ(topo->gpus()[0].cpulist, "0-7,16-23");
    EXPECT_EQ(topo->gpus()[5].cpulist, "8-15,24-31");
}

TEST_F(Topo, Dgx8Paths) {
    auto topo = load("dgx8.xml");
    ASSERT_TRUE(topo);
    EXPECT_EQ(path_name(topo->path(0, 0)), "PIX");  // same switch
    EXPECT_EQ(path_name(topo->path(0, 1)), "PIX");
    EXPECT_EQ(path_name(topo->path(0, 2)), "NODE"); // other switch, other host bridge, same socket
    EXPECT_EQ(path_name(topo->path(0, 4)), "SYS");  // other socket
    EXPECT_EQ(path_name(topo->path(7, 8)), "NODE");
    EXPECT_EQ(path_name(topo->gpu_path(0, 1)), "PIX");
    EXPECT_EQ(path_name(topo->gpu_path(0, 3)), "NODE");
    EXPECT_EQ(path_name(topo->gpu_path(2, 6)), "SYS");
    EXPECT_EQ(path_name(topo->nic_path(0, 1)), "PIX");
    EXPECT_EQ(path_name(topo->nic_path(1, 7)), "SYS");
}

TEST_F(Topo, Dgx8Choices) {
    auto topo = load("dgx8.xml");
    ASSERT_TRUE(topo);
    /* One rail per GPU; backups on the other switch of the same socket, spread so no NIC backs up two. */
    const char* primary[] = {"mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1",
                             "mlx5_4:1", "mlx5_5:1", "mlx5_6:1", "mlx5_7:1"};
    const char* backup[] = {"mlx5_2:1", "mlx5_3:1", "mlx5_0:1", "mlx5_1:1",
                            "mlx5_6:1", "mlx5_7:1", "mlx5_4:1", "mlx5_5:1"};
    for (int r = 0; r < 8; ++r) {
        RailChoice c = choose(*topo, r, 8);
        EXPECT_EQ(c.gpu, r);
        EXPECT_EQ(c.primary_ucx, primary[r]) << "rank " << r;
        EXPECT_EQ(c.primary_device, "mlx5_" + std::to_string(r));
        EXPECT_EQ(c.primary_port, 1);
        EXPECT_EQ(c.backup_ucx, backup[r]) << "rank " << r;
        EXPECT_EQ(c.cpulist, r < 4 ? "0-7,16-23" : "8-15,24-31");
        EXPECT_TRUE(c.warnings.empty()) << c.warnings[0];
        EXPECT_FALSE(c.reasons.empty());
    }
    /* More ranks than GPUs wrap around. */
    EXPECT_EQ(choose(*topo, 9, 16).primary_ucx, "mlx5_1:1");
}

TEST_F(Topo, DualPort8) {
    auto topo = load("dual_port8.xml");
    ASSERT_TRUE(topo);
    ASSERT_EQ(topo->gpus().size(), 8u);
    ASSERT_EQ(topo->nics().size(), 8u);
    EXPECT_EQ(topo->switches().size(), 6u); // per socket: a top switch and two leaf switches
    EXPECT_EQ(topo->nics()[0].hca, topo->nics()[1].hca); // two functions of one card
    EXPECT_NE(topo->nics()[1].hca, topo->nics()[2].hca);
    EXPECT_EQ(topo->nics()[0].link_layer, "Ethernet");
    EXPECT_EQ(topo->nics()[1].netdev, "ens51f1");
    EXPECT_EQ(path_name(topo->path(0, 0)), "PIX");
    EXPECT_EQ(path_name(topo->path(0, 1)), "PIX");
    EXPECT_EQ(path_name(topo->path(0, 2)), "PXB"); // via the top switch to the other leaf
    EXPECT_EQ(path_name(topo->path(0, 4)), "SYS");
    EXPECT_EQ(path_name(topo->gpu_path(0, 1)), "PIX");
    EXPECT_EQ(path_name(topo->gpu_path(1, 2)), "PXB");
    EXPECT_EQ(path_name(topo->gpu_path(3, 4)), "SYS");
    /* Each GPU of a leaf takes one port of the leaf's card; the backup is a port of the card on the other
     * leaf (another switch and card) rather than the other port of the same card. */
    const char* primary[] = {"mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1",
                             "mlx5_4:1", "mlx5_5:1", "mlx5_6:1", "mlx5_7:1"};
    const char* backup[] = {"mlx5_2:1", "mlx5_3:1", "mlx5_0:1", "mlx5_1:1",
                            "mlx5_6:1", "mlx5_7:1", "mlx5_4:1", "mlx5_5:1"};
    for (int r = 0; r < 8; ++r) {
        RailChoice c = choose(*topo, r, 8);
        EXPECT_EQ(c.primary_ucx, primary[r]) << "rank " << r;
        EXPECT_EQ(c.backup_ucx, backup[r]) << "rank " << r;
        EXPECT_EQ(c.cpulist, r < 4 ? "0-7,16-23" : "8-15,24-31");
    }
}

TEST_F(Topo, SingleNicHasNoBackup) {
    auto topo = load("single_nic2.xml");
    ASSERT_TRUE(topo);
    ASSERT_EQ(topo->gpus().size(), 2u); // a 3D and a VGA class NVIDIA device
    ASSERT_EQ(topo->nics().size(), 1u);
    EXPECT_EQ(topo->switches().size(), 0u);
    EXPECT_EQ(path_name(topo->path(0, 0)), "PHB");
    EXPECT_EQ(path_name(topo->gpu_path(0, 1)), "PHB");
    for (int r = 0; r < 2; ++r) {
        RailChoice c = choose(*topo, r, 2);
        EXPECT_EQ(c.primary_ucx, "mlx5_0:1");
        EXPECT_EQ(c.backup_ucx, "");
        EXPECT_EQ(c.backup_device, "");
        EXPECT_EQ(c.cpulist, "0-7");
        ASSERT_FALSE(c.warnings.empty());
        EXPECT_NE(c.warnings[0].find("no backup"), std::string::npos) << c.warnings[0];
    }
}

TEST_F(Topo, GpuBusIdsAndNvlinks) {
    TopoOptions options;
    options.gpu_busids = {"00000000:02:00.0", "0000:01:00.0", "0000:0A:00.0"}; // NVML and CUDA spellings
    options.nvlinks = {{0, 4, 0}, {4, 0, 0}, {0, 0, 0}};
    auto topo = load("single_nic2.xml", options);
    ASSERT_TRUE(topo);
    ASSERT_EQ(topo->gpus().size(), 3u);
    EXPECT_EQ(topo->gpus()[0].busid, "0000:02:00.0"); // CUDA order, not PCI order
    EXPECT_EQ(topo->gpus()[1].busid, "0000:01:00.0");
    EXPECT_EQ(path_name(topo->gpu_path(0, 1)), "NV4");
    EXPECT_EQ(path_name(topo->gpu_path(1, 0)), "NV4");
    EXPECT_FALSE(topo->gpus()[2].located); // not in the topology: nothing claimed
    EXPECT_EQ(path_name(topo->gpu_path(0, 2)), "SYS");
    EXPECT_EQ(path_name(topo->path(2, 0)), "SYS");
    EXPECT_EQ(choose(*topo, 2, 3).primary_ucx, "mlx5_0:1");

    std::unique_ptr<Topology> bad;
    options.nvlinks = {{0, 1}, {1, 0}};
    options.xml_file = std::string(VCCL_TOPO_DIR) + "/single_nic2.xml";
    EXPECT_EQ(topo_load(options, &bad), vcclInvalidArgument);
    options.nvlinks.clear();
    options.gpu_busids = {"0000:zz:00.0"};
    EXPECT_EQ(topo_load(options, &bad), vcclInvalidArgument);
    EXPECT_FALSE(bad);
}

TEST_F(Topo, NoGpuBoundProcess) {
    TopoOptions options;
    options.cpu_binding = "1-2"; // on socket 0
    auto topo = load("no_gpu.xml", options);
    ASSERT_TRUE(topo);
    EXPECT_TRUE(topo->gpus().empty());
    ASSERT_EQ(topo->nics().size(), 3u);
    EXPECT_EQ(nic_name(*topo, 0), "mlx5_0:1");
    EXPECT_EQ(nic_name(*topo, 1), "mlx5_1:1");
    EXPECT_EQ(nic_name(*topo, 2), "eth0");
    EXPECT_EQ(path_name(topo->anchor_path(0)), "NODE");
    EXPECT_EQ(path_name(topo->anchor_path(1)), "SYS");
    EXPECT_EQ(path_name(topo->nic_path(0, 1)), "SYS");
    EXPECT_EQ(path_name(topo->nic_path(0, 2)), "PHB");
    EXPECT_EQ(topo->anchor_cpulist(), "0-3,8-11");
    for (int r = 0; r < 2; ++r) {
        RailChoice c = choose(*topo, r, 2);
        EXPECT_EQ(c.gpu, -1);
        EXPECT_EQ(c.primary_ucx, "mlx5_0:1"); // the NIC of the process's socket
        EXPECT_EQ(c.backup_ucx, "mlx5_1:1");  // RDMA only: eth0 is not a backup for an RDMA rail
        EXPECT_EQ(c.cpulist, "0-3,8-11");
    }
}

TEST_F(Topo, NoGpuUnboundProcessSpreadsByRank) {
    auto topo = load("no_gpu.xml"); // XML: no binding to read, so the whole machine is the anchor
    ASSERT_TRUE(topo);
    EXPECT_EQ(topo->anchor_cpulist(), "0-15");
    RailChoice r0 = choose(*topo, 0, 2), r1 = choose(*topo, 1, 2);
    EXPECT_EQ(r0.primary_ucx, "mlx5_0:1");
    EXPECT_EQ(r0.backup_ucx, "mlx5_1:1");
    EXPECT_EQ(r1.primary_ucx, "mlx5_1:1");
    EXPECT_EQ(r1.backup_ucx, "mlx5_0:1");
}

/* A hand-built node: one GPU and one dual-port card. The only backup is the card's other port. */
TEST_F(Topo, SameCardBackupIsLastResort) {
    TopologyData d;
    d.source = "hand-built";
    d.gpus.resize(1);
    d.gpus[0].cpulist = "0-3";
    for (int port = 1; port <= 2; ++port) {
        TopoNic nic;
        nic.device = "mlx5_0";
        nic.port = port;
        nic.rdma = true;
        nic.hca = 0;
        nic.pci_switch = 0;
        d.nics.push_back(nic);
    }
    Path pix;
    pix.type = PathType::kPIX;
    d.gpu_nic = {{pix, pix}};
    d.gpu_gpu = {{pix}};
    d.nic_nic = {{pix, pix}, {pix, pix}};
    d.anchor_nic = {pix, pix};
    Topology topo(d);
    RailChoice c = choose(topo, 0, 1);
    EXPECT_EQ(c.primary_ucx, "mlx5_0:1");
    EXPECT_EQ(c.backup_ucx, "mlx5_0:2");
    ASSERT_EQ(c.warnings.size(), 1u);
    EXPECT_NE(c.warnings[0].find("shares a card"), std::string::npos);
}

TEST_F(Topo, NetDeviceOverrides) {
    auto topo = load("dgx8.xml");
    ASSERT_TRUE(topo);
    set_env("VCCL_NET_DEVICES", "mlx5_3:1, mlx5_2");
    RailChoice r0 = choose(*topo, 0, 8), r1 = choose(*topo, 1, 8), r2 = choose(*topo, 2, 8);
    EXPECT_EQ(r0.primary_ucx, "mlx5_3:1");
    EXPECT_EQ(r1.primary_ucx, "mlx5_2:1"); // port taken from the topology
    EXPECT_EQ(r2.primary_ucx, "mlx5_3:1"); // entry 2 mod 2
    /* Backups follow the user's primary: another switch than mlx5_3's, the closest to the GPU. */
    EXPECT_EQ(r0.backup_ucx, "mlx5_0:1");
    EXPECT_EQ(r1.backup_ucx, "mlx5_1:1");

    set_env("VCCL_BACKUP_NET_DEVICES", "mlx5_7:1,none");
    EXPECT_EQ(choose(*topo, 0, 8).backup_ucx, "mlx5_7:1");
    EXPECT_EQ(choose(*topo, 1, 8).backup_ucx, "");

    set_env("VCCL_NET_DEVICES", "rail0"); // not in the topology (a veth): honoured, with a warning
    RailChoice veth = choose(*topo, 0, 8);
    EXPECT_EQ(veth.primary_ucx, "rail0");
    EXPECT_FALSE(veth.warnings.empty());

    set_env("VCCL_NET_DEVICES", "mlx5_0:x");
    RailChoice bad;
    EXPECT_EQ(topo_choose(*topo, 0, 8, &bad), vcclInvalidArgument);
    set_env("VCCL_NET_DEVICES", "mlx5_0:1,,mlx5_1:1");
    EXPECT_EQ(topo_choose(*topo, 0, 8, &bad), vcclInvalidArgument);
    EXPECT_TRUE(bad.primary_ucx.empty()); // outputs untouched on failure
}

TEST_F(Topo, ProxyCpuOverride) {
    auto topo = load("dgx8.xml");
    ASSERT_TRUE(topo);
    set_env("VCCL_PROXY_CPUS", "2,0-1;5-6");
    EXPECT_EQ(choose(*topo, 0, 8).cpulist, "0-2");
    EXPECT_EQ(choose(*topo, 1, 8).cpulist, "5-6");
    EXPECT_EQ(choose(*topo, 2, 8).cpulist, "0-2");
    RailChoice bad;
    for (const char* text : {"0-3,abc", "4-2", "", "0-", "1;;2"}) {
        if (*text == '\0') continue; // empty means unset
        set_env("VCCL_PROXY_CPUS", text);
        EXPECT_EQ(topo_choose(*topo, 0, 8, &bad), vcclInvalidArgument) << text;
    }
}

TEST_F(Topo, BadInputs) {
    std::unique_ptr<Topology> topo;
    TopoOptions options;
    options.xml_file = "/nonexistent/topo.xml";
    EXPECT_EQ(topo_load(options, &topo), vcclInvalidArgument);
    options.xml_file = std::string(VCCL_TOPO_DIR) + "/gen_topologies.py";
    EXPECT_EQ(topo_load(options, &topo), vcclInvalidArgument);
    EXPECT_FALSE(topo);
    set_env("VCCL_TOPO_FILE", "/nonexistent/env.xml");
    EXPECT_EQ(topo_load(TopoOptions(), &topo), vcclInvalidArgument);

    auto dgx = load("dgx8.xml");
    ASSERT_TRUE(dgx);
    RailChoice c;
    EXPECT_EQ(topo_choose(*dgx, 8, 8, &c), vcclInvalidArgument);
    EXPECT_EQ(topo_choose(*dgx, -1, 8, &c), vcclInvalidArgument);
    EXPECT_EQ(topo_choose(*dgx, 0, 0, &c), vcclInvalidArgument);
}

TEST_F(Topo, EnvTopoFileAndPrimaryDevices) {
    set_env("VCCL_TOPO_FILE", (std::string(VCCL_TOPO_DIR) + "/dgx8.xml").c_str());
    EXPECT_EQ(topo_primary_devices(3, 8), "mlx5_3:1");
    set_env("VCCL_NET_DEVICES", "eth7");
    EXPECT_EQ(topo_primary_devices(3, 8), "eth7");
    set_env("VCCL_TOPO_FILE", "/nonexistent/env.xml"); // no topology: the override still holds
    EXPECT_EQ(topo_primary_devices(0, 1), "eth7");
    unsetenv("VCCL_NET_DEVICES");
    env::reload();
    EXPECT_EQ(topo_primary_devices(0, 1), "");
}

TEST_F(Topo, FormatTextAndJson) {
    auto topo = load("dgx8.xml");
    ASSERT_TRUE(topo);
    std::vector<RailChoice> choices;
    for (int r = 0; r < 8; ++r) choices.push_back(choose(*topo, r, 8));
    std::string text = topo_format_text(*topo, choices);
    EXPECT_NE(text.find("GPU0     X    PIX   NODE  NODE  SYS"), std::string::npos) << text;
    EXPECT_NE(text.find("NIC0: mlx5_0:1"), std::string::npos);
    EXPECT_NE(text.find("mlx5_0:1    mlx5_2:1    0-7,16-23"), std::string::npos) << text;
    EXPECT_NE(text.find("PIX  = Connection traversing at most a single PCIe bridge"), std::string::npos);
    std::string json = topo_format_json(*topo, choices);
    EXPECT_EQ(json.front(), '{');
    EXPECT_EQ(json.back(), '}');
    EXPECT_NE(json.find("\"primary\": \"mlx5_7:1\", \"backup\": \"mlx5_5:1\""), std::string::npos) << json;
    EXPECT_NE(json.find("[\"X\", \"PIX\", \"NODE\", \"NODE\", \"SYS\""), std::string::npos);
}

/* This machine, whatever it is (CI: no GPU, no RDMA): loads, chooses something sensible, prints. */
TEST_F(Topo, LiveMachine) {
    std::unique_ptr<Topology> topo;
    ASSERT_EQ(topo_load(TopoOptions(), &topo), vcclSuccess);
    ASSERT_TRUE(topo);
    EXPECT_EQ(topo->source(), "live");
    EXPECT_GE(topo->numa_nodes().size(), 1u);
    EXPECT_FALSE(topo->anchor_cpulist().empty());
    RailChoice c = choose(*topo, 0, 1);
    EXPECT_FALSE(c.cpulist.empty());
    if (!topo->nics().empty()) {
        EXPECT_FALSE(c.primary_ucx.empty());
    }
    bool any_rdma = false;
    for (const TopoNic& nic : topo->nics()) any_rdma = any_rdma || nic.rdma;
    std::string devices = topo_primary_devices(0, 1);
    if (!any_rdma) {
        EXPECT_EQ(devices, ""); // plain netdevs are left to UCX
    }
    std::string text = topo_format_text(*topo, {c});
    EXPECT_NE(text.find("# topology (live)"), std::string::npos);
    EXPECT_NE(topo_format_json(*topo, {c}).find("\"source\": \"live\""), std::string::npos);
}

} // namespace
