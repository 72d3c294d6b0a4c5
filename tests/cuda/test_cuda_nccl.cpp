// The NCCL backend on one GPU: a job of one process, its communicator bootstrapped in-process
// (no MPI, which a GPU machine without a package registry may lack). Every collective of every
// dtype returns its operand (all_gather under a leading axis of 1), on the GPU, and a started
// all_reduce runs on NCCL's own stream and joins the compute stream. Built where NCCL is.
#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "flaxpp/core/array.hpp"
#include "flaxpp/dist/communicator.hpp"
#include "flaxpp/ops/numpy.hpp"
#include "harness/cuda_parity.hpp"
#include "src/dist/transport.hpp"

using namespace flaxpp;
using testing::kNoGpu;

namespace {

// The bytes of `a` on the host, as float64 values (every dtype these tests use).
std::vector<double> host_values(const Array& a) {
  return astype(a.to(Device::cpu()), DType::f64).to_vector<double>();
}

}  // namespace

TEST_CASE("NCCL, one process: every collective of every dtype gives its operand on the GPU" *
          doctest::skip(kNoGpu)) {
  const std::unique_ptr<dist::Communicator> nccl =
      dist::detail::nccl_communicator(0, 1, 0, nullptr);
  CHECK(nccl->rank() == 0);
  CHECK(nccl->size() == 1);
  for (const DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32}) {
    CAPTURE(dtype_name(dtype));
    const Array x = astype(Array::from_vector(std::vector<float>{1, -2, 3, 4}, Shape{2, 2},
                                              Device::cuda(0)),
                           dtype);
    const std::vector<double> want = host_values(x);
    for (const dist::ReduceOp op : {dist::ReduceOp::sum, dist::ReduceOp::max}) {
      const Array r = nccl->all_reduce(x, op);
      CHECK(r.device() == Device::cuda(0));
      CHECK(r.aval() == x.aval());
      CHECK(host_values(r) == want);
    }
    CHECK(host_values(nccl->broadcast(x, 0)) == want);
    const Array gathered = nccl->all_gather(x);
    CHECK(gathered.shape() == Shape{1, 2, 2});
    CHECK(host_values(gathered) == want);
  }
  nccl->barrier();
  CHECK(nccl->stats().calls > 0);
}

TEST_CASE("NCCL, one process: a started all_reduce completes on its stream and joins the "
          "compute stream" * doctest::skip(kNoGpu)) {
  const std::unique_ptr<dist::Communicator> nccl =
      dist::detail::nccl_communicator(0, 1, 0, nullptr);
  const Array x = Array::from_vector(std::vector<float>{0.5f, 1.5f, -3.0f}, Shape{3},
                                     Device::cuda(0));
  std::unique_ptr<dist::PendingCollective> sum = nccl->start_all_reduce(x, dist::ReduceOp::sum);
  std::unique_ptr<dist::PendingCollective> mean =
      nccl->start_all_reduce(x * 2.0, dist::ReduceOp::mean);
  // Work on the compute stream meanwhile; the results are read after the joins.
  const Array other = x * x + 1.0;
  const Array s = sum->wait(), m = mean->wait();
  CHECK(sum->done());
  CHECK(s.to(Device::cpu()).to_vector<float>() == std::vector<float>{0.5f, 1.5f, -3.0f});
  CHECK(m.to(Device::cpu()).to_vector<float>() == std::vector<float>{1.0f, 3.0f, -6.0f});
  CHECK((s + other).to(Device::cpu()).to_vector<float>() ==
        std::vector<float>{1.75f, 4.75f, 7.0f});
}

TEST_CASE("NCCL, one process: a started all_reduce dropped without its wait (an earlier bucket's "
          "wait threw) lets its buffers go after NCCL's work, and the GPU goes on" *
          doctest::skip(kNoGpu)) {
  const std::unique_ptr<dist::Communicator> nccl =
      dist::detail::nccl_communicator(0, 1, 0, nullptr);
  const Array x = Array::from_vector(std::vector<float>(1 << 20, 0.5f), Shape{1 << 20},
                                     Device::cuda(0));
  for (int i = 0; i < 4; ++i)
    (void)nccl->start_all_reduce(x * 2.0, dist::ReduceOp::sum);  // its operand and result go
  // The pool hands the freed memory out again: the compute stream waited for NCCL first.
  const Array y = x * 3.0;
  CHECK(y.to(Device::cpu()).to_vector<float>() == std::vector<float>(1 << 20, 1.5f));
  nccl->barrier();
}
