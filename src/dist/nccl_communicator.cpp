// Collectives on GPU memory over NCCL: one communicator per process on its backend's stream
// (ordered with the compute around it), its unique id made by rank 0 and broadcast over the
// host transport (MPI), or made in-process for a job of one. A collective is waited for until
// it completes, NCCL or this GPU reports an error, or the collective time limit passes; then
// the communicator is aborted and the rank ends with a clear error. Inside a CUDA graph recording
// nothing is waited for: the launch is recorded. A started all_reduce (start_all_reduce, a
// gradient bucket's in a jitted step) runs on the communicator's own stream, after the compute
// stream's work so far, and is joined back into the compute stream by its wait(), so that the
// GPU computes the rest of the backward pass meanwhile. Compiled in CI; it needs a GPU to run.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "dist/transport.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/core/error.hpp"
#include "kernels/cuda_error_text.hpp"

namespace flaxpp::dist::detail {
namespace {

ncclDataType_t nccl_type(DType dtype) {
  constexpr PerDType<ncclDataType_t> kTypes(ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat16,
                                            ncclInt32, ncclUint32, ncclUint8);
  return kTypes[dtype];
}

// `err` in words for a message, and cleared from the runtime's last-error slot: reported here,
// it must not be blamed on the next kernel launch.
std::string cuda_failure(cudaError_t err) {
  (void)cudaGetLastError();
  return kernels::cuda_error_text(err);
}

class Nccl final : public Communicator {
 public:
  Nccl(int rank, int size, int local_rank, Communicator* bootstrap)
      : Communicator(rank, size), device_(Device::cuda(local_rank)) {
    gpu_ = &backend(device_);
    ncclUniqueId id{};
    if (rank == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    if (size > 1) {
      // The id travels as int32 words over the host transport.
      std::vector<std::int32_t> words((sizeof id + 3) / 4, 0);
      std::memcpy(words.data(), &id, sizeof id);
      const Array sent = bootstrap->broadcast(
          Array::from_vector(words, Shape{static_cast<std::int64_t>(words.size())}, Device::cpu()), 0);
      words = sent.to_vector<std::int32_t>();
      std::memcpy(&id, words.data(), sizeof id);
    }
    if (const cudaError_t err = cudaSetDevice(device_.index); err != cudaSuccess)
      throw DistributedError(::flaxpp::detail::str("rank ", rank, ": cannot use GPU ", device_,
                                                   ": ", cuda_failure(err)));
    check(ncclCommInitRank(&comm_, size, id, rank), "ncclCommInitRank");
    if (const cudaError_t err = cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking);
        err != cudaSuccess)
      throw DistributedError(::flaxpp::detail::str(
          "rank ", rank, ": cannot create NCCL's stream on ", device_, ": ", cuda_failure(err)));
  }
  ~Nccl() override {
    if (comm_ != nullptr) (void)ncclCommDestroy(comm_);
    if (side_ != nullptr) (void)cudaStreamDestroy(side_);
  }

 protected:
  Array all_reduce_impl(const Array& x, ReduceOp op) override {
    Array out = device_array(x.shape(), x.dtype());
    check(ncclAllReduce(x.buffer().data(), out.buffer().data(), count(x), nccl_type(x.dtype()),
                        op == ReduceOp::max ? ncclMax : ncclSum, comm_, stream()),
          "ncclAllReduce");
    wait("all_reduce", x);
    return out;
  }
  std::unique_ptr<PendingCollective> start_all_reduce_impl(const Array& x, ReduceOp op) override;
  std::unique_ptr<PendingCollective> start_all_reduce_in_place_impl(const Array& x,
                                                                    ReduceOp op) override;
  Array broadcast_impl(const Array& x, int root) override {
    Array out = device_array(x.shape(), x.dtype());
    check(ncclBroadcast(x.buffer().data(), out.buffer().data(), count(x), nccl_type(x.dtype()),
                        root, comm_, stream()),
          "ncclBroadcast");
    wait("broadcast", x);
    return out;
  }
  Array all_gather_impl(const Array& x) override {
    std::vector<std::int64_t> dims{size()};
    dims.insert(dims.end(), x.shape().dims().begin(), x.shape().dims().end());
    Array out = device_array(Shape(dims), x.dtype());
    check(ncclAllGather(x.buffer().data(), out.buffer().data(), count(x), nccl_type(x.dtype()),
                        comm_, stream()),
          "ncclAllGather");
    wait("all_gather", x);
    return out;
  }
  void barrier_impl() override {
    (void)all_reduce_impl(Array::full(Shape{}, 0.0, DType::f32, device_), ReduceOp::sum);
  }

 private:
  void check(ncclResult_t result, const char* what) const {
    if (result == ncclSuccess) return;
    throw DistributedError(::flaxpp::detail::str("rank ", rank(), ": ", what, " failed: ",
                                                 ncclGetErrorString(result), " (",
                                                 ncclGetLastError(comm_), ")"));
  }
  static std::size_t count(const Array& x) { return static_cast<std::size_t>(x.size()); }
  Array device_array(const Shape& shape, DType dtype) const {
    const std::int64_t bytes = shape.size() * static_cast<std::int64_t>(itemsize(dtype));
    return Array(gpu_->allocate(bytes), shape, dtype);
  }
  // Until the collective completes on the GPU, NCCL reports an error, or the time limit.
  void wait(const char* op, const Array& x) {
    if (gpu_->capturing()) return;
    struct Event {
      cudaEvent_t event;
      ~Event() { (void)cudaEventDestroy(event); }
    } done{recorded(stream(), op)};
    wait_event(done.event, op, x);
  }

 public:
  // A new event recorded on `stream`.
  cudaEvent_t recorded(cudaStream_t stream, const char* op) const {
    cudaEvent_t event = nullptr;
    cudaError_t err = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    if (err == cudaSuccess) {
      err = cudaEventRecord(event, stream);
      if (err != cudaSuccess) (void)cudaEventDestroy(event);
    }
    if (err != cudaSuccess)
      throw DistributedError(::flaxpp::detail::str("rank ", rank(), ": ", op,
                                                   ": cannot record an event: ", cuda_failure(err)));
    return event;
  }
  // Whether `event` completed. cudaErrorNotReady is an answer, not an error. Any other failure
  // (a sticky error such as cudaErrorIllegalAddress from an earlier kernel of this process) never
  // turns into completion: it throws at once, rather than letting the wait run into the time
  // limit and blame the other processes. The communicator is aborted with it, as its kernels
  // cannot complete on this GPU either.
  bool completed(cudaEvent_t event, const char* op) {
    const cudaError_t state = cudaEventQuery(event);
    if (state == cudaSuccess) return true;
    if (state == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    const std::string failure = cuda_failure(state);
    abort_communicator();
    throw DeviceError(::flaxpp::detail::str(
        "rank ", rank(), ": ", op, ": this process's GPU failed while the collective ran: ",
        failure, ". The error is this process's (an earlier kernel or copy on ", device_,
        "), not another process's, and the GPU cannot be used again by this process; "
        "compute-sanitizer or CUDA_LAUNCH_BLOCKING=1 finds the operation that failed"));
  }
  // Until `done` completes on the GPU, NCCL or CUDA reports an error, or the time limit (then
  // the communicator is aborted).
  void wait_event(cudaEvent_t done, const char* op, const Array& x) {
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + collective_timeout();
    for (;;) {
      if (completed(done, op)) break;
      ncclResult_t async = ncclSuccess;
      (void)ncclCommGetAsyncError(comm_, &async);
      const auto now = std::chrono::steady_clock::now();
      if (async != ncclSuccess || now > deadline) {
        const std::string why =
            async != ncclSuccess
                ? ::flaxpp::detail::str("rank ", rank(), ": ", op, " failed: ",
                                        ncclGetErrorString(async), " (", ncclGetLastError(comm_), ")")
                : std::string();
        abort_communicator();
        if (!why.empty()) throw DistributedError(why);
        throw_timed_out(rank(), size(), op, x);
      }
      // A collective on a fast link completes in tens of microseconds: the first ones are
      // waited for by yielding, not sleeping (a sleep lasts at least the kernel's timer slack,
      // ~50 us), and longer ones with short sleeps, which bound the latency a sleep adds.
      if (now - start < kSpin)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(kPause);
    }
  }
  Backend& gpu() const { return *gpu_; }
  // The GPU backend's stream, which every collective is ordered on.
  cudaStream_t stream() const { return static_cast<cudaStream_t>(gpu_->stream_handle()); }
  cudaStream_t side() const { return side_; }

 private:
  static constexpr auto kSpin = std::chrono::microseconds(200);
  static constexpr auto kPause = std::chrono::microseconds(50);

  // A failed or stuck communicator cannot be used again; its kernels stop.
  void abort_communicator() {
    if (comm_ != nullptr) (void)ncclCommAbort(comm_);
    comm_ = nullptr;
  }

  Device device_;
  Backend* gpu_ = nullptr;
  ncclComm_t comm_ = nullptr;
  cudaStream_t side_ = nullptr;  // started collectives' stream
};

// An ncclAllReduce on the communicator's side stream: it starts after the compute stream's work
// so far (the bucket's gradients), and wait() joins it back into the compute stream, after
// waiting for it on the host with the blocking call's errors and time limit (none while a CUDA
// graph records: the fork and the join are recorded). x and the result stay alive with it.
class NcclAllReduce final : public PendingCollective {
 public:
  NcclAllReduce(Nccl& nccl, Array x, Array out, ReduceOp op, ncclComm_t comm)
      : nccl_(nccl), x_(std::move(x)), out_(std::move(out)) {
    cudaEvent_t ready = nccl_.recorded(nccl_.stream(), "all_reduce");
    const cudaError_t ordered = cudaStreamWaitEvent(nccl_.side(), ready, 0);
    (void)cudaEventDestroy(ready);
    if (ordered != cudaSuccess)
      throw DistributedError(::flaxpp::detail::str("rank ", nccl_.rank(),
                                                   ": all_reduce: cannot order NCCL's stream: ",
                                                   cuda_failure(ordered)));
    const ncclResult_t result = ncclAllReduce(
        x_.buffer().data(), out_.buffer().data(), static_cast<std::size_t>(x_.size()),
        nccl_type(x_.dtype()), op == ReduceOp::max ? ncclMax : ncclSum, comm, nccl_.side());
    if (result != ncclSuccess)
      throw DistributedError(::flaxpp::detail::str(
          "rank ", nccl_.rank(), ": ncclAllReduce failed: ", ncclGetErrorString(result)));
    try {
      reduced_ = nccl_.recorded(nccl_.side(), "all_reduce");
    } catch (...) {
      // Nothing marks the end of the launched collective: x and out are freed (on the compute
      // stream) only once NCCL's stream is idle. A recording cannot wait; it fails anyway.
      if (!nccl_.gpu().capturing()) (void)cudaStreamSynchronize(nccl_.side());
      (void)cudaGetLastError();
      throw;
    }
  }
  ~NcclAllReduce() override {
    if (reduced_ == nullptr) return;
    // Never joined (wait() threw for this bucket or an earlier one): x and out are freed on
    // the compute stream when the members go, so that stream first waits for NCCL's work on
    // them, or the pool would hand them out while NCCL still reads and writes them. After a
    // time-out the communicator is aborted, which ends its kernels.
    if (!joined_) {
      if (const cudaError_t err = cudaStreamWaitEvent(nccl_.stream(), reduced_, 0);
          err != cudaSuccess) {
        (void)cudaGetLastError();
        // Without the join, the host waits for NCCL's stream (never inside a recording).
        if (!nccl_.gpu().capturing()) (void)cudaEventSynchronize(reduced_);
        (void)cudaGetLastError();
      }
    }
    (void)cudaEventDestroy(reduced_);
  }
  bool done() override {
    if (nccl_.gpu().capturing()) return true;
    return nccl_.completed(reduced_, "all_reduce");
  }
  Array wait() override {
    if (!nccl_.gpu().capturing()) nccl_.wait_event(reduced_, "all_reduce", x_);
    if (const cudaError_t err = cudaStreamWaitEvent(nccl_.stream(), reduced_, 0);
        err != cudaSuccess)
      throw DistributedError(::flaxpp::detail::str(
          "rank ", nccl_.rank(), ": all_reduce: cannot join NCCL's stream to the compute stream: ",
          cuda_failure(err)));
    joined_ = true;
    return out_;
  }

 private:
  Nccl& nccl_;
  Array x_, out_;
  cudaEvent_t reduced_ = nullptr;
  bool joined_ = false;  // the compute stream waits for reduced_
};

std::unique_ptr<PendingCollective> Nccl::start_all_reduce_impl(const Array& x, ReduceOp op) {
  return std::make_unique<NcclAllReduce>(*this, x, device_array(x.shape(), x.dtype()), op, comm_);
}

// NCCL reduces in place where the send and receive buffers are one.
std::unique_ptr<PendingCollective> Nccl::start_all_reduce_in_place_impl(const Array& x,
                                                                        ReduceOp op) {
  return std::make_unique<NcclAllReduce>(*this, x, x, op, comm_);
}

}  // namespace

std::unique_ptr<Communicator> nccl_communicator(int rank, int size, int local_rank,
                                                Communicator* bootstrap) {
  return std::make_unique<Nccl>(rank, size, local_rank, bootstrap);
}

}  // namespace flaxpp::dist::detail
