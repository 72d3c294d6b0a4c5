// CPU evaluation of fused_elementwise: the program runs over chunks of each group's elements,
// one instruction at a time across the chunk (a plain loop per instruction, which vectorises),
// with every temporary a chunk-sized row that stays in the L1 cache; instructions read the
// inputs in place (a bool mask is converted into its row, a broadcast operand gathered into
// it). A chunk's results are written after its code has run, so donated inputs take results
// in place. Large groups are shared among the CPU's threads by runs of chunks
// (cpu_parallel.hpp): the same bits for any count. A program with row reductions runs over
// chunks of whole rows and folds each row from its chunk's registers as reduce_sum and
// reduce_max fold it (cpu_fold.hpp).
#include <algorithm>
#include <type_traits>
#include <vector>

#include "backend/cpu/cpu_eval_impl.hpp"
#include "backend/cpu/cpu_fold.hpp"
#include "backend/cpu/cpu_parallel.hpp"
#include "backend/cpu/cpu_program_loop.hpp"
#include "flaxpp/ir/elementwise_program.hpp"

namespace flaxpp::cpu {
namespace {

constexpr std::int64_t kChunk = 256;

// d[k] = as(x[((start + k) / inner) % size]) for k < m: a broadcast operand's row, walked in
// runs without a division per element: runs of one value (a per-row value, inner > 1) are
// fills, and with inner 1 (a bias along the leading axes) runs of consecutive elements are
// copies; both vectorise.
template <class X, class T, class As>
void gather_broadcast(const X* x, std::int64_t size, std::int64_t inner, std::int64_t start,
                      std::int64_t m, T* d, As as) {
  std::int64_t index = (start / inner) % size, within = start % inner;
  for (std::int64_t k = 0; k < m;) {
    if (inner == 1) {
      const std::int64_t run = std::min(m - k, size - index);
      for (std::int64_t j = 0; j < run; ++j)
        d[k + j] = as(x[index + j]);
      k += run;
      index += run;
    } else {
      const std::int64_t run = std::min(m - k, inner - within);
      std::fill_n(d + k, run, as(x[index]));
      k += run;
      within += run;
      if (within < inner) continue;
      within = 0;
      ++index;
    }
    if (index == size) index = 0;
  }
}

// The registers of one thread's share of a group: a chunk-sized row each, the scalars' and
// constants' rows filled once.
template <class T>
class Chunks {
 public:
  Chunks(const ir::ElementwiseProgram& p, std::span<const Array> scalars)
      : p_(p),
        regs_(static_cast<std::size_t>(std::max(p.num_registers, 1))),
        rows_(regs_ * kChunk),
        reg_(regs_),
        is_result_(regs_, false) {
    // Where each register's chunk is read from: its row, or for an input the input itself.
    for (std::size_t r = 0; r < regs_; ++r)
      reg_[r] = row(static_cast<int>(r));
    for (const std::uint8_t r : p.outputs)
      is_result_[r] = true;
    // Scalars and constants fill their rows once; the code never writes them.
    for (int s = 0; s < p.num_scalars; ++s)
      std::fill_n(row(s), kChunk, in_data<T>(scalars[static_cast<std::size_t>(s)])[0]);
    for (std::size_t c = 0; c < p.constants.size(); ++c) {
      // A weak-typed scalar as Array::full makes it.
      const double v = p.constants[c];
      const T value = std::is_same_v<T, float> ? round_to_float32(v) : static_cast<T>(v);
      std::fill_n(row(p.first_constant() + static_cast<int>(c)), kChunk, value);
    }
  }

  // Runs the program over elements [start, start + m) of a group (m <= kChunk); store() then
  // writes them. The code reads the inputs where they are. An input that is itself a result
  // is copied first: another result may take its buffer.
  void compute(std::span<const Array> inputs, std::int64_t start, std::int64_t m) {
    for (int i = 0; i < p_.num_inputs; ++i) {
      const int r = p_.num_scalars + i;
      const Array& x = inputs[static_cast<std::size_t>(i)];
      if (p_.is_broadcast(i)) {  // its row gathers element (e / inner) % size for each e
        if (p_.is_mask(i)) {
          gather_broadcast(in_data<std::uint8_t>(x), x.size(), p_.broadcast_inner(i), start, m,
                           row(r), [](std::uint8_t bit) { return bit != 0 ? T(1) : T(0); });
        } else {
          gather_broadcast(in_data<T>(x), x.size(), p_.broadcast_inner(i), start, m, row(r),
                           [](T v) { return v; });
        }
        continue;
      }
      if (p_.is_mask(i)) {  // a bool array: its row holds 1 or 0
        const std::uint8_t* bits = in_data<std::uint8_t>(x) + start;
        T* d = row(r);
        for (std::int64_t k = 0; k < m; ++k)
          d[k] = bits[k] != 0 ? T(1) : T(0);
        continue;
      }
      const T* data = in_data<T>(x) + start;
      if (is_result_[static_cast<std::size_t>(r)])
        std::copy_n(data, m, row(r));
      else
        reg_[static_cast<std::size_t>(r)] = data;
    }
    for (const ir::ElementwiseProgram::Instr& instr : p_.code) {
      T* d = row(instr.dst);
      const T* a = reg_[instr.a];
      const T* b = reg_[instr.b];
      const T* c = reg_[instr.c];
      run_program_instr(instr.op, instr.y, a, b, c, d, m);
    }
  }
  // The chunk's values of register r, once computed.
  const T* value(std::uint8_t r) const { return reg_[r]; }
  // Writes the outputs of the chunk computed last to dst.
  void store(const std::vector<T*>& dst, std::int64_t start, std::int64_t m) const {
    for (std::size_t o = 0; o < p_.outputs.size(); ++o)
      std::copy_n(reg_[p_.outputs[o]], m, dst[o] + start);
  }

 private:
  T* row(int r) { return rows_.data() + static_cast<std::size_t>(r) * kChunk; }

  const ir::ElementwiseProgram& p_;
  std::size_t regs_;
  std::vector<T> rows_;
  std::vector<const T*> reg_;
  std::vector<bool> is_result_;
};

// Calls f(functor, identity) for a row reduction's operation (add or max).
template <class T, class F>
void visit_fold(ir::ElementwiseProgram::Op op, F&& f) {
  if (op == ir::ElementwiseProgram::Op::add)
    f(kernels::Add{}, T(0));
  else
    f(kernels::Max{}, kernels::max_identity<T>());
}

// One row reduction over a row longer than a chunk, folded chunk by chunk.
template <class T>
class LongRowFold {
 public:
  explicit LongRowFold(ir::ElementwiseProgram::Op op) : op_(op) {}
  // Folds the row's next m values; returns the row's result after its last chunk (`last`).
  T add(const T* x, std::int64_t m, bool last) {
    if (op_ == ir::ElementwiseProgram::Op::add) return kernels::Add{}(T(0), sum_.add(x, m, last));
    return kernels::Max{}(kernels::max_identity<T>(), max_.add(x, m, last));
  }

 private:
  ir::ElementwiseProgram::Op op_;
  LaneFold<T, kernels::Add> sum_{kernels::Add{}, T(0)};
  LaneFold<T, kernels::Max> max_{kernels::Max{}, kernels::max_identity<T>()};
};

// A group whose program reduces rows: the threads take runs of whole rows. Rows of up to
// kChunk elements go as many to a chunk as fit, each folded from the chunk's registers; a
// longer row goes in chunks of kChunk (a multiple of LaneFold's lanes, so that its fold is the
// primitive's), its folds carried from chunk to chunk. The reductions' results are appended
// to `results`.
template <class T>
void run_rows(const ir::ElementwiseProgram& p, std::span<const Array> scalars,
              std::span<const Array> inputs, const std::vector<T*>& dst,
              std::span<const AVal> row_avals, std::vector<Array>& results) {
  static_assert(kChunk % LaneFold<T, kernels::Add>::kLanes == 0);
  const std::int64_t n = inputs[0].size();
  const std::int64_t rows = row_avals[0].shape.size();
  const std::int64_t length = rows == 0 ? 0 : n / rows;
  std::vector<T*> ys;
  for (std::size_t k = 0; k < p.row_reductions.size(); ++k) {
    const Output result(row_avals[k]);
    ys.push_back(result.data<T>());
    results.push_back(result.array());
  }
  if (length == 0) {  // empty rows: each reduction's identity
    for (std::size_t k = 0; k < ys.size(); ++k)
      visit_fold<T>(p.row_reductions[k].op,
                    [&](auto, T identity) { std::fill_n(ys[k], rows, identity); });
    return;
  }
  parallel_rows(rows, length, [&](std::int64_t begin, std::int64_t end) {
    Chunks<T> chunks(p, scalars);
    if (length <= kChunk) {
      const std::int64_t per_chunk = kChunk / length;
      for (std::int64_t r = begin; r < end; r += per_chunk) {
        const std::int64_t count = std::min(per_chunk, end - r);
        chunks.compute(inputs, r * length, count * length);
        for (std::size_t k = 0; k < ys.size(); ++k)
          visit_fold<T>(p.row_reductions[k].op, [&](auto op, T identity) {
            fold_rows(op, chunks.value(p.row_reductions[k].reg), count, length, identity,
                      ys[k] + r);
          });
        chunks.store(dst, r * length, count * length);
      }
      return;
    }
    std::vector<LongRowFold<T>> folds;  // one row's, reallocated never after the first
    folds.reserve(ys.size());
    for (std::int64_t r = begin; r < end; ++r) {
      folds.clear();
      for (const ir::ElementwiseProgram::RowReduction& reduction : p.row_reductions)
        folds.emplace_back(reduction.op);
      for (std::int64_t at = 0; at < length; at += kChunk) {
        const std::int64_t m = std::min(kChunk, length - at);
        const bool last = at + m == length;
        chunks.compute(inputs, r * length + at, m);
        for (std::size_t k = 0; k < ys.size(); ++k) {
          const T y = folds[k].add(chunks.value(p.row_reductions[k].reg), m, last);
          if (last) ys[k][r] = y;
        }
        chunks.store(dst, r * length + at, m);
      }
    }
  });
}

template <class T>
std::vector<Array> run(const ir::ElementwiseProgram& p, bool donate, std::span<const Array> in,
                       std::span<const AVal> out) {
  std::vector<Array> results;
  results.reserve(out.size());
  const std::size_t num_outputs = p.outputs.size();
  const std::span<const Array> scalars = in.first(static_cast<std::size_t>(p.num_scalars));
  const std::span<const Array> groups = in.subspan(static_cast<std::size_t>(p.num_scalars));
  for (std::size_t g = 0; g * static_cast<std::size_t>(p.num_inputs) < groups.size(); ++g) {
    const std::span<const Array> inputs = groups.subspan(g * static_cast<std::size_t>(p.num_inputs),
                                                         static_cast<std::size_t>(p.num_inputs));
    std::vector<T*> dst;
    const std::vector<int> from = backend_impl::donated_inputs(inputs, p, donate);
    for (std::size_t o = 0; o < num_outputs; ++o) {
      if (from[o] >= 0) {
        const Array& donor = inputs[static_cast<std::size_t>(from[o])];
        dst.push_back(const_cast<T*>(in_data<T>(donor)));
        results.push_back(donor);
      } else {
        const Output result(out[g * p.results_per_group() + o]);
        dst.push_back(result.data<T>());
        results.push_back(result.array());
      }
    }
    const std::int64_t n = inputs[0].size();
    if (!p.row_reductions.empty()) {
      run_rows<T>(p, scalars, inputs, dst, out.subspan(g * p.results_per_group() + num_outputs),
                  results);
      continue;
    }
    // Chunks are independent (each reads and writes only its own elements, so a donated
    // buffer is safe too): the threads take runs of them.
    parallel_rows((n + kChunk - 1) / kChunk, kChunk, [&](std::int64_t begin, std::int64_t end) {
      Chunks<T> chunks(p, scalars);
      for (std::int64_t c = begin; c < end; ++c) {
        const std::int64_t m = std::min(kChunk, n - c * kChunk);
        chunks.compute(inputs, c * kChunk, m);
        chunks.store(dst, c * kChunk, m);
      }
    });
  }
  return results;
}

}  // namespace

std::vector<Array> Families::fused_elementwise(const ir::Primitive& prim, std::span<const Array> in,
                                               const ir::Params& params,
                                               std::span<const AVal> out) {
  if (out.empty()) return {};
  const backend_impl::FusedParams fused = backend_impl::fused_params(params);
  return visit_dtype<kFloat, std::vector<Array>>(prim, out[0].dtype, [&]<class T>(TypeTag<T>) {
    return run<T>(fused.program, fused.donate, in, out);
  });
}

}  // namespace flaxpp::cpu
