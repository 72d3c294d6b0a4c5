// oneDNN's matmul primitive for cpu_dot_general.cpp, kept by shape, layout and threads.
#include <functional>

#include "backend/cpu/cpu_onednn.hpp"
#include "backend/cpu/onednn_runtime.hpp"
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

}  // namespace

void onednn_gemm(const BatchedGemm& gemm, const float* a, const float* b, float* c, int threads) {
  static onednn::Table<Key, Primitive, KeyHash> primitives;
  try {
    const Primitive p =
        primitives.get({gemm, onednn::use_threads(threads)}, [&] { return make(gemm); });
    dnnl::stream& stream = onednn::stream();
    const dnnl::engine& engine = onednn::engine();
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
