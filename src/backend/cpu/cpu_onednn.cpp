// oneDNN's matmul primitive for cpu_dot_general.cpp, kept by shape, layout and threads.
#include <atomic>
#include <functional>
#include <memory>

#include "backend/cpu/cpu_onednn.hpp"
#include "backend/cpu/onednn_runtime.hpp"
#include "flaxpp/core/error.hpp"

namespace flaxpp::cpu {
namespace {

using dnnl::memory;

// What a primitive depends on: oneDNN picks its kernel and its split over threads when it is
// made.
template <class Gemm>
struct Key {
  Gemm gemm;
  int threads;
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  std::size_t operator()(const Key<BatchedGemm>& key) const {
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

Primitive make(const BatchedGemm& g) {
  Primitive p{matrix_desc(g.batch, g.m, g.k, g.transpose_a),
              matrix_desc(g.batch, g.k, g.n, g.transpose_b),
              matrix_desc(g.batch, g.m, g.n, false),
              {}};
#if DNNL_VERSION_MAJOR >= 3
  p.matmul = dnnl::matmul(dnnl::matmul::primitive_desc(onednn::engine(), p.a, p.b, p.c));
#else
  p.matmul = dnnl::matmul(
      dnnl::matmul::primitive_desc(dnnl::matmul::desc(p.a, p.b, p.c), onednn::engine()));
#endif
  return p;
}

struct StridedKeyHash {
  std::size_t operator()(const Key<StridedGemm>& key) const {
    std::size_t h = std::hash<int>{}(key.threads);
    for (const auto* v :
         {&key.gemm.a_dims, &key.gemm.a_strides, &key.gemm.b_dims, &key.gemm.b_strides})
      for (const std::int64_t x : *v)
        h = h * 1000003u ^ std::hash<std::int64_t>{}(x);
    return h;
  }
};

// A strided product's primitive; null where oneDNN has only its reference implementation.
std::shared_ptr<const Primitive> make_strided(const StridedGemm& g) {
  const auto f32 = memory::data_type::f32;
  memory::dims c_dims(g.a_dims.begin(), g.a_dims.end() - 1);
  c_dims.push_back(g.b_dims.back());
  memory::dims c_strides(c_dims.size(), 1);
  for (std::size_t i = c_dims.size() - 1; i-- > 0;)
    c_strides[i] = c_strides[i + 1] * c_dims[i + 1];
  Primitive p{memory::desc(memory::dims(g.a_dims.begin(), g.a_dims.end()), f32,
                           memory::dims(g.a_strides.begin(), g.a_strides.end())),
              memory::desc(memory::dims(g.b_dims.begin(), g.b_dims.end()), f32,
                           memory::dims(g.b_strides.begin(), g.b_strides.end())),
              memory::desc(c_dims, f32, c_strides),
              {}};
  try {
#if DNNL_VERSION_MAJOR >= 3
    const dnnl::matmul::primitive_desc pd(onednn::engine(), p.a, p.b, p.c);
#else
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p.a, p.b, p.c), onednn::engine());
#endif
    if (onednn::is_reference(pd.impl_info_str())) return nullptr;
    p.matmul = dnnl::matmul(pd);
  } catch (const dnnl::error& e) {
    if (e.status != dnnl_unimplemented) throw;
    return nullptr;
  }
  return std::make_shared<const Primitive>(std::move(p));
}

std::atomic<std::int64_t> strided_runs{0};

void run(const Primitive& p, const float* a, const float* b, float* c) {
  dnnl::stream& stream = onednn::stream();
  const dnnl::engine& engine = onednn::engine();
  memory a_mem(p.a, engine, const_cast<float*>(a));  // read only: DNNL_ARG_SRC
  memory b_mem(p.b, engine, const_cast<float*>(b));  // read only: DNNL_ARG_WEIGHTS
  memory c_mem(p.c, engine, c);
  p.matmul.execute(stream,
                   {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
  stream.wait();
}

}  // namespace

bool onednn_strided_gemm(const StridedGemm& gemm, const float* a, const float* b, float* c,
                         int threads) {
  if (gemm.a_dims.size() > DNNL_MAX_NDIMS) return false;
  static onednn::Table<Key<StridedGemm>, std::shared_ptr<const Primitive>, StridedKeyHash>
      primitives;
  try {
    const std::shared_ptr<const Primitive> p =
        primitives.get({gemm, onednn::use_threads(threads)}, [&] { return make_strided(gemm); });
    if (p == nullptr) return false;
    run(*p, a, b, c);
    strided_runs.fetch_add(1, std::memory_order_relaxed);
    return true;
  } catch (const dnnl::error& e) {
    throw DeviceError(detail::str("oneDNN's matmul failed for a strided product of (",
                                  gemm.a_dims.size(), "-d operands: ", e.what(), " (status ",
                                  static_cast<int>(e.status),
                                  "); set FLAXPP_CPU_GEMM=blas to multiply with the BLAS"));
  }
}

std::int64_t onednn_strided_gemm_runs() {
  return strided_runs.load(std::memory_order_relaxed);
}

void onednn_gemm(const BatchedGemm& gemm, const float* a, const float* b, float* c, int threads) {
  static onednn::Table<Key<BatchedGemm>, Primitive, KeyHash> primitives;
  try {
    const Primitive p =
        primitives.get({gemm, onednn::use_threads(threads)}, [&] { return make(gemm); });
    run(p, a, b, c);
  } catch (const dnnl::error& e) {
    throw DeviceError(detail::str("oneDNN's matmul failed for a (", gemm.batch, " x ", gemm.m,
                                  " x ", gemm.k, ")·(", gemm.k, " x ", gemm.n,
                                  ") product: ", e.what(), " (status ", static_cast<int>(e.status),
                                  "); set FLAXPP_CPU_GEMM=blas to multiply with the BLAS"));
  }
}

}  // namespace flaxpp::cpu
