// CPU evaluation of the layout primitives — broadcast_in_dim, reshape, transpose — and the
// strided gather they (and dot_general's operand permutation) are built on.
#include <algorithm>
#include <cstring>

#include "backend/cpu/cpu_eval_impl.hpp"

namespace flaxpp::cpu {

std::vector<std::int64_t> row_major_strides(std::span<const std::int64_t> dims) {
  std::vector<std::int64_t> strides(dims.size());
  std::int64_t stride = 1;
  for (std::size_t k = dims.size(); k-- > 0;) {
    strides[k] = stride;
    stride *= dims[k];
  }
  return strides;
}

namespace {

// Square tiles for strided 2-D copies: 32x32 elements of 8 bytes (8 KiB read + 8 KiB written)
// stay in L1 while a transposed tile is walked.
constexpr std::int64_t kTile = 32;

// out (rows, cols), contiguous, gets in[r * rs + c * cs]. Reads along a row are contiguous
// (cs == 1) or constant (cs == 0, a broadcast) in the simple case; otherwise the copy goes
// tile by tile so that both the read and the written lines are reused from cache.
template <class T>
void copy_2d(const T* in, std::int64_t rs, std::int64_t cs, std::int64_t rows, std::int64_t cols,
             T* out) {
  if (cs == 0 || cs == 1 || rows == 1) {
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        out[r * cols + c] = in[r * rs + c * cs];
    return;
  }
  for (std::int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const std::int64_t r1 = std::min(r0 + kTile, rows);
    for (std::int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const std::int64_t c1 = std::min(c0 + kTile, cols);
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = c0; c < c1; ++c)
          out[r * cols + c] = in[r * rs + c * cs];
    }
  }
}

// gather_strided for dims already simplified: the last two axes as one 2-D copy each, the
// outer axes walked with an odometer.
template <class T>
void gather_strided_t(const T* in, std::span<const std::int64_t> dims,
                      std::span<const std::int64_t> strides, T* out) {
  const std::size_t r = dims.size();
  if (r == 0) {
    out[0] = in[0];
    return;
  }
  const std::int64_t cols = dims[r - 1], cs = strides[r - 1];
  const std::int64_t rows = r >= 2 ? dims[r - 2] : 1, rs = r >= 2 ? strides[r - 2] : 0;
  const std::size_t outer_rank = r >= 2 ? r - 2 : 0;
  std::int64_t outer = 1;
  for (std::size_t k = 0; k < outer_rank; ++k)
    outer *= dims[k];
  std::vector<std::int64_t> index(outer_rank, 0);
  std::int64_t in_offset = 0;
  for (std::int64_t o = 0; o < outer; ++o) {
    copy_2d(in + in_offset, rs, cs, rows, cols, out + o * rows * cols);
    for (std::size_t k = outer_rank; k-- > 0;) {
      in_offset += strides[k];
      if (++index[k] < dims[k]) break;
      in_offset -= strides[k] * dims[k];
      index[k] = 0;
    }
  }
}

}  // namespace

void gather_strided(const void* in, std::span<const std::int64_t> out_dims,
                    std::span<const std::int64_t> in_strides, std::size_t itemsize, void* out) {
  std::int64_t total = 1;
  for (const std::int64_t d : out_dims)
    total *= d;
  if (total == 0) return;
  // Simplify: drop size-1 axes, and merge an axis into the one before it when the pair walks
  // the input like a single axis (e.g. an identity permutation becomes one contiguous run).
  std::vector<std::int64_t> dims, strides;
  for (std::size_t k = 0; k < out_dims.size(); ++k) {
    if (out_dims[k] == 1) continue;
    if (!dims.empty() && strides.back() == in_strides[k] * out_dims[k]) {
      dims.back() *= out_dims[k];
      strides.back() = in_strides[k];
    } else {
      dims.push_back(out_dims[k]);
      strides.push_back(in_strides[k]);
    }
  }
  switch (itemsize) {
    case 1:
      return gather_strided_t(static_cast<const std::uint8_t*>(in), dims, strides,
                              static_cast<std::uint8_t*>(out));
    case 4:
      return gather_strided_t(static_cast<const std::uint32_t*>(in), dims, strides,
                              static_cast<std::uint32_t*>(out));
    case 8:
      return gather_strided_t(static_cast<const std::uint64_t*>(in), dims, strides,
                              static_cast<std::uint64_t*>(out));
    default:
      FLAXPP_ASSERT(false, "gather_strided: itemsize ", itemsize);
  }
}

namespace {

// The result of gathering `x` with the given strides (one per result axis) into `out`.
Array gather(const ir::Primitive& prim, const Array& x, std::span<const std::int64_t> strides,
             const AVal& out) {
  return visit_dtype<kAll>(prim, x.dtype(), [&]<class T>(TypeTag<T>) {
    const Output o(out);
    gather_strided(in_data<T>(x), out.shape.dims(), strides, sizeof(T), o.data<T>());
    return o.array();
  });
}

}  // namespace

// Result axis broadcast_dimensions[i] walks operand axis i; every other result axis, and any
// axis where the operand has size 1, repeats (stride 0).
Array eval_broadcast_in_dim(const ir::Primitive& prim, std::span<const Array> inputs,
                            const ir::Params& params, const AVal& out) {
  const Array& x = inputs[0];
  const auto& bdims = params.get<std::vector<std::int64_t>>("broadcast_dimensions");
  const std::vector<std::int64_t> x_strides = row_major_strides(x.shape().dims());
  std::vector<std::int64_t> strides(out.shape.dims().size(), 0);
  for (std::size_t i = 0; i < bdims.size(); ++i)
    if (x.shape().dims()[i] != 1) strides[static_cast<std::size_t>(bdims[i])] = x_strides[i];
  return gather(prim, x, strides, out);
}

// Row-major order is kept, so the bytes are the operand's. (Copied: Array offers no way to
// share its buffer under a new shape.)
Array eval_reshape(const ir::Primitive& prim, std::span<const Array> inputs,
                   const ir::Params& /*params*/, const AVal& out) {
  const Array& x = inputs[0];
  return visit_dtype<kAll>(prim, x.dtype(), [&]<class T>(TypeTag<T>) {
    const Output o(out);
    std::memcpy(o.data<T>(), in_data<T>(x), static_cast<std::size_t>(x.nbytes()));
    return o.array();
  });
}

// Result axis i walks operand axis permutation[i].
Array eval_transpose(const ir::Primitive& prim, std::span<const Array> inputs,
                     const ir::Params& params, const AVal& out) {
  const Array& x = inputs[0];
  const auto& perm = params.get<std::vector<std::int64_t>>("permutation");
  const std::vector<std::int64_t> x_strides = row_major_strides(x.shape().dims());
  std::vector<std::int64_t> strides(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i)
    strides[i] = x_strides[static_cast<std::size_t>(perm[i])];
  return gather(prim, x, strides, out);
}

}  // namespace flaxpp::cpu
