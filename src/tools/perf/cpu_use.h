/* SPDX-License-Identifier: BSD-3-Clause */
/* vccl-perf --cpu: the processor time a timed loop cost, the calling thread's and the others'.
 *
 * The calling thread waits actively in most configurations (host transfers poll the transport, a CUDA stream
 * synchronisation spins while the process has fewer contexts than processors), so its share says little
 * beyond the time itself. The other threads' share is what a library adds on its own: vccl's staging proxy and
 * idle-progress threads, the telemetry flusher (VCCL_TELEMETRY_DIR), NCCL's proxy thread under the NCCL
 * baseline, and threads of MPI, UCX or CUDA that every configuration shares. No MPI here (tests/unit). */
#ifndef VCCL_TOOLS_PERF_CPU_USE_H_
#define VCCL_TOOLS_PERF_CPU_USE_H_

namespace vperf {

/* Processor time over wall time, in percent of one core (200: two cores busy); negative: not measured. */
struct CpuUse {
    double process_pct = -1; // every thread of the process
    double others_pct = -1;  // every thread but the one that calls start() and stop()
};

/* Adds up start()/stop() intervals (the rounds of a paired baseline are several). start() and stop() must be
 * called by the same thread. */
class CpuMeter {
public:
    void start();
    void stop();
    CpuUse use() const; // not measured (negative) while no interval was added
private:
    double wall0_ = 0, process0_ = 0, thread0_ = 0;
    double wall_s_ = 0, process_s_ = 0, others_s_ = 0;
};

} // namespace vperf

#endif
