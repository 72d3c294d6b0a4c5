// Collectives on host memory over MPI_COMM_WORLD (Open MPI): non-blocking calls polled until
// they complete or the collective time limit passes, so that a dead or stalled peer ends this
// rank with a clear error instead of a hang. 16-bit floats have no MPI type: they travel as
// 2-byte words with sum and max operations that compute in float32 and round back.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "dist/transport.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/core/error.hpp"

namespace flaxpp::dist::detail {
namespace {

void check(int err, const char* what) {
  if (err == MPI_SUCCESS) return;
  char message[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(err, message, &length);
  throw DistributedError(::flaxpp::detail::str("rank ", mpi_rank(), ": ", what, " failed: ", message));
}

// inout[i] = op(in[i], inout[i]) over 16-bit floats, in float32, rounded back.
template <bool kBf16, bool kMax>
void half_op(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  // Exact: every 16-bit value is a float (core/dtype.hpp's conversions).
  const auto value = [](std::uint16_t h) {
    return static_cast<float>(kBf16 ? bfloat16_bits_to_double(h) : float16_bits_to_double(h));
  };
  for (int i = 0; i < *len; ++i) {
    const float x = value(a[i]), y = value(b[i]);
    const float r = kMax ? (x != x || y != y ? x + y : std::max(x, y)) : x + y;
    b[i] = kBf16 ? round_to_bfloat16_bits(r) : round_to_float16_bits(r);
  }
}

struct Half {
  MPI_Op bf16_sum, bf16_max, f16_sum, f16_max;
};
const Half& half_ops() {
  static const Half ops = [] {
    Half h{};
    check(MPI_Op_create(half_op<true, false>, 1, &h.bf16_sum), "MPI_Op_create");
    check(MPI_Op_create(half_op<true, true>, 1, &h.bf16_max), "MPI_Op_create");
    check(MPI_Op_create(half_op<false, false>, 1, &h.f16_sum), "MPI_Op_create");
    check(MPI_Op_create(half_op<false, true>, 1, &h.f16_max), "MPI_Op_create");
    return h;
  }();
  return ops;
}

// bf16 and f16 travel as their 16 bits (half_op reduces them).
MPI_Datatype mpi_type(DType dtype) {
  const PerDType<MPI_Datatype> types(MPI_FLOAT, MPI_DOUBLE, MPI_UINT16_T, MPI_UINT16_T, MPI_INT32_T,
                                     MPI_UINT32_T, MPI_UINT8_T);
  return types[dtype];
}

MPI_Op mpi_op(DType dtype, ReduceOp op) {
  const bool max = op == ReduceOp::max;
  if (dtype == DType::bf16) return max ? half_ops().bf16_max : half_ops().bf16_sum;
  if (dtype == DType::f16) return max ? half_ops().f16_max : half_ops().f16_sum;
  return max ? MPI_MAX : MPI_SUM;
}

int mpi_count(const char* op, const Array& x) {
  if (x.size() > 0x7fffffff)
    throw ValueError(::flaxpp::detail::str(op, " of ", x.aval(),
                                           ": MPI counts are 32-bit; split the array"));
  return static_cast<int>(x.size());
}

// A new host array of `shape` and x's dtype, uninitialised.
Array host_array(const Shape& shape, DType dtype) {
  const std::int64_t bytes = shape.size() * static_cast<std::int64_t>(itemsize(dtype));
  return Array(backend(Device::cpu()).allocate(bytes), shape, dtype);
}

// Waits for `request` until the time limit. Open MPI moves a non-blocking collective on only
// inside MPI_Test (there is no progress thread), so this polls without sleeping, yielding the
// core between tests, as a blocking MPI call spins: a sleep between tests would stall every
// step of the collective's algorithm (pausing up to 1 ms made a 3 MB all-reduce take 3 ms).
void wait_for(MPI_Request& request, const char* op, const Array& x) {
  const auto deadline = std::chrono::steady_clock::now() + collective_timeout();
  for (std::uint64_t polls = 0;; ++polls) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), op);
    if (done != 0) return;
    if (polls % 1024 == 0 && std::chrono::steady_clock::now() > deadline)
      throw_timed_out(mpi_rank(), mpi_size(), op, x);
    std::this_thread::yield();
  }
}

// An MPI_Iallreduce in flight, into a new array or into x's own buffer (MPI_IN_PLACE); its
// operand stays alive with it (MPI reads it until the end).
class MpiAllReduce final : public PendingCollective {
 public:
  MpiAllReduce(const Array& x, ReduceOp op, bool in_place)
      : x_(x), out_(in_place ? x : host_array(x.shape(), x.dtype())) {
    check(MPI_Iallreduce(in_place ? MPI_IN_PLACE : x.buffer().data(), out_.buffer().data(),
                         mpi_count("all_reduce", x), mpi_type(x.dtype()), mpi_op(x.dtype(), op),
                         MPI_COMM_WORLD, &request_),
          "MPI_Iallreduce");
  }
  bool done() override {
    if (request_ == MPI_REQUEST_NULL) return true;
    int flag = 0;
    check(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE), "all_reduce");
    return flag != 0;
  }
  Array wait() override {
    if (request_ != MPI_REQUEST_NULL) wait_for(request_, "all_reduce", x_);
    return out_;
  }

 private:
  Array x_, out_;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

class Mpi final : public Communicator {
 public:
  Mpi() : Communicator(mpi_rank(), mpi_size()) {}

 protected:
  Array all_reduce_impl(const Array& x, ReduceOp op) override {
    return MpiAllReduce(x, op, false).wait();
  }
  std::unique_ptr<PendingCollective> start_all_reduce_impl(const Array& x, ReduceOp op) override {
    return std::make_unique<MpiAllReduce>(x, op, false);
  }
  std::unique_ptr<PendingCollective> start_all_reduce_in_place_impl(const Array& x,
                                                                    ReduceOp op) override {
    return std::make_unique<MpiAllReduce>(x, op, true);
  }
  Array broadcast_impl(const Array& x, int root) override {
    Array out = host_array(x.shape(), x.dtype());
    if (rank() == root && x.nbytes() > 0)
      std::memcpy(out.buffer().data(), x.buffer().data(), static_cast<std::size_t>(x.nbytes()));
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Ibcast(out.buffer().data(), mpi_count("broadcast", x), mpi_type(x.dtype()), root,
                     MPI_COMM_WORLD, &request),
          "MPI_Ibcast");
    wait_for(request, "broadcast", x);
    return out;
  }
  Array all_gather_impl(const Array& x) override {
    std::vector<std::int64_t> dims{size()};
    dims.insert(dims.end(), x.shape().dims().begin(), x.shape().dims().end());
    Array out = host_array(Shape(dims), x.dtype());
    const int count = mpi_count("all_gather", x);
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Iallgather(x.buffer().data(), count, mpi_type(x.dtype()), out.buffer().data(),
                         count, mpi_type(x.dtype()), MPI_COMM_WORLD, &request),
          "MPI_Iallgather");
    wait_for(request, "all_gather", x);
    return out;
  }
  void barrier_impl() override {
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Ibarrier(MPI_COMM_WORLD, &request), "MPI_Ibarrier");
    wait_for(request, "barrier", Array::scalar(0.0f, Device::cpu()));
  }
};

}  // namespace

void mpi_init() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized != 0) return;
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  // Errors come back as codes (then flaxpp's messages), not MPI's abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized == 0) MPI_Finalize();
  });
}

bool mpi_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  return initialized != 0;
}

void mpi_abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);  // MPI_Abort does not return; should it, exit anyway
}

std::string mpi_library() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(version, &length);
  const std::string v(version, static_cast<std::size_t>(length));
  return v.substr(0, v.find(','));
}

int mpi_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int mpi_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

std::unique_ptr<Communicator> mpi_communicator() {
  return std::make_unique<Mpi>();
}

}  // namespace flaxpp::dist::detail
