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

namespace flaxpp::dist {
namespace {

ReduceOp op_of(const ir::Params& params) {
  return reduce_op_from_name(params.get<std::string>("op"));
}

ir::Params params_of(ReduceOp op) {
  return {{"op", std::string(reduce_op_name(op))}};
}

// The arrays of one dtype and device among an all_reduce's operands, packed into one flat
// buffer (a bucket) where they are several.
struct Bucket {
  std::vector<std::size_t> members;
  Array packed;
};

std::vector<Bucket> pack(std::span<const Array> in) {
  std::map<std::pair<DType, std::string>, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < in.size(); ++i)
    groups[{in[i].dtype(), in[i].device().str()}].push_back(i);
  std::vector<Bucket> buckets;
  for (auto& [key, members] : groups) {
    if (members.size() == 1) {
      const Array& only = in[members[0]];
      buckets.push_back({std::move(members), only});
      continue;
    }
    Backend& be = in[members[0]].buffer().backend();
    std::int64_t elements = 0, bytes = 0;
    for (const std::size_t i : members) {
      elements += in[i].size();
      bytes += in[i].nbytes();
    }
    std::shared_ptr<Buffer> flat = be.allocate(bytes);
    std::int64_t offset = 0;
    for (const std::size_t i : members) {
      be.copy(in[i].buffer(), 0, *flat, offset, in[i].nbytes());
      offset += in[i].nbytes();
    }
    Array packed(std::move(flat), Shape{elements}, key.first);
    buckets.push_back({std::move(members), std::move(packed)});
  }
  return buckets;
}

// The bucket's reduction, unpacked into arrays of their own (out[i] for each member i).
void unpack(const Bucket& bucket, const Array& reduced, std::span<const Array> in,
            std::vector<Array>& out) {
  if (bucket.members.size() == 1) {
    out[bucket.members[0]] = reduced;
    return;
  }
  Backend& be = reduced.buffer().backend();
  std::int64_t offset = 0;
  for (const std::size_t i : bucket.members) {
    std::shared_ptr<Buffer> own = be.allocate(in[i].nbytes());
    be.copy(reduced.buffer(), offset, *own, 0, in[i].nbytes());
    out[i] = Array(std::move(own), in[i].shape(), in[i].dtype());
    offset += in[i].nbytes();
  }
}

// The reductions of `in`, one collective per dtype and device.
std::vector<Array> reduce_packed(std::span<const Array> in, ReduceOp op) {
  std::vector<Array> out(in.size());
  for (const Bucket& bucket : pack(in))
    unpack(bucket, world().all_reduce(bucket.packed, op), in, out);
  return out;
}

// An all_reduce_start's collectives in flight, one per bucket, until its all_reduce_done, and
// the thread that started them: the only one that moves them on (MPI runs FUNNELED).
struct Flight {
  std::vector<Bucket> buckets;
  std::vector<std::unique_ptr<PendingCollective>> pending;
  std::thread::id thread = std::this_thread::get_id();
};

// The flights of every started all_reduce, by the buffer of its first operand (which the
// start hands on to its done), oldest first.
struct Flights {
  std::mutex mutex;
  std::multimap<const Buffer*, Flight> by_operand;
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
  for (auto& [operand, flight] : f.by_operand)
    if (flight.thread == std::this_thread::get_id())
      for (const std::unique_ptr<PendingCollective>& p : flight.pending)
        p->done();
}

std::vector<Array> start(std::span<const Array> in, const ir::Params& params) {
  Flight flight;
  flight.buckets = pack(in);
  for (const Bucket& bucket : flight.buckets)
    flight.pending.push_back(world().start_all_reduce(bucket.packed, op_of(params)));
  Flights& f = flights();
  {
    std::lock_guard lock(f.mutex);
    f.by_operand.emplace(&in[0].buffer(), std::move(flight));
    f.count.fetch_add(1, std::memory_order_release);
  }
  static std::once_flag hooked;
  std::call_once(hooked, [] { ir::set_progress_hook(progress); });
  return {in.begin(), in.end()};  // the operands, held until the done
}

std::vector<Array> done(std::span<const Array> in, const ir::Params& /*params*/) {
  Flights& f = flights();
  Flight flight;
  {
    std::lock_guard lock(f.mutex);
    const auto it = f.by_operand.lower_bound(&in[0].buffer());  // the oldest of that operand
    FLAXPP_ASSERT(it != f.by_operand.end() && it->first == &in[0].buffer(),
                  "all_reduce_done without its all_reduce_start");
    flight = std::move(it->second);
    f.by_operand.erase(it);
    f.count.fetch_sub(1, std::memory_order_release);
  }
  std::vector<Array> out(in.size());
  for (std::size_t b = 0; b < flight.buckets.size(); ++b)
    unpack(flight.buckets[b], flight.pending[b]->wait(), in, out);
  return out;
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
      const ReduceOp op = op_of(params);
      for (const AVal& a : in)
        if (op == ReduceOp::mean && !is_floating(a.dtype))
          throw ValueError(::flaxpp::detail::str(
              "all_reduce(mean) of ", a, ": a mean needs a floating dtype; convert first"));
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
// An all_reduce exchanges data between processes; jit's overlap_collectives splits each into
// these two (collectives too).
[[gnu::constructor]] void register_all_reduce_rules() {
  ir::register_effects(all_reduce_p, {.collective = true});
  ir::register_async_collective(all_reduce_p, all_reduce_start_p, all_reduce_done_p);
}
}  // namespace

Array all_reduce(const Array& x, ReduceOp op) {
  return ir::bind1(all_reduce_p, std::span<const Array>(&x, 1), params_of(op));
}

std::vector<Array> all_reduce(std::span<const Array> xs, ReduceOp op) {
  if (xs.empty()) return {};
  return ir::bind(all_reduce_p, xs, params_of(op));
}

}  // namespace flaxpp::dist
