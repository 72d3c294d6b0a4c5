// The all_reduce primitive: its shape rule, VJP rule and evaluation through dist::world().
#include "flaxpp/dist/all_reduce.hpp"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "flaxpp/core/backend.hpp"
#include "flaxpp/core/error.hpp"
#include "flaxpp/ir/passes.hpp"
#include "flaxpp/ir/primitive_rules.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/transforms/memory_analysis.hpp"

namespace flaxpp::dist {
namespace {

ReduceOp op_of(const ir::Params& params) {
  return reduce_op_from_name(params.get<std::string>("op"));
}

ir::Params params_of(ReduceOp op) {
  return {{"op", std::string(reduce_op_name(op))}};
}

void check_operands(std::span<const AVal> in, ReduceOp op) {
  for (const AVal& a : in)
    if (op == ReduceOp::mean && !is_floating(a.dtype))
      throw ValueError(::flaxpp::detail::str("all_reduce(mean) of ", a,
                                             ": a mean needs a floating dtype; convert first"));
}

// The arrays of one dtype and device among an all_reduce's operands, copied into one flat
// buffer of their own (a bucket), which the collective reduces in place: each member's
// reduction is then its slot of it. So an all_reduce holds its operands' bytes once more
// while it runs, and nothing else: what memory_analysis counts (the memory models below).
struct Bucket {
  std::vector<std::size_t> members;
  Array packed;
  std::vector<Array> slots;  // per member: its part of `packed`, in its shape
};

std::vector<Bucket> pack(std::span<const Array> in) {
  std::map<std::pair<DType, std::string>, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < in.size(); ++i)
    groups[{in[i].dtype(), in[i].device().str()}].push_back(i);
  std::vector<Bucket> buckets;
  for (auto& [key, members] : groups) {
    Backend& be = in[members[0]].buffer().backend();
    std::int64_t elements = 0, bytes = 0;
    for (const std::size_t i : members) {
      elements += in[i].size();
      bytes += in[i].nbytes();
    }
    std::shared_ptr<Buffer> flat = be.allocate(bytes);
    Bucket bucket{std::move(members), {}, {}};
    std::int64_t offset = 0;
    for (const std::size_t i : bucket.members) {
      be.copy(in[i].buffer(), 0, *flat, offset, in[i].nbytes());
      bucket.slots.emplace_back(be.slot(flat, offset, in[i].nbytes()), in[i].shape(),
                                in[i].dtype());
      offset += in[i].nbytes();
    }
    bucket.packed = Array(std::move(flat), Shape{elements}, key.first);
    buckets.push_back(std::move(bucket));
  }
  return buckets;
}

// The collective a bucket's reduction runs: a mean is a sum, divided when unpacked.
ReduceOp in_place_op(ReduceOp op) {
  return op == ReduceOp::mean ? ReduceOp::sum : op;
}

// The reductions, from their buckets reduced in place: each an array of its own (a mean's
// divided by the number of processes), out[i] for operand i.
std::vector<Array> unpack(const std::vector<Bucket>& buckets, std::size_t n, ReduceOp op) {
  const int size = world().size();
  std::vector<Array> out(n);
  for (const Bucket& bucket : buckets)
    for (std::size_t j = 0; j < bucket.members.size(); ++j) {
      const Array& reduced = bucket.slots[j];
      out[bucket.members[j]] =
          op == ReduceOp::mean && size > 1 ? reduced / static_cast<double>(size) : reduced.copy();
    }
  return out;
}

// The reductions of `in`, one collective per dtype and device.
std::vector<Array> reduce_packed(std::span<const Array> in, ReduceOp op) {
  const std::vector<Bucket> buckets = pack(in);
  for (const Bucket& bucket : buckets)
    (void)world().start_all_reduce_in_place(bucket.packed, in_place_op(op))->wait();
  return unpack(buckets, in.size(), op);
}

// An all_reduce_start's collectives in flight, one per bucket, until its all_reduce_done, and
// the thread that started them: the only one that moves them on (MPI runs FUNNELED).
struct Flight {
  std::vector<Bucket> buckets;
  std::vector<std::unique_ptr<PendingCollective>> pending;
  std::thread::id thread = std::this_thread::get_id();
};

// The flights of every started all_reduce, by the buffer of its first result (the first
// operand of its done), oldest first.
struct Flights {
  std::mutex mutex;
  std::multimap<const Buffer*, Flight> by_result;
  std::atomic<int> count{0};
};
Flights& flights() {
  static Flights* f = new Flights;  // never destroyed: collectives may run during exit
  return *f;
}

// ir's progress hook: every collective this thread started moves on.
void progress() {
  Flights& f = flights();
  if (f.count.load(std::memory_order_acquire) == 0) return;
  std::lock_guard lock(f.mutex);
  for (auto& [result, flight] : f.by_result)
    if (flight.thread == std::this_thread::get_id())
      for (const std::unique_ptr<PendingCollective>& p : flight.pending)
        p->done();
}

std::vector<Array> start(std::span<const Array> in, const ir::Params& params) {
  Flight flight;
  flight.buckets = pack(in);
  for (const Bucket& bucket : flight.buckets)
    flight.pending.push_back(
        world().start_all_reduce_in_place(bucket.packed, in_place_op(op_of(params))));
  // The results: the buckets' slots, in the operands' order, being written.
  std::vector<Array> out(in.size());
  for (const Bucket& bucket : flight.buckets)
    for (std::size_t j = 0; j < bucket.members.size(); ++j)
      out[bucket.members[j]] = bucket.slots[j];
  Flights& f = flights();
  {
    std::lock_guard lock(f.mutex);
    f.by_result.emplace(&out[0].buffer(), std::move(flight));
    f.count.fetch_add(1, std::memory_order_release);
  }
  static std::once_flag hooked;
  std::call_once(hooked, [] { ir::set_progress_hook(progress); });
  return out;
}

std::vector<Array> done(std::span<const Array> in, const ir::Params& params) {
  Flights& f = flights();
  Flight flight;
  {
    std::lock_guard lock(f.mutex);
    const auto it = f.by_result.lower_bound(&in[0].buffer());  // the oldest of that result
    FLAXPP_ASSERT(it != f.by_result.end() && it->first == &in[0].buffer(),
                  "all_reduce_done without its all_reduce_start");
    flight = std::move(it->second);
    f.by_result.erase(it);
    f.count.fetch_sub(1, std::memory_order_release);
  }
  for (const std::unique_ptr<PendingCollective>& p : flight.pending)
    (void)p->wait();
  return unpack(flight.buckets, in.size(), op_of(params));
}

// Operands and results of one aval each (all_reduce's shape rule without its checks, which
// the all_reduce they were split from passed).
std::vector<AVal> same_avals(std::span<const AVal> in, const ir::Params& /*params*/) {
  return {in.begin(), in.end()};
}

}  // namespace

const ir::Primitive all_reduce_p(
    "all_reduce",
    [](std::span<const AVal> in, const ir::Params& params) {
      if (in.empty()) throw ValueError("all_reduce takes one operand or more, got none");
      check_operands(in, op_of(params));
      return std::vector<AVal>(in.begin(), in.end());
    },
    [](const ir::VjpArgs& a) -> std::vector<Array> {
      const ReduceOp op = op_of(a.params);
      if (op == ReduceOp::max)
        throw ValueError("all_reduce(max) has no gradient; reduce with sum or mean");
      // The cotangents that exist, reduced together; the others stay zero.
      std::vector<Array> cts;
      for (const Array& ct : a.cotangents)
        if (ct.valid()) cts.push_back(ct);
      std::vector<Array> out(a.cotangents.size());
      if (cts.empty()) return out;
      const std::vector<Array> reduced = all_reduce(cts, op);
      std::size_t next = 0;
      for (std::size_t i = 0; i < out.size(); ++i)
        if (a.cotangents[i].valid()) out[i] = reduced[next++];
      return out;
    },
    [](std::span<const Array> in, const ir::Params& params) {
      return reduce_packed(in, op_of(params));
    });

const ir::Primitive all_reduce_start_p("all_reduce_start", same_avals, nullptr, start);
const ir::Primitive all_reduce_done_p("all_reduce_done", same_avals, nullptr, done);

namespace {

// What evaluating an equation of the three holds beyond its operands (their memory models):
// `copies` times its results' bytes at its peak (the buckets, and for all_reduce and
// all_reduce_done the results made while the buckets are held), its results when it returns.
// Exact, except where a mean is divided here (a primitive bound with op "mean" rather than
// through dist::all_reduce): the division's scalar is not counted.
EqnMemory bucket_memory(const ir::Graph& g, const ir::Eqn& e, std::int64_t copies, bool divides) {
  std::int64_t bytes = 0;
  for (const ir::VarId v : e.outputs)
    bytes += g.aval(v).nbytes();
  return {.peak = copies * bytes,
          .results = bytes,
          .exact = !divides || op_of(e.params) != ReduceOp::mean};
}

// An all_reduce exchanges data between processes; jit's overlap_collectives splits each into
// these two (collectives too).
[[gnu::constructor]] void register_all_reduce_rules() {
  ir::register_effects(all_reduce_p, {.collective = true});
  ir::register_async_collective(all_reduce_p, all_reduce_start_p, all_reduce_done_p);
  register_memory_model(all_reduce_p, [](const ir::Graph& g, const ir::Eqn& e) {
    return bucket_memory(g, e, 2, true);
  });
  // The start's results are its buckets; the done's, made while its operands (the buckets)
  // are held.
  register_memory_model(all_reduce_start_p, [](const ir::Graph& g, const ir::Eqn& e) {
    return bucket_memory(g, e, 1, false);
  });
  register_memory_model(all_reduce_done_p, [](const ir::Graph& g, const ir::Eqn& e) {
    return bucket_memory(g, e, 1, true);
  });
}

}  // namespace

Array all_reduce(const Array& x, ReduceOp op) {
  return all_reduce(std::span<const Array>(&x, 1), op)[0];
}

std::vector<Array> all_reduce(std::span<const Array> xs, ReduceOp op) {
  if (xs.empty()) return {};
  if (op != ReduceOp::mean) return ir::bind(all_reduce_p, xs, params_of(op));
  std::vector<AVal> avals;
  for (const Array& x : xs)
    avals.push_back(x.aval());
  check_operands(avals, op);
  std::vector<Array> out = ir::bind(all_reduce_p, xs, params_of(ReduceOp::sum));
  if (const int size = world().size(); size > 1)
    for (Array& x : out)
      x = x / static_cast<double>(size);
  return out;
}

}  // namespace flaxpp::dist
