// flaxpp_kernel_bench: each CUDA launcher of kernels/ alone, as llm.c times its kernels: raw
// device pointers, sizes and a stream, no flaxpp library. For each launcher, a small case is
// checked against a host computation, then a large one is timed (CUDA events, 5 warm-up
// launches, the median of 20) and reported as a JSON line with the bytes it must move and the
// bandwidth that gives. Exits 1 when a check fails; without a GPU it says so and exits 0
// (ctest counts it as skipped).
//
//   build/tests/flaxpp_kernel_bench [--quick]   # --quick: the checks, and small timed sizes
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/add_bias.hpp"
#include "flaxpp/kernels/elementwise.hpp"
#include "kernels/elementwise_kernels.cuh"
#include "kernels/fill.hpp"
#include "kernels/gather_kernel.cuh"
#include "kernels/indexing_kernels.cuh"
#include "kernels/layer_norm_kernels.cuh"
#include "kernels/reduce_kernels.cuh"

namespace k = flaxpp::kernels;

namespace {

int failures = 0;

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(2);
  }
}

// A device buffer of n elements of T.
template <class T>
struct Device {
  T* p = nullptr;
  std::int64_t n = 0;
  explicit Device(std::int64_t count) : n(count) {
    check_cuda(cudaMalloc(&p, static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * sizeof(T)),
               "cudaMalloc");
  }
  Device(const std::vector<T>& host) : Device(static_cast<std::int64_t>(host.size())) {
    check_cuda(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  }
  ~Device() { cudaFree(p); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  // The first `count` elements (all of them by default).
  std::vector<T> host(std::int64_t count = -1) const {
    std::vector<T> out(static_cast<std::size_t>(count < 0 ? n : count));
    check_cuda(cudaMemcpy(out.data(), p, out.size() * sizeof(T), cudaMemcpyDeviceToHost), "download");
    return out;
  }
};

// The device buffers of scatter_add's grouping (kernels::ScatterAddGroups).
struct ScatterScratch {
  Device<std::int32_t> keys, positions, sorted, order, begin;
  Device<unsigned char> sort;
  std::size_t sort_bytes;
  ScatterScratch(std::int64_t m, std::int64_t rows, std::size_t bytes)
      : keys(m), positions(m), sorted(m), order(m), begin(rows + 1),
        sort(static_cast<std::int64_t>(bytes)), sort_bytes(bytes) {}
  k::ScatterAddGroups groups() const {
    return {keys.p, positions.p, sorted.p, order.p, begin.p, sort.p, sort_bytes};
  }
};

std::unique_ptr<ScatterScratch> scatter_scratch(std::int64_t m, std::int64_t rows) {
  std::size_t sort_bytes = 0;
  check_cuda(k::scatter_add_sort_bytes(m, rows, sort_bytes), "scatter_add sort bytes");
  return std::make_unique<ScatterScratch>(m, rows, sort_bytes);
}

// `tokens` ids spread over a vocabulary, as an embedding lookup of a large model sees them.
std::vector<std::int32_t> embedding_ids(std::int64_t tokens, std::int64_t vocab) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens));
  for (std::int64_t i = 0; i < tokens; ++i)
    ids[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7919) % vocab);
  return ids;
}

std::vector<float> values(std::int64_t n, int seed) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = std::sin(0.37f * static_cast<float>(i) + static_cast<float>(seed));
  return v;
}

void expect_close(const std::string& what, const std::vector<float>& got,
                  const std::vector<float>& want, float tol) {
  for (std::size_t i = 0; i < want.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= tol * (1.0f + std::abs(want[i])))) {
      std::fprintf(stderr, "FAILED %s: element %zu is %g, expected %g\n", what.c_str(), i,
                   static_cast<double>(got[i]), static_cast<double>(want[i]));
      ++failures;
      return;
    }
}

// Times launch() and prints its line; `bytes` is what one launch must read and write.
void time_launch(const std::string& kernel, const std::string& shape, double bytes,
                 const std::function<cudaError_t(cudaStream_t)>& launch) {
  cudaStream_t stream;
  check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < 5; ++i)
    check_cuda(launch(stream), kernel.c_str());
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    check_cuda(cudaEventRecord(start, stream), "cudaEventRecord");
    check_cuda(launch(stream), kernel.c_str());
    check_cuda(cudaEventRecord(stop, stream), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float t = 0;
    check_cuda(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double median_ms = ms[ms.size() / 2];
  std::printf("{\"kernel\": \"%s\", \"shape\": \"%s\", \"us\": %.2f, \"gb_per_s\": %.1f}\n",
              kernel.c_str(), shape.c_str(), median_ms * 1e3, bytes / (median_ms * 1e-3) / 1e9);
  std::fflush(stdout);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
}

void elementwise(std::int64_t big) {
  {  // fill
    const float value = 1.5f;
    Device<float> out(1000);
    check_cuda(k::launch_fill(out.p, &value, sizeof value, 1000, nullptr), "fill");
    expect_close("fill", out.host(), std::vector<float>(1000, 1.5f), 0);
    Device<float> o(big);
    time_launch("fill f32", std::to_string(big), 4.0 * big,
                [&](cudaStream_t s) { return k::launch_fill(o.p, &value, sizeof value, big, s); });
  }
  {  // binary add, unary exp, convert to bf16
    const std::vector<float> a = values(1000, 1), b = values(1000, 2);
    Device<float> x(a), y(b), out(1000);
    check_cuda(k::launch_binary(k::Add{}, x.p, false, y.p, false, out.p, 1000, nullptr), "add");
    std::vector<float> sum(1000), ex(1000);
    for (int i = 0; i < 1000; ++i) {
      sum[i] = a[i] + b[i];
      ex[i] = std::exp(a[i]);
    }
    expect_close("add", out.host(), sum, 0);
    check_cuda(k::launch_unary(k::Exp{}, x.p, out.p, 1000, nullptr), "exp");
    expect_close("exp", out.host(), ex, 2e-6f);
    Device<__nv_bfloat16> half(1000);
    check_cuda(k::launch_convert(x.p, half.p, 1000, nullptr), "convert");
    std::vector<__nv_bfloat16> h = half.host();
    std::vector<float> back(1000);
    for (int i = 0; i < 1000; ++i)
      back[i] = __bfloat162float(h[i]);
    expect_close("convert f32 -> bf16", back, a, 1.0f / 256);

    Device<float> bx(big), by(big), bo(big);
    Device<__nv_bfloat16> bh(big);
    time_launch("add f32", std::to_string(big), 12.0 * big, [&](cudaStream_t s) {
      return k::launch_binary(k::Add{}, bx.p, false, by.p, false, bo.p, big, s);
    });
    time_launch("exp f32", std::to_string(big), 8.0 * big,
                [&](cudaStream_t s) { return k::launch_unary(k::Exp{}, bx.p, bo.p, big, s); });
    time_launch("convert f32->bf16", std::to_string(big), 6.0 * big,
                [&](cudaStream_t s) { return k::launch_convert(bx.p, bh.p, big, s); });
  }
  {  // a product's bias added to each row in place
    const std::int64_t rows = 30, n = 37;
    const std::vector<float> a = values(rows * n, 4), b = values(n, 5);
    Device<float> y(a), bias(b);
    check_cuda(k::launch_add_bias(y.p, bias.p, rows, n, nullptr), "add_bias");
    std::vector<float> want(a.size());
    for (std::int64_t i = 0; i < rows * n; ++i)
      want[static_cast<std::size_t>(i)] =
          a[static_cast<std::size_t>(i)] + b[static_cast<std::size_t>(i % n)];
    expect_close("add_bias", y.host(), want, 0);
    const std::int64_t width = 1024;
    Device<float> by(big), bb(width);
    time_launch(
        "add_bias f32", std::to_string(big / width) + "x" + std::to_string(width), 8.0 * big,
        [&](cudaStream_t s) { return k::launch_add_bias(by.p, bb.p, big / width, width, s); });
  }
}

void layout(std::int64_t side) {
  {  // transpose (rows, cols) <- (cols, rows)
    const std::int64_t rows = 37, cols = 70;
    const std::vector<float> a = values(rows * cols, 3);
    Device<float> in(a), out(rows * cols);
    check_cuda(k::launch_transpose_2d(in.p, rows, cols, out.p, nullptr), "transpose");
    std::vector<float> want(a.size());
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        want[static_cast<std::size_t>(r * cols + c)] = a[static_cast<std::size_t>(c * rows + r)];
    expect_close("transpose", out.host(), want, 0);
    Device<float> bi(side * side), bo(side * side);
    time_launch("transpose f32", std::to_string(side) + "x" + std::to_string(side),
                8.0 * side * side,
                [&](cudaStream_t s) { return k::launch_transpose_2d(bi.p, side, side, bo.p, s); });
  }
  {  // take rows
    const std::int64_t rows = 50, width = 33, m = 20;
    const std::vector<float> a = values(rows * width, 4);
    std::vector<std::int32_t> idx(m);
    for (std::int64_t i = 0; i < m; ++i)
      idx[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7) % rows);
    Device<float> x(a), out(m * width);
    Device<std::int32_t> ids(idx);
    Device<k::IndexFault> fault(std::vector<k::IndexFault>(1, k::IndexFault{}));
    check_cuda(k::launch_take(x.p, rows, ids.p, m, width, out.p, fault.p, nullptr), "take");
    std::vector<float> want(static_cast<std::size_t>(m * width));
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t c = 0; c < width; ++c)
        want[static_cast<std::size_t>(i * width + c)] = a[static_cast<std::size_t>(idx[i] * width + c)];
    expect_close("take", out.host(), want, 0);
    expect_close("take: no index fault", {static_cast<float>(fault.host()[0].seen)}, {0.0f}, 0);
    // A bad index is clamped (row rows - 1) and recorded with its position.
    std::vector<std::int32_t> bad_idx = idx;
    bad_idx[5] = static_cast<std::int32_t>(rows);
    Device<std::int32_t> bad(bad_idx);
    check_cuda(k::launch_take(x.p, rows, bad.p, m, width, out.p, fault.p, nullptr), "take");
    const k::IndexFault seen = fault.host()[0];
    expect_close("take: a bad index recorded (seen, index, position, rows)",
                 {static_cast<float>(seen.seen), static_cast<float>(seen.index),
                  static_cast<float>(seen.position), static_cast<float>(seen.rows)},
                 {1.0f, static_cast<float>(rows), 5.0f, static_cast<float>(rows)}, 0);
    const std::vector<float> taken = out.host();  // one copy: both iterators must be its
    expect_close("take: a bad index clamped",
                 std::vector<float>(taken.begin() + 5 * width, taken.begin() + 6 * width),
                 std::vector<float>(a.end() - width, a.end()), 0);
    const std::int64_t vocab = 50304, d = 768, tokens = side * 8;
    const std::vector<std::int32_t> big_idx = embedding_ids(tokens, vocab);
    Device<float> table(vocab * d), bo(tokens * d);
    Device<std::int32_t> bids(big_idx);
    time_launch("take f32 (embedding rows)", std::to_string(tokens) + " of " + std::to_string(vocab) + "x768",
                8.0 * tokens * d, [&](cudaStream_t s) {
                  return k::launch_take(table.p, vocab, bids.p, tokens, d, bo.p, fault.p, s);
                });
  }
  {  // scatter_add: updates grouped by row on the device (radix sort), summed in index order
    const std::int64_t rows = 40, width = 9, m = 300;
    std::vector<std::int32_t> idx(m);
    for (std::int64_t i = 0; i < m; ++i)
      idx[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 13) % (rows - 3));
    const std::vector<float> u = values(m * width, 6), base = values(rows * width, 7);
    std::vector<float> want = base;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t c = 0; c < width; ++c)
        want[static_cast<std::size_t>(idx[i] * width + c)] += u[static_cast<std::size_t>(i * width + c)];
    Device<float> updates(u), out(base);
    Device<std::int32_t> ids(idx);
    Device<k::IndexFault> fault(std::vector<k::IndexFault>(1, k::IndexFault{}));
    const auto g = scatter_scratch(m, rows);
    check_cuda(k::launch_scatter_add(ids.p, m, rows, updates.p, width, out.p, g->groups(), fault.p,
                                     nullptr),
               "scatter_add");
    expect_close("scatter_add (index order, as the CPU)", out.host(), want, 0);
    const std::int64_t vocab = 50304, d = 768, tokens = side * 8;
    const std::vector<std::int32_t> big_idx = embedding_ids(tokens, vocab);
    Device<float> grads(tokens * d), table(vocab * d);
    Device<std::int32_t> bids(big_idx);
    const auto bg = scatter_scratch(tokens, vocab);
    time_launch("scatter_add f32 (embedding gradient)",
                std::to_string(tokens) + " into " + std::to_string(vocab) + "x768",
                4.0 * (2.0 * tokens * d + 2.0 * vocab * d), [&](cudaStream_t s) {
                  return k::launch_scatter_add(bids.p, tokens, vocab, grads.p, d, table.p,
                                               bg->groups(), fault.p, s);
                });
  }
}

void reductions(std::int64_t rows) {
  const std::int64_t cols = 768;
  const std::vector<float> a = values(100 * cols, 5);
  Device<float> x(a), out(cols);
  std::vector<float> row_sums(100), col_sums(cols, 0.0f);
  for (std::int64_t r = 0; r < 100; ++r) {
    double acc = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      acc += a[static_cast<std::size_t>(r * cols + c)];
      col_sums[static_cast<std::size_t>(c)] += a[static_cast<std::size_t>(r * cols + c)];
    }
    row_sums[static_cast<std::size_t>(r)] = static_cast<float>(acc);
  }
  check_cuda(k::launch_reduce_rows_warp(k::Add{}, x.p, 100, cols, 0.0f, out.p, nullptr), "rows");
  expect_close("reduce rows (warp per row)", out.host(100),
               row_sums, 1e-5f);
  check_cuda(k::launch_reduce_rows_block(k::Add{}, x.p, 100, cols, 0.0f, out.p, nullptr), "rows");
  expect_close("reduce rows (block per row)", out.host(100),
               row_sums, 1e-5f);
  check_cuda(k::launch_reduce_columns(k::Add{}, x.p, 100, cols, 100, 1, 0.0f, out.p, nullptr), "columns");
  expect_close("reduce columns", out.host(), col_sums, 1e-5f);

  Device<float> bx(rows * cols), bo(rows > cols ? rows : cols);
  const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
  time_launch("reduce rows f32 (warp per row)", shape, 4.0 * rows * cols, [&](cudaStream_t s) {
    return k::launch_reduce_rows_warp(k::Add{}, bx.p, rows, cols, 0.0f, bo.p, s);
  });
  time_launch("reduce columns f32 (one chunk)", shape, 4.0 * rows * cols, [&](cudaStream_t s) {
    return k::launch_reduce_columns(k::Add{}, bx.p, rows, cols, rows, 1, 0.0f, bo.p, s);
  });
}

void layer_norm(std::int64_t rows) {
  const std::int64_t f = 768;
  const std::vector<float> a = values(64 * f, 6), sc = values(f, 7), bi = values(f, 8);
  Device<float> x(a), scale(sc), bias(bi), y(64 * f);
  check_cuda(k::launch_layer_norm(x.p, scale.p, bias.p, 64, f, 1e-6f, y.p, nullptr), "layer_norm");
  std::vector<float> want(a.size());
  for (std::int64_t r = 0; r < 64; ++r) {
    double mean = 0, sq = 0;
    for (std::int64_t c = 0; c < f; ++c)
      mean += a[static_cast<std::size_t>(r * f + c)];
    mean /= static_cast<double>(f);
    for (std::int64_t c = 0; c < f; ++c) {
      const double d = a[static_cast<std::size_t>(r * f + c)] - mean;
      sq += d * d;
    }
    const double rstd = 1.0 / std::sqrt(sq / static_cast<double>(f) + 1e-6);
    for (std::int64_t c = 0; c < f; ++c)
      want[static_cast<std::size_t>(r * f + c)] = static_cast<float>(
          (a[static_cast<std::size_t>(r * f + c)] - mean) * rstd * sc[static_cast<std::size_t>(c)] +
          bi[static_cast<std::size_t>(c)]);
  }
  expect_close("layer_norm", y.host(), want, 1e-4f);

  Device<float> bx(rows * f), by(rows * f);
  Device<__nv_bfloat16> hx(rows * f), hy(rows * f), hs(f), hb(f);
  const std::string shape = std::to_string(rows) + "x" + std::to_string(f);
  time_launch("layer_norm f32", shape, 8.0 * rows * f, [&](cudaStream_t s) {
    return k::launch_layer_norm(bx.p, scale.p, bias.p, rows, f, 1e-6f, by.p, s);
  });
  time_launch("layer_norm bf16", shape, 4.0 * rows * f, [&](cudaStream_t s) {
    return k::launch_layer_norm(hx.p, hs.p, hb.p, rows, f, 1e-6f, hy.p, s);
  });
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("NO CUDA GPU VISIBLE: the kernel bench needs one (skipped)\n");
    return 0;
  }
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("{\"device\": \"%s\", \"memory_bytes\": %zu}\n", prop.name, prop.totalGlobalMem);
  elementwise(quick ? (1 << 20) : (1 << 28));
  layout(quick ? 1024 : 8192);
  reductions(quick ? 4096 : (1 << 18));
  layer_norm(quick ? 4096 : (1 << 16));
  if (failures > 0) {
    std::fprintf(stderr, "%d kernel checks failed\n", failures);
    return 1;
  }
  std::printf("every kernel check passed\n");
  return 0;
}
