#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes the hwloc XML (format v2) topologies that tests/unit/test_topo.cc loads.

The files are committed; rerun this script after changing a machine below and check each result with
`hwloc-ls --input FILE`. Each machine is described as a tree of PCI objects under host bridges, so that
the tests exercise every path class (PIX, PXB, PHB, NODE, SYS) on known layouts.

Usage: tests/topo/gen_topologies.py [OUTDIR]   (default: the folder of this script)
"""
import os
import sys
from xml.sax.saxutils import quoteattr

GPU_TYPE = "0302 [10de:2330] [10de:16c1] a1"   # 3D controller, NVIDIA H100 SXM
VGA_TYPE = "0300 [10de:2204] [10de:1454] a1"   # VGA controller, NVIDIA (class 0300 counts too)
NIC_TYPE = "0207 [15b3:1021] [15b3:0041] 00"   # InfiniBand controller, ConnectX-7
ETH_TYPE = "0200 [15b3:101d] [15b3:0016] 00"   # Ethernet controller, ConnectX-6 Dx
BRIDGE_TYPE = "0604 [10b5:c010] [0000:0000] b0"  # PCI bridge (switch port)
NVME_TYPE = "0108 [144d:a824] [144d:a801] 00"  # NVMe


class Gen:
    def __init__(self, packages, cores_per_package, threads=2):
        self.gp = 100
        self.packages = packages
        self.cores = cores_per_package
        self.threads = threads
        self.lines = []
        self.npu = packages * cores_per_package * threads

    def gp_index(self):
        self.gp += 1
        return self.gp

    # PU numbering like Linux on SMT machines: first thread of every core first, then the siblings.
    def pus_of_package(self, p):
        first = [p * self.cores + c for c in range(self.cores)]
        pus = []
        for t in range(self.threads):
            pus += [x + t * self.packages * self.cores for x in first]
        return sorted(pus)

    @staticmethod
    def mask(bits):
        value = 0
        for b in bits:
            value |= 1 << b
        words = []
        while True:
            words.append(value & 0xffffffff)
            value >>= 32
            if value == 0:
                break
        return ",".join("0x%08x" % w for w in reversed(words))

    def emit(self, depth, text):
        self.lines.append("  " * depth + text)


def sets(cpus, nodes):
    c = Gen.mask(cpus)
    n = Gen.mask(nodes)
    return 'cpuset="%s" complete_cpuset="%s" nodeset="%s" complete_nodeset="%s"' % (c, c, n, n)


class Pci:
    """A PCI device, bridge or host bridge with its children and OS devices."""

    def __init__(self, kind, busid=None, pci_type=None, children=(), osdevs=(), bus_range=None):
        self.kind = kind          # "host", "bridge" or "dev"
        self.busid = busid
        self.pci_type = pci_type
        self.children = list(children)
        self.osdevs = list(osdevs)
        self.bus_range = bus_range


def host(bus_range, *children):
    return Pci("host", children=children, bus_range=bus_range)


def bridge(busid, bus_range, *children):
    return Pci("bridge", busid, BRIDGE_TYPE, children, bus_range=bus_range)


def dev(busid, pci_type, *osdevs):
    return Pci("dev", busid, pci_type, osdevs=osdevs)


def ib(name, ports, netdev=None, link="InfiniBand"):
    """An OpenFabrics OS device with `ports` ports, plus its netdev (IPoIB or RoCE) when named."""
    infos = [("NodeGUID", "b83f:d203:00%s:0000" % name[-2:].replace("_", "0"))]
    for p in range(1, ports + 1):
        infos += [("Port%dState" % p, "4"),
                  ("Port%dLID" % p, "0x%x" % (p + 16) if link == "InfiniBand" else "0"),
                  ("Port%dLinkLayer" % p, link)]
    out = [(name, 3, infos)]
    if netdev:
        out.append((netdev, 2, [("Address", "00:00:00:00:00:00")]))
    return out


def write_pci(g, depth, node):
    gp = g.gp_index()
    if node.kind == "host":
        g.emit(depth, '<object type="Bridge" gp_index="%d" bridge_type="0-1" depth="0" bridge_pci="0000:[%s]">'
               % (gp, node.bus_range))
    elif node.kind == "bridge":
        g.emit(depth, '<object type="Bridge" gp_index="%d" bridge_type="1-1" depth="%d" bridge_pci="0000:[%s]" '
               'pci_busid="%s" pci_type="%s" pci_link_speed="31.507692">'
               % (gp, node.depth, node.bus_range, node.busid, node.pci_type))
    else:
        g.emit(depth, '<object type="PCIDev" gp_index="%d" pci_busid="%s" pci_type="%s" pci_link_speed="31.507692">'
               % (gp, node.busid, node.pci_type))
    for child in node.children:
        child.depth = (node.depth + 1) if node.kind == "bridge" else 1 if node.kind == "host" else 0
        write_pci(g, depth + 1, child)
    for group in node.osdevs:
        for name, osdev_type, infos in group:
            g.emit(depth + 1, '<object type="OSDev" gp_index="%d" name=%s osdev_type="%d">'
                   % (g.gp_index(), quoteattr(name), osdev_type))
            for key, value in infos:
                g.emit(depth + 2, '<info name=%s value=%s/>' % (quoteattr(key), quoteattr(value)))
            g.emit(depth + 1, '</object>')
    g.emit(depth, '</object>')


def machine(packages, cores, io_per_package, hostname, threads=2):
    """io_per_package[p]: list of host bridges attached to package p (its NUMA node)."""
    g = Gen(packages, cores, threads)
    allpus = list(range(g.npu))
    allnodes = list(range(packages))
    g.emit(0, '<?xml version="1.0" encoding="UTF-8"?>')
    g.emit(0, '<!DOCTYPE topology SYSTEM "hwloc2.dtd">')
    g.emit(0, '<topology version="2.0">')
    m = Gen.mask(allpus)
    n = Gen.mask(allnodes)
    g.emit(1, '<object type="Machine" os_index="0" %s allowed_cpuset="%s" allowed_nodeset="%s" gp_index="1">'
           % (sets(allpus, allnodes), m, n))
    g.emit(2, '<info name="Backend" value="Linux"/>')
    g.emit(2, '<info name="HostName" value=%s/>' % quoteattr(hostname))
    g.emit(2, '<info name="Architecture" value="x86_64"/>')
    for p in range(packages):
        pus = g.pus_of_package(p)
        g.emit(2, '<object type="Package" os_index="%d" %s gp_index="%d">' % (p, sets(pus, [p]), g.gp_index()))
        g.emit(3, '<object type="NUMANode" os_index="%d" %s gp_index="%d" local_memory="137438953472"/>'
               % (p, sets(pus, [p]), g.gp_index()))
        for c in range(cores):
            core_pus = [p * cores + c + t * packages * cores for t in range(threads)]
            g.emit(3, '<object type="Core" os_index="%d" %s gp_index="%d">'
                   % (c, sets(core_pus, [p]), g.gp_index()))
            for pu in core_pus:
                g.emit(4, '<object type="PU" os_index="%d" %s gp_index="%d"/>' % (pu, sets([pu], [p]), g.gp_index()))
            g.emit(3, '</object>')
        for hb in io_per_package[p]:
            write_pci(g, 3, hb)
        g.emit(2, '</object>')
    g.emit(1, '</object>')
    g.emit(0, '</topology>')
    return "\n".join(g.lines) + "\n"


def dgx8():
    """Two sockets, four PCIe switches (two per socket, each behind its own root port and host bridge);
    each switch has 2 GPUs and 2 single-port InfiniBand NICs on its downstream ports, like a DGX H100.
    Package 1 also has a storage NVMe and a management Ethernet port on a root port of their own."""
    io = [[], []]
    sw = 0
    for p in range(2):
        for s in range(2):
            base = 0x10 + sw * 0x20     # buses of this switch's hierarchy
            gpu0, gpu1, nic0, nic1 = 2 * sw, 2 * sw + 1, 2 * sw, 2 * sw + 1

            def b(off):
                return "%02x" % (base + off)
            switch = bridge("0000:%s:00.0" % b(1), "%s-%s" % (b(2), b(7)),
                            bridge("0000:%s:00.0" % b(2), "%s-%s" % (b(3), b(3)),
                                   dev("0000:%s:00.0" % b(3), GPU_TYPE)),
                            bridge("0000:%s:01.0" % b(2), "%s-%s" % (b(4), b(4)),
                                   dev("0000:%s:00.0" % b(4), NIC_TYPE, ib("mlx5_%d" % nic0, 1, "ibp%ds0" % (base + 4)))),
                            bridge("0000:%s:02.0" % b(2), "%s-%s" % (b(5), b(5)),
                                   dev("0000:%s:00.0" % b(5), GPU_TYPE)),
                            bridge("0000:%s:03.0" % b(2), "%s-%s" % (b(6), b(6)),
                                   dev("0000:%s:00.0" % b(6), NIC_TYPE, ib("mlx5_%d" % nic1, 1, "ibp%ds0" % (base + 6)))))
            root = bridge("0000:%s:01.0" % b(0), "%s-%s" % (b(1), b(7)), switch)
            io[p].append(host("%s-%s" % (b(0), b(7)), root))
            del gpu0, gpu1
            sw += 1
    io[1].append(host("f0-f2",
                      bridge("0000:f0:01.0", "f1-f1", dev("0000:f1:00.0", NVME_TYPE, [("nvme0n1", 0, [])])),
                      bridge("0000:f0:02.0", "f2-f2", dev("0000:f2:00.0", ETH_TYPE, [("eno1", 2, [])]))))
    return machine(2, 8, io, "dgx8")


def dual_port8():
    """Two sockets, one host bridge each, a two-level PCIe switch tree under it: a top switch with two
    leaf switches; each leaf has 2 GPUs and one dual-port ConnectX (ports as PCI functions .0/.1 of one
    card, mlx5_2k and mlx5_2k+1). RoCE (Ethernet link layer) with netdevs."""
    io = [[], []]
    hca = 0
    gpu = 0
    for p in range(2):
        base = 0x20 + p * 0x80
        leaves = []
        for leaf in range(2):
            lb = base + 0x10 + leaf * 0x10

            def b(off, lb=lb):
                return "%02x" % (lb + off)
            nic = dev("0000:%s:00.0" % b(3), ETH_TYPE, ib("mlx5_%d" % (2 * hca), 1, "ens%df0" % (lb + 3), "Ethernet"))
            nic_fn1 = dev("0000:%s:00.1" % b(3), ETH_TYPE,
                          ib("mlx5_%d" % (2 * hca + 1), 1, "ens%df1" % (lb + 3), "Ethernet"))
            leaves.append(bridge("0000:%02x:%02x.0" % (base + 2, leaf), "%s-%s" % (b(0), b(5)),
                                 bridge("0000:%s:00.0" % b(0), "%s-%s" % (b(1), b(5)),
                                        bridge("0000:%s:00.0" % b(1), "%s-%s" % (b(2), b(2)),
                                               dev("0000:%s:00.0" % b(2), GPU_TYPE)),
                                        bridge("0000:%s:01.0" % b(1), "%s-%s" % (b(3), b(3)), nic, nic_fn1),
                                        bridge("0000:%s:02.0" % b(1), "%s-%s" % (b(4), b(4)),
                                               dev("0000:%s:00.0" % b(4), GPU_TYPE)))))
            hca += 1
            gpu += 2
        top = bridge("0000:%02x:00.0" % (base + 1), "%02x-%02x" % (base + 2, base + 0x3f), *leaves)
        root = bridge("0000:%02x:01.0" % base, "%02x-%02x" % (base + 1, base + 0x3f), top)
        io[p].append(host("%02x-%02x" % (base, base + 0x3f), root))
    return machine(2, 8, io, "dualport8")


def single_nic2():
    """One socket, 2 GPUs and one single-port NIC, each on its own root port of the one host bridge
    (so every pair is PHB). The second GPU is a VGA-class device to cover class 0x0300."""
    io = [[host("00-03",
                bridge("0000:00:01.0", "01-01", dev("0000:01:00.0", GPU_TYPE)),
                bridge("0000:00:02.0", "02-02", dev("0000:02:00.0", VGA_TYPE)),
                bridge("0000:00:03.0", "03-03", dev("0000:03:00.0", NIC_TYPE, ib("mlx5_0", 1, "ib0"))))]]
    return machine(1, 4, io, "singlenic2")


def no_gpu():
    """Two sockets, no GPU: one InfiniBand NIC per socket and an Ethernet port on socket 0."""
    io = [[host("00-02",
                bridge("0000:00:01.0", "01-01", dev("0000:01:00.0", NIC_TYPE, ib("mlx5_0", 1, "ib0"))),
                bridge("0000:00:02.0", "02-02", dev("0000:02:00.0", ETH_TYPE, [("eth0", 2, [])])))],
          [host("80-81",
                bridge("0000:80:01.0", "81-81", dev("0000:81:00.0", NIC_TYPE, ib("mlx5_1", 1, "ib1"))))]]
    return machine(2, 4, io, "nogpu")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for name, fn in [("dgx8", dgx8), ("dual_port8", dual_port8), ("single_nic2", single_nic2),
                     ("no_gpu", no_gpu)]:
        path = os.path.join(out, name + ".xml")
        with open(path, "w") as f:
            f.write(fn())
        print("wrote", path)


if __name__ == "__main__":
    main()
