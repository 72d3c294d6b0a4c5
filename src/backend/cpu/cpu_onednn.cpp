// oneDNN's matmul primitive for cpu_dot_general.cpp: the primitives kept by shape, and the
// OpenMP thread count set before each product.
#include "backend/cpu/cpu_onednn.hpp"

#include <dlfcn.h>

#include <functional>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "flaxpp/core/error.hpp"

namespace flaxpp::cpu {
namespace {

using dnnl::memory;

// What a primitive depends on: oneDNN picks its kernel and its split over threads when it is
// made.
struct Key {
  BatchedGemm gemm;
  int threads;
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  std::size_t operator()(const Key& key) const {
    std::size_t h = std::hash<std::int64_t>{}(key.gemm.batch);
    for (const std::int64_t v :
         {key.gemm.m, key.gemm.n, key.gemm.k,
          std::int64_t{key.gemm.transpose_a} * 2 + key.gemm.transpose_b, std::int64_t{key.threads}})
      h = h * 1000003u ^ std::hash<std::int64_t>{}(v);
    return h;
  }
};

struct Primitive {
  memory::desc a, b, c;
  dnnl::matmul matmul;
};

// A (batch of) row-major (rows, cols) matrices, stored as their (cols, rows) transposes when
// `transposed`: oneDNN reads the layout from the strides.
memory::desc matrix_desc(std::int64_t batch, std::int64_t rows, std::int64_t cols,
                         bool transposed) {
  const memory::dim row_stride = transposed ? 1 : cols;
  const memory::dim col_stride = transposed ? rows : 1;
  if (batch == 1)
    return memory::desc({rows, cols}, memory::data_type::f32, {row_stride, col_stride});
  return memory::desc({batch, rows, cols}, memory::data_type::f32,
                      {rows * cols, row_stride, col_stride});
}

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

Primitive make(const BatchedGemm& g) {
  Primitive p{matrix_desc(g.batch, g.m, g.k, g.transpose_a),
              matrix_desc(g.batch, g.k, g.n, g.transpose_b),
              matrix_desc(g.batch, g.m, g.n, false),
              {}};
#if DNNL_VERSION_MAJOR >= 3
  p.matmul = dnnl::matmul(dnnl::matmul::primitive_desc(cpu_engine(), p.a, p.b, p.c));
#else
  p.matmul =
      dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(p.a, p.b, p.c), cpu_engine()));
#endif
  return p;
}

// The primitives made so far. A program multiplies a few shapes again and again; one that
// keeps making new shapes (a growing sequence) starts over past kCapacity.
class Primitives {
 public:
  Primitive get(const Key& key) {
    std::lock_guard lock(mutex_);
    if (const auto it = table_.find(key); it != table_.end()) return it->second;
    if (table_.size() >= kCapacity) table_.clear();
    return table_.emplace(key, make(key.gemm)).first->second;
  }

 private:
  static constexpr std::size_t kCapacity = 1024;
  std::mutex mutex_;
  std::unordered_map<Key, Primitive, KeyHash> table_;
};

// OpenMP's thread control, found in the process (oneDNN links libgomp) rather than linked, so
// that flaxpp needs no OpenMP flags of its own compiler (clang's would bring a second runtime).
struct OpenMp {
  void (*set)(int) = nullptr;
  int (*get)() = nullptr;
  int initial = 0;  // the default, before flaxpp set anything
};

const OpenMp& open_mp() {
  static const OpenMp omp = [] {
    OpenMp o;
    if (dnnl::version()->cpu_runtime != DNNL_RUNTIME_OMP) return o;
    o.set = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    o.get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
    if (o.set == nullptr || o.get == nullptr) return OpenMp{};
    o.initial = o.get();
    return o;
  }();
  return omp;
}

// Asks OpenMP for `threads` (0: its default) on this thread; returns what it will use (0 where
// oneDNN does not run on OpenMP).
int use_threads(int threads) {
  const OpenMp& omp = open_mp();
  if (omp.set == nullptr) return 0;
  const int wanted = threads > 0 ? threads : omp.initial;
  if (omp.get() != wanted) omp.set(wanted);
  return wanted;
}

}  // namespace

void onednn_gemm(const BatchedGemm& gemm, const float* a, const float* b, float* c, int threads) {
  static Primitives primitives;
  try {
    const Primitive p = primitives.get({gemm, use_threads(threads)});
    thread_local dnnl::stream stream(cpu_engine());
    const dnnl::engine& engine = cpu_engine();
    memory a_mem(p.a, engine, const_cast<float*>(a));  // read only: DNNL_ARG_SRC
    memory b_mem(p.b, engine, const_cast<float*>(b));  // read only: DNNL_ARG_WEIGHTS
    memory c_mem(p.c, engine, c);
    p.matmul.execute(stream,
                     {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
    stream.wait();
  } catch (const dnnl::error& e) {
    throw DeviceError(detail::str("oneDNN's matmul failed for a (", gemm.batch, " x ", gemm.m,
                                  " x ", gemm.k, ")·(", gemm.k, " x ", gemm.n,
                                  ") product: ", e.what(), " (status ", static_cast<int>(e.status),
                                  "); set FLAXPP_CPU_GEMM=blas to multiply with the BLAS"));
  }
}

}  // namespace flaxpp::cpu
