/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_coll.cc - MPI collectives checked against values computed locally (an independent reference).
 *
 * Run under mpirun with or without the coll/vccl component (tests/coll/run-coll.sh does both); the program
 * itself only uses MPI, so it checks whichever coll component Open MPI selected. Verdicts are agreed over
 * point-to-point messages, not over the collectives under test. Only rank 0 writes GoogleTest XML.
 *
 * VCCL_TEST_DEVICE=1: buffers are allocated with cudaMalloc (libcudart loaded with dlopen); without a GPU
 * every test is skipped with a message.
 */
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int g_rank = 0, g_size = 1;

/* ---- optional device buffers ------------------------------------------------------------------- */
struct Cuda {
    bool wanted = false, ok = false;
    std::string why;
    int (*malloc_)(void**, size_t) = nullptr;
    int (*free_)(void*) = nullptr;
    int (*memcpy_)(void*, const void*, size_t, int) = nullptr; // kind 4: cudaMemcpyDefault
    void init() {
        const char* e = getenv("VCCL_TEST_DEVICE");
        wanted = e != nullptr && atoi(e) != 0;
        if (!wanted) return;
        void* lib = nullptr;
        for (const char* n : {"libcudart.so", "libcudart.so.12", "libcudart.so.11.0"})
            if ((lib = dlopen(n, RTLD_NOW)) != nullptr) break;
        if (lib == nullptr) { why = "libcudart not found"; return; }
        int (*count)(int*) = reinterpret_cast<int (*)(int*)>(dlsym(lib, "cudaGetDeviceCount"));
        int (*setdev)(int) = reinterpret_cast<int (*)(int)>(dlsym(lib, "cudaSetDevice"));
        malloc_ = reinterpret_cast<int (*)(void**, size_t)>(dlsym(lib, "cudaMalloc"));
        free_ = reinterpret_cast<int (*)(void*)>(dlsym(lib, "cudaFree"));
        memcpy_ = reinterpret_cast<int (*)(void*, const void*, size_t, int)>(dlsym(lib, "cudaMemcpy"));
        int n = 0;
        if (!count || !setdev || !malloc_ || !free_ || !memcpy_ || count(&n) != 0 || n == 0) {
            why = "no CUDA device";
            return;
        }
        ok = setdev(g_rank % n) == 0;
        if (!ok) why = "cudaSetDevice failed";
    }
} g_cuda;

/* A buffer of T that lives on the device under VCCL_TEST_DEVICE=1, else in host memory. */
template <class T>
struct Buf {
    std::vector<T> h;
    void* d = nullptr;
    explicit Buf(size_t n, T fill = T()) : h(n, fill) {
        if (g_cuda.ok) {
            if (g_cuda.malloc_(&d, n * sizeof(T) + 1) != 0) abort();
            put();
        }
    }
    ~Buf() { if (d != nullptr) g_cuda.free_(d); }
    Buf(const Buf&) = delete;
    Buf& operator=(const Buf&) = delete;
    T* ptr() { return d != nullptr ? static_cast<T*>(d) : h.data(); }
    void put() { if (d != nullptr && !h.empty()) g_cuda.memcpy_(d, h.data(), h.size() * sizeof(T), 4); }
    std::vector<T>& get() {
        if (d != nullptr && !h.empty()) g_cuda.memcpy_(h.data(), d, h.size() * sizeof(T), 4);
        return h;
    }
};

/* ---- verdicts over point-to-point -------------------------------------------------------------- */
/* Returns the number of ranks of MPI_COMM_WORLD that reported failure (every rank gets the same number). */
int failedRanks(bool ok) {
    int bad = ok ? 0 : 1;
    const int tag = 4242;
    if (g_rank == 0) {
        for (int r = 1; r < g_size; ++r) {
            int b = 0;
            MPI_Recv(&b, 1, MPI_INT, r, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            bad += b;
        }
        for (int r = 1; r < g_size; ++r) MPI_Send(&bad, 1, MPI_INT, r, tag, MPI_COMM_WORLD);
    } else {
        MPI_Send(&bad, 1, MPI_INT, 0, tag, MPI_COMM_WORLD);
        MPI_Recv(&bad, 1, MPI_INT, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    return bad;
}

/* Per-test mismatch record: the first few are printed with the rank. */
struct Checker {
    int errors = 0;
    template <class T>
    void eq(T want, T got, const std::string& what, size_t i) {
        if (want == got) return;
        if (++errors <= 3)
            ADD_FAILURE() << "rank " << g_rank << ": " << what << " [" << i << "]: expected " << +want << ", got "
                          << +got;
    }
};

#define EXPECT_ALL_RANKS_OK(chk) EXPECT_EQ(0, failedRanks((chk).errors == 0)) << "ranks with mismatches"

/* Values: small integers so that every type and op gives exact results for up to 8 ranks. */
template <class T>
T val(int rank, size_t i, MPI_Op op) {
    if (op == MPI_PROD) return T((rank + i) % 2 + 1);
    return T((rank * 7 + i * 3) % 5 + 1);
}

template <class T>
T combine(T a, T b, MPI_Op op) {
    if (op == MPI_SUM) return T(a + b);
    if (op == MPI_PROD) return T(a * b);
    if (op == MPI_MAX) return a > b ? a : b;
    return a < b ? a : b;
}

template <class T>
T reduced(int nranks, size_t i, MPI_Op op, int first = 0) {
    T acc = val<T>(first, i, op);
    for (int r = first + 1; r < first + nranks; ++r) acc = combine(acc, val<T>(r, i, op), op);
    return acc;
}

const size_t kCounts[] = {0, 1, 7, 1000, 65536 + 5};
const char* opName(MPI_Op op) {
    return op == MPI_SUM ? "sum" : op == MPI_PROD ? "prod" : op == MPI_MAX ? "max" : "min";
}

/* ---- typed checks ------------------------------------------------------------------------------ */
template <class T>
void allreduceCase(MPI_Datatype dt, MPI_Comm comm, Checker& chk) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (MPI_Op op : {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN}) {
        for (size_t n : kCounts) {
            for (int inplace = 0; inplace < 2; ++inplace) {
                Buf<T> s(n), r(n);
                for (size_t i = 0; i < n; ++i) (inplace ? r.h : s.h)[i] = val<T>(rank, i, op);
                s.put();
                r.put();
                ASSERT_EQ(MPI_SUCCESS, MPI_Allreduce(inplace ? MPI_IN_PLACE : s.ptr(), r.ptr(), int(n), dt, op, comm));
                auto& got = r.get();
                std::string what = std::string("allreduce ") + opName(op) + " n=" + std::to_string(n) +
                                   (inplace ? " in-place" : "");
                for (size_t i = 0; i < n; ++i) chk.eq(reduced<T>(size, i, op), got[i], what, i);
            }
        }
    }
}

template <class T>
void reduceCase(MPI_Datatype dt, MPI_Comm comm, Checker& chk) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (MPI_Op op : {MPI_SUM, MPI_MAX}) {
        for (size_t n : {size_t(0), size_t(1), size_t(13), size_t(40000)}) {
            for (int root = 0; root < size; ++root) {
                for (int inplace = 0; inplace < 2; ++inplace) {
                    bool ip = inplace && rank == root;
                    Buf<T> s(n), r(n, T(99));
                    for (size_t i = 0; i < n; ++i) (ip ? r.h : s.h)[i] = val<T>(rank, i, op);
                    s.put();
                    r.put();
                    ASSERT_EQ(MPI_SUCCESS,
                              MPI_Reduce(ip ? MPI_IN_PLACE : s.ptr(), r.ptr(), int(n), dt, op, root, comm));
                    if (rank != root) continue;
                    auto& got = r.get();
                    std::string what = std::string("reduce ") + opName(op) + " root=" + std::to_string(root) +
                                       " n=" + std::to_string(n) + (ip ? " in-place" : "");
                    for (size_t i = 0; i < n; ++i) chk.eq(reduced<T>(size, i, op), got[i], what, i);
                }
            }
        }
    }
}

template <class T>
void reduceScatterCase(MPI_Datatype dt, MPI_Comm comm, Checker& chk, bool vector_form) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (MPI_Op op : {MPI_SUM, MPI_MIN}) {
        for (size_t n : {size_t(0), size_t(1), size_t(5), size_t(20000)}) {
            for (int inplace = 0; inplace < 2; ++inplace) {
                size_t total = n * size_t(size);
                Buf<T> s(total), r(inplace ? total : n, T(77));
                for (size_t i = 0; i < total; ++i) (inplace ? r.h : s.h)[i] = val<T>(rank, i, op);
                s.put();
                r.put();
                const void* sb = inplace ? MPI_IN_PLACE : s.ptr();
                if (vector_form) {
                    std::vector<int> counts(static_cast<size_t>(size), static_cast<int>(n));
                    ASSERT_EQ(MPI_SUCCESS, MPI_Reduce_scatter(sb, r.ptr(), counts.data(), dt, op, comm));
                } else {
                    ASSERT_EQ(MPI_SUCCESS, MPI_Reduce_scatter_block(sb, r.ptr(), int(n), dt, op, comm));
                }
                auto& got = r.get();
                std::string what = std::string(vector_form ? "reduce_scatter " : "reduce_scatter_block ") +
                                   opName(op) + " n=" + std::to_string(n) + (inplace ? " in-place" : "");
                for (size_t i = 0; i < n; ++i)
                    chk.eq(reduced<T>(size, size_t(rank) * n + i, op), got[i], what, i);
            }
        }
    }
}

/* Data movement: element i of rank r's contribution is r*1000+i (mod the type's range). */
template <class T>
T mv(int rank, size_t i) { return T(rank * 1000 + int(i % 997)); }

template <class T>
void bcastCase(MPI_Datatype dt, MPI_Comm comm, Checker& chk) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (size_t n : kCounts) {
        for (int root = 0; root < size; ++root) {
            Buf<T> b(n, T(3));
            if (rank == root)
                for (size_t i = 0; i < n; ++i) b.h[i] = mv<T>(root, i);
            b.put();
            ASSERT_EQ(MPI_SUCCESS, MPI_Bcast(b.ptr(), int(n), dt, root, comm));
            auto& got = b.get();
            std::string what = "bcast root=" + std::to_string(root) + " n=" + std::to_string(n);
            for (size_t i = 0; i < n; ++i) chk.eq(mv<T>(root, i), got[i], what, i);
        }
    }
}

template <class T>
void allgatherCase(MPI_Datatype dt, MPI_Comm comm, Checker& chk) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (size_t n : {size_t(0), size_t(1), size_t(9), size_t(30000)}) {
        for (int inplace = 0; inplace < 2; ++inplace) {
            Buf<T> s(n), r(n * size_t(size), T(5));
            for (size_t i = 0; i < n; ++i) (inplace ? r.h[size_t(rank) * n + i] : s.h[i]) = mv<T>(rank, i);
            s.put();
            r.put();
            ASSERT_EQ(MPI_SUCCESS, MPI_Allgather(inplace ? MPI_IN_PLACE : s.ptr(), int(n), dt, r.ptr(), int(n), dt, comm));
            auto& got = r.get();
            std::string what = "allgather n=" + std::to_string(n) + (inplace ? " in-place" : "");
            for (int p = 0; p < size; ++p)
                for (size_t i = 0; i < n; ++i) chk.eq(mv<T>(p, i), got[size_t(p) * n + i], what, size_t(p) * n + i);
        }
    }
}

template <class T>
void alltoallCase(MPI_Datatype dt, MPI_Comm comm, Checker& chk) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (size_t n : {size_t(0), size_t(1), size_t(11), size_t(20000)}) {
        for (int inplace = 0; inplace < 2; ++inplace) {
            size_t total = n * size_t(size);
            Buf<T> s(total), r(total, T(6));
            /* block j of rank r's send data: mv(r*size + j, i) */
            for (int j = 0; j < size; ++j)
                for (size_t i = 0; i < n; ++i)
                    (inplace ? r.h : s.h)[size_t(j) * n + i] = mv<T>(rank * size + j, i);
            s.put();
            r.put();
            ASSERT_EQ(MPI_SUCCESS, MPI_Alltoall(inplace ? MPI_IN_PLACE : s.ptr(), int(n), dt, r.ptr(), int(n), dt, comm));
            auto& got = r.get();
            std::string what = "alltoall n=" + std::to_string(n) + (inplace ? " in-place" : "");
            for (int p = 0; p < size; ++p)
                for (size_t i = 0; i < n; ++i)
                    chk.eq(mv<T>(p * size + rank, i), got[size_t(p) * n + i], what, size_t(p) * n + i);
        }
    }
}

class Coll : public ::testing::Test {
protected:
    void SetUp() override {
        if (g_cuda.wanted && !g_cuda.ok) GTEST_SKIP() << "VCCL_TEST_DEVICE=1 but " << g_cuda.why << ": skipped";
    }
};

#define FOR_REDUCTION_TYPES(fn, ...)                                  \
    do {                                                              \
        fn<int32_t>(MPI_INT, __VA_ARGS__);                            \
        fn<int64_t>(MPI_INT64_T, __VA_ARGS__);                        \
        fn<int64_t>(MPI_LONG, __VA_ARGS__);                           \
        fn<uint32_t>(MPI_UNSIGNED, __VA_ARGS__);                      \
        fn<uint64_t>(MPI_UINT64_T, __VA_ARGS__);                      \
        fn<int8_t>(MPI_INT8_T, __VA_ARGS__);                          \
        fn<uint8_t>(MPI_UNSIGNED_CHAR, __VA_ARGS__);                  \
        fn<float>(MPI_FLOAT, __VA_ARGS__);                            \
        fn<double>(MPI_DOUBLE, __VA_ARGS__);                          \
    } while (0)

TEST_F(Coll, Allreduce) {
    Checker chk;
    FOR_REDUCTION_TYPES(allreduceCase, MPI_COMM_WORLD, chk);
    EXPECT_ALL_RANKS_OK(chk);
}

/* MPI_COMM_SELF: a single-process communicator, which the component ranks above coll/self (unless its priority
 * turns it off: coll-np2-off.sh checks that no vccl communicator is made then). */
TEST_F(Coll, AllreduceOnCommSelf) {
    Checker chk;
    FOR_REDUCTION_TYPES(allreduceCase, MPI_COMM_SELF, chk);
    EXPECT_ALL_RANKS_OK(chk);
}

TEST_F(Coll, Reduce) {
    Checker chk;
    reduceCase<int32_t>(MPI_INT, MPI_COMM_WORLD, chk);
    reduceCase<double>(MPI_DOUBLE, MPI_COMM_WORLD, chk);
    reduceCase<uint64_t>(MPI_UNSIGNED_LONG, MPI_COMM_WORLD, chk);
    EXPECT_ALL_RANKS_OK(chk);
}

TEST_F(Coll, ReduceScatterBlock) {
    Checker chk;
    reduceScatterCase<int32_t>(MPI_INT, MPI_COMM_WORLD, chk, false);
    reduceScatterCase<float>(MPI_FLOAT, MPI_COMM_WORLD, chk, false);
    reduceScatterCase<int64_t>(MPI_LONG_LONG, MPI_COMM_WORLD, chk, false);
    EXPECT_ALL_RANKS_OK(chk);
}

TEST_F(Coll, ReduceScatterEqualCounts) {
    Checker chk;
    reduceScatterCase<int32_t>(MPI_INT32_T, MPI_COMM_WORLD, chk, true);
    reduceScatterCase<double>(MPI_DOUBLE, MPI_COMM_WORLD, chk, true);
    EXPECT_ALL_RANKS_OK(chk);
}

/* Unequal counts: vccl cannot, the previous module must (staged for device buffers). */
TEST_F(Coll, ReduceScatterUnequalCounts) {
    Checker chk;
    std::vector<int> counts(static_cast<size_t>(g_size));
    size_t total = 0;
    for (int p = 0; p < g_size; ++p) total += size_t(counts[size_t(p)] = p + 1);
    size_t off = 0;
    for (int p = 0; p < g_rank; ++p) off += size_t(counts[size_t(p)]);
    Buf<int> s(total), r(size_t(counts[size_t(g_rank)]));
    for (size_t i = 0; i < total; ++i) s.h[i] = val<int>(g_rank, i, MPI_SUM);
    s.put();
    ASSERT_EQ(MPI_SUCCESS, MPI_Reduce_scatter(s.ptr(), r.ptr(), counts.data(), MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    auto& got = r.get();
    for (size_t i = 0; i < got.size(); ++i) chk.eq(reduced<int>(g_size, off + i, MPI_SUM), got[i], "unequal", i);
    EXPECT_ALL_RANKS_OK(chk);
}

TEST_F(Coll, Bcast) {
    Checker chk;
    bcastCase<int32_t>(MPI_INT, MPI_COMM_WORLD, chk);
    bcastCase<double>(MPI_DOUBLE, MPI_COMM_WORLD, chk);
    bcastCase<int16_t>(MPI_SHORT, MPI_COMM_WORLD, chk); /* no vccl type: moved as bytes */
    bcastCase<uint8_t>(MPI_BYTE, MPI_COMM_WORLD, chk);
    EXPECT_ALL_RANKS_OK(chk);
}

TEST_F(Coll, Allgather) {
    Checker chk;
    allgatherCase<int32_t>(MPI_INT, MPI_COMM_WORLD, chk);
    allgatherCase<float>(MPI_FLOAT, MPI_COMM_WORLD, chk);
    allgatherCase<int16_t>(MPI_SHORT, MPI_COMM_WORLD, chk);
    EXPECT_ALL_RANKS_OK(chk);
}

TEST_F(Coll, Alltoall) {
    Checker chk;
    alltoallCase<int32_t>(MPI_INT, MPI_COMM_WORLD, chk);
    alltoallCase<uint64_t>(MPI_UINT64_T, MPI_COMM_WORLD, chk);
    alltoallCase<uint8_t>(MPI_UINT8_T, MPI_COMM_WORLD, chk);
    EXPECT_ALL_RANKS_OK(chk);
}

TEST_F(Coll, Barrier) {
    for (int i = 0; i < 50; ++i) ASSERT_EQ(MPI_SUCCESS, MPI_Barrier(MPI_COMM_WORLD));
    EXPECT_EQ(0, failedRanks(true));
}

/* What vccl cannot do goes to the previous module (staged for device buffers): derived datatypes, MINLOC,
 * bitwise ops, user-defined ops, a send type different from the receive type. */
void userMax(void* in, void* inout, int* len, MPI_Datatype*) {
    int* a = static_cast<int*>(in);
    int* b = static_cast<int*>(inout);
    for (int i = 0; i < *len; ++i) b[i] = a[i] > b[i] ? a[i] : b[i];
}

/* a user sum over a strided vector of doubles (count 1 of the vector type per element of the op) */
int g_vec_n = 0;
void userSumVec(void* in, void* inout, int* len, MPI_Datatype*) {
    double* a = static_cast<double*>(in);
    double* b = static_cast<double*>(inout);
    for (int k = 0; k < *len; ++k)
        for (int i = 0; i < g_vec_n; ++i) b[size_t(k) * size_t(2 * g_vec_n) + size_t(2 * i)] += a[size_t(k) * size_t(2 * g_vec_n) + size_t(2 * i)];
}

TEST_F(Coll, FallbackOps) {
    Checker chk;
    const size_t n = 33;
    {   /* MPI_MINLOC on MPI_2INT */
        Buf<int> s(2 * n), r(2 * n);
        for (size_t i = 0; i < n; ++i) { s.h[2 * i] = val<int>(g_rank, i, MPI_MIN); s.h[2 * i + 1] = g_rank; }
        s.put();
        ASSERT_EQ(MPI_SUCCESS, MPI_Allreduce(s.ptr(), r.ptr(), int(n), MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD));
        auto& got = r.get();
        for (size_t i = 0; i < n; ++i) {
            int best = val<int>(0, i, MPI_MIN), loc = 0;
            for (int p = 1; p < g_size; ++p)
                if (val<int>(p, i, MPI_MIN) < best) { best = val<int>(p, i, MPI_MIN); loc = p; }
            chk.eq(best, got[2 * i], "minloc value", i);
            chk.eq(loc, got[2 * i + 1], "minloc rank", i);
        }
    }
    {   /* MPI_BOR and a user op */
        Buf<int> s(n), r(n), r2(n);
        for (size_t i = 0; i < n; ++i) s.h[i] = 1 << ((g_rank + int(i)) % 20);
        s.put();
        ASSERT_EQ(MPI_SUCCESS, MPI_Allreduce(s.ptr(), r.ptr(), int(n), MPI_INT, MPI_BOR, MPI_COMM_WORLD));
        MPI_Op op;
        MPI_Op_create(userMax, 1, &op);
        ASSERT_EQ(MPI_SUCCESS, MPI_Allreduce(s.ptr(), r2.ptr(), int(n), MPI_INT, op, MPI_COMM_WORLD));
        MPI_Op_free(&op);
        auto& got = r.get();
        auto& got2 = r2.get();
        for (size_t i = 0; i < n; ++i) {
            int o = 0, mx = 0;
            for (int p = 0; p < g_size; ++p) { o |= 1 << ((p + int(i)) % 20); mx = std::max(mx, 1 << ((p + int(i)) % 20)); }
            chk.eq(o, got[i], "bor", i);
            chk.eq(mx, got2[i], "user op", i);
        }
    }
    {   /* a strided vector type: bcast and allreduce */
        MPI_Datatype vec;
        MPI_Type_vector(int(n), 1, 2, MPI_DOUBLE, &vec);
        MPI_Type_commit(&vec);
        Buf<double> b(2 * n, -1.0), s(2 * n, 0.0), r(2 * n, -2.0);
        if (g_rank == 0) for (size_t i = 0; i < n; ++i) b.h[2 * i] = double(i) + 0.5;
        for (size_t i = 0; i < n; ++i) s.h[2 * i] = double(g_rank + 1);
        b.put();
        s.put();
        r.put();
        ASSERT_EQ(MPI_SUCCESS, MPI_Bcast(b.ptr(), 1, vec, 0, MPI_COMM_WORLD));
        MPI_Op vsum;
        g_vec_n = int(n);
        MPI_Op_create(userSumVec, 1, &vsum);
        ASSERT_EQ(MPI_SUCCESS, MPI_Allreduce(s.ptr(), r.ptr(), 1, vec, vsum, MPI_COMM_WORLD));
        MPI_Op_free(&vsum);
        MPI_Type_free(&vec);
        auto& gb = b.get();
        auto& gr = r.get();
        for (size_t i = 0; i < n; ++i) {
            chk.eq(double(i) + 0.5, gb[2 * i], "vector bcast", 2 * i);
            chk.eq(-1.0, gb[2 * i + 1], "vector bcast gap", 2 * i + 1);
            chk.eq(double(g_size * (g_size + 1) / 2), gr[2 * i], "vector allreduce", 2 * i);
            chk.eq(-2.0, gr[2 * i + 1], "vector allreduce gap", 2 * i + 1);
        }
    }
    {   /* allgather sending MPI_INT, receiving a contiguous type of 2 ints: moved as bytes */
        MPI_Datatype pair;
        MPI_Type_contiguous(2, MPI_INT, &pair);
        MPI_Type_commit(&pair);
        Buf<int> s(4), r(4 * size_t(g_size), -1);
        for (int i = 0; i < 4; ++i) s.h[size_t(i)] = g_rank * 10 + i;
        s.put();
        r.put();
        ASSERT_EQ(MPI_SUCCESS, MPI_Allgather(s.ptr(), 4, MPI_INT, r.ptr(), 2, pair, MPI_COMM_WORLD));
        MPI_Type_free(&pair);
        auto& got = r.get();
        for (int p = 0; p < g_size; ++p)
            for (int i = 0; i < 4; ++i) chk.eq(p * 10 + i, got[size_t(p * 4 + i)], "allgather int->pair", size_t(i));
    }
    EXPECT_ALL_RANKS_OK(chk);
}

/* Communicators made and freed in a loop: each gets its own vccl communicator on first use. */
TEST_F(Coll, CommDupSplitFreeLoop) {
    Checker chk;
    for (int it = 0; it < 20; ++it) {
        MPI_Comm dup, half;
        ASSERT_EQ(MPI_SUCCESS, MPI_Comm_dup(MPI_COMM_WORLD, &dup));
        ASSERT_EQ(MPI_SUCCESS, MPI_Comm_split(dup, g_rank % 2, g_size - g_rank, &half));
        int hr, hs;
        MPI_Comm_rank(half, &hr);
        MPI_Comm_size(half, &hs);
        Buf<int> a(3), b(3);
        for (size_t i = 0; i < 3; ++i) a.h[i] = g_rank + it + int(i);
        a.put();
        ASSERT_EQ(MPI_SUCCESS, MPI_Allreduce(a.ptr(), b.ptr(), 3, MPI_INT, MPI_SUM, dup));
        auto& got = b.get();
        for (size_t i = 0; i < 3; ++i)
            chk.eq(g_size * (g_size - 1) / 2 + g_size * (it + int(i)), got[i], "dup allreduce", i);
        if (it % 2 == 0) {
            /* allreduce over the half communicator: members are the ranks with the same parity */
            Buf<int> c(1, g_rank), d(1);
            c.put();
            ASSERT_EQ(MPI_SUCCESS, MPI_Allreduce(c.ptr(), d.ptr(), 1, MPI_INT, MPI_SUM, half));
            int want = 0;
            for (int p = g_rank % 2; p < g_size; p += 2) want += p;
            chk.eq(want, d.get()[0], "split allreduce", 0);
            Buf<int> e(1, hr == 0 ? 4242 + it : 0);
            e.put();
            ASSERT_EQ(MPI_SUCCESS, MPI_Bcast(e.ptr(), 1, MPI_INT, 0, half));
            chk.eq(4242 + it, e.get()[0], "split bcast", 0);
        }
        (void)hs;
        ASSERT_EQ(MPI_SUCCESS, MPI_Comm_free(&half));
        ASSERT_EQ(MPI_SUCCESS, MPI_Comm_free(&dup));
    }
    EXPECT_ALL_RANKS_OK(chk);
}

} // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    ::testing::InitGoogleTest(&argc, argv);
    if (g_rank != 0) {
        ::testing::GTEST_FLAG(output) = "";
        ::testing::TestEventListeners& l = ::testing::UnitTest::GetInstance()->listeners();
        delete l.Release(l.default_result_printer());
    }
    g_cuda.init();
    if (g_cuda.wanted && !g_cuda.ok && g_rank == 0)
        fprintf(stderr, "test_coll: VCCL_TEST_DEVICE=1 but %s: every test is skipped\n", g_cuda.why.c_str());
    int rc = RUN_ALL_TESTS();
    MPI_Finalize();
    return rc;
}
