/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The one list of vccl's environment variables. Each is declared here once, with its type, default and a
 * one-line description; env.cc is the only code that reads them, vccl-info -c prints this table and
 * vccl(7) documents it. Add a variable here and nowhere else.
 *
 * VCCL_ENV_DEF(id, "NAME", type, "default", "description")
 * Types: Int (decimal integer), Bool (0/1/yes/no/true/false/on/off), Str (free text), Size (bytes with
 * optional K/M/G suffix).
 */
VCCL_ENV_DEF(kDebug, "VCCL_DEBUG", Str, "WARN", "Log level: NONE, WARN, INFO or TRACE")
VCCL_ENV_DEF(kDebugSubsys, "VCCL_DEBUG_SUBSYS", Str, "ALL",
             "Subsystems to log: comma list of INIT,BOOTSTRAP,NET,COLL,P2P,TOPO,PROXY,ENV,DEVICE,ALL; ^ excludes")
VCCL_ENV_DEF(kDebugFile, "VCCL_DEBUG_FILE", Str, "",
             "Write logs to this file instead of stderr; %h expands to the host name, %p to the pid. A new file "
             "is mode 0600; a symbolic link or another user's file is refused (logs then go to stderr)")
VCCL_ENV_DEF(kDebugTimestamps, "VCCL_DEBUG_TIMESTAMPS", Bool, "0",
             "Start every log line with the wall-clock time, [seconds since the epoch with microseconds], to line "
             "logs up with other ranks' and with outside events (TRACE lines also carry the monotonic time)")
VCCL_ENV_DEF(kBootstrapTimeout, "VCCL_BOOTSTRAP_TIMEOUT", Int, "120",
             "Seconds any bootstrap wait (connect, accept, receive) may take before vcclTimeout")
VCCL_ENV_DEF(kSocketIfname, "VCCL_SOCKET_IFNAME", Str, "",
             "Network interface for the TCP bootstrap (default: first non-loopback interface that is up, else lo)")
VCCL_ENV_DEF(kOpTimeoutMs, "VCCL_OP_TIMEOUT_MS", Int, "600000",
             "Milliseconds an operation may wait for a peer before it ends with vcclTimeout (0: no limit); "
             "vcclConfig_t.opTimeoutMs overrides it per communicator")
VCCL_ENV_DEF(kAlgo, "VCCL_ALGO", Str, "",
             "Force algorithms: comma list of COLL:ALGO, host (allreduce:ring, bcast:chain) or device ones "
             "(allreduce:ll, allreduce:pieces); vccl-info -a lists them. A call the forced one cannot take runs the "
             "default. Rank 0's value is used on every rank")
VCCL_ENV_DEF(kChunkSize, "VCCL_CHUNK_SIZE", Size, "1M",
             "Bytes per pipelined chunk in the host ring and chain algorithms (at least 4K): larger chunks cost fewer "
             "messages, smaller ones overlap more. Rank 0's value is used on every rank")
VCCL_ENV_DEF(kSmallMsgBytes, "VCCL_ALLREDUCE_SMALL_BYTES", Size, "64K",
             "AllReduce up to this size, where VCCL_ALGO does not choose: host buffers by recursive doubling "
             "(Broadcast and Reduce: binomial trees), device buffers by one_shot where the kernels do not take it. "
             "Rank 0's value is used on every rank")
VCCL_ENV_DEF(kNetDevices, "VCCL_NET_DEVICES", Str, "",
             "Primary network device per local rank: comma list of NAME[:PORT] (e.g. mlx5_0:1,mlx5_1:1 or eth0), "
             "local rank i takes entry i mod length; default: the NIC closest to the rank's GPU (vccl-info -t)")
VCCL_ENV_DEF(kBackupNetDevices, "VCCL_BACKUP_NET_DEVICES", Str, "",
             "Backup (failover) network device per local rank, same syntax as VCCL_NET_DEVICES, or none; "
             "default: the closest NIC on another PCIe switch and card")
VCCL_ENV_DEF(kFailover, "VCCL_FAILOVER", Str, "auto",
             "Primary/backup path failover: auto (peers on other hosts, when a backup device is known), on (every "
             "peer, also ranks sharing a host name, e.g. in network namespaces), off")
VCCL_ENV_DEF(kMultipath, "VCCL_MULTIPATH", Str, "standby",
             "How a failover connection uses its two paths: standby (data on the active path, the other one a hot "
             "standby) or spray (the chunks of messages over 1 MiB spread over every healthy path by measured "
             "speed; small messages stay on one path). Set it alike on every rank")
VCCL_ENV_DEF(kFailoverTimeoutMs, "VCCL_FAILOVER_TIMEOUT_MS", Int, "250",
             "Silence on the active path (no acknowledgement, no data) before the backup is probed; the path is "
             "left only if the peer answers on the backup")
VCCL_ENV_DEF(kFailbackIntervalMs, "VCCL_FAILBACK_INTERVAL_MS", Int, "500",
             "Reconnect interval of a failed path; a primary that answers is probed every quarter of it, and traffic "
             "returns after 3 answered probes and a hold of this interval, doubled each time the primary fails again "
             "(up to 16x)")
VCCL_ENV_DEF(kFailback, "VCCL_FAILBACK", Bool, "1",
             "Return to the primary path once it works again (VCCL_FAILBACK_INTERVAL_MS); 0: stay on the backup until "
             "it fails (no second interruption, like bonding's primary_reselect=failure). The lower rank of a pair "
             "decides: set it alike on every rank")
VCCL_ENV_DEF(kPeerTimeoutMs, "VCCL_PEER_TIMEOUT_MS", Int, "10000",
             "With no usable path to a peer, or no answer from it on any path, for this long, its operations fail "
             "with vcclRemoteError")
VCCL_ENV_DEF(kIdleProgressMs, "VCCL_IDLE_PROGRESS_MS", Int, "1",
             "Milliseconds between transport polls by a thread while the communicator is idle, so acknowledgements "
             "peers wait for and path switches go on (20 ms after 1 s without work); 0: off, a peer may stall until "
             "this rank calls vccl")
VCCL_ENV_DEF(kProxyCpus, "VCCL_PROXY_CPUS", Str, "",
             "CPUs for the proxy thread: a cpulist (e.g. 0-15,32-47), or one per local rank separated by ; "
             "(entry i mod length); default: the cores of the GPU's NUMA node")
VCCL_ENV_DEF(kTopoFile, "VCCL_TOPO_FILE", Str, "",
             "hwloc XML topology to use instead of discovering this machine (lstopo --of xml writes one); "
             "for tests and for reproducing a user's node")
VCCL_ENV_DEF(kUcxTls, "VCCL_UCX_TLS", Str, "",
             "UCX transports for vccl's own UCX context (sets UCX_TLS for it only); default: UCX's choice")
VCCL_ENV_DEF(kP2pDirect, "VCCL_P2P_DIRECT", Bool, "1",
             "Send/recv between GPUs of one host: copy engine into the peer's buffer via CUDA IPC, no kernels (0: stage through host memory)")
VCCL_ENV_DEF(kStagingAsync, "VCCL_STAGING_ASYNC", Bool, "1",
             "Device buffers the direct GPU path does not serve (other hosts, VCCL_P2P_DIRECT=0) are staged through "
             "pinned host memory by a proxy thread, ordered on the caller's stream: calls return at once; 0: the "
             "caller waits and stages")
VCCL_ENV_DEF(kStagingPoolBytes, "VCCL_STAGING_POOL_BYTES", Size, "256M",
             "Pinned host memory the asynchronous staging path may hold for operations in flight; a call that "
             "finds it full waits for earlier operations' results to be copied back (one larger operation still "
             "runs, alone)")
VCCL_ENV_DEF(kStagingChunkBytes, "VCCL_STAGING_CHUNK_BYTES", Size, "4M",
             "Staged collectives, and send/recv of any memory, above this size run in pieces of it (at most 64 a "
             "call, larger pieces beyond), so copies to and from the GPU overlap the network; 0: one piece. Rank 0's "
             "value is used on every rank")
VCCL_ENV_DEF(kMemVmm, "VCCL_MEM_VMM", Bool, "1",
             "vcclMemAlloc makes CUDA VMM memory (cuMemCreate, shared with peers of the host as a file descriptor "
             "over a Unix socket); 0, or a GPU without VMM: cudaMalloc in whole 2 MiB blocks (shared by CUDA IPC)")
VCCL_ENV_DEF(kP2pFifoBytes, "VCCL_P2P_FIFO_BYTES", Size, "0",
             "Direct send/recv from device memory up to this size goes through a FIFO in the receiver's GPU memory, "
             "so the sender need not wait for the receive, at two copies a transfer (at most 4M; equal on every rank "
             "of a host); 0: off")
VCCL_ENV_DEF(kP2pMaxMappings, "VCCL_P2P_MAX_MAPPINGS", Int, "64",
             "Direct send/recv: mappings of a peer's receive allocations a sender keeps per communicator (1-65536). "
             "Past it the least recently used goes, for cudaMalloc memory after waiting for the whole GPU; a mapping "
             "keeps freed memory alive")
VCCL_ENV_DEF(kP2pFifoSlots, "VCCL_P2P_FIFO_SLOTS", Int, "8",
             "Slots of the staging FIFO per sending rank of the host: how many small transfers a sender may run "
             "ahead of its receiver (1-64; 0: FIFO off; must be equal on every rank of a host)")
VCCL_ENV_DEF(kAllreduceLlBytes, "VCCL_ALLREDUCE_LL_BYTES", Size, "2M",
             "Device collectives of n ranks all on this host whose per-peer message x (n-1) is at most this (max 8M; "
             "AlltoAll: 1M a peer) take one low-latency kernel, using 8x this x n/(n-1) GPU bytes (half of them for calls captured into "
             "CUDA graphs); equal on all ranks, off on shared GPUs; 0: off")
VCCL_ENV_DEF(kAllreduceKernelBytes, "VCCL_ALLREDUCE_KERNEL_BYTES", Size, "8M",
             "Device AllReduce and ReduceScatter past the VCCL_ALLREDUCE_LL_BYTES kernel, up to this per peer (max "
             "128M), take one chunked kernel, off where that one is: faster alone, costlier beside a GEMM. 0: off. "
             "Rank 0's value is used on every rank")
VCCL_ENV_DEF(kPreMulSumKernelBytes, "VCCL_PREMULSUM_KERNEL_BYTES", Size, "32M",
             "VCCL_ALLREDUCE_KERNEL_BYTES for PreMulSum ops (max 128M; a lower value counts as that one's): the "
             "kernel scales as it loads, where the copy engines need a scaling pass, so it pays further than for Sum. "
             "Rank 0's value is used on every rank")
VCCL_ENV_DEF(kReducePipelineBytes, "VCCL_REDUCE_PIPELINE_BYTES", Size, "32M",
             "Device AllReduce and ReduceScatter on one host from 2x this size run in pieces, each reduced while the "
             "next moves (AllReduce 2, ReduceScatter up to 8): faster alone, slower beside a GEMM. 0: one piece. Rank "
             "0's value is used on every rank")
VCCL_ENV_DEF(kReduceScratchBytes, "VCCL_REDUCE_SCRATCH_BYTES", Size, "256M",
             "Most GPU memory a rank keeps as scratch of reductions in pieces (until destroy); where 2 need more "
             "((n-1)/n of an AllReduce), up to 8 are cut: slower beside a GEMM. One piece ignores it; 0: no limit. "
             "Rank 0's value is used on every rank")
VCCL_ENV_DEF(kMaxCtas, "VCCL_MAX_CTAS", Int, "32",
             "Upper bound on CUDA thread blocks of one reduction kernel (vcclConfig_t.maxCtas overrides it)")
VCCL_ENV_DEF(kTelemetry, "VCCL_TELEMETRY", Bool, "1",
             "Flow telemetry: per-path transfer records, window bandwidth, outstanding work, shared-memory export (0: off)")
VCCL_ENV_DEF(kTelemetryWindow, "VCCL_TELEMETRY_WINDOW", Int, "8",
             "Completions per path and direction in the sliding window that gives the current bandwidth: their "
             "bytes over the time at least one of them was in progress (1-1024)")
VCCL_ENV_DEF(kTelemetrySample, "VCCL_TELEMETRY_SAMPLE", Int, "64",
             "Time and record one collective in N (by sequence number, alike on every rank) and one point-to-point "
             "transfer in N per path, count the rest; host transfers from 4 MiB and the failover transport's are "
             "always timed. 1: time every one")
VCCL_ENV_DEF(kTelemetryRing, "VCCL_TELEMETRY_RING", Int, "4096",
             "Records in each rank's telemetry ring (shared memory, read by vccl-telemetry); older records are overwritten")
VCCL_ENV_DEF(kTelemetryShm, "VCCL_TELEMETRY_SHM", Bool, "1",
             "Export each rank's telemetry ring as /dev/shm/vccl-JOB-HASH-RANK (mode 0600) for vccl-telemetry top (0: keep it private)")
VCCL_ENV_DEF(kTelemetryJob, "VCCL_TELEMETRY_JOB", Str, "",
             "Job name in telemetry ring and file names; default: SLURM_JOB_ID, else Open MPI's job id, else u<uid>")
VCCL_ENV_DEF(kTelemetryDir, "VCCL_TELEMETRY_DIR", Str, "",
             "Directory where each rank also writes its telemetry records as CSV and JSON Lines (mode 0600), for vccl-telemetry report and plot; a rank that cannot create its files there warns and writes none")
VCCL_ENV_DEF(kTelemetryFlushMs, "VCCL_TELEMETRY_FLUSH_MS", Int, "1000",
             "Milliseconds between appends to the VCCL_TELEMETRY_DIR files (also flushed at destroy, and early when the ring is half full)")
/*
 * Read by the launch scripts of contrib/slurm and contrib/megatron, not by the library: declared here so
 * that vccl-info -c and vccl(7) list every VCCL_* variable an operator may set.
 */
VCCL_ENV_DEF(kScriptPrefix, "VCCL_PREFIX", Str, "",
             "Launch scripts: where vccl is installed (bin/, lib/); launch-megatron.sh loads "
             "PREFIX/lib/vccl/nccl/libnccl.so.2 and the sbatch templates put PREFIX/bin first in PATH")
VCCL_ENV_DEF(kScriptNcclDir, "VCCL_NCCL_DIR", Str, "",
             "launch-megatron.sh: directory of vccl's libnccl.so.2 (default: VCCL_PREFIX/lib/vccl/nccl, else next "
             "to the vccl-info on PATH); a directory without it stops the launch with exit code 2")
VCCL_ENV_DEF(kScriptNcclPreload, "VCCL_NCCL_PRELOAD", Bool, "1",
             "launch-megatron.sh: also put vccl's libnccl.so.2 into LD_PRELOAD, for PyTorch wheels that load "
             "NVIDIA's NCCL through their RPATH (0: LD_LIBRARY_PATH only)")
VCCL_ENV_DEF(kScriptUseNccl, "VCCL_USE_NCCL", Bool, "0",
             "launch-megatron.sh: 1 leaves the real NCCL in place (same launch, for comparisons)")
VCCL_ENV_DEF(kBindLocalRank, "VCCL_BIND_LOCAL_RANK", Str, "",
             "vccl-bind.sh: local rank to bind (default: OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID, "
             "LOCAL_RANK, else 0: the MPI launcher's first, as mpirun's ranks inherit the batch step's SLURM_LOCALID)")
VCCL_ENV_DEF(kBindGpu, "VCCL_BIND_GPU", Bool, "1",
             "vccl-bind.sh: set CUDA_VISIBLE_DEVICES to the local rank's GPU (0: leave it)")
VCCL_ENV_DEF(kBindCpus, "VCCL_BIND_CPUS", Bool, "1",
             "vccl-bind.sh: run the command under taskset on the CPUs of its GPU's NUMA node that the process may "
             "use (0: no CPU binding)")
VCCL_ENV_DEF(kBindNet, "VCCL_BIND_NET", Bool, "1",
             "vccl-bind.sh: set VCCL_NET_DEVICES, VCCL_BACKUP_NET_DEVICES and VCCL_PROXY_CPUS from vccl-info's "
             "choice for the local rank (0: leave them)")
VCCL_ENV_DEF(kBindTopoJson, "VCCL_BIND_TOPO_JSON", Str, "",
             "vccl-bind.sh: read this saved vccl-info -t --json output instead of running vccl-info (the sbatch "
             "templates save one per node)")
VCCL_ENV_DEF(kBindVerbose, "VCCL_BIND_VERBOSE", Bool, "0",
             "vccl-bind.sh: print each rank's binding to stderr")
VCCL_ENV_DEF(kScriptInfoPath, "VCCL_INFO_PATH", Str, "vccl-info",
             "vccl-bind.sh: the vccl-info program to run (a failing one leaves the rank unbound, with a message)")
VCCL_ENV_DEF(kScriptTopoDir, "VCCL_TOPO_DIR", Str, "",
             "sbatch-srun.sh: directory for the per-node topology files (default: vccl-topo-JOBID in the submit "
             "directory)")
VCCL_ENV_DEF(kScriptContribDir, "VCCL_CONTRIB", Str, "",
             "sbatch templates: directory holding vccl-bind.sh (default: the template's own directory; set it when "
             "sbatch runs a copy of the template)")
/*
 * Read by the PMPI interposer libvccl-pmpi.so (coll_vccl/pmpi, vccl-pmpi(7)), not by the library: declared
 * here so that vccl-info -c and vccl(7) list them.
 */
VCCL_ENV_DEF(kPmpi, "VCCL_PMPI", Bool, "1",
             "libvccl-pmpi.so: 0 passes every MPI call to the MPI library unchanged, as if the interposer were not "
             "loaded (device buffers then need a CUDA-aware MPI)")
VCCL_ENV_DEF(kPmpiHost, "VCCL_PMPI_HOST", Int, "0",
             "libvccl-pmpi.so: 1 sends collectives on host buffers through vccl too, MPI_Barrier included; 2 also "
             "takes host buffers for device memory, so what vccl cannot do goes to the MPI library on host copies "
             "(tests of the staging paths without a GPU); 0: host buffers go to the MPI library unchanged")
VCCL_ENV_DEF(kPmpiVerbose, "VCCL_PMPI_VERBOSE", Int, "0",
             "libvccl-pmpi.so: 1 logs each vccl communicator created and destroyed with its calls by route; 2 also "
             "the route of every call")
