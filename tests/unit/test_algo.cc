/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every registered algorithm, run on N threads over the in-process transport and checked against a
 * reference computed independently here: per-rank inputs come from a hash of (seed, rank, index), and the
 * expected output element is recomputed from those inputs in int64/double arithmetic.
 *
 * Inputs are small integers so fp16/bf16 sums and products are exact and the comparison can be bit-exact
 * whatever the reduction order; a random-float case uses a tolerance instead. Besides the values, each
 * run checks: the return code, guard bytes around every buffer, that sendbuf is unchanged out of place,
 * that allreduce results are bit-identical on all ranks, and that no message or request is left over.
 */
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "algo/algo.h"
#include "algo/host_groups.h"
#include "algo/staged_layout.h"
#include "transport/staging/staged_pieces.h"
#include "core/dtype.h"
#include "core/env.h"
#include "core/status.h"
#include "sim_transport.h"

using namespace vccl;
using test::SimOptions;
using test::SimWorld;

namespace {

// ---------------------------------------------------------------------------------------------------
// Values

uint64_t mix(uint64_t x) { // splitmix64 finaliser
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

bool is_float(vcclDataType_t t) {
    return t == vcclFloat16 || t == vcclBfloat16 || t == vcclFloat32 || t == vcclFloat64;
}
bool is_signed_int(vcclDataType_t t) { return t == vcclInt8 || t == vcclInt32 || t == vcclInt64; }
bool is_reduction(CollType c) {
    return c == CollType::AllReduce || c == CollType::Reduce || c == CollType::ReduceScatter;
}

/* Sign- or zero-extends the low bytes of `bits` as the integer type t stores them. */
uint64_t normalise_int(uint64_t bits, vcclDataType_t t) {
    size_t w = dtype_size(t) * 8;
    if (w == 64) return bits;
    uint64_t mask = (1ull << w) - 1;
    bits &= mask;
    if (is_signed_int(t) && (bits >> (w - 1)) != 0) bits |= ~mask;
    return bits;
}

void encode_float(double v, vcclDataType_t t, void* p) {
    switch (t) {
    case vcclFloat16: { uint16_t h = float_to_half(float(v)); memcpy(p, &h, 2); break; }
    case vcclBfloat16: { uint16_t h = float_to_bf16(float(v)); memcpy(p, &h, 2); break; }
    case vcclFloat32: { float f = float(v); memcpy(p, &f, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}

double decode_float(const void* p, vcclDataType_t t) {
    uint16_t h;
    float f;
    double d;
    switch (t) {
    case vcclFloat16: memcpy(&h, p, 2); return half_to_float(h);
    case vcclBfloat16: memcpy(&h, p, 2); return bf16_to_float(h);
    case vcclFloat32: memcpy(&f, p, 4); return f;
    default: memcpy(&d, p, 8); return d;
    }
}

enum class Input { Int, Float };

struct Spec {
    const Algorithm* algo;
    vcclDataType_t dtype;
    vcclRedOp_t op;
    size_t count;
    bool in_place;
    int root;
    size_t chunk_bytes;
    Input input;
    uint64_t seed;
    bool staged = false;       // run as the staged device path plans it (algo/staged_layout.h)...
    uint64_t staged_chunk = 0; // ... cut at this many bytes (0: one piece)
    const HostGroups* hosts = nullptr; // where the ranks are (NULL: one host)
    long small_bytes = -1;             // CollSettings::small_bytes (-1: the default)
};

std::string describe(const Spec& s, int n) {
    char buf[256];
    snprintf(buf, sizeof(buf), "%s:%s n=%d %s %s count=%zu %s root=%d chunk=%zu%s", coll_name(s.algo->coll),
             s.algo->name, n, dtype_name(s.dtype), op_name(s.op), s.count, s.in_place ? "in-place" : "out-of-place",
             s.root, s.chunk_bytes, s.input == Input::Float ? " random-float" : "");
    std::string text = buf;
    if (s.hosts != nullptr) {
        text += " hosts";
        for (int r = 0; r < s.hosts->nranks(); ++r) text += (r ? "," : "=") + std::to_string(s.hosts->host_of(r));
    }
    if (s.small_bytes >= 0) text += " small_bytes=" + std::to_string(s.small_bytes);
    if (s.staged) text += " staged in pieces of " + std::to_string(s.staged_chunk) + " B";
    return text;
}

/* Rank k's input element j, as an integer (Int input on integer types) ... */
int64_t int_value(const Spec& s, int k, size_t j) {
    uint64_t h = mix(s.seed ^ mix(uint64_t(k) * 0x100000001b3ull + j));
    bool sign = is_signed_int(s.dtype) || is_float(s.dtype);
    if (s.op == vcclProd && is_reduction(s.algo->coll)) {
        // Products of n of these stay exact in fp16/bf16 (powers of two up to 2^8) and wrap int8/uint8.
        static const int64_t kSigned[4] = {1, 2, -1, 1};
        return sign ? kSigned[h % 4] : int64_t(1 + h % 2);
    }
    return sign ? int64_t(h % 33) - 16 : int64_t(h % 32); // sums of 8 stay within +-128: exact in bf16
}
/* ... or as a float already rounded to the type. */
double float_value(const Spec& s, int k, size_t j) {
    if (s.input == Input::Int) return double(int_value(s, k, j));
    uint64_t h = mix(s.seed ^ mix(uint64_t(k) * 0x100000001b3ull + j));
    double u = double(h >> 11) / double(1ull << 53) * 2.0 - 1.0;
    char tmp[8];
    encode_float(u, s.dtype, tmp);
    return decode_float(tmp, s.dtype);
}

void write_input(const Spec& s, int k, size_t j, void* p) {
    if (is_float(s.dtype)) {
        encode_float(float_value(s, k, j), s.dtype, p);
    } else {
        uint64_t bits = uint64_t(int_value(s, k, j));
        memcpy(p, &bits, dtype_size(s.dtype)); // little endian: the low bytes
    }
}

/* The expected element, either exact bytes or a value with a tolerance. */
struct Expected {
    char bytes[8];
    bool exact = true;
    double value = 0, tol = 0;
};

double epsilon(vcclDataType_t t) {
    switch (t) {
    case vcclFloat16: return std::ldexp(1.0, -10);
    case vcclBfloat16: return std::ldexp(1.0, -7);
    case vcclFloat32: return std::ldexp(1.0, -23);
    default: return std::ldexp(1.0, -52);
    }
}

/* Reduction over all n ranks of input element j. */
Expected reduce_ref(const Spec& s, int n, size_t j) {
    Expected e;
    if (!is_float(s.dtype)) {
        uint64_t acc = 0;
        for (int k = 0; k < n; ++k) {
            uint64_t v = normalise_int(uint64_t(int_value(s, k, j)), s.dtype);
            if (k == 0) {
                acc = v;
                continue;
            }
            switch (s.op) {
            case vcclSum: case vcclAvg: acc += v; break;
            case vcclProd: acc *= v; break;
            case vcclMax: acc = is_signed_int(s.dtype) ? (int64_t(v) > int64_t(acc) ? v : acc) : (v > acc ? v : acc); break;
            case vcclMin: acc = is_signed_int(s.dtype) ? (int64_t(v) < int64_t(acc) ? v : acc) : (v < acc ? v : acc); break;
            default: break;
            }
        }
        acc = normalise_int(acc, s.dtype); // wrap to the type
        if (s.op == vcclAvg) {
            acc = is_signed_int(s.dtype) ? uint64_t(int64_t(acc) / n) : acc / uint64_t(n);
        }
        memcpy(e.bytes, &acc, 8);
        return e;
    }
    double acc = 0;
    for (int k = 0; k < n; ++k) {
        double v = float_value(s, k, j);
        if (k == 0) {
            acc = v;
            continue;
        }
        switch (s.op) {
        case vcclSum: case vcclAvg: acc += v; break;
        case vcclProd: acc *= v; break;
        case vcclMax: acc = v > acc ? v : acc; break;
        case vcclMin: acc = v < acc ? v : acc; break;
        default: break;
        }
    }
    if (s.op == vcclAvg) {
        // The library divides the (exact) sum once, in float for fp16/bf16/fp32 and in double for fp64.
        acc = s.dtype == vcclFloat64 ? acc / n : double(float(acc) / float(n));
    }
    encode_float(acc, s.dtype, e.bytes);
    if (s.input == Input::Float && (s.op == vcclSum || s.op == vcclAvg)) {
        e.exact = false;
        e.value = acc;
        e.tol = (double(n) * n + 2) * epsilon(s.dtype);
    }
    return e;
}

Expected copy_ref(const Spec& s, int k, size_t j) {
    Expected e;
    write_input(s, k, j, e.bytes);
    return e;
}

/* Expected output element o of rank r. */
Expected expected(const Spec& s, int n, int r, size_t o) {
    const size_t c = s.count;
    switch (s.algo->coll) {
    case CollType::AllReduce:
    case CollType::Reduce: return reduce_ref(s, n, o);
    case CollType::Broadcast: return copy_ref(s, s.root, o);
    case CollType::AllGather: return copy_ref(s, int(o / c), o % c);
    case CollType::ReduceScatter: return reduce_ref(s, n, size_t(r) * c + o);
    case CollType::AlltoAll: return copy_ref(s, int(o / c), size_t(r) * c + o % c);
    default: return Expected();
    }
}

// ---------------------------------------------------------------------------------------------------
// Running

constexpr size_t kGuard = 64;
constexpr unsigned char kGuardByte = 0xa5, kGarbageByte = 0x5a;

/* A buffer with guard bytes on both sides. */
struct Guarded {
    std::vector<unsigned char> mem;
    size_t bytes = 0;
    explicit Guarded(size_t n) : mem(n + 2 * kGuard, kGuardByte), bytes(n) {
        memset(mem.data() + kGuard, kGarbageByte, n);
    }
    unsigned char* data() { return mem.data() + kGuard; }
    bool guards_ok() const {
        for (size_t i = 0; i < kGuard; ++i) {
            if (mem[i] != kGuardByte || mem[kGuard + bytes + i] != kGuardByte) return false;
        }
        return true;
    }
};

struct RankResult {
    vcclResult_t status = vcclSuccess;
    size_t errors = 0;
    std::string first; // first problem seen
    uint64_t hash = 0; // of the output, to compare allreduce results across ranks
};

struct RunOptions {
    SimOptions sim;
    int64_t timeout_ms = 30000;
};

uint64_t fnv(const unsigned char* p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

void note(RankResult* res, const std::string& what) {
    if (res->errors++ == 0) res->first = what;
}

/* A staged copy (transport/staging/staging_buffer.h) with host memory standing in for the device, row by row. */
void apply_staged_copy(unsigned char* slot, const StagedCopy& c, bool to_slot) {
    for (size_t i = 0; i < c.rows; ++i) {
        unsigned char* host = slot + c.offset + i * c.host_pitch;
        unsigned char* dev = static_cast<unsigned char*>(c.device) + i * c.device_pitch;
        if (c.bytes > 0) memcpy(to_slot ? host : dev, to_slot ? dev : host, c.bytes);
    }
}

/* The collective as the staged device path runs it (comm/enqueue.cc): every input copied into a slot of the
 * plan's size (guarded), the pieces' host collectives in order (each with its own tag, as each is a collective
 * of its own there), then every output copied back. Piece counts are checked against what was asked for. */
vcclResult_t run_staged(SimWorld& world, const Spec& s, const CollArgs& args, uint64_t tag, int r,
                        const CollSettings& settings, ScratchArena* scratch, RankResult* res);

/* One rank's part of one collective: set up buffers, run, check. */
void run_one(SimWorld& world, const Spec& s, uint64_t tag, int r, ScratchArena* scratch, int64_t timeout_ms,
             RankResult* res) {
    const int n = world.nranks();
    const size_t ts = dtype_size(s.dtype), c = s.count;
    const CollType coll = s.algo->coll;
    const bool multi_in = coll == CollType::ReduceScatter || coll == CollType::AlltoAll;
    const bool multi_out = coll == CollType::AllGather || coll == CollType::AlltoAll;
    const size_t in_elems = multi_in ? size_t(n) * c : c, out_elems = multi_out ? size_t(n) * c : c;
    const bool has_input = coll != CollType::Broadcast || r == s.root;
    const bool has_output = coll != CollType::Reduce || r == s.root;

    // In place, one buffer holds both; its size is the larger of the two.
    Guarded inbuf(s.in_place ? 0 : in_elems * ts), outbuf((s.in_place ? std::max(in_elems, out_elems) : out_elems) * ts);
    unsigned char* in_base = s.in_place ? outbuf.data() : inbuf.data();
    size_t in_offset = 0; // element offset of this rank's input within in_base
    if (s.in_place && coll == CollType::AllGather) in_offset = size_t(r) * c;
    if (has_input || s.in_place) {
        for (size_t j = 0; j < in_elems; ++j) write_input(s, r, j, in_base + (in_offset + j) * ts);
    }
    CollArgs args;
    args.coll = coll;
    args.count = c;
    args.dtype = s.dtype;
    args.op = s.op;
    args.root = s.root;
    args.sendbuf = has_input || s.in_place ? in_base + in_offset * ts : nullptr;
    args.recvbuf = outbuf.data();
    if (s.in_place && coll == CollType::ReduceScatter) args.recvbuf = outbuf.data() + size_t(r) * c * ts;
    if (!s.in_place && !has_output) args.recvbuf = nullptr; // reduce: recvbuf is the root's only
    unsigned char* out = static_cast<unsigned char*>(args.recvbuf);

    CollSettings settings;
    settings.chunk_bytes = s.chunk_bytes;
    settings.op_timeout_ms = timeout_ms;
    if (s.small_bytes >= 0) settings.small_bytes = size_t(s.small_bytes);
    if (s.staged) {
        res->status = run_staged(world, s, args, tag, r, settings, scratch, res);
    } else {
        CollCtx ctx(world.transport(r), r, n, tag, s.dtype, s.op, settings, nullptr, scratch);
        ctx.set_hosts(s.hosts);
        res->status = s.algo->run(ctx, args);
    }
    if (res->status != vcclSuccess) {
        note(res, std::string("returned ") + vcclGetErrorString(res->status) + ": " + last_error_message());
        return;
    }
    if (!inbuf.guards_ok() || !outbuf.guards_ok()) note(res, "guard bytes overwritten");
    if (!s.in_place && has_input) {
        for (size_t j = 0; j < in_elems; ++j) {
            char want[8];
            write_input(s, r, j, want);
            if (memcmp(want, inbuf.data() + j * ts, ts) != 0) {
                note(res, "sendbuf modified at element " + std::to_string(j));
                break;
            }
        }
    }
    if (!has_output) return;
    for (size_t o = 0; o < out_elems; ++o) {
        Expected e = expected(s, n, r, o);
        const unsigned char* got = out + o * ts;
        bool ok;
        if (e.exact) {
            ok = memcmp(e.bytes, got, ts) == 0;
        } else {
            double g = decode_float(got, s.dtype);
            ok = std::fabs(g - e.value) <= e.tol;
        }
        if (!ok) {
            char msg[200];
            uint64_t wi = 0, gi = 0;
            memcpy(&wi, e.bytes, ts);
            memcpy(&gi, got, ts);
            double want = is_float(s.dtype) ? decode_float(e.bytes, s.dtype) : double(int64_t(normalise_int(wi, s.dtype)));
            double have = is_float(s.dtype) ? decode_float(got, s.dtype) : double(int64_t(normalise_int(gi, s.dtype)));
            snprintf(msg, sizeof(msg), "element %zu: want %g (0x%llx) got %g (0x%llx)", o, want,
                     (unsigned long long)wi, have, (unsigned long long)gi);
            note(res, msg);
        }
    }
    res->hash = fnv(out, out_elems * ts);
}

vcclResult_t run_staged(SimWorld& world, const Spec& s, const CollArgs& args, uint64_t tag, int r,
                        const CollSettings& settings, ScratchArena* scratch, RankResult* res) {
    const int n = world.nranks();
    StagedPlan plan = staged_plan(n, r, s.staged_chunk, args);
    const bool columns = args.coll == CollType::AllGather || args.coll == CollType::ReduceScatter ||
                         args.coll == CollType::AlltoAll;
    size_t want = staged_pieces(s.count, dtype_size(s.dtype) * (columns ? size_t(n) : 1), s.staged_chunk).size();
    if (plan.pieces.size() != want) {
        note(res, std::to_string(plan.pieces.size()) + " pieces, want " + std::to_string(want));
    }
    Guarded slot(plan.slot_bytes);
    for (const StagedPiece& piece : plan.pieces) {
        for (const StagedCopy& c : piece.in) apply_staged_copy(slot.data(), c, true);
    }
    for (size_t k = 0; k < plan.pieces.size(); ++k) {
        uint64_t piece_tag = tag * 2 * kMaxStagedPieces + k;
        CollCtx ctx(world.transport(r), r, n, piece_tag, s.dtype, s.op, settings, nullptr, scratch);
        ctx.set_hosts(s.hosts);
        char* host = reinterpret_cast<char*>(slot.data());
        vcclResult_t st = s.algo->run(ctx, staged_host_args(args, plan.pieces[k], host));
        scratch->reset();
        if (st != vcclSuccess) return st;
    }
    for (const StagedPiece& piece : plan.pieces) {
        for (const StagedCopy& c : piece.out) apply_staged_copy(slot.data(), c, false);
    }
    if (!slot.guards_ok()) note(res, "staging slot overrun (guard bytes overwritten)");
    return vcclSuccess;
}

struct Report {
    size_t failed_cases = 0;
    std::string text; // the first few failures
};

/* Runs every spec on an n-rank world, each rank doing them in order (tags keep them apart). */
Report run_cases(int n, const std::vector<Spec>& specs, const RunOptions& opt = RunOptions()) {
    SimWorld world(n, opt.sim);
    std::vector<std::vector<RankResult>> results(specs.size(), std::vector<RankResult>(size_t(n)));
    world.run([&](int r) {
        ScratchArena scratch; // reused across collectives, as the communicator's is
        for (size_t i = 0; i < specs.size(); ++i) {
            run_one(world, specs[i], i + 1, r, &scratch, opt.timeout_ms, &results[i][size_t(r)]);
        }
    });
    Report rep;
    for (size_t i = 0; i < specs.size(); ++i) {
        std::string problems;
        for (int r = 0; r < n; ++r) {
            const RankResult& res = results[i][size_t(r)];
            if (res.errors > 0) {
                problems += " rank " + std::to_string(r) + ": " + res.first + " (" + std::to_string(res.errors) +
                            " problems);";
            }
        }
        if (problems.empty() && specs[i].algo->coll == CollType::AllReduce) {
            for (int r = 1; r < n; ++r) {
                if (results[i][size_t(r)].hash != results[i][0].hash) {
                    problems += " rank " + std::to_string(r) + " result differs bitwise from rank 0;";
                    break;
                }
            }
        }
        if (!problems.empty()) {
            if (++rep.failed_cases <= 8) rep.text += describe(specs[i], n) + ":" + problems + "\n";
        }
    }
    if (world.outstanding_requests() != 0) {
        ++rep.failed_cases;
        rep.text += std::to_string(world.outstanding_requests()) + " transport requests never released\n";
    }
    if (world.unmatched() != 0) {
        ++rep.failed_cases;
        rep.text += std::to_string(world.unmatched()) + " messages or receives left unmatched\n";
    }
    return rep;
}

// ---------------------------------------------------------------------------------------------------
// The grid

const vcclDataType_t kAllTypes[] = {vcclInt8,    vcclUint8,   vcclInt32,   vcclUint32,   vcclInt64,
                                    vcclUint64,  vcclFloat16, vcclFloat32, vcclFloat64, vcclBfloat16};
const vcclRedOp_t kAllOps[] = {vcclSum, vcclProd, vcclMax, vcclMin, vcclAvg};
const std::vector<int> kRankCounts = {1, 2, 3, 4, 5, 8};

const Algorithm* algo_at(size_t i) {
    size_t n;
    const Algorithm* all = algo_list(&n);
    return i < n ? &all[i] : nullptr;
}
size_t algo_count() {
    size_t n;
    algo_list(&n);
    return n;
}

/* Every type x op x small count x placement, with chunk sizes that range from one element to whole
 * blocks; then random floats; then counts that do not divide evenly and a ~3 MB one, with small chunks. */
std::vector<Spec> grid(const Algorithm* a, int n) {
    std::vector<Spec> specs;
    const bool red = is_reduction(a->coll);
    const bool per_rank = a->coll == CollType::AllGather || a->coll == CollType::ReduceScatter ||
                          a->coll == CollType::AlltoAll; // count is per rank; total is n * count
    const size_t counts[] = {0, 1, 2, 7, size_t(n - 1), size_t(n + 1), 1000};
    // Down to one element per chunk for tiny counts; a few elements per chunk at 1000 (enough to pipeline,
    // few enough messages to keep the run short).
    const size_t chunks[] = {size_t(1) << 20, 40, 7}, chunks_1000[] = {size_t(1) << 20, 256, 40};
    uint64_t seed = 1;
    for (vcclDataType_t t : kAllTypes) {
        for (vcclRedOp_t op : kAllOps) {
            if (!red && op != vcclSum) continue;
            for (size_t count : counts) {
                for (int in_place = 0; in_place < 2; ++in_place) {
                    ++seed;
                    // Both placements for the counts that exercise the most code; one, alternating, for the rest.
                    bool both = count == size_t(n + 1) || count == 1000;
                    if (!both && in_place != int((seed / 2 + size_t(t) + size_t(op)) % 2)) continue;
                    size_t chunk = count >= 1000 ? chunks_1000[seed % 3] : chunks[seed % 3];
                    specs.push_back(Spec{a, t, op, count, in_place != 0, int(seed % size_t(n)), chunk, Input::Int, seed});
                }
            }
        }
    }
    for (vcclDataType_t t : {vcclFloat16, vcclBfloat16, vcclFloat32, vcclFloat64}) {
        for (vcclRedOp_t op : {vcclSum, vcclAvg, vcclMax}) {
            if (!red && op != vcclSum) continue;
            ++seed;
            specs.push_back(Spec{a, t, op, 1000, (seed & 1) != 0, int(seed % size_t(n)), 256, Input::Float, seed});
        }
    }
    struct Big {
        vcclDataType_t t;
        vcclRedOp_t op;
    };
    const Big bigs[] = {{vcclFloat32, vcclSum}, {vcclInt32, vcclAvg}, {vcclBfloat16, vcclSum}, {vcclUint8, vcclMax},
                        {vcclFloat64, vcclProd}, {vcclFloat16, vcclMin}};
    for (const Big& b : bigs) {
        if (!red && b.op != vcclSum && b.t != vcclUint8) continue;
        for (int in_place = 0; in_place < 2; ++in_place) {
            ++seed;
            specs.push_back(Spec{a, b.t, red ? b.op : vcclSum, 70001, in_place != 0, int(seed % size_t(n)), 4096,
                                 Input::Int, seed});
        }
    }
    // ~3 MB in total, with 64 KiB chunks: dozens of chunks per block in flight.
    size_t big = (size_t(3) << 20) / 4 + 3;
    ++seed;
    specs.push_back(Spec{a, vcclFloat32, vcclSum, per_rank ? big / size_t(n) : big, (seed & 1) != 0,
                         int(seed % size_t(n)), 64 << 10, Input::Int, seed});
    return specs;
}

struct GridParam {
    size_t algo;
    int nranks;
};

class AlgoGrid : public ::testing::TestWithParam<GridParam> {};

TEST_P(AlgoGrid, MatchesReference) {
    const Algorithm* a = algo_at(GetParam().algo);
    ASSERT_NE(a, nullptr);
    Report rep = run_cases(GetParam().nranks, grid(a, GetParam().nranks));
    EXPECT_EQ(rep.failed_cases, 0u) << rep.text;
}

bool is_two_level(const Algorithm* a) { return strcmp(a->name, "twolevel") == 0; }

/* Every flat algorithm on each of these rank counts (the two-level ones have their own layouts, AlgoTwoLevel). */
std::vector<GridParam> every_algo_on(const std::vector<int>& rank_counts) {
    std::vector<GridParam> out;
    for (size_t i = 0; i < algo_count(); ++i) {
        if (is_two_level(algo_at(i))) continue;
        for (int n : rank_counts) out.push_back(GridParam{i, n});
    }
    return out;
}

std::string param_name(const ::testing::TestParamInfo<GridParam>& info) {
    const Algorithm* a = algo_at(info.param.algo);
    return std::string(coll_name(a->coll)) + "_" + a->name + "_n" + std::to_string(info.param.nranks);
}

INSTANTIATE_TEST_SUITE_P(All, AlgoGrid, ::testing::ValuesIn(every_algo_on(kRankCounts)), param_name);

/* Sends that complete only when received (as UCX rendezvous does), with every delivery randomly delayed:
 * catches waits that close a cycle, and buffers touched before their request completed. */
class AlgoStress : public ::testing::TestWithParam<GridParam> {};

TEST_P(AlgoStress, RendezvousWithRandomDelays) {
    const Algorithm* a = algo_at(GetParam().algo);
    const int n = GetParam().nranks;
    const bool per_rank = a->coll == CollType::AllGather || a->coll == CollType::ReduceScatter ||
                          a->coll == CollType::AlltoAll;
    std::vector<Spec> specs;
    uint64_t seed = 1000;
    for (size_t count : {size_t(1), size_t(n + 1), size_t(1000), size_t(20011)}) {
        for (int in_place = 0; in_place < 2; ++in_place) {
            ++seed;
            size_t c = per_rank && count > 1000 ? count / size_t(n) : count;
            specs.push_back(Spec{a, vcclFloat32, vcclSum, c, in_place != 0, int(seed % size_t(n)),
                                 count > 1000 ? size_t(2048) : size_t(40), Input::Int, seed});
            specs.push_back(Spec{a, vcclInt32, vcclAvg, c, in_place == 0, int((seed + 1) % size_t(n)), 12,
                                 Input::Int, seed + 7});
        }
    }
    RunOptions opt;
    opt.sim.eager = false;
    opt.sim.max_delay_us = 30;
    opt.sim.seed = seed;
    Report rep = run_cases(n, specs, opt);
    EXPECT_EQ(rep.failed_cases, 0u) << rep.text;
}

/* The staged device path's plan (algo/staged_layout.h) run on host memory: pieces of every collective, cut
 * small enough that counts from 1 element up give from one piece to the 64-piece cap, with one-element pieces,
 * short last pieces and (AllGather, ReduceScatter, AlltoAll) columns of every rank's block, in and out of place,
 * against the same reference as the grid. */
class AlgoStaged : public ::testing::TestWithParam<GridParam> {};

TEST_P(AlgoStaged, PiecesMatchReference) {
    const Algorithm* a = algo_at(GetParam().algo);
    const int n = GetParam().nranks;
    const bool red = is_reduction(a->coll);
    std::vector<Spec> specs;
    uint64_t seed = 5000;
    const vcclDataType_t types[] = {vcclInt8, vcclFloat16, vcclInt32, vcclFloat64, vcclBfloat16};
    for (vcclDataType_t t : types) {
        for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(n + 1), size_t(1000), size_t(9001)}) {
            for (uint64_t chunk : {uint64_t(0), uint64_t(1), uint64_t(40), uint64_t(1000)}) {
                for (int in_place = 0; in_place < 2; ++in_place) { // AlltoAll too: vccl takes it in place
                    ++seed;
                    vcclRedOp_t op = red ? kAllOps[seed % 5] : vcclSum;
                    Spec spec{a, t, op, count, in_place != 0, int(seed % size_t(n)), 256, Input::Int, seed};
                    spec.staged_chunk = chunk; // 0: one piece, still through the plan
                    spec.staged = true;
                    specs.push_back(spec);
                }
            }
        }
    }
    Report rep = run_cases(n, specs);
    EXPECT_EQ(rep.failed_cases, 0u) << rep.text;
}

INSTANTIATE_TEST_SUITE_P(All, AlgoStaged, ::testing::ValuesIn(every_algo_on({1, 2, 3, 5})), param_name);

INSTANTIATE_TEST_SUITE_P(All, AlgoStress, ::testing::ValuesIn(every_algo_on({2, 3, 5, 8})), param_name);

TEST(AlgoRegistry, EveryCollectiveHasAlgorithmsWithUniqueNames) {
    size_t n;
    const Algorithm* all = algo_list(&n);
    ASSERT_GE(n, 9u);
    int per_coll[int(CollType::kCount)] = {};
    for (size_t i = 0; i < n; ++i) {
        per_coll[int(all[i].coll)]++;
        EXPECT_NE(all[i].run, nullptr);
        EXPECT_GT(strlen(all[i].description), 10u);
        for (size_t j = 0; j < i; ++j) {
            EXPECT_FALSE(all[i].coll == all[j].coll && strcmp(all[i].name, all[j].name) == 0) << all[i].name;
        }
    }
    for (int c = 0; c < int(CollType::kCount); ++c) EXPECT_GE(per_coll[c], 1) << coll_name(CollType(c));
}

TEST(AlgoRegistry, DefaultSelection) {
    if (env::is_set(env::kAlgo)) GTEST_SKIP() << "VCCL_ALGO is set";
    CollSettings st; // small_bytes = 64 KiB
    auto pick = [&](CollType c, size_t count, int nranks) {
        CollArgs a{c, nullptr, nullptr, count, vcclFloat32, vcclSum, 0};
        return std::string(algo_select(a, nranks, st)->name);
    };
    EXPECT_EQ(pick(CollType::AllReduce, 1024, 8), "recursive_doubling"); // 4 KiB
    EXPECT_EQ(pick(CollType::AllReduce, 16384, 8), "recursive_doubling"); // exactly 64 KiB
    EXPECT_EQ(pick(CollType::AllReduce, 16385, 8), "ring");
    EXPECT_EQ(pick(CollType::AllReduce, 1 << 20, 8), "ring");
    st.small_bytes = 0;
    EXPECT_EQ(pick(CollType::AllReduce, 3, 4), "recursive_doubling"); // fewer elements than ranks
    EXPECT_EQ(pick(CollType::AllReduce, 4, 4), "ring");
    st = CollSettings();
    EXPECT_EQ(pick(CollType::Broadcast, 100, 4), "binomial");
    EXPECT_EQ(pick(CollType::Broadcast, 1 << 20, 4), "chain");
    EXPECT_EQ(pick(CollType::Reduce, 100, 4), "binomial");
    EXPECT_EQ(pick(CollType::Reduce, 1 << 20, 4), "chain");
    EXPECT_EQ(pick(CollType::AllGather, 1 << 20, 4), "ring");
    EXPECT_EQ(pick(CollType::ReduceScatter, 1, 4), "ring");
    EXPECT_EQ(pick(CollType::AlltoAll, 1, 4), "pairwise");
}

// ---------------------------------------------------------------------------------------------------
// Two-level algorithms over layouts of ranks on hosts

struct Layout {
    const char* name;
    std::vector<int> host_of; // host label of every rank
};

const std::vector<Layout>& layouts() {
    static const std::vector<Layout> kLayouts = {
        {"2x2", {0, 0, 1, 1}},
        {"3x2", {0, 0, 1, 1, 2, 2}},
        {"2x3", {0, 0, 0, 1, 1, 1}},
        {"4x4", {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}},
        {"2x2_interleaved", {7, 3, 7, 3}},       // hosts alternate by rank
        {"3x2_scattered", {2, 0, 1, 1, 0, 2}},   // no host's ranks are contiguous
        {"2x1", {0, 1}},                          // one rank per host: flat
        {"2plus1", {0, 0, 1}},                    // uneven: flat
        {"3plus1", {0, 1, 0, 0}},                 // uneven: flat
        {"1x4", {0, 0, 0, 0}},                    // one host: flat
    };
    return kLayouts;
}

const Algorithm* two_level_of(CollType c) {
    for (size_t i = 0; i < algo_count(); ++i) {
        if (algo_at(i)->coll == c && is_two_level(algo_at(i))) return algo_at(i);
    }
    return nullptr;
}

/* Every type x op, counts from 0 through odd and non-divisible ones, both placements, both the small-message and
 * the blocked allreduce path (small_bytes 0 forces the latter), chunks down to one element, random floats, a
 * larger odd count, and a few through the staged device path's pieces. Smaller than the flat grid: the phases
 * are the flat algorithms, which that grid covers. */
std::vector<Spec> two_level_grid(const Algorithm* a, int n, const HostGroups* hosts, bool full) {
    std::vector<Spec> specs;
    const bool red = is_reduction(a->coll);
    const size_t counts[] = {0, 1, 2, 7, size_t(n - 1), size_t(n + 1), 1001};
    const size_t chunks[] = {size_t(1) << 20, 40, 7};
    uint64_t seed = 77;
    for (vcclDataType_t t : kAllTypes) {
        for (vcclRedOp_t op : kAllOps) {
            if (!red && op != vcclSum) continue;
            for (size_t count : counts) {
                ++seed;
                if (!full && seed % 4 != 0) continue; // the big layouts: a quarter of the cases
                Spec sp{a, t, op, count, seed % 2 == 0, int(seed % size_t(n)), chunks[seed % 3], Input::Int, seed};
                sp.hosts = hosts;
                sp.small_bytes = (seed / 2) % 2 == 0 ? -1 : 0;
                specs.push_back(sp);
            }
        }
    }
    for (vcclDataType_t t : {vcclFloat16, vcclBfloat16, vcclFloat32, vcclFloat64}) {
        for (vcclRedOp_t op : {vcclSum, vcclAvg, vcclMax}) {
            if (!red && op != vcclSum) continue;
            ++seed;
            Spec sp{a, t, op, 1001, (seed & 1) != 0, int(seed % size_t(n)), 256, Input::Float, seed};
            sp.hosts = hosts;
            sp.small_bytes = (seed / 2) % 2 == 0 ? -1 : 0;
            specs.push_back(sp);
        }
    }
    if (!full) return specs; // the big layouts: the small cases only
    for (int in_place = 0; in_place < 2; ++in_place) {
        for (vcclDataType_t t : {vcclFloat32, vcclInt32}) {
            ++seed;
            Spec sp{a, t, red && t == vcclInt32 ? vcclAvg : vcclSum, 70001, in_place != 0, int(seed % size_t(n)),
                    4096, Input::Int, seed};
            sp.hosts = hosts;
            specs.push_back(sp);
        }
    }
    for (uint64_t piece : {uint64_t(0), uint64_t(40), uint64_t(1000)}) {
        for (size_t count : {size_t(1), size_t(n + 1), size_t(1001)}) {
            ++seed;
            Spec sp{a, vcclFloat32, red ? kAllOps[seed % 5] : vcclSum, count, (seed & 1) != 0, int(seed % size_t(n)),
                    256, Input::Int, seed};
            sp.hosts = hosts;
            sp.small_bytes = (seed / 2) % 2 == 0 ? -1 : 0;
            sp.staged = true;
            sp.staged_chunk = piece;
            specs.push_back(sp);
        }
    }
    return specs;
}

struct TwoLevelParam {
    CollType coll;
    size_t layout;
};

class AlgoTwoLevel : public ::testing::TestWithParam<TwoLevelParam> {};

TEST_P(AlgoTwoLevel, MatchesReference) {
    const Algorithm* a = two_level_of(GetParam().coll);
    ASSERT_NE(a, nullptr);
    const Layout& l = layouts()[GetParam().layout];
    HostGroups hosts = HostGroups::from_hosts(l.host_of);
    const int n = hosts.nranks();
    Report rep = run_cases(n, two_level_grid(a, n, &hosts, n <= 6));
    EXPECT_EQ(rep.failed_cases, 0u) << rep.text;
}

TEST_P(AlgoTwoLevel, RendezvousWithRandomDelays) {
    const Algorithm* a = two_level_of(GetParam().coll);
    const Layout& l = layouts()[GetParam().layout];
    if (l.host_of.size() > 6) GTEST_SKIP() << "the grid covers the big layouts";
    HostGroups hosts = HostGroups::from_hosts(l.host_of);
    const int n = hosts.nranks();
    std::vector<Spec> specs;
    uint64_t seed = 3000;
    for (size_t count : {size_t(1), size_t(n + 1), size_t(1001), size_t(20011)}) {
        for (int in_place = 0; in_place < 2; ++in_place) {
            ++seed;
            Spec sp{a, vcclFloat32, vcclSum, count, in_place != 0, int(seed % size_t(n)), count > 1001 ? 2048u : 40u,
                    Input::Int, seed};
            sp.hosts = &hosts;
            sp.small_bytes = in_place ? 0 : -1;
            specs.push_back(sp);
            sp.dtype = vcclInt32;
            sp.op = vcclAvg;
            sp.in_place = !sp.in_place;
            sp.root = int((seed + 1) % size_t(n));
            specs.push_back(sp);
        }
    }
    RunOptions opt;
    opt.sim.eager = false;
    opt.sim.max_delay_us = 30;
    opt.sim.seed = seed;
    Report rep = run_cases(n, specs, opt);
    EXPECT_EQ(rep.failed_cases, 0u) << rep.text;
}

std::vector<TwoLevelParam> every_two_level_layout() {
    std::vector<TwoLevelParam> out;
    for (int c = 0; c < int(CollType::kCount); ++c) {
        for (size_t l = 0; l < layouts().size(); ++l) out.push_back(TwoLevelParam{CollType(c), l});
    }
    return out;
}

std::string two_level_name(const ::testing::TestParamInfo<TwoLevelParam>& info) {
    return std::string(coll_name(info.param.coll)) + "_" + layouts()[info.param.layout].name;
}

INSTANTIATE_TEST_SUITE_P(All, AlgoTwoLevel, ::testing::ValuesIn(every_two_level_layout()), two_level_name);

/* Bytes each rank sent to ranks of other hosts in one collective, and that none went off its rail. */
struct CrossHost {
    std::vector<size_t> per_rank;
    size_t off_rail = 0;
};

CrossHost run_counting(const Spec& spec, const HostGroups& hosts) {
    const int n = hosts.nranks();
    SimWorld world(n);
    std::vector<RankResult> results(static_cast<size_t>(n));
    world.run([&](int r) {
        ScratchArena scratch;
        run_one(world, spec, 1, r, &scratch, 30000, &results[size_t(r)]);
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ(results[size_t(r)].errors, 0u) << results[size_t(r)].first;
    CrossHost out;
    out.per_rank.assign(size_t(n), 0);
    for (int a = 0; a < n; ++a) {
        for (int b = 0; b < n; ++b) {
            if (hosts.host_of(a) == hosts.host_of(b)) continue;
            out.per_rank[size_t(a)] += world.bytes_sent(a, b);
            if (hosts.local_rank(a) != hosts.local_rank(b)) out.off_rail += world.bytes_sent(a, b);
        }
    }
    return out;
}

/* The point of two levels: each rank's inter-host bytes are the rail's share, 1/G of what crosses per host, and
 * stay on the rail; the flat ring sends several times as much over its busiest link. */
TEST(AlgoTwoLevelTraffic, InterHostBytesPerRailAreDividedByRanksPerHost) {
    for (const char* name : {"2x2", "3x2", "4x4"}) {
        const Layout* l = nullptr;
        for (const Layout& x : layouts()) {
            if (strcmp(x.name, name) == 0) l = &x;
        }
        ASSERT_NE(l, nullptr);
        HostGroups hosts = HostGroups::from_hosts(l->host_of);
        const size_t n = size_t(hosts.nranks()), H = size_t(hosts.nhosts()), G = size_t(hosts.ranks_per_host());
        const size_t c = 4 * 3 * 5 * 7 * 16; // divisible by every G * H here, so each rank's share is exact
        struct Case {
            CollType coll;
            size_t count, expected; // bytes per rank across hosts
        };
        const Case cases[] = {
            {CollType::AllReduce, c * G, 2 * (H - 1) * c * 4 / H},      // 2(H-1)/H of S/G, S = c*G*4
            {CollType::AllGather, c, (H - 1) * c * 4},                  // (H-1)/H of S/G, S = n*c*4
            {CollType::ReduceScatter, c, (H - 1) * c * 4},
            {CollType::AlltoAll, c, (H - 1) * G * c * 4},               // every block for another host, once
            {CollType::Broadcast, c, 0},                                 // checked below: the root's rail only
        };
        for (const Case& k : cases) {
            Spec spec{two_level_of(k.coll), vcclFloat32, vcclSum, k.count, false, 1, 1 << 20, Input::Int, 11};
            spec.hosts = &hosts;
            spec.small_bytes = 0; // the blocked allreduce, and the flat ring to compare with
            CrossHost two = run_counting(spec, hosts);
            EXPECT_EQ(two.off_rail, 0u) << name << " " << coll_name(k.coll) << ": bytes left their rail";
            if (k.coll == CollType::Broadcast) continue;
            for (size_t r = 0; r < n; ++r) {
                EXPECT_EQ(two.per_rank[r], k.expected) << name << " " << coll_name(k.coll) << " rank " << r;
            }
            if (k.coll == CollType::AlltoAll) continue; // same bytes flat, in G times the messages
            spec.hosts = nullptr;
            spec.algo = algo_select(CollArgs{k.coll, nullptr, nullptr, k.count, vcclFloat32, vcclSum, 0}, int(n),
                                    CollSettings());
            CrossHost flat = run_counting(spec, hosts);
            size_t busiest = 0;
            for (size_t b : flat.per_rank) busiest = std::max(busiest, b);
            EXPECT_GE(busiest, 2 * k.expected) << name << " " << coll_name(k.coll) << " flat " << spec.algo->name;
        }
    }
}

TEST(AlgoTwoLevelTraffic, HostGroupsFromLabels) {
    HostGroups g = HostGroups::from_hosts({9, 4, 9, 4, 9, 4});
    EXPECT_EQ(g.nhosts(), 2);
    EXPECT_EQ(g.ranks_per_host(), 3);
    EXPECT_TRUE(g.two_level());
    EXPECT_EQ(g.host_of(0), 0);
    EXPECT_EQ(g.host_of(1), 1);
    EXPECT_EQ(g.local_rank(4), 2);
    EXPECT_EQ(g.local_rank(5), 2);
    EXPECT_EQ(g.host_ranks(1), (std::vector<int>{1, 3, 5}));
    EXPECT_EQ(g.rail_ranks(2), (std::vector<int>{4, 5}));
    HostGroups uneven = HostGroups::from_ids({5, 5, 6});
    EXPECT_EQ(uneven.ranks_per_host(), 0);
    EXPECT_EQ(uneven.local_size(2), 1);
    EXPECT_EQ(uneven.local_size(1), 2);
    EXPECT_FALSE(uneven.two_level());
    EXPECT_FALSE(HostGroups::from_ids({5, 6}).two_level()) << "one rank per host";
    EXPECT_FALSE(HostGroups::from_ids({5, 5, 5}).two_level()) << "one host";
}

TEST(AlgoRegistry, TwoLevelByDefaultAcrossEvenHosts) {
    if (env::is_set(env::kAlgo)) GTEST_SKIP() << "VCCL_ALGO is set";
    CollSettings st;
    HostGroups two_by_two = HostGroups::from_hosts({0, 0, 1, 1}), uneven = HostGroups::from_hosts({0, 0, 1}),
               one_each = HostGroups::from_hosts({0, 1}), one_host = HostGroups::from_hosts({0, 0, 0, 0});
    for (int c = 0; c < int(CollType::kCount); ++c) {
        for (size_t count : {size_t(1), size_t(1) << 22}) {
            CollArgs a{CollType(c), nullptr, nullptr, count, vcclFloat32, vcclSum, 0};
            EXPECT_STREQ(algo_select(a, 4, st, AlgoChoice(), &two_by_two)->name, "twolevel") << coll_name(CollType(c));
            EXPECT_STRNE(algo_select(a, 3, st, AlgoChoice(), &uneven)->name, "twolevel");
            EXPECT_STRNE(algo_select(a, 2, st, AlgoChoice(), &one_each)->name, "twolevel");
            EXPECT_STRNE(algo_select(a, 4, st, AlgoChoice(), &one_host)->name, "twolevel");
            EXPECT_STRNE(algo_select(a, 4, st)->name, "twolevel");
        }
    }
    AlgoChoice forced;
    const Algorithm* chosen[int(CollType::kCount)];
    char error[256];
    ASSERT_TRUE(algo_parse_override("allreduce:ring,alltoall:twolevel", chosen, error, sizeof(error))) << error;
    for (int c = 0; c < int(CollType::kCount); ++c) forced.host[c] = chosen[c];
    CollArgs ar{CollType::AllReduce, nullptr, nullptr, 1 << 20, vcclFloat32, vcclSum, 0};
    EXPECT_STREQ(algo_select(ar, 4, st, forced, &two_by_two)->name, "ring") << "a forced flat algorithm wins";
    CollArgs aa{CollType::AlltoAll, nullptr, nullptr, 1, vcclFloat32, vcclSum, 0};
    EXPECT_STREQ(algo_select(aa, 4, st, forced)->name, "twolevel");
    EXPECT_EQ(algo_choice_decode(algo_choice_encode(forced)).host[int(CollType::AlltoAll)], chosen[int(CollType::AlltoAll)]);
}

// ---------------------------------------------------------------------------------------------------
// The checker itself must fail on wrong algorithms.

vcclResult_t broken_local_only(CollCtx& ctx, const CollArgs& a) {
    ctx.copy(a.recvbuf, a.sendbuf, a.count * ctx.type_size()); // forgets the other ranks
    return ctx.wait_all();
}
vcclResult_t broken_ring_short(CollCtx& ctx, const CollArgs& a) {
    CollArgs b = a;
    if (b.count > 0) b.count--; // the last element is never reduced
    return kAllReduceRing.run(ctx, b);
}
/* Pairwise alltoall without the scratch copy: in place, block r+s is overwritten before it is sent. */
vcclResult_t broken_alltoall_inplace(CollCtx& ctx, const CollArgs& a) {
    const int n = ctx.nranks(), r = ctx.rank();
    const size_t bb = a.count * ctx.type_size();
    const char* in = static_cast<const char*>(a.sendbuf);
    char* out = static_cast<char*>(a.recvbuf);
    if (a.count == 0) return vcclSuccess;
    ctx.copy(out + size_t(r) * bb, in + size_t(r) * bb, bb);
    for (int s = 1; s < n; ++s) {
        int to = (r + s) % n, from = (r - s + n) % n;
        VCCL_RETURN_IF_ERROR(ctx.sendrecv(to, in + size_t(to) * bb, bb, from, out + size_t(from) * bb, bb));
    }
    return ctx.wait_all();
}
/* Sends, waits for the send, then receives: fine with eager sends, a deadlock with rendezvous. */
vcclResult_t broken_blocking_ring(CollCtx& ctx, const CollArgs& a) {
    const int n = ctx.nranks(), r = ctx.rank();
    const size_t bytes = a.count * ctx.type_size();
    ctx.copy(a.recvbuf, a.sendbuf, bytes);
    char* tmp = static_cast<char*>(ctx.scratch(bytes));
    for (int s = 0; s < n - 1; ++s) {
        CollCtx::ReqId id;
        VCCL_RETURN_IF_ERROR(ctx.isend((r + 1) % n, s == 0 ? a.sendbuf : tmp, bytes, &id));
        VCCL_RETURN_IF_ERROR(ctx.wait(id));
        VCCL_RETURN_IF_ERROR(ctx.irecv((r + n - 1) % n, tmp, bytes, &id));
        VCCL_RETURN_IF_ERROR(ctx.wait(id));
        ctx.reduce(a.recvbuf, a.recvbuf, tmp, a.count);
    }
    return ctx.wait_all();
}

TEST(AlgoChecker, CatchesBrokenAlgorithms) {
    const Algorithm local{CollType::AllReduce, "local", "broken", "never", broken_local_only};
    const Algorithm shortr{CollType::AllReduce, "short", "broken", "never", broken_ring_short};
    const Algorithm a2a{CollType::AlltoAll, "inplace", "broken", "never", broken_alltoall_inplace};
    for (const Algorithm* a : {&local, &shortr, &a2a}) {
        const int n = 4;
        std::vector<Spec> specs;
        for (const Spec& s : grid(a, n)) { // the grid minus its largest cases, to keep this quick
            if (s.count <= 1000) specs.push_back(s);
        }
        Report rep = run_cases(n, specs);
        EXPECT_GT(rep.failed_cases, 0u) << a->name << " was not caught";
    }
}

TEST(AlgoChecker, RendezvousExposesDeadlock) {
    const Algorithm blocking{CollType::AllReduce, "blocking", "broken", "never", broken_blocking_ring};
    std::vector<Spec> specs = {Spec{&blocking, vcclFloat32, vcclSum, 100, false, 0, 1 << 20, Input::Int, 5}};
    RunOptions opt;
    EXPECT_EQ(run_cases(3, specs, opt).failed_cases, 0u) << "correct with eager sends";
    opt.sim.eager = false;
    opt.timeout_ms = 200;
    Report rep = run_cases(3, specs, opt);
    EXPECT_GT(rep.failed_cases, 0u);
    EXPECT_NE(rep.text.find("timed out"), std::string::npos) << rep.text;
}

// ---------------------------------------------------------------------------------------------------
// CollCtx

CollSettings quick(int64_t timeout_ms) {
    CollSettings s;
    s.op_timeout_ms = timeout_ms;
    return s;
}

TEST(CollCtx, TimeoutNamesPeerAndBytesAndReleasesRequests) {
    SimWorld world(2);
    ScratchArena scratch;
    vcclResult_t st = vcclSuccess;
    std::string msg;
    world.run([&](int r) {
        if (r != 0) return; // rank 1 never sends
        char buf[24];
        CollCtx ctx(world.transport(0), 0, 2, 7, vcclFloat32, vcclSum, quick(50), nullptr, &scratch);
        auto t0 = std::chrono::steady_clock::now();
        CollCtx::ReqId id;
        ASSERT_EQ(ctx.irecv(1, buf, sizeof(buf), &id), vcclSuccess);
        st = ctx.wait(id);
        msg = last_error_message();
        EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
        EXPECT_EQ(ctx.status(), vcclTimeout);
        EXPECT_EQ(ctx.isend(1, buf, 4), vcclTimeout) << "errors are sticky";
    });
    EXPECT_EQ(st, vcclTimeout);
    EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("24 bytes"), std::string::npos) << msg;
    EXPECT_EQ(world.outstanding_requests(), 0u);
    EXPECT_EQ(world.unmatched(), 0u) << "the destructor must cancel the pending receive";
}

TEST(CollCtx, AbortEndsWait) {
    SimWorld world(2);
    ScratchArena scratch;
    std::atomic<bool> abort_flag{false};
    vcclResult_t st = vcclSuccess;
    std::string msg;
    std::thread aborter([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        abort_flag = true;
    });
    {
        char buf[8];
        CollCtx ctx(world.transport(0), 0, 2, 7, vcclInt8, vcclSum, quick(0), &abort_flag, &scratch);
        ASSERT_EQ(ctx.isend(1, buf, sizeof(buf)), vcclSuccess);
        ASSERT_EQ(ctx.irecv(1, buf, sizeof(buf)), vcclSuccess);
        st = ctx.wait_all();
        msg = last_error_message();
    }
    aborter.join();
    EXPECT_EQ(st, vcclRemoteError);
    EXPECT_NE(msg.find("aborted"), std::string::npos) << msg;
    EXPECT_EQ(world.outstanding_requests(), 0u);
}

TEST(CollCtx, SizeMismatchIsAnError) {
    SimWorld world(2);
    vcclResult_t st[2] = {vcclSuccess, vcclSuccess};
    world.run([&](int r) {
        ScratchArena scratch;
        CollCtx ctx(world.transport(r), r, 2, 9, vcclInt8, vcclSum, quick(2000), nullptr, &scratch);
        char buf[16] = {};
        if (r == 0) {
            ctx.isend(1, buf, 16);
        } else {
            ctx.irecv(0, buf, 8);
        }
        st[r] = ctx.wait_all();
    });
    EXPECT_NE(st[1], vcclSuccess);
    EXPECT_NE(st[1], vcclInProgress);
}

TEST(CollCtx, TagsKeepCollectivesApart) {
    // Two collectives in flight with different tags: the second's message must not satisfy the first.
    SimWorld world(2);
    int got[2] = {0, 0};
    world.run([&](int r) {
        ScratchArena s1, s2;
        CollCtx a(world.transport(r), r, 2, 1, vcclInt32, vcclSum, quick(2000), nullptr, &s1);
        CollCtx b(world.transport(r), r, 2, 2, vcclInt32, vcclSum, quick(2000), nullptr, &s2);
        if (r == 0) {
            int x = 22, y = 11;
            ASSERT_EQ(b.isend(1, &x, 4), vcclSuccess);
            ASSERT_EQ(a.isend(1, &y, 4), vcclSuccess);
            EXPECT_EQ(b.wait_all(), vcclSuccess);
            EXPECT_EQ(a.wait_all(), vcclSuccess);
        } else {
            ASSERT_EQ(a.irecv(0, &got[0], 4), vcclSuccess);
            EXPECT_EQ(a.wait_all(), vcclSuccess);
            ASSERT_EQ(b.irecv(0, &got[1], 4), vcclSuccess);
            EXPECT_EQ(b.wait_all(), vcclSuccess);
        }
    });
    EXPECT_EQ(got[0], 11);
    EXPECT_EQ(got[1], 22);
}

TEST(ScratchArena, PointersStayValidUntilReset) {
    ScratchArena arena;
    std::vector<char*> ptrs;
    for (int i = 0; i < 20; ++i) {
        char* p = static_cast<char*>(arena.get(size_t(100 + i)));
        memset(p, i, size_t(100 + i));
        ptrs.push_back(p);
    }
    for (int i = 0; i < 20; ++i) {
        for (int j = 0; j < 100 + i; ++j) ASSERT_EQ(ptrs[size_t(i)][j], char(i));
    }
    arena.reset();
    EXPECT_EQ(arena.get(50), static_cast<void*>(ptrs[0])) << "blocks are reused after reset";
    void* bigger = arena.get(1 << 20);
    memset(bigger, 1, 1 << 20);
    EXPECT_NE(arena.get(0), nullptr);
}

} // namespace
