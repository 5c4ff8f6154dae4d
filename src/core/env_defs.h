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
             "Milliseconds an operation may wait for a peer before it ends with vcclTimeout (0: no limit)")
VCCL_ENV_DEF(kAlgo, "VCCL_ALGO", Str, "",
             "Force algorithms by name: comma list of COLL:ALGO, e.g. allreduce:ring,bcast:chain (vccl-info -a lists them)")
VCCL_ENV_DEF(kChunkSize, "VCCL_CHUNK_SIZE", Size, "1M",
             "Bytes per pipelined chunk in ring and chain algorithms")
VCCL_ENV_DEF(kSmallMsgBytes, "VCCL_ALLREDUCE_SMALL_BYTES", Size, "64K",
             "Allreduce messages up to this size use the low-latency algorithm when VCCL_ALGO does not choose; "
             "device buffers of one host: one shot (each rank reduces every rank's whole buffer) where the kernel of "
             "VCCL_ALLREDUCE_LL_BYTES does not take them")
VCCL_ENV_DEF(kNetDevices, "VCCL_NET_DEVICES", Str, "",
             "Primary network device per local rank: comma list of NAME[:PORT] (e.g. mlx5_0:1,mlx5_1:1 or eth0), "
             "local rank i takes entry i mod length; default: the NIC closest to the rank's GPU (vccl-info -t)")
VCCL_ENV_DEF(kBackupNetDevices, "VCCL_BACKUP_NET_DEVICES", Str, "",
             "Backup (failover) network device per local rank, same syntax as VCCL_NET_DEVICES, or none; "
             "default: the closest NIC on another PCIe switch and card")
VCCL_ENV_DEF(kFailover, "VCCL_FAILOVER", Str, "auto",
             "Primary/backup path failover: auto (peers on other hosts, when a backup device is known), on (every "
             "peer, also ranks sharing a host name, e.g. in network namespaces), off")
VCCL_ENV_DEF(kFailoverTimeoutMs, "VCCL_FAILOVER_TIMEOUT_MS", Int, "250",
             "Silence on the active path (no acknowledgement, no data) before the backup is probed; the path is "
             "left only if the peer answers on the backup")
VCCL_ENV_DEF(kFailbackIntervalMs, "VCCL_FAILBACK_INTERVAL_MS", Int, "500",
             "Reconnect interval of a failed path; once the primary answers, it is probed every quarter of this "
             "and traffic returns after 3 answered probes in a row and a hold time (this interval, doubling each "
             "time the primary fails again, up to 16x: flapping)")
VCCL_ENV_DEF(kFailback, "VCCL_FAILBACK", Bool, "1",
             "Return to the primary path once it works again (VCCL_FAILBACK_INTERVAL_MS); 0: stay on the backup "
             "until the backup fails, like Linux bonding's primary_reselect=failure (no second interruption, and "
             "no move back onto a primary that fails again); the lower rank of each pair decides, so set it alike on "
             "every rank")
VCCL_ENV_DEF(kPeerTimeoutMs, "VCCL_PEER_TIMEOUT_MS", Int, "10000",
             "With no usable path to a peer, or no answer from it on any path, for this long, its operations fail "
             "with vcclRemoteError")
VCCL_ENV_DEF(kIdleProgressMs, "VCCL_IDLE_PROGRESS_MS", Int, "1",
             "A thread drives the transport every this many milliseconds while no operation runs on the "
             "communicator, so the acknowledgements this rank still owes its peers (UCX rendezvous and synchronous "
             "sends, failover) and path switches go on while the application waits elsewhere (e.g. in MPI); after "
             "1 s with no operation and nothing in flight it backs off to 20 ms until the next one; 0: off (a peer "
             "may then stall until this rank calls vccl again)")
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
             "Device buffers the direct GPU path does not serve (peers on other hosts, VCCL_P2P_DIRECT=0) are "
             "staged through pinned host memory by a proxy thread, ordered on the caller's stream, so the call "
             "returns without waiting for the GPU; 0: the calling thread waits for the stream and stages itself")
VCCL_ENV_DEF(kStagingPoolBytes, "VCCL_STAGING_POOL_BYTES", Size, "256M",
             "Pinned host memory the asynchronous staging path may hold for operations in flight; a call that "
             "finds it full waits for earlier operations' results to be copied back (one larger operation still "
             "runs, alone)")
VCCL_ENV_DEF(kStagingChunkBytes, "VCCL_STAGING_CHUNK_BYTES", Size, "4M",
             "Staged collectives, and send/recv messages of any memory, larger than this run in pieces of this "
             "size (at most 64, larger calls get larger pieces; AllGather, ReduceScatter and AlltoAll cut every "
             "rank's block alike), so the copies to and from the GPU overlap the network (a communicator uses "
             "rank 0's value, with a warning on ranks set otherwise; 0: one piece)")
VCCL_ENV_DEF(kMemVmm, "VCCL_MEM_VMM", Bool, "1",
             "vcclMemAlloc makes CUDA VMM memory (cuMemCreate, shared with peers of the host as a file descriptor "
             "over a Unix socket); 0, or a GPU without VMM: cudaMalloc in whole 2 MiB blocks (shared by CUDA IPC)")
VCCL_ENV_DEF(kP2pFifoBytes, "VCCL_P2P_FIFO_BYTES", Size, "0",
             "Direct send/recv: transfers from device memory up to this size go through a staging FIFO in the "
             "receiver's GPU memory, so the sender does not wait for the receiver to post (at most 4M; must be "
             "equal on every rank of a host). Off (0) by default: on 2x H200 it took 19-21 us per small send/recv "
             "against 11-14 us without")
VCCL_ENV_DEF(kP2pMaxMappings, "VCCL_P2P_MAX_MAPPINGS", Int, "64",
             "Direct send/recv: allocations of one peer's receive buffers that a sender keeps mapped, per "
             "communicator (1-65536; buffers in one cudaMalloc allocation or VMM span share a mapping). Past it the "
             "least recently used mapping goes; for cudaMalloc memory that waits for the whole GPU (a stall, logged "
             "once per communicator). A mapping may keep an allocation its owner freed until it goes")
VCCL_ENV_DEF(kP2pFifoSlots, "VCCL_P2P_FIFO_SLOTS", Int, "8",
             "Slots of the staging FIFO per sending rank of the host: how many small transfers a sender may run "
             "ahead of its receiver (1-64; 0: FIFO off; must be equal on every rank of a host)")
VCCL_ENV_DEF(kAllreduceLlBytes, "VCCL_ALLREDUCE_LL_BYTES", Size, "2M",
             "AllReduce, ReduceScatter, AllGather, AlltoAll, Broadcast and Reduce on device buffers of one host where "
             "what a rank sends each peer (the message; ReduceScatter's and AllGather's per-rank block, AlltoAll's "
             "per-peer block, Broadcast's and Reduce's whole buffer) is at most this size divided by (ranks - 1) (AlltoAll: and at most 1M) "
             "(at most 8M) run in one kernel of up to VCCL_MAX_CTAS thread blocks that stores into every peer's GPU "
             "memory and reduces or places there, with no host round trip; costs about 4x this size x ranks / (ranks - "
             "1) of device memory per rank; needs every rank of the communicator on this host and the same value on "
             "every rank, and is off where ranks share a GPU. 0: off (copy-engine transfers and a reduction kernel "
             "instead; on 2x H200 a 512 KiB allreduce took 10 us this way, 42 us without, and 2 MiB 29 us against 47)")
VCCL_ENV_DEF(kAllreduceKernelBytes, "VCCL_ALLREDUCE_KERNEL_BYTES", Size, "8M",
             "AllReduce and ReduceScatter on device buffers of one host whose message (what a rank sends each peer: "
             "AllReduce's buffer, ReduceScatter's per-rank block) is above the VCCL_ALLREDUCE_LL_BYTES kernel's limit "
             "and at most this size (at most 128M) run in one kernel of up to VCCL_MAX_CTAS thread blocks that moves "
             "the data in chunks through the memory of the VCCL_ALLREDUCE_LL_BYTES kernel (no more device memory; off "
             "where that kernel is off); ReduceScatter needs a per-rank size that is a multiple of 16 bytes. On 2x H200 "
             "a 4 MiB allreduce took 31 us this way and 54 us without, 8 MiB 50 against 69; at 16-32 MiB the kernel "
             "is as fast as the copy engines or faster alone, but beside a GEMM it takes more from it and finishes "
             "later. 0: off (copy-engine transfers and a reduction kernel; PreMulSum ops go by "
             "VCCL_PREMULSUM_KERNEL_BYTES). Rank 0's value is used on every rank")
VCCL_ENV_DEF(kPreMulSumKernelBytes, "VCCL_PREMULSUM_KERNEL_BYTES", Size, "32M",
             "The same limit as VCCL_ALLREDUCE_KERNEL_BYTES for PreMulSum ops (vcclRedOpCreatePreMulSum), whose "
             "chunked kernel multiplies each element as it loads it, where the copy-engine path first runs a "
             "scaling kernel of its own over the blocks it sends (at most 128M; a value below "
             "VCCL_ALLREDUCE_KERNEL_BYTES counts as that one). On 2x H200 a 16 MiB "
             "allreduce took 83 us this way and 106 us with the copy engines (NCCL 78), a 32 MiB reducescatter 84-89 "
             "against 105 (NCCL 90); beside a GEMM the copy-engine path was slower still (16 MiB: 1.5 ms a call "
             "against 1.1), while the GEMM kept 80-83% of its speed against 85-87%. Rank 0's value is used on every rank")
VCCL_ENV_DEF(kReducePipelineBytes, "VCCL_REDUCE_PIPELINE_BYTES", Size, "32M",
             "Device AllReduce (above VCCL_ALLREDUCE_SMALL_BYTES) and ReduceScatter among GPUs of one host on at "
             "least twice this many bytes run in pieces, the reduction kernel of one piece on a second stream while "
             "the next piece moves: AllReduce in 2 pieces; ReduceScatter in 2, and from 4x this size one piece per "
             "2x this size, at most 8 (smaller pieces cost more host time than they save); both in more where "
             "VCCL_REDUCE_SCRATCH_BYTES asks. 0: one piece (transfers, kernel and all-gather one after another). "
             "Beside a kernel that holds every SM (a large GEMM), each piece's reduction waits for it to end: on 2x "
             "H200 a 1 GiB AllReduce took 4.5 ms a call there in 2 pieces, 6.9 in 4, 9.4 in 8, 4.6 in one; alone "
             "2.79, 2.85, 2.96 and 3.41 ms (docs/PERFORMANCE.md). Rank 0's value is used on every rank")
VCCL_ENV_DEF(kReduceScratchBytes, "VCCL_REDUCE_SCRATCH_BYTES", Size, "256M",
             "Device AllReduce and ReduceScatter in pieces (VCCL_REDUCE_PIPELINE_BYTES): the most GPU memory their "
             "scratch may take on each rank, which the communicator keeps until it is destroyed. Where the pieces "
             "would take more (2 pieces of an AllReduce take (n-1)/n of its size), more pieces are cut, at most 8: "
             "on 2 ranks a 1 GiB AllReduce then takes 4 pieces and 256 MiB, about 2% slower alone and 1.5x slower "
             "beside a GEMM than in 2 pieces with 512 MiB (2x H200). 0: no limit. One piece (below twice "
             "VCCL_REDUCE_PIPELINE_BYTES, or 0 there) takes (n-1)/n of the call's size whatever this says. Rank "
             "0's value is used on every rank")
VCCL_ENV_DEF(kMaxCtas, "VCCL_MAX_CTAS", Int, "32",
             "Upper bound on CUDA thread blocks of one reduction kernel (vcclConfig_t.maxCtas overrides it)")
VCCL_ENV_DEF(kTelemetry, "VCCL_TELEMETRY", Bool, "1",
             "Flow telemetry: per-path transfer records, window bandwidth, outstanding work, shared-memory export (0: off)")
VCCL_ENV_DEF(kTelemetryWindow, "VCCL_TELEMETRY_WINDOW", Int, "8",
             "Completions per path and direction in the sliding window that gives the current bandwidth: their "
             "bytes over the time at least one of them was in progress (1-1024)")
VCCL_ENV_DEF(kTelemetrySample, "VCCL_TELEMETRY_SAMPLE", Int, "64",
             "Host transport transfers under 4 MiB (each transfer: collectives move in VCCL_CHUNK_SIZE chunks; device path: all sizes; failover transport: none sampled) are timed and recorded for one collective in N (by sequence number, the same on every rank) and one point-to-point transfer in N per path; the others are only counted. 1: time every transfer")
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
