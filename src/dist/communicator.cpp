// The checks every collective makes, the job of one's communicator, and world(): the job's
// communicator, routing each array to the transport of its memory.
#include "flaxpp/dist/communicator.hpp"

#include <chrono>
#include <cstdlib>
#include <mutex>

#include "dist/transport.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/core/error.hpp"
#include "flaxpp/dist/process_group.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "flaxpp/transforms/recording_agreement.hpp"

namespace flaxpp::dist {

std::string_view reduce_op_name(ReduceOp op) {
  constexpr std::string_view kNames[] = {"sum", "mean", "max"};  // the enum's order
  return kNames[static_cast<std::size_t>(op)];
}

ReduceOp reduce_op_from_name(std::string_view name) {
  for (const ReduceOp op : {ReduceOp::sum, ReduceOp::mean, ReduceOp::max})
    if (reduce_op_name(op) == name) return op;
  throw ValueError(::flaxpp::detail::str("unknown reduction \"", name,
                                         "\"; expected sum, mean or max"));
}

namespace {

void check_concrete(const char* op, const Array& x) {
  if (!x.valid()) throw ValueError(::flaxpp::detail::str(op, ": a null array"));
  if (x.is_traced())
    throw ValueError(::flaxpp::detail::str(
        op, " of a traced array (", x.aval(),
        "): inside jit or grad use dist::all_reduce (the primitive), not the communicator"));
}

void check_all_reduce(const Array& x, ReduceOp op) {
  check_concrete("all_reduce", x);
  if (op == ReduceOp::mean && !is_floating(x.dtype()))
    throw ValueError(::flaxpp::detail::str("all_reduce(mean) of ", x.aval(),
                                           ": a mean needs a floating dtype; convert first"));
  if (op == ReduceOp::sum && x.dtype() == DType::bool_)
    throw ValueError("all_reduce(sum) of a bool array: use max (any) or convert to int32 first");
}

}  // namespace

// Runs one collective `f`, counting it (and x's bytes) in stats_, also when it throws.
template <class F>
auto Communicator::timed(const Array* x, F&& f) {
  const auto start = std::chrono::steady_clock::now();
  struct Count {
    CommunicatorStats& stats;
    std::chrono::steady_clock::time_point start;
    ~Count() {
      stats.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  } count{stats_, start};
  ++stats_.calls;
  if (x != nullptr) stats_.bytes += x->nbytes();
  return f();
}

Array Communicator::all_reduce(const Array& x, ReduceOp op) {
  check_all_reduce(x, op);
  Array sum = timed(&x, [&] { return all_reduce_impl(x, op == ReduceOp::mean ? ReduceOp::sum : op); });
  return op == ReduceOp::mean && size_ > 1 ? sum / static_cast<double>(size_) : sum;
}

namespace {

// A collective that completed when it started.
class Completed final : public PendingCollective {
 public:
  explicit Completed(Array result) : result_(std::move(result)) {}
  bool done() override { return true; }
  Array wait() override { return result_; }

 private:
  Array result_;
};

// The caller's side of a started all_reduce: the time spent waiting counts in the stats, and
// a mean divides the sum once it arrives.
class Counted final : public PendingCollective {
 public:
  Counted(std::unique_ptr<PendingCollective> inner, CommunicatorStats& stats, double divisor)
      : inner_(std::move(inner)), stats_(stats), divisor_(divisor) {}
  bool done() override { return inner_->done(); }
  Array wait() override {
    const auto start = std::chrono::steady_clock::now();
    Array sum = inner_->wait();
    stats_.seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return divisor_ != 1 ? sum / divisor_ : sum;
  }

 private:
  std::unique_ptr<PendingCollective> inner_;
  CommunicatorStats& stats_;
  double divisor_;
};

}  // namespace

std::unique_ptr<PendingCollective> Communicator::start_all_reduce_impl(const Array& x,
                                                                       ReduceOp op) {
  return std::make_unique<Completed>(all_reduce_impl(x, op));
}

std::unique_ptr<PendingCollective> Communicator::start_all_reduce(const Array& x, ReduceOp op) {
  check_all_reduce(x, op);
  std::unique_ptr<PendingCollective> inner = timed(
      &x, [&] { return start_all_reduce_impl(x, op == ReduceOp::mean ? ReduceOp::sum : op); });
  return std::make_unique<Counted>(std::move(inner), stats_,
                                   op == ReduceOp::mean ? static_cast<double>(size_) : 1.0);
}

std::unique_ptr<PendingCollective> Communicator::start_all_reduce_in_place_impl(const Array& x,
                                                                                ReduceOp op) {
  const Array sum = all_reduce_impl(x, op);
  if (&sum.buffer() != &x.buffer()) {
    // The caller holds x's buffer alone and gave it up to the collective (the contract of
    // start_all_reduce_in_place), as a donated operand is given up to a primitive.
    auto& into = const_cast<Buffer&>(x.buffer());
    into.backend().copy(sum.buffer(), into, x.nbytes());
  }
  return std::make_unique<Completed>(x);
}

std::unique_ptr<PendingCollective> Communicator::start_all_reduce_in_place(const Array& x,
                                                                           ReduceOp op) {
  check_all_reduce(x, op);
  if (op == ReduceOp::mean)
    throw ValueError(::flaxpp::detail::str(
        "all_reduce(mean) in place of ", x.aval(),
        ": a mean's division needs a buffer of its own; reduce with sum in place and divide by "
        "size() after"));
  return std::make_unique<Counted>(timed(&x, [&] { return start_all_reduce_in_place_impl(x, op); }),
                                   stats_, 1.0);
}

Array Communicator::broadcast(const Array& x, int root) {
  check_concrete("broadcast", x);
  if (root < 0 || root >= size_)
    throw ValueError(::flaxpp::detail::str("broadcast from rank ", root, ": the job has ranks 0..",
                                           size_ - 1));
  return timed(&x, [&] { return broadcast_impl(x, root); });
}

Array Communicator::all_gather(const Array& x) {
  check_concrete("all_gather", x);
  return timed(&x, [&] { return all_gather_impl(x); });
}

void Communicator::barrier() {
  timed(nullptr, [&] { barrier_impl(); });
}

namespace detail {

std::chrono::duration<double> collective_timeout() {
  static const double seconds = [] {
    const char* env = std::getenv("FLAXPP_COLLECTIVE_TIMEOUT");
    if (env == nullptr || *env == '\0') return 300.0;
    char* end = nullptr;
    const double v = std::strtod(env, &end);
    if (end == env || *end != '\0' || !(v > 0))
      throw ValueError(::flaxpp::detail::str("FLAXPP_COLLECTIVE_TIMEOUT=", env,
                                             ": expected a positive number of seconds"));
    return v;
  }();
  return std::chrono::duration<double>(seconds);
}

void throw_timed_out(int rank, int size, const char* op, const Array& x) {
  throw DistributedError(::flaxpp::detail::str(
      "rank ", rank, " of ", size, ": ", op, " of ", x.aval(), " did not complete within ",
      collective_timeout().count(),
      " s (FLAXPP_COLLECTIVE_TIMEOUT): another process died, stalled or called a different "
      "collective. The job is ended; the last checkpoint written is intact"));
}

namespace {

// A job of one: nothing to exchange.
class Local final : public Communicator {
 public:
  Local() : Communicator(0, 1) {}

 protected:
  Array all_reduce_impl(const Array& x, ReduceOp) override { return x; }
  std::unique_ptr<PendingCollective> start_all_reduce_in_place_impl(const Array& x,
                                                                    ReduceOp) override {
    return std::make_unique<Completed>(x);
  }
  Array broadcast_impl(const Array& x, int) override { return x; }
  Array all_gather_impl(const Array& x) override {
    // The same bytes under a leading axis of 1 (a byte copy: every dtype, on any device).
    std::vector<std::int64_t> dims{1};
    dims.insert(dims.end(), x.shape().dims().begin(), x.shape().dims().end());
    Backend& be = x.buffer().backend();
    std::shared_ptr<Buffer> out = be.allocate(x.nbytes());
    be.copy(x.buffer(), *out, x.nbytes());
    return Array(std::move(out), Shape(dims), x.dtype());
  }
  void barrier_impl() override {}
};

}  // namespace

std::unique_ptr<Communicator> local_communicator() {
  return std::make_unique<Local>();
}

}  // namespace detail

namespace {

// The job's communicator: arrays in host memory go to the host transport (MPI), arrays on a
// GPU to NCCL where it was built, else through host memory.
class Job final : public Communicator {
 public:
  Job(std::unique_ptr<Communicator> host, std::unique_ptr<Communicator> device)
      : Communicator(host->rank(), host->size()), host_(std::move(host)), device_(std::move(device)) {}

 protected:
  Array all_reduce_impl(const Array& x, ReduceOp op) override {
    return on(x, [&](Communicator& c, const Array& a) { return c.all_reduce(a, op); });
  }
  std::unique_ptr<PendingCollective> start_all_reduce_impl(const Array& x, ReduceOp op) override {
    if (x.device().kind == DeviceKind::cpu) return host_->start_all_reduce(x, op);
    if (device_) return device_->start_all_reduce(x, op);
    return Communicator::start_all_reduce_impl(x, op);  // through host memory, at once
  }
  std::unique_ptr<PendingCollective> start_all_reduce_in_place_impl(const Array& x,
                                                                    ReduceOp op) override {
    if (x.device().kind == DeviceKind::cpu) return host_->start_all_reduce_in_place(x, op);
    if (device_) return device_->start_all_reduce_in_place(x, op);
    return Communicator::start_all_reduce_in_place_impl(x, op);  // through host memory
  }
  Array broadcast_impl(const Array& x, int root) override {
    return on(x, [&](Communicator& c, const Array& a) { return c.broadcast(a, root); });
  }
  Array all_gather_impl(const Array& x) override {
    return on(x, [&](Communicator& c, const Array& a) { return c.all_gather(a); });
  }
  void barrier_impl() override { host_->barrier(); }

 private:
  template <class F>
  Array on(const Array& x, F&& f) {
    const Device device = x.device();
    if (device.kind == DeviceKind::cpu) return f(*host_, x);
    if (device_) return f(*device_, x);
    return f(*host_, x.to(Device::cpu())).to(device);
  }
  std::unique_ptr<Communicator> host_, device_;
};

// The job's vote on a call of a recorded step with collectives (transforms' agreement): the
// least vote over the host transport, which runs no device work and so cannot itself diverge.
transforms::RecordingVote least_vote(Communicator& host, transforms::RecordingVote vote) {
  // The least vote is the largest distance from ready (all_reduce has no min).
  const auto ready = static_cast<std::int32_t>(transforms::RecordingVote::ready);
  const std::vector<std::int32_t> away{ready - static_cast<std::int32_t>(vote)};
  const Array most =
      host.all_reduce(Array::from_vector(away, Shape{}, Device::cpu()), ReduceOp::max);
  return static_cast<transforms::RecordingVote>(ready - most.to_vector<std::int32_t>()[0]);
}

}  // namespace

Communicator& world() {
  static std::once_flag once;
  static Communicator* job = nullptr;  // never destroyed: collectives may run during exit
  std::call_once(once, [] {
    if (!is_initialized()) init();
    std::unique_ptr<Communicator> host = detail::local_communicator();
    std::unique_ptr<Communicator> device;
#ifdef FLAXPP_WITH_MPI
    if (world_size() > 1) host = detail::mpi_communicator();
#endif
#ifdef FLAXPP_WITH_NCCL
    if (world_size() > 1 && is_available(DeviceKind::cuda))
      device = detail::nccl_communicator(rank(), world_size(), local_rank(), host.get());
#endif
    if (world_size() > 1)
      transforms::set_recording_agreement(
          [host = host.get()](transforms::RecordingVote vote) { return least_vote(*host, vote); });
    job = new Job(std::move(host), std::move(device));
  });
  return *job;
}

}  // namespace flaxpp::dist
