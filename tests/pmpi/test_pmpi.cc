/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_pmpi: every collective libvccl-pmpi.so intercepts, called as a plain MPI program calls it, with
 * results checked against values computed here from each rank's known inputs (not by another MPI call).
 * Each case also checks which way the interposer sent the call (vccl, the MPI library unchanged, the MPI
 * library on host copies), read from the test library (vccl::testing::pmpi_routes). Runs under any MPI: it
 * includes only mpi.h (and the test library's header) and is built once per flavour (tests/pmpi/Makefile.inc); run-pmpi.sh preloads the interposer.
 *
 * VTEST_PMPI_MODE says what the run set up and so which route each call must take:
 *   host    VCCL_PMPI_HOST=1: host buffers through vccl where vccl can; others to MPI unchanged
 *   asdev   VCCL_PMPI_HOST=2: host buffers taken for device memory: others to MPI on host copies
 *   off     VCCL_PMPI=0: everything to MPI unchanged, nothing counted
 *   device  buffers in cudaMalloc memory (the GPU build, test_pmpi_gpu): others on host copies
 */
#include <dlfcn.h>
#include <mpi.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "testing/test_hooks.h"

#include "mpi_gtest_main.h"

#if VTEST_PMPI_DEVICE
#include <cuda_runtime_api.h>
#endif

namespace {

/* ---------------------------------------------------------------------------------------------- */
/* Mode, routes, buffers                                                                          */

enum class Mode { Host, AsDev, Off, Device };

Mode mode() {
    static Mode m = [] {
        const char* v = getenv("VTEST_PMPI_MODE");
        std::string s = v != nullptr ? v : "host";
        if (s == "asdev") return Mode::AsDev;
        if (s == "off") return Mode::Off;
        if (s == "device") return Mode::Device;
        return Mode::Host;
    }();
    return m;
}

struct Counts {
    unsigned long long vccl = 0, pmpi = 0, staged = 0;
};

/* Read from the test library, which the interposer tells of every call's route (its test point). */
Counts counts() {
    Counts c;
    vccl::testing::pmpi_routes(&c.vccl, &c.pmpi, &c.staged);
    return c;
}

enum class Route { Vccl, Pmpi, Staged, Uncounted };

const char* route_name(Route r) {
    switch (r) {
    case Route::Vccl: return "vccl";
    case Route::Pmpi: return "MPI unchanged";
    case Route::Staged: return "MPI on host copies";
    default: return "not counted";
    }
}

/* The route of a call vccl can do, and of one it cannot (unsupported type or op, invalid arguments). */
Route supported() { return mode() == Mode::Off ? Route::Uncounted : Route::Vccl; }
Route unsupported() {
    switch (mode()) {
    case Mode::Host: return Route::Pmpi;
    case Mode::Off: return Route::Uncounted;
    default: return Route::Staged;
    }
}
/* Nonblocking collectives never use vccl: host buffers pass through uncounted, device ones are staged. */
Route nonblocking() { return mode() == Mode::AsDev || mode() == Mode::Device ? Route::Staged : Route::Uncounted; }

/* Collects a rank's failures of one case; report() is collective. */
struct Check {
    bool ok = true;
    std::string why;
    void expect(bool cond, const std::string& what) {
        if (cond) return;
        if (ok || why.size() < 1500) why += (why.empty() ? "" : "; ") + what;
        ok = false;
    }
    void route(const Counts& before, Route want, const std::string& what) {
        Counts now = counts();
        unsigned long long dv = now.vccl - before.vccl, dp = now.pmpi - before.pmpi, ds = now.staged - before.staged;
        bool good = false;
        switch (want) {
        case Route::Vccl: good = dv >= 1 && dp == 0 && ds == 0; break;
        case Route::Pmpi: good = dv == 0 && dp >= 1 && ds == 0; break;
        case Route::Staged: good = dv == 0 && dp == 0 && ds >= 1; break;
        case Route::Uncounted: good = dv == 0 && dp == 0 && ds == 0; break;
        }
        expect(good, what + ": expected route " + route_name(want) + ", counted vccl " + std::to_string(dv) +
                         ", MPI " + std::to_string(dp) + ", staged " + std::to_string(ds));
    }
};

#define REPORT(c) EXPECT_ALL_RANKS_WHY((c).ok, (c).why)

int rank_() { return vtest::world_rank(); }
int size_() { return vtest::world_size(); }

/* A buffer in host memory, or in device memory in the GPU build's device mode. */
class Buf {
public:
    explicit Buf(size_t bytes) : bytes_(bytes) {
#if VTEST_PMPI_DEVICE
        if (mode() == Mode::Device) {
            /* ranks of one host spread over its GPUs (they share GPU 0 on a one-GPU machine) */
            static const bool device_set = [] {
                int n = 0;
                if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) cudaSetDevice(rank_() % n);
                return true;
            }();
            (void)device_set;
            if (cudaMalloc(&dev_, bytes_ > 0 ? bytes_ : 1) != cudaSuccess) dev_ = nullptr;
            return;
        }
#endif
        host_.assign(bytes_ > 0 ? bytes_ : 1, 0);
    }
    ~Buf() {
#if VTEST_PMPI_DEVICE
        if (dev_ != nullptr) cudaFree(dev_);
#endif
    }
    Buf(const Buf&) = delete;
    Buf& operator=(const Buf&) = delete;
    void* p() { return dev_ != nullptr ? dev_ : host_.data(); }
    size_t bytes() const { return bytes_; }
    void put(const void* src, size_t n) {
#if VTEST_PMPI_DEVICE
        if (dev_ != nullptr) {
            cudaMemcpy(dev_, src, n, cudaMemcpyHostToDevice);
            return;
        }
#endif
        memcpy(host_.data(), src, n);
    }
    void put(const std::vector<unsigned char>& v) { put(v.data(), v.size()); }
    std::vector<unsigned char> get() {
        std::vector<unsigned char> v(bytes_);
#if VTEST_PMPI_DEVICE
        if (dev_ != nullptr) {
            cudaMemcpy(v.data(), dev_, bytes_, cudaMemcpyDeviceToHost);
            return v;
        }
#endif
        memcpy(v.data(), host_.data(), bytes_);
        return v;
    }

private:
    size_t bytes_;
    std::vector<unsigned char> host_;
    void* dev_ = nullptr;
};

/* ---------------------------------------------------------------------------------------------- */
/* Reduction types and ops                                                                        */

enum class Kind { Signed, Unsigned, Float };

struct TypeCase {
    const char* name;
    MPI_Datatype dt;
    size_t size;
    Kind kind;
};

/* Every predefined type MPI reduces with SUM/PROD/MAX/MIN and vccl has an equivalent for. */
const std::vector<TypeCase>& reduce_types() {
    static const std::vector<TypeCase> v = {
        {"signed_char", MPI_SIGNED_CHAR, 1, Kind::Signed},
        {"unsigned_char", MPI_UNSIGNED_CHAR, 1, Kind::Unsigned},
        {"int8", MPI_INT8_T, 1, Kind::Signed},
        {"uint8", MPI_UINT8_T, 1, Kind::Unsigned},
        {"int", MPI_INT, sizeof(int), Kind::Signed},
        {"unsigned", MPI_UNSIGNED, sizeof(unsigned), Kind::Unsigned},
        {"int32", MPI_INT32_T, 4, Kind::Signed},
        {"uint32", MPI_UINT32_T, 4, Kind::Unsigned},
        {"long", MPI_LONG, sizeof(long), Kind::Signed},
        {"unsigned_long", MPI_UNSIGNED_LONG, sizeof(unsigned long), Kind::Unsigned},
        {"long_long", MPI_LONG_LONG, sizeof(long long), Kind::Signed},
        {"unsigned_long_long", MPI_UNSIGNED_LONG_LONG, sizeof(unsigned long long), Kind::Unsigned},
        {"int64", MPI_INT64_T, 8, Kind::Signed},
        {"uint64", MPI_UINT64_T, 8, Kind::Unsigned},
        {"aint", MPI_AINT, sizeof(MPI_Aint), Kind::Signed},
        {"float", MPI_FLOAT, 4, Kind::Float},
        {"double", MPI_DOUBLE, 8, Kind::Float},
        {"fortran_integer", MPI_INTEGER, 4, Kind::Signed},
        {"fortran_real", MPI_REAL, 4, Kind::Float},
        {"fortran_double_precision", MPI_DOUBLE_PRECISION, 8, Kind::Float},
    };
    return v;
}

enum class Op { Sum, Prod, Max, Min };
const char* op_name(Op o) { return o == Op::Sum ? "sum" : o == Op::Prod ? "prod" : o == Op::Max ? "max" : "min"; }
MPI_Op mpi_op(Op o) { return o == Op::Sum ? MPI_SUM : o == Op::Prod ? MPI_PROD : o == Op::Max ? MPI_MAX : MPI_MIN; }

/* Inputs small enough that every result is exact in every type, on up to 8 ranks. */
double input(const TypeCase& t, Op op, int rank, size_t i) {
    switch (op) {
    case Op::Sum: return double((rank + 1) * int(i % 5 + 1));
    case Op::Prod: return (rank + int(i)) % 3 == 0 ? 2.0 : 1.0;
    default: {
        int v = (rank * 37 + int(i) * 11) % 97;
        return t.kind == Kind::Unsigned ? double(v) : double(v - 48);
    }
    }
}

double reference(const TypeCase& t, Op op, size_t i, int nranks) {
    double acc = input(t, op, 0, i);
    for (int r = 1; r < nranks; ++r) {
        double x = input(t, op, r, i);
        switch (op) {
        case Op::Sum: acc += x; break;
        case Op::Prod: acc *= x; break;
        case Op::Max: acc = x > acc ? x : acc; break;
        case Op::Min: acc = x < acc ? x : acc; break;
        }
    }
    return acc;
}

void store(unsigned char* p, const TypeCase& t, size_t i, double v) {
    unsigned char* e = p + i * t.size;
    if (t.kind == Kind::Float) {
        if (t.size == 4) { float f = float(v); memcpy(e, &f, 4); }
        else memcpy(e, &v, 8);
        return;
    }
    int64_t x = int64_t(v);
    /* little endian: the low bytes of the 64-bit value are the narrower integer */
    memcpy(e, &x, t.size);
}

double load(const unsigned char* p, const TypeCase& t, size_t i) {
    const unsigned char* e = p + i * t.size;
    if (t.kind == Kind::Float) {
        if (t.size == 4) { float f; memcpy(&f, e, 4); return f; }
        double d; memcpy(&d, e, 8); return d;
    }
    if (t.kind == Kind::Unsigned) {
        uint64_t x = 0;
        memcpy(&x, e, t.size);
        return double(x);
    }
    int64_t x = 0;
    memcpy(&x, e, t.size);
    int shift = int(64 - 8 * t.size);
    if (shift > 0) x = int64_t(uint64_t(x) << shift) >> shift; /* sign-extend */
    return double(x);
}

std::vector<unsigned char> inputs(const TypeCase& t, Op op, int rank, size_t n) {
    std::vector<unsigned char> v(n * t.size);
    for (size_t i = 0; i < n; ++i) store(v.data(), t, i, input(t, op, rank, i));
    return v;
}

/* Compares elements [0, n) of got with the reference for elements [first, first + n). */
void compare(Check& c, const std::vector<unsigned char>& got, const TypeCase& t, Op op, size_t first, size_t n,
             const std::string& what) {
    for (size_t i = 0; i < n; ++i) {
        double want = reference(t, op, first + i, size_())
            , have = load(got.data(), t, i);
        if (want != have) {
            c.expect(false, what + ": element " + std::to_string(first + i) + " is " + std::to_string(have) +
                                ", expected " + std::to_string(want));
            return;
        }
    }
}

struct RedParam {
    size_t type;
    Op op;
};

std::vector<RedParam> red_params() {
    std::vector<RedParam> v;
    for (size_t t = 0; t < reduce_types().size(); ++t)
        for (Op op : {Op::Sum, Op::Prod, Op::Max, Op::Min}) v.push_back({t, op});
    return v;
}

std::string red_name(const ::testing::TestParamInfo<RedParam>& info) {
    return std::string(reduce_types()[info.param.type].name) + "_" + op_name(info.param.op);
}

/* Counts: one, odd, and not a multiple of anything vccl might chunk by. */
const size_t kCounts[] = {1, 7, 1023};

/* ---------------------------------------------------------------------------------------------- */
/* Reductions over every type and op                                                              */

class Reductions : public ::testing::TestWithParam<RedParam> {};

TEST_P(Reductions, Allreduce) {
    const TypeCase& t = reduce_types()[GetParam().type];
    Op op = GetParam().op;
    Check c;
    for (size_t n : kCounts) {
        std::string what = std::string("MPI_Allreduce ") + t.name + " " + op_name(op) + " count " + std::to_string(n);
        Buf s(n * t.size), r(n * t.size);
        s.put(inputs(t, op, rank_(), n));
        Counts before = counts();
        c.expect(MPI_Allreduce(s.p(), r.p(), int(n), t.dt, mpi_op(op), MPI_COMM_WORLD) == MPI_SUCCESS, what + " failed");
        c.route(before, supported(), what);
        compare(c, r.get(), t, op, 0, n, what);
        c.expect(s.get() == inputs(t, op, rank_(), n), what + ": the send buffer changed");
        /* in place */
        r.put(inputs(t, op, rank_(), n));
        before = counts();
        c.expect(MPI_Allreduce(MPI_IN_PLACE, r.p(), int(n), t.dt, mpi_op(op), MPI_COMM_WORLD) == MPI_SUCCESS,
                 what + " in place failed");
        c.route(before, supported(), what + " in place");
        compare(c, r.get(), t, op, 0, n, what + " in place");
    }
    REPORT(c);
}

TEST_P(Reductions, Reduce) {
    const TypeCase& t = reduce_types()[GetParam().type];
    Op op = GetParam().op;
    Check c;
    const int roots[] = {0, size_() - 1};
    for (int root : roots) {
        size_t n = 7 + size_t(root);
        std::string what = std::string("MPI_Reduce ") + t.name + " " + op_name(op) + " root " + std::to_string(root);
        Buf s(n * t.size), r(n * t.size);
        s.put(inputs(t, op, rank_(), n));
        std::vector<unsigned char> marker(n * t.size, 0xa5);
        r.put(marker);
        Counts before = counts();
        c.expect(MPI_Reduce(s.p(), r.p(), int(n), t.dt, mpi_op(op), root, MPI_COMM_WORLD) == MPI_SUCCESS, what + " failed");
        c.route(before, supported(), what);
        if (rank_() == root) compare(c, r.get(), t, op, 0, n, what);
        else c.expect(r.get() == marker, what + ": the receive buffer changed away from the root");
        /* in place at the root */
        if (rank_() == root) r.put(inputs(t, op, rank_(), n));
        before = counts();
        int rc = rank_() == root ? MPI_Reduce(MPI_IN_PLACE, r.p(), int(n), t.dt, mpi_op(op), root, MPI_COMM_WORLD)
                                 : MPI_Reduce(s.p(), nullptr, int(n), t.dt, mpi_op(op), root, MPI_COMM_WORLD);
        c.expect(rc == MPI_SUCCESS, what + " in place failed");
        c.route(before, supported(), what + " in place");
        if (rank_() == root) compare(c, r.get(), t, op, 0, n, what + " in place");
    }
    REPORT(c);
}

TEST_P(Reductions, ReduceScatterBlock) {
    const TypeCase& t = reduce_types()[GetParam().type];
    Op op = GetParam().op;
    Check c;
    for (size_t per : {size_t(1), size_t(5)}) {
        size_t total = per * size_t(size_());
        std::string what = std::string("MPI_Reduce_scatter_block ") + t.name + " " + op_name(op) + " " +
                           std::to_string(per) + " per rank";
        Buf s(total * t.size), r(per * t.size);
        s.put(inputs(t, op, rank_(), total));
        Counts before = counts();
        c.expect(MPI_Reduce_scatter_block(s.p(), r.p(), int(per), t.dt, mpi_op(op), MPI_COMM_WORLD) == MPI_SUCCESS,
                 what + " failed");
        c.route(before, supported(), what);
        compare(c, r.get(), t, op, per * size_t(rank_()), per, what);
        /* in place: the input is the whole buffer, the result its start */
        Buf ip(total * t.size);
        ip.put(inputs(t, op, rank_(), total));
        before = counts();
        c.expect(MPI_Reduce_scatter_block(MPI_IN_PLACE, ip.p(), int(per), t.dt, mpi_op(op), MPI_COMM_WORLD) ==
                     MPI_SUCCESS,
                 what + " in place failed");
        c.route(before, supported(), what + " in place");
        compare(c, ip.get(), t, op, per * size_t(rank_()), per, what + " in place");
    }
    REPORT(c);
}

TEST_P(Reductions, ReduceScatter) {
    const TypeCase& t = reduce_types()[GetParam().type];
    Op op = GetParam().op;
    Check c;
    /* equal counts go to vccl; unequal ones (rank r gets r + 1) to the MPI library */
    for (bool equal : {true, false}) {
        std::vector<int> rcounts(static_cast<size_t>(size_()));
        size_t total = 0, first = 0;
        for (int i = 0; i < size_(); ++i) {
            rcounts[size_t(i)] = equal ? 3 : i + 1;
            if (i < rank_()) first += size_t(rcounts[size_t(i)]);
            total += size_t(rcounts[size_t(i)]);
        }
        size_t mine = size_t(rcounts[size_t(rank_())]);
        std::string what = std::string("MPI_Reduce_scatter ") + t.name + " " + op_name(op) +
                           (equal ? " equal counts" : " unequal counts");
        Route want = equal ? supported() : unsupported();
        Buf s(total * t.size), r(mine * t.size);
        s.put(inputs(t, op, rank_(), total));
        Counts before = counts();
        c.expect(MPI_Reduce_scatter(s.p(), r.p(), rcounts.data(), t.dt, mpi_op(op), MPI_COMM_WORLD) == MPI_SUCCESS,
                 what + " failed");
        c.route(before, want, what);
        compare(c, r.get(), t, op, first, mine, what);
        Buf ip(total * t.size);
        ip.put(inputs(t, op, rank_(), total));
        before = counts();
        c.expect(MPI_Reduce_scatter(MPI_IN_PLACE, ip.p(), rcounts.data(), t.dt, mpi_op(op), MPI_COMM_WORLD) ==
                     MPI_SUCCESS,
                 what + " in place failed");
        c.route(before, want, what + " in place");
        compare(c, ip.get(), t, op, first, mine, what + " in place");
    }
    REPORT(c);
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, Reductions, ::testing::ValuesIn(red_params()), red_name);

/* ---------------------------------------------------------------------------------------------- */
/* Data movement                                                                                  */

/* Bytes of element i of block b that rank r sends: distinct everywhere. */
unsigned char byte_of(int r, size_t b, size_t i) { return (unsigned char)(r * 53 + b * 29 + i * 7 + 1); }

std::vector<unsigned char> block(int r, size_t b, size_t bytes) {
    std::vector<unsigned char> v(bytes);
    for (size_t i = 0; i < bytes; ++i) v[i] = byte_of(r, b, i);
    return v;
}

struct MoveType {
    const char* name;
    MPI_Datatype dt;
    size_t size;   /* bytes of data per element */
    size_t extent; /* bytes per element in memory */
    bool vccl;     /* a gap-free type vccl moves; others go to the MPI library */
};

/* Predefined types vccl has, others moved as bytes, a contiguous derived type, and a strided vector type
 * with holes that must stay untouched. Built after MPI_Init. */
std::vector<MoveType>& move_types() {
    static std::vector<MoveType> v;
    if (v.empty()) {
        MPI_Datatype contig, vec;
        MPI_Type_contiguous(3, MPI_INT, &contig);
        MPI_Type_commit(&contig);
        /* 2 blocks of 1 int, stride 2: 8 bytes of data over 12, extent 12 after resizing */
        MPI_Datatype v0;
        MPI_Type_vector(2, 1, 2, MPI_INT, &v0);
        MPI_Type_create_resized(v0, 0, 16, &vec);
        MPI_Type_free(&v0);
        MPI_Type_commit(&vec);
        v = {{"int", MPI_INT, 4, 4, true},         {"double", MPI_DOUBLE, 8, 8, true},
             {"byte", MPI_BYTE, 1, 1, true},       {"short", MPI_SHORT, 2, 2, true},
             {"char", MPI_CHAR, 1, 1, true},       {"contiguous_3int", contig, 12, 12, true},
             {"vector_with_holes", vec, 8, 16, false}};
        vtest::on_finalize([] {
            for (auto& t : v)
                if (strcmp(t.name, "contiguous_3int") == 0 || strcmp(t.name, "vector_with_holes") == 0)
                    MPI_Type_free(&t.dt);
        });
    }
    return v;
}

/* The data bytes of element e within an element's extent (the vector type: bytes 0-3 and 8-11). */
bool is_data(const MoveType& t, size_t off_in_elem) {
    if (t.size == t.extent) return true;
    return off_in_elem < 4 || (off_in_elem >= 8 && off_in_elem < 12);
}

/* n elements of t holding data stream `data` (t.size bytes per element) in their data bytes and `fill` in
 * the holes. */
std::vector<unsigned char> layout(const MoveType& t, size_t n, const std::vector<unsigned char>& data,
                                  unsigned char fill) {
    std::vector<unsigned char> mem(n * t.extent, fill);
    size_t k = 0;
    for (size_t off = 0; off < mem.size(); ++off)
        if (is_data(t, off % t.extent)) mem[off] = data[k++];
    return mem;
}

class Moves : public ::testing::TestWithParam<size_t> {};

TEST_P(Moves, Bcast) {
    const MoveType& t = move_types()[GetParam()];
    Check c;
    for (size_t n : {size_t(1), size_t(13), size_t(4099)}) {
        for (int root = 0; root < size_(); ++root) {
            std::string what = std::string("MPI_Bcast ") + t.name + " count " + std::to_string(n) + " root " +
                               std::to_string(root);
            std::vector<unsigned char> data = block(root, 0, n * t.size);
            std::vector<unsigned char> want = layout(t, n, data, 0xee);
            Buf b(n * t.extent);
            b.put(rank_() == root ? want : layout(t, n, block(rank_() + 100, 0, n * t.size), 0xee));
            Counts before = counts();
            c.expect(MPI_Bcast(b.p(), int(n), t.dt, root, MPI_COMM_WORLD) == MPI_SUCCESS, what + " failed");
            c.route(before, t.vccl ? supported() : unsupported(), what);
            c.expect(b.get() == want, what + ": wrong data (or holes changed)");
        }
    }
    REPORT(c);
}

TEST_P(Moves, Allgather) {
    const MoveType& t = move_types()[GetParam()];
    Check c;
    size_t np = size_t(size_());
    for (size_t n : {size_t(1), size_t(3), size_t(1000)}) {
        for (bool in_place : {false, true}) {
            std::string what = std::string("MPI_Allgather ") + t.name + " count " + std::to_string(n) +
                               (in_place ? " in place" : "");
            std::vector<unsigned char> all;
            for (size_t r = 0; r < np; ++r) {
                std::vector<unsigned char> b = block(int(r), 0, n * t.size);
                all.insert(all.end(), b.begin(), b.end());
            }
            std::vector<unsigned char> want = layout(t, n * np, all, 0xdd);
            Buf s(n * t.extent), r(n * np * t.extent);
            s.put(layout(t, n, block(rank_(), 0, n * t.size), 0xdd));
            std::vector<unsigned char> init(n * np * t.extent, 0xdd);
            if (in_place) {
                /* my own block in place, other blocks' data garbage, holes 0xdd */
                init = layout(t, n * np, std::vector<unsigned char>(n * np * t.size, 0x11), 0xdd);
                std::vector<unsigned char> mine = layout(t, n, block(rank_(), 0, n * t.size), 0xdd);
                memcpy(init.data() + size_t(rank_()) * n * t.extent, mine.data(), mine.size());
            } else {
                init = layout(t, n * np, std::vector<unsigned char>(n * np * t.size, 0x11), 0xdd);
            }
            r.put(init);
            Counts before = counts();
            int rc = in_place ? MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r.p(), int(n), t.dt, MPI_COMM_WORLD)
                              : MPI_Allgather(s.p(), int(n), t.dt, r.p(), int(n), t.dt, MPI_COMM_WORLD);
            c.expect(rc == MPI_SUCCESS, what + " failed");
            c.route(before, t.vccl ? supported() : unsupported(), what);
            c.expect(r.get() == want, what + ": wrong data (or holes changed)");
        }
    }
    REPORT(c);
}

TEST_P(Moves, Alltoall) {
    const MoveType& t = move_types()[GetParam()];
    Check c;
    size_t np = size_t(size_());
    for (size_t n : {size_t(1), size_t(5), size_t(301)}) {
        for (bool in_place : {false, true}) {
            std::string what = std::string("MPI_Alltoall ") + t.name + " count " + std::to_string(n) +
                               (in_place ? " in place" : "");
            /* block b of rank r's send buffer goes to rank b */
            std::vector<unsigned char> send, want;
            for (size_t b = 0; b < np; ++b) {
                std::vector<unsigned char> x = block(rank_(), b, n * t.size);
                send.insert(send.end(), x.begin(), x.end());
                std::vector<unsigned char> y = block(int(b), size_t(rank_()), n * t.size);
                want.insert(want.end(), y.begin(), y.end());
            }
            Buf s(n * np * t.extent), r(n * np * t.extent);
            s.put(layout(t, n * np, send, 0xcc));
            r.put(in_place ? layout(t, n * np, send, 0xcc) : layout(t, n * np, std::vector<unsigned char>(send.size(), 0x22), 0xcc));
            Counts before = counts();
            int rc = in_place ? MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r.p(), int(n), t.dt, MPI_COMM_WORLD)
                              : MPI_Alltoall(s.p(), int(n), t.dt, r.p(), int(n), t.dt, MPI_COMM_WORLD);
            c.expect(rc == MPI_SUCCESS, what + " failed");
            c.route(before, t.vccl ? supported() : unsupported(), what);
            c.expect(r.get() == layout(t, n * np, want, 0xcc), what + ": wrong data (or holes changed)");
        }
    }
    REPORT(c);
}

std::string move_name(const ::testing::TestParamInfo<size_t>& i) {
    static const char* const names[] = {"int", "double", "byte", "short", "char", "contiguous_3int",
                                        "vector_with_holes"};
    return names[i.param];
}

INSTANTIATE_TEST_SUITE_P(Types, Moves, ::testing::Range(size_t(0), size_t(7)), move_name);

/* Send and receive types that differ but carry the same bytes (4 MPI_INT against one contiguous type of 4
 * ints, and MPI_BYTE against MPI_INT): moved as bytes, as MPI moves them. */
TEST(MovesMixedTypes, AllgatherAndAlltoall) {
    Check c;
    size_t np = size_t(size_());
    MPI_Datatype four;
    MPI_Type_contiguous(4, MPI_INT, &four);
    MPI_Type_commit(&four);
    std::vector<unsigned char> all;
    for (size_t r = 0; r < np; ++r) {
        std::vector<unsigned char> b = block(int(r), 0, 16);
        all.insert(all.end(), b.begin(), b.end());
    }
    Buf s(16), r(16 * np);
    s.put(block(rank_(), 0, 16));
    Counts before = counts();
    c.expect(MPI_Allgather(s.p(), 4, MPI_INT, r.p(), 1, four, MPI_COMM_WORLD) == MPI_SUCCESS, "allgather failed");
    c.route(before, supported(), "MPI_Allgather 4 MPI_INT into 1 contiguous(4, MPI_INT)");
    c.expect(r.get() == all, "MPI_Allgather mixed types: wrong data");
    before = counts();
    c.expect(MPI_Allgather(s.p(), 16, MPI_BYTE, r.p(), 4, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS, "allgather failed");
    c.route(before, supported(), "MPI_Allgather 16 MPI_BYTE into 4 MPI_INT");
    c.expect(r.get() == all, "MPI_Allgather bytes into ints: wrong data");
    Buf as(16 * np), ar(16 * np);
    std::vector<unsigned char> send, want;
    for (size_t b = 0; b < np; ++b) {
        std::vector<unsigned char> x = block(rank_(), b, 16), y = block(int(b), size_t(rank_()), 16);
        send.insert(send.end(), x.begin(), x.end());
        want.insert(want.end(), y.begin(), y.end());
    }
    as.put(send);
    before = counts();
    c.expect(MPI_Alltoall(as.p(), 1, four, ar.p(), 4, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS, "alltoall failed");
    c.route(before, supported(), "MPI_Alltoall 1 contiguous(4, MPI_INT) into 4 MPI_INT");
    c.expect(ar.get() == want, "MPI_Alltoall mixed types: wrong data");
    MPI_Type_free(&four);
    REPORT(c);
}

/* ---------------------------------------------------------------------------------------------- */
/* What vccl does not take: the MPI library's answer, on host copies for device buffers            */

TEST(Unsupported, MinlocMaxlocPairs) {
    Check c;
    struct Pair { int v; int i; };
    size_t n = 9;
    std::vector<Pair> mine(n);
    for (size_t k = 0; k < n; ++k) mine[k] = {int((rank_() * 7 + int(k) * 3) % 5), rank_()};
    for (MPI_Op op : {MPI_MINLOC, MPI_MAXLOC}) {
        Buf s(n * sizeof(Pair)), r(n * sizeof(Pair));
        s.put(mine.data(), n * sizeof(Pair));
        Counts before = counts();
        c.expect(MPI_Allreduce(s.p(), r.p(), int(n), MPI_2INT, op, MPI_COMM_WORLD) == MPI_SUCCESS, "allreduce failed");
        c.route(before, unsupported(), op == MPI_MINLOC ? "MPI_MINLOC" : "MPI_MAXLOC");
        std::vector<unsigned char> got = r.get();
        for (size_t k = 0; k < n; ++k) {
            Pair best = {int((0 * 7 + int(k) * 3) % 5), 0};
            for (int q = 1; q < size_(); ++q) {
                int v = (q * 7 + int(k) * 3) % 5;
                if (op == MPI_MINLOC ? v < best.v : v > best.v) best = {v, q};
            }
            Pair g;
            memcpy(&g, got.data() + k * sizeof(Pair), sizeof g);
            c.expect(g.v == best.v && g.i == best.i, std::string(op == MPI_MINLOC ? "MINLOC" : "MAXLOC") +
                                                         " element " + std::to_string(k) + " wrong");
        }
    }
    REPORT(c);
}

TEST(Unsupported, LogicalBitwiseAndShortSum) {
    Check c;
    size_t n = 11;
    std::vector<int> v(n);
    for (size_t k = 0; k < n; ++k) v[k] = int((rank_() + int(k)) % 2) | (1 << (rank_() % 4));
    struct OpCase { MPI_Op op; const char* name; };
    for (OpCase oc : {OpCase{MPI_LAND, "MPI_LAND"}, OpCase{MPI_LOR, "MPI_LOR"}, OpCase{MPI_BAND, "MPI_BAND"},
                      OpCase{MPI_BOR, "MPI_BOR"}, OpCase{MPI_BXOR, "MPI_BXOR"}}) {
        Buf s(n * 4), r(n * 4);
        s.put(v.data(), n * 4);
        Counts before = counts();
        c.expect(MPI_Allreduce(s.p(), r.p(), int(n), MPI_INT, oc.op, MPI_COMM_WORLD) == MPI_SUCCESS,
                 std::string(oc.name) + " failed");
        c.route(before, unsupported(), oc.name);
        std::vector<unsigned char> got = r.get();
        for (size_t k = 0; k < n; ++k) {
            int acc = 0;
            for (int q = 0; q < size_(); ++q) {
                int x = int((q + int(k)) % 2) | (1 << (q % 4));
                if (q == 0) acc = x;
                else if (oc.op == MPI_LAND) acc = acc && x;
                else if (oc.op == MPI_LOR) acc = acc || x;
                else if (oc.op == MPI_BAND) acc &= x;
                else if (oc.op == MPI_BOR) acc |= x;
                else acc ^= x;
            }
            if (oc.op == MPI_LAND || oc.op == MPI_LOR) acc = acc != 0;
            int g;
            memcpy(&g, got.data() + k * 4, 4);
            if (oc.op == MPI_LAND || oc.op == MPI_LOR) g = g != 0;
            c.expect(g == acc, std::string(oc.name) + " element " + std::to_string(k) + " wrong");
        }
    }
    /* MPI_CHAR is no integer type to MPI, which both libraries reduce anyway: the library's answer */
    {
        std::vector<signed char> ch(n);
        for (size_t k = 0; k < n; ++k) ch[k] = (signed char)(rank_() + int(k));
        Buf cs(n), cr(n);
        cs.put(ch.data(), n);
        Counts before = counts();
        c.expect(MPI_Allreduce(cs.p(), cr.p(), int(n), MPI_CHAR, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
                 "MPI_CHAR sum failed");
        c.route(before, unsupported(), "MPI_CHAR MPI_SUM");
        std::vector<unsigned char> g = cr.get();
        for (size_t k = 0; k < n; ++k) {
            int want = 0;
            for (int q = 0; q < size_(); ++q) want += q + int(k);
            c.expect((signed char)g[k] == (signed char)want, "MPI_CHAR sum element " + std::to_string(k));
        }
    }
    /* vccl has no 16-bit integers */
    std::vector<short> sh(n);
    for (size_t k = 0; k < n; ++k) sh[k] = short(rank_() * 100 + int(k));
    Buf s(n * 2), r(n * 2);
    s.put(sh.data(), n * 2);
    Counts before = counts();
    c.expect(MPI_Allreduce(s.p(), r.p(), int(n), MPI_SHORT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "short sum failed");
    c.route(before, unsupported(), "MPI_SHORT MPI_SUM");
    std::vector<unsigned char> got = r.get();
    for (size_t k = 0; k < n; ++k) {
        int want = 0;
        for (int q = 0; q < size_(); ++q) want += q * 100 + int(k);
        short g;
        memcpy(&g, got.data() + k * 2, 2);
        c.expect(g == short(want), "MPI_SHORT sum element " + std::to_string(k) + " wrong");
    }
    REPORT(c);
}

void user_max_abs(void* in, void* inout, int* len, MPI_Datatype*) {
    int* a = static_cast<int*>(in);
    int* b = static_cast<int*>(inout);
    for (int i = 0; i < *len; ++i) b[i] = std::abs(a[i]) > std::abs(b[i]) ? a[i] : b[i];
}

/* Sums elements of contiguous(2, MPI_INT): MPI's predefined ops are not defined on derived types. */
void user_sum_int_pairs(void* in, void* inout, int* len, MPI_Datatype*) {
    int* a = static_cast<int*>(in);
    int* b = static_cast<int*>(inout);
    for (int i = 0; i < 2 * *len; ++i) b[i] += a[i];
}

TEST(Unsupported, UserOpAndDerivedReduceType) {
    Check c;
    MPI_Op op;
    MPI_Op_create(user_max_abs, 1, &op);
    size_t n = 6;
    std::vector<int> v(n);
    for (size_t k = 0; k < n; ++k) v[k] = (rank_() % 2 ? -1 : 1) * (rank_() * 10 + int(k));
    Buf s(n * 4), r(n * 4);
    s.put(v.data(), n * 4);
    Counts before = counts();
    c.expect(MPI_Allreduce(s.p(), r.p(), int(n), MPI_INT, op, MPI_COMM_WORLD) == MPI_SUCCESS, "user op failed");
    c.route(before, unsupported(), "user-defined op");
    std::vector<unsigned char> got = r.get();
    for (size_t k = 0; k < n; ++k) {
        int q = size_() - 1, want = (q % 2 ? -1 : 1) * (q * 10 + int(k)), g;
        memcpy(&g, got.data() + k * 4, 4);
        c.expect(g == want, "user op element " + std::to_string(k) + " wrong");
    }
    /* a derived (contiguous) datatype with a user op, on MPI_Reduce to the last rank */
    MPI_Op pair_sum;
    MPI_Op_create(user_sum_int_pairs, 1, &pair_sum);
    MPI_Datatype two;
    MPI_Type_contiguous(2, MPI_INT, &two);
    MPI_Type_commit(&two);
    Buf s2(n * 4), r2(n * 4);
    s2.put(v.data(), n * 4);
    int root = size_() - 1;
    before = counts();
    c.expect(MPI_Reduce(s2.p(), r2.p(), int(n / 2), two, pair_sum, root, MPI_COMM_WORLD) == MPI_SUCCESS,
             "derived reduce failed");
    c.route(before, unsupported(), "MPI_Reduce on a derived datatype");
    if (rank_() == root) {
        std::vector<unsigned char> g2 = r2.get();
        for (size_t k = 0; k < n; ++k) {
            int want = 0, g;
            for (int q = 0; q < size_(); ++q) want += (q % 2 ? -1 : 1) * (q * 10 + int(k));
            memcpy(&g, g2.data() + k * 4, 4);
            c.expect(g == want, "derived reduce element " + std::to_string(k) + " wrong");
        }
    }
    MPI_Type_free(&two);
    MPI_Op_free(&pair_sum);
    MPI_Op_free(&op);
    REPORT(c);
}

/* ---------------------------------------------------------------------------------------------- */
/* Count 0 and bad input: what the MPI library does                                              */

TEST(Edge, CountZeroEverywhere) {
    Check c;
    size_t np = size_t(size_());
    Buf s(64), r(64 * np);
    std::vector<unsigned char> marker(64 * np, 0x5a), smark(64, 0x3c);
    s.put(smark);
    r.put(marker);
    std::vector<int> zeros(np, 0);
    struct Z { const char* name; std::function<int()> call; };
    std::vector<Z> calls = {
        {"MPI_Allreduce", [&] { return MPI_Allreduce(s.p(), r.p(), 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD); }},
        {"MPI_Reduce", [&] { return MPI_Reduce(s.p(), r.p(), 0, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD); }},
        {"MPI_Bcast", [&] { return MPI_Bcast(r.p(), 0, MPI_INT, 0, MPI_COMM_WORLD); }},
        {"MPI_Allgather", [&] { return MPI_Allgather(s.p(), 0, MPI_INT, r.p(), 0, MPI_INT, MPI_COMM_WORLD); }},
        {"MPI_Alltoall", [&] { return MPI_Alltoall(s.p(), 0, MPI_INT, r.p(), 0, MPI_INT, MPI_COMM_WORLD); }},
        {"MPI_Reduce_scatter_block",
         [&] { return MPI_Reduce_scatter_block(s.p(), r.p(), 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD); }},
        {"MPI_Reduce_scatter",
         [&] { return MPI_Reduce_scatter(s.p(), r.p(), zeros.data(), MPI_INT, MPI_SUM, MPI_COMM_WORLD); }},
    };
    for (auto& z : calls) {
        Counts before = counts();
        c.expect(z.call() == MPI_SUCCESS, std::string(z.name) + " with count 0 failed");
        c.route(before, unsupported(), std::string(z.name) + " count 0");
        c.expect(r.get() == marker && s.get() == smark, std::string(z.name) + " with count 0 wrote into a buffer");
    }
    REPORT(c);
}

/* Calls MPI defines as erroneous: with MPI_ERRORS_RETURN the interposed call must return the error class
 * that the library's own PMPI_ call returns, or succeed where it succeeds. Only cases the library survives
 * are made: MPICH 4.0.2 crashes on a negative MPI_Allreduce count and on MPI_IN_PLACE in MPI_Bcast, and
 * MPI_IN_PLACE away from MPI_Reduce's root fails there and leaves the root waiting in Open MPI 4.1 (the
 * interposer hands those to the library unchanged, crash and hang included). Some errors are
 * raised on MPI_COMM_WORLD's handler, which returns for the duration too. */
TEST(Edge, BadInputAsTheLibrary) {
    Check c;
    /* an erroneous call may leave messages behind: each call gets a communicator of its own */
    MPI_Comm comm = MPI_COMM_NULL;
    auto fresh = [&comm] {
        if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    };
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    /* the library's own answer is taken on host buffers: in device mode an MPI built without CUDA support
     * would read the device buffers that the interposer stages for it */
    Buf s(64), r(64 * size_t(size_()));
    std::vector<unsigned char> hs(64), hr(64 * size_t(size_()));
    struct Bad {
        const char* name;
        std::function<int()> ours;
        std::function<int()> lib;
    };
    int bad_root = size_();
    bool mpich = false;
#ifdef MPICH_NUMVERSION
    mpich = true;
#endif
    std::vector<Bad> cases = {
        {"MPI_Allreduce MPI_DATATYPE_NULL",
         [&] { return MPI_Allreduce(s.p(), r.p(), 2, MPI_DATATYPE_NULL, MPI_SUM, comm); },
         [&] { return PMPI_Allreduce(hs.data(), hr.data(), 2, MPI_DATATYPE_NULL, MPI_SUM, comm); }},
        {"MPI_Allreduce MPI_OP_NULL", [&] { return MPI_Allreduce(s.p(), r.p(), 2, MPI_INT, MPI_OP_NULL, comm); },
         [&] { return PMPI_Allreduce(hs.data(), hr.data(), 2, MPI_INT, MPI_OP_NULL, comm); }},
        {"MPI_Allreduce MPI_COMM_NULL",
         [&] { return MPI_Allreduce(s.p(), r.p(), 2, MPI_INT, MPI_SUM, MPI_COMM_NULL); },
         [&] { return PMPI_Allreduce(hs.data(), hr.data(), 2, MPI_INT, MPI_SUM, MPI_COMM_NULL); }},
        {"MPI_Bcast root out of range", [&] { return MPI_Bcast(r.p(), 2, MPI_INT, bad_root, comm); },
         [&] { return PMPI_Bcast(hr.data(), 2, MPI_INT, bad_root, comm); }},
        {"MPI_Reduce root out of range",
         [&] { return MPI_Reduce(s.p(), r.p(), 2, MPI_INT, MPI_SUM, bad_root, comm); },
         [&] { return PMPI_Reduce(hs.data(), hr.data(), 2, MPI_INT, MPI_SUM, bad_root, comm); }},
        {"MPI_Bcast count -3", [&] { return MPI_Bcast(r.p(), -3, MPI_INT, 0, comm); },
         [&] { return PMPI_Bcast(hr.data(), -3, MPI_INT, 0, comm); }},
        {"MPI_Allgather count -1", [&] { return MPI_Allgather(s.p(), -1, MPI_INT, r.p(), -1, MPI_INT, comm); },
         [&] { return PMPI_Allgather(hs.data(), -1, MPI_INT, hr.data(), -1, MPI_INT, comm); }},
        {"MPI_Allgather sending more than is received (3 MPI_INT into 2)",
         [&] { return MPI_Allgather(s.p(), 3, MPI_INT, r.p(), 2, MPI_INT, comm); },
         [&] { return PMPI_Allgather(hs.data(), 3, MPI_INT, hr.data(), 2, MPI_INT, comm); }},
        {"MPI_Alltoall MPI_DATATYPE_NULL",
         [&] { return MPI_Alltoall(s.p(), 1, MPI_DATATYPE_NULL, r.p(), 1, MPI_DATATYPE_NULL, comm); },
         [&] { return PMPI_Alltoall(hs.data(), 1, MPI_DATATYPE_NULL, hr.data(), 1, MPI_DATATYPE_NULL, comm); }},
        {"MPI_Alltoall MPI_IN_PLACE as the receive buffer",
         [&] { return MPI_Alltoall(MPI_IN_PLACE, 1, MPI_INT, MPI_IN_PLACE, 1, MPI_INT, comm); },
         [&] { return PMPI_Alltoall(MPI_IN_PLACE, 1, MPI_INT, MPI_IN_PLACE, 1, MPI_INT, comm); }},
        {"MPI_Reduce_scatter_block MPI_OP_NULL",
         [&] { return MPI_Reduce_scatter_block(s.p(), r.p(), 1, MPI_INT, MPI_OP_NULL, comm); },
         [&] { return PMPI_Reduce_scatter_block(hs.data(), hr.data(), 1, MPI_INT, MPI_OP_NULL, comm); }},
    };
    if (!mpich) {
        cases.push_back({"MPI_Allreduce count -1",
                         [&] { return MPI_Allreduce(s.p(), r.p(), -1, MPI_INT, MPI_SUM, comm); },
                         [&] { return PMPI_Allreduce(hs.data(), hr.data(), -1, MPI_INT, MPI_SUM, comm); }});
        cases.push_back({"MPI_Bcast MPI_IN_PLACE", [&] { return MPI_Bcast(MPI_IN_PLACE, 2, MPI_INT, 0, comm); },
                         [&] { return PMPI_Bcast(MPI_IN_PLACE, 2, MPI_INT, 0, comm); }});
    }
    for (auto& b : cases) {
        fresh();
        int lib = b.lib();
        fresh();
        int ours = b.ours();
        int lib_class = lib, our_class = ours;
        if (lib != MPI_SUCCESS) MPI_Error_class(lib, &lib_class);
        if (ours != MPI_SUCCESS) MPI_Error_class(ours, &our_class);
        c.expect(our_class == lib_class, std::string(b.name) + ": error class " + std::to_string(our_class) +
                                             " through the interposer, " + std::to_string(lib_class) +
                                             " from the library");
    }
    /* receiving more than is sent (2 MPI_INT into 3) is accepted by both libraries: same bytes either way */
    std::vector<int> mine = {rank_() * 10 + 1, rank_() * 10 + 2};
    std::vector<int> lib_out(size_t(3 * size_()), -7), our_out(size_t(3 * size_()), -7);
    Buf ms(8), mr(12 * size_t(size_()));
    ms.put(mine.data(), 8);
    mr.put(lib_out.data(), lib_out.size() * 4);
    fresh();
    int lib = PMPI_Allgather(mine.data(), 2, MPI_INT, lib_out.data(), 3, MPI_INT, comm);
    Counts before = counts();
    int ours = MPI_Allgather(ms.p(), 2, MPI_INT, mr.p(), 3, MPI_INT, comm);
    c.route(before, unsupported(), "MPI_Allgather of 2 MPI_INT into 3");
    std::vector<unsigned char> got = mr.get();
    memcpy(our_out.data(), got.data(), got.size());
    c.expect(lib == ours, "MPI_Allgather 2 into 3: return codes differ");
    c.expect(lib != MPI_SUCCESS || lib_out == our_out, "MPI_Allgather 2 into 3: results differ from the library's");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_free(&comm);
    REPORT(c);
}

/* MPI_Allreduce with the send buffer equal to the receive buffer (not MPI_IN_PLACE): vccl would take it as
 * in place; it must reach the library, which rejects it (Open MPI raises it on MPI_COMM_WORLD's handler,
 * hence MPI_ERRORS_RETURN there too for the duration). */
TEST(Edge, AliasedBuffersGoToTheLibrary) {
    Check c;
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    Buf b(8 * 4);
    std::vector<int> v(8, rank_() + 1);
    b.put(v.data(), v.size() * 4);
    std::vector<int> lib_v = v; /* host memory: see Edge.BadInputAsTheLibrary */
    int lib = PMPI_Allreduce(lib_v.data(), lib_v.data(), 8, MPI_INT, MPI_SUM, comm);
    Counts before = counts();
    int ours = MPI_Allreduce(b.p(), b.p(), 8, MPI_INT, MPI_SUM, comm);
    c.route(before, unsupported(), "MPI_Allreduce with sendbuf == recvbuf");
    int lib_class = lib, our_class = ours;
    if (lib != MPI_SUCCESS) MPI_Error_class(lib, &lib_class);
    if (ours != MPI_SUCCESS) MPI_Error_class(ours, &our_class);
    c.expect(our_class == lib_class, "aliased buffers: error class " + std::to_string(our_class) +
                                         " through the interposer, " + std::to_string(lib_class) + " from the library");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_free(&comm);
    REPORT(c);
}

/* ---------------------------------------------------------------------------------------------- */
/* Communicators                                                                                  */

void allreduce_check(Check& c, MPI_Comm comm, const std::string& what) {
    int r = 0, n = 0;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    size_t cnt = 33;
    Buf s(cnt * 8), d(cnt * 8);
    std::vector<double> v(cnt);
    for (size_t k = 0; k < cnt; ++k) v[k] = double(r + 1) * double(k + 1);
    s.put(v.data(), cnt * 8);
    Counts before = counts();
    c.expect(MPI_Allreduce(s.p(), d.p(), int(cnt), MPI_DOUBLE, MPI_SUM, comm) == MPI_SUCCESS, what + " failed");
    c.route(before, supported(), what);
    std::vector<unsigned char> got = d.get();
    for (size_t k = 0; k < cnt; ++k) {
        double g;
        memcpy(&g, got.data() + k * 8, 8);
        double want = double(n) * double(n + 1) / 2.0 * double(k + 1);
        if (g != want) {
            c.expect(false, what + ": element " + std::to_string(k) + " is " + std::to_string(g));
            break;
        }
    }
}

TEST(Comms, DupAndSplitInLoops) {
    Check c;
    for (int it = 0; it < 6; ++it) { /* each round creates and frees two vccl communicators */
        MPI_Comm dup, half;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        allreduce_check(c, dup, "dup " + std::to_string(it));
        /* two halves, keyed in reverse so ranks are renumbered */
        MPI_Comm_split(MPI_COMM_WORLD, rank_() % 2, -rank_(), &half);
        allreduce_check(c, half, "split " + std::to_string(it));
        int hr = 0;
        MPI_Comm_rank(half, &hr);
        Buf b(4);
        int root_val = 1000 + it, x = hr == 0 ? root_val : -1;
        b.put(&x, 4);
        c.expect(MPI_Bcast(b.p(), 1, MPI_INT, 0, half) == MPI_SUCCESS, "bcast on split failed");
        std::vector<unsigned char> g = b.get();
        memcpy(&x, g.data(), 4);
        c.expect(x == root_val, "bcast on split " + std::to_string(it) + " wrong");
        MPI_Comm_free(&half);
        MPI_Comm_free(&dup);
    }
    REPORT(c);
}

TEST(Comms, SingletonsAndSelf) {
    Check c;
    MPI_Comm one;
    MPI_Comm_split(MPI_COMM_WORLD, rank_(), 0, &one);
    allreduce_check(c, one, "single-process split");
    MPI_Comm_free(&one);
    allreduce_check(c, MPI_COMM_SELF, "MPI_COMM_SELF");
    REPORT(c);
}

TEST(Comms, InterCommunicatorGoesToTheLibrary) {
    if (size_() < 2) GTEST_SKIP() << "needs 2 ranks";
    Check c;
    MPI_Comm half, inter;
    int color = rank_() % 2;
    MPI_Comm_split(MPI_COMM_WORLD, color, rank_(), &half);
    /* leaders: world ranks 0 and 1 */
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, color == 0 ? 1 : 0, 77, &inter);
    int rsize = 0;
    MPI_Comm_remote_size(inter, &rsize);
    int mine = rank_() + 1, sum = 0;
    Buf s(4), r(4);
    s.put(&mine, 4);
    Counts before = counts();
    c.expect(MPI_Allreduce(s.p(), r.p(), 1, MPI_INT, MPI_SUM, inter) == MPI_SUCCESS, "intercomm allreduce failed");
    c.route(before, unsupported(), "MPI_Allreduce on an inter-communicator");
    std::vector<unsigned char> g = r.get();
    memcpy(&sum, g.data(), 4);
    int want = 0;
    for (int q = 0; q < size_(); ++q)
        if (q % 2 != color) want += q + 1;
    c.expect(sum == want, "intercomm allreduce: " + std::to_string(sum) + " expected " + std::to_string(want));
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
    REPORT(c);
}

/* Communicators left alive for MPI_Finalize to tear down (run-pmpi.sh counts the teardown lines). */
TEST(Comms, LeftForFinalize) {
    Check c;
    static MPI_Comm kept[3];
    for (MPI_Comm& k : kept) {
        MPI_Comm_dup(MPI_COMM_WORLD, &k);
        allreduce_check(c, k, "kept communicator");
    }
    REPORT(c);
}

/* ---------------------------------------------------------------------------------------------- */
/* Barrier                                                                                        */

double mono() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

TEST(Barrier, NobodyLeavesBeforeEveryoneArrived) {
    Check c;
    for (int it = 0; it < 3; ++it) {
        /* rank (it mod np) arrives 50 ms late; the clock is the host's, shared by the ranks of one host */
        if (rank_() == it % size_()) usleep(50000);
        double in = mono();
        Counts before = counts();
        c.expect(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS, "barrier failed");
        double out = mono();
        c.route(before, mode() == Mode::Host || mode() == Mode::AsDev ? Route::Vccl : Route::Uncounted, "MPI_Barrier");
        std::vector<double> ins(static_cast<size_t>(size_())), outs(static_cast<size_t>(size_()));
        PMPI_Allgather(&in, 1, MPI_DOUBLE, ins.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD);
        PMPI_Allgather(&out, 1, MPI_DOUBLE, outs.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD);
        double last_in = ins[0], first_out = outs[0];
        for (int q = 1; q < size_(); ++q) {
            last_in = ins[size_t(q)] > last_in ? ins[size_t(q)] : last_in;
            first_out = outs[size_t(q)] < first_out ? outs[size_t(q)] : first_out;
        }
        c.expect(first_out >= last_in, "a rank left the barrier before the last one entered");
    }
    REPORT(c);
}

/* ---------------------------------------------------------------------------------------------- */
/* Nonblocking collectives, completed by every completion call                                    */

enum class Completion { Wait, Test, Waitall, Testall, Waitany, Waitsome, Testsome, GetStatus };
const char* completion_name(Completion k) {
    static const char* const n[] = {"Wait", "Test", "Waitall", "Testall", "Waitany", "Waitsome", "Testsome",
                                    "GetStatus"};
    return n[int(k)];
}

int complete(Completion k, MPI_Request* req) {
    int flag = 0, idx = 0, out = 0, indices[1];
    switch (k) {
    case Completion::Wait: return MPI_Wait(req, MPI_STATUS_IGNORE);
    case Completion::Test:
        while (!flag) {
            int rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) return rc;
        }
        return MPI_SUCCESS;
    case Completion::Waitall: return MPI_Waitall(1, req, MPI_STATUSES_IGNORE);
    case Completion::Testall:
        while (!flag) {
            int rc = MPI_Testall(1, req, &flag, MPI_STATUSES_IGNORE);
            if (rc != MPI_SUCCESS) return rc;
        }
        return MPI_SUCCESS;
    case Completion::Waitany: return MPI_Waitany(1, req, &idx, MPI_STATUS_IGNORE);
    case Completion::Waitsome: return MPI_Waitsome(1, req, &out, indices, MPI_STATUSES_IGNORE);
    case Completion::Testsome:
        while (out == 0) {
            int rc = MPI_Testsome(1, req, &out, indices, MPI_STATUSES_IGNORE);
            if (rc != MPI_SUCCESS) return rc;
        }
        return MPI_SUCCESS;
    case Completion::GetStatus: {
        /* the result must be in place as soon as the status says complete; then the request is freed */
        while (!flag) {
            int rc = MPI_Request_get_status(*req, &flag, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) return rc;
        }
        return MPI_SUCCESS;
    }
    }
    return MPI_ERR_OTHER;
}

class Nonblocking : public ::testing::TestWithParam<Completion> {};

TEST_P(Nonblocking, EveryCall) {
    Completion k = GetParam();
    Check c;
    size_t np = size_t(size_());
    const TypeCase& t = reduce_types()[16]; /* double */
    size_t n = 37;
    auto done = [&](MPI_Request* req, std::function<void()> verify_before_free, const std::string& what) {
        c.expect(complete(k, req) == MPI_SUCCESS, what + " completion failed");
        verify_before_free();
        if (k == Completion::GetStatus) c.expect(MPI_Wait(req, MPI_STATUS_IGNORE) == MPI_SUCCESS, what + " wait");
        c.expect(*req == MPI_REQUEST_NULL, what + ": request not freed");
    };
    {
        std::string what = std::string("MPI_Iallreduce/") + completion_name(k);
        Buf s(n * 8), r(n * 8);
        s.put(inputs(t, Op::Sum, rank_(), n));
        MPI_Request req;
        Counts before = counts();
        c.expect(MPI_Iallreduce(s.p(), r.p(), int(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req) == MPI_SUCCESS, what);
        c.route(before, nonblocking(), what);
        done(&req, [&] { compare(c, r.get(), t, Op::Sum, 0, n, what); }, what);
        Buf ip(n * 8);
        ip.put(inputs(t, Op::Max, rank_(), n));
        c.expect(MPI_Iallreduce(MPI_IN_PLACE, ip.p(), int(n), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &req) == MPI_SUCCESS,
                 what + " in place");
        done(&req, [&] { compare(c, ip.get(), t, Op::Max, 0, n, what + " in place"); }, what + " in place");
    }
    {
        std::string what = std::string("MPI_Ireduce/") + completion_name(k);
        int root = int(np) - 1;
        Buf s(n * 8), r(n * 8);
        s.put(inputs(t, Op::Min, rank_(), n));
        MPI_Request req;
        c.expect(MPI_Ireduce(s.p(), r.p(), int(n), MPI_DOUBLE, MPI_MIN, root, MPI_COMM_WORLD, &req) == MPI_SUCCESS, what);
        done(&req, [&] { if (rank_() == root) compare(c, r.get(), t, Op::Min, 0, n, what); }, what);
    }
    {
        std::string what = std::string("MPI_Ibcast/") + completion_name(k);
        Buf b(n);
        b.put(block(rank_() == 0 ? 0 : 9, 0, n));
        MPI_Request req;
        c.expect(MPI_Ibcast(b.p(), int(n), MPI_BYTE, 0, MPI_COMM_WORLD, &req) == MPI_SUCCESS, what);
        done(&req, [&] { c.expect(b.get() == block(0, 0, n), what + ": wrong data"); }, what);
    }
    {
        std::string what = std::string("MPI_Iallgather/") + completion_name(k);
        Buf s(n), r(n * np);
        s.put(block(rank_(), 0, n));
        std::vector<unsigned char> want;
        for (size_t q = 0; q < np; ++q) {
            std::vector<unsigned char> x = block(int(q), 0, n);
            want.insert(want.end(), x.begin(), x.end());
        }
        MPI_Request req;
        c.expect(MPI_Iallgather(s.p(), int(n), MPI_BYTE, r.p(), int(n), MPI_BYTE, MPI_COMM_WORLD, &req) == MPI_SUCCESS,
                 what);
        done(&req, [&] { c.expect(r.get() == want, what + ": wrong data"); }, what);
    }
    {
        std::string what = std::string("MPI_Ialltoall/") + completion_name(k);
        std::vector<unsigned char> send, want;
        for (size_t b = 0; b < np; ++b) {
            std::vector<unsigned char> x = block(rank_(), b, n), y = block(int(b), size_t(rank_()), n);
            send.insert(send.end(), x.begin(), x.end());
            want.insert(want.end(), y.begin(), y.end());
        }
        Buf s(n * np), r(n * np);
        s.put(send);
        MPI_Request req;
        c.expect(MPI_Ialltoall(s.p(), int(n), MPI_BYTE, r.p(), int(n), MPI_BYTE, MPI_COMM_WORLD, &req) == MPI_SUCCESS,
                 what);
        done(&req, [&] { c.expect(r.get() == want, what + ": wrong data"); }, what);
    }
    {
        std::string what = std::string("MPI_Ireduce_scatter_block/") + completion_name(k);
        size_t per = 3, total = per * np;
        Buf s(total * 8), r(per * 8);
        s.put(inputs(t, Op::Sum, rank_(), total));
        MPI_Request req;
        c.expect(MPI_Ireduce_scatter_block(s.p(), r.p(), int(per), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req) ==
                     MPI_SUCCESS,
                 what);
        done(&req, [&] { compare(c, r.get(), t, Op::Sum, per * size_t(rank_()), per, what); }, what);
    }
    {
        std::string what = std::string("MPI_Ireduce_scatter/") + completion_name(k);
        std::vector<int> cnt(np);
        size_t total = 0, first = 0;
        for (size_t q = 0; q < np; ++q) {
            cnt[q] = int(q) + 2;
            if (int(q) < rank_()) first += size_t(cnt[q]);
            total += size_t(cnt[q]);
        }
        size_t mine = size_t(cnt[size_t(rank_())]);
        Buf ip(total * 8);
        ip.put(inputs(t, Op::Sum, rank_(), total));
        MPI_Request req;
        c.expect(MPI_Ireduce_scatter(MPI_IN_PLACE, ip.p(), cnt.data(), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req) ==
                     MPI_SUCCESS,
                 what);
        done(&req, [&] { compare(c, ip.get(), t, Op::Sum, first, mine, what + " in place"); }, what);
    }
    REPORT(c);
}

std::string completion_param_name(const ::testing::TestParamInfo<Completion>& i) { return completion_name(i.param); }

INSTANTIATE_TEST_SUITE_P(Completions, Nonblocking,
                         ::testing::Values(Completion::Wait, Completion::Test, Completion::Waitall,
                                           Completion::Testall, Completion::Waitany, Completion::Waitsome,
                                           Completion::Testsome, Completion::GetStatus),
                         completion_param_name);

/* Several staged requests in flight at once, completed out of order by one MPI_Waitall with a plain
 * point-to-point request among them. */
TEST(NonblockingMany, WaitallMixedWithPointToPoint) {
    Check c;
    size_t n = 19;
    const TypeCase& t = reduce_types()[4]; /* int */
    std::vector<Buf*> bufs;
    std::vector<MPI_Request> reqs(5);
    for (int i = 0; i < 4; ++i) {
        bufs.push_back(new Buf(n * 4));
        bufs.back()->put(inputs(t, Op::Sum, rank_(), n));
        c.expect(MPI_Iallreduce(MPI_IN_PLACE, bufs.back()->p(), int(n), MPI_INT, MPI_SUM, MPI_COMM_WORLD,
                                &reqs[size_t(i)]) == MPI_SUCCESS,
                 "iallreduce");
    }
    int token = rank_(), got = -1;
    int peer = (rank_() + 1) % size_(), from = (rank_() + size_() - 1) % size_();
    MPI_Request sreq;
    c.expect(MPI_Irecv(&got, 1, MPI_INT, from, 5, MPI_COMM_WORLD, &reqs[4]) == MPI_SUCCESS, "irecv");
    c.expect(MPI_Isend(&token, 1, MPI_INT, peer, 5, MPI_COMM_WORLD, &sreq) == MPI_SUCCESS, "isend");
    std::swap(reqs[0], reqs[3]);
    c.expect(MPI_Waitall(5, reqs.data(), MPI_STATUSES_IGNORE) == MPI_SUCCESS, "waitall");
    c.expect(MPI_Wait(&sreq, MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait send");
    c.expect(got == from, "point-to-point message wrong");
    for (Buf* b : bufs) {
        compare(c, b->get(), t, Op::Sum, 0, n, "MPI_Iallreduce among many");
        delete b;
    }
    REPORT(c);
}

/* ---------------------------------------------------------------------------------------------- */
/* MPI 4 large-count forms (MPICH 4; mpi4py calls them where they exist)                            */

#if defined(MPI_VERSION) && MPI_VERSION >= 4
TEST(LargeCount, TheCFormsRouteLikeTheIntForms) {
    Check c;
    size_t np = size_t(size_()), n = 11;
    const TypeCase& t = reduce_types()[16]; /* double */
    Buf s(n * 8 * np), r(n * 8 * np);
    s.put(inputs(t, Op::Sum, rank_(), n * np));
    Counts before = counts();
    c.expect(MPI_Allreduce_c(s.p(), r.p(), MPI_Count(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
             "MPI_Allreduce_c");
    c.route(before, supported(), "MPI_Allreduce_c");
    compare(c, r.get(), t, Op::Sum, 0, n, "MPI_Allreduce_c");
    before = counts();
    c.expect(MPI_Allreduce_c(s.p(), r.p(), MPI_Count(n), MPI_LONG, MPI_BOR, MPI_COMM_WORLD) == MPI_SUCCESS,
             "MPI_Allreduce_c MPI_BOR");
    c.route(before, unsupported(), "MPI_Allreduce_c with MPI_BOR");
    std::vector<MPI_Count> cnt(np, MPI_Count(n));
    before = counts();
    c.expect(MPI_Reduce_scatter_c(s.p(), r.p(), cnt.data(), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
             "MPI_Reduce_scatter_c");
    c.route(before, supported(), "MPI_Reduce_scatter_c");
    compare(c, r.get(), t, Op::Sum, n * size_t(rank_()), n, "MPI_Reduce_scatter_c");
    Buf b(n);
    b.put(block(rank_() == 0 ? 0 : 3, 0, n));
    before = counts();
    c.expect(MPI_Bcast_c(b.p(), MPI_Count(n), MPI_BYTE, 0, MPI_COMM_WORLD) == MPI_SUCCESS, "MPI_Bcast_c");
    c.route(before, supported(), "MPI_Bcast_c");
    c.expect(b.get() == block(0, 0, n), "MPI_Bcast_c data");
    Buf g(n * np);
    before = counts();
    c.expect(MPI_Allgather_c(b.p(), MPI_Count(n), MPI_BYTE, g.p(), MPI_Count(n), MPI_BYTE, MPI_COMM_WORLD) == MPI_SUCCESS,
             "MPI_Allgather_c");
    c.route(before, supported(), "MPI_Allgather_c");
    std::vector<unsigned char> want;
    for (size_t q = 0; q < np; ++q) {
        std::vector<unsigned char> x = block(0, 0, n);
        want.insert(want.end(), x.begin(), x.end());
    }
    c.expect(g.get() == want, "MPI_Allgather_c data");
    MPI_Request req;
    Buf ip(n * 8);
    ip.put(inputs(t, Op::Sum, rank_(), n));
    before = counts();
    c.expect(MPI_Iallreduce_c(MPI_IN_PLACE, ip.p(), MPI_Count(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req) ==
                 MPI_SUCCESS,
             "MPI_Iallreduce_c");
    c.route(before, nonblocking(), "MPI_Iallreduce_c");
    c.expect(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait");
    compare(c, ip.get(), t, Op::Sum, 0, n, "MPI_Iallreduce_c");
    REPORT(c);
}
#endif

/* ---------------------------------------------------------------------------------------------- */
/* The interposer is there (and, with VCCL_PMPI=0, loaded but off)                                 */

TEST(Setup, InterposerLoaded) {
    // The MPI_Allreduce this program calls is the interposer's when it is preloaded.
    Dl_info info;
    void* fn = dlsym(RTLD_DEFAULT, "MPI_Allreduce");
    bool loaded = fn != nullptr && dladdr(fn, &info) != 0 && info.dli_fname != nullptr &&
                  strstr(info.dli_fname, "libvccl-pmpi") != nullptr;
    EXPECT_ALL_RANKS_WHY(loaded, std::string("MPI_Allreduce is not libvccl-pmpi.so's: the interposer is not preloaded"));
    if (mode() == Mode::Off) {
        Counts before = counts();
        int x = 1, y = 0;
        MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        Check c;
        c.route(before, Route::Uncounted, "VCCL_PMPI=0");
        c.expect(y == size_(), "allreduce with the interposer off");
        REPORT(c);
    }
}

/* Device mode (VCCL_PMPI_HOST=0): host buffers reach the MPI library unchanged, and a call with one
 * buffer on each side runs on vccl with the device one copied to host memory. */
TEST(Setup, HostBuffersUntouchedAndMixedKinds) {
    if (mode() != Mode::Device) GTEST_SKIP() << "device mode only";
    Check c;
    int x = rank_() + 1, y = 0;
    Counts before = counts();
    c.expect(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "host allreduce failed");
    c.route(before, Route::Pmpi, "MPI_Allreduce on host buffers");
    c.expect(y == size_() * (size_() + 1) / 2, "host allreduce wrong");
    Buf s(4);
    s.put(&x, 4);
    y = 0;
    before = counts();
    c.expect(MPI_Allreduce(s.p(), &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS, "mixed allreduce failed");
    c.route(before, Route::Vccl, "MPI_Allreduce from device to host memory");
    c.expect(y == size_() * (size_() + 1) / 2, "mixed allreduce wrong");
    REPORT(c);
}

} // namespace

/* ---------------------------------------------------------------------------------------------- */
/* A failing vccl call raises an MPI error on the communicator's handler (run with VTEST_PMPI_ERRORS=1  */
/* and a short VCCL_OP_TIMEOUT_MS: rank 0 stays away from a collective the others enter)               */

namespace {
int g_handler_calls = 0;
int g_handler_class = MPI_SUCCESS;
std::string g_handler_text;

void record_error(MPI_Comm*, int* code, ...) {
    ++g_handler_calls;
    MPI_Error_class(*code, &g_handler_class);
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(*code, text, &len);
    g_handler_text.assign(text, size_t(len));
}
} // namespace

/* Whether MPI_Error_string returns the string added to a new code of a predefined class (MPICH 4.0.2 does
 * not: the interposer then raises the bare class, and vccl's text is only in its log line). */
bool library_keeps_code_strings() {
    int code = 0, len = 0;
    char text[MPI_MAX_ERROR_STRING];
    if (MPI_Add_error_code(MPI_ERR_OTHER, &code) != MPI_SUCCESS || MPI_Add_error_string(code, "probe") != MPI_SUCCESS)
        return false;
    return MPI_Error_string(code, text, &len) == MPI_SUCCESS && strcmp(text, "probe") == 0;
}

TEST(Errors, VcclFailureReachesTheErrorHandler) {
    if (getenv("VTEST_PMPI_ERRORS") == nullptr) GTEST_SKIP() << "run by the errors wrappers (VTEST_PMPI_ERRORS=1)";
    ASSERT_ALL_RANKS(size_() >= 2);
    Check c;
    MPI_Comm comm;
    MPI_Errhandler eh;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_create_errhandler(record_error, &eh);
    MPI_Comm_set_errhandler(comm, eh);
    std::vector<int> v(1024, 1), w(1024, 0);
    c.expect(MPI_Allreduce(v.data(), w.data(), 1024, MPI_INT, MPI_SUM, comm) == MPI_SUCCESS, "first allreduce");
    c.expect(w[0] == size_(), "first allreduce wrong");
    int rc = MPI_SUCCESS;
    if (rank_() != 0) rc = MPI_Allreduce(v.data(), w.data(), 1024, MPI_INT, MPI_SUM, comm);
    PMPI_Barrier(MPI_COMM_WORLD);
    if (rank_() != 0) {
        int cls = MPI_SUCCESS;
        if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
        c.expect(rc != MPI_SUCCESS, "the allreduce without rank 0 succeeded");
        c.expect(g_handler_calls == 1, "the error handler ran " + std::to_string(g_handler_calls) + " times");
        c.expect(g_handler_class == MPI_ERR_OTHER && cls == MPI_ERR_OTHER,
                 "error class " + std::to_string(g_handler_class) + ", expected MPI_ERR_OTHER");
        if (library_keeps_code_strings())
            c.expect(g_handler_text.find("vccl") != std::string::npos, "error string '" + g_handler_text + "'");
    } else {
        c.expect(g_handler_calls == 0, "rank 0's handler ran");
    }
    MPI_Comm_free(&comm);
    MPI_Errhandler_free(&eh);
    REPORT(c);
}
