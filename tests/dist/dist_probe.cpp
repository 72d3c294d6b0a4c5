// A program for `mpirun -np N` (ctest's flaxpp_dist_* jobs): each rank checks the collectives
// against values computed from the ranks, or plays a failure.
//   dist_probe collectives   every dtype through all_reduce (sum, mean, max), broadcast,
//                            all_gather and barrier; prints "rank R: N checks passed"
//   dist_probe stall         rank 1 stops taking part: rank 0's all_reduce must time out with
//                            flaxpp's message and end the job (abort_job)
//   dist_probe die           rank 1 is killed: mpirun must end the job, naming rank 1
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "flaxpp/dist/communicator.hpp"
#include "flaxpp/dist/process_group.hpp"
#include "flaxpp/ops/numpy.hpp"

using namespace flaxpp;

namespace {

int failures = 0, checks = 0;
void expect(bool ok, const std::string& what) {
  ++checks;
  if (!ok) {
    ++failures;
    std::cerr << "rank " << dist::rank() << ": FAILED " << what << "\n";
  }
}

int collectives() {
  dist::Communicator& c = dist::world();
  const int r = dist::rank(), n = dist::world_size();
  // x[i] = r + i on rank r: sum = n (n - 1) / 2 + n i, max = n - 1 + i.
  auto sum_of = [&](int i) { return static_cast<float>(n * (n - 1) / 2 + n * i); };
  std::vector<float> f(5), gathered;
  std::vector<double> d(5);
  std::vector<std::int32_t> i32(5);
  std::vector<std::uint32_t> u32(5);
  for (int i = 0; i < 5; ++i) {
    f[i] = static_cast<float>(r + i);
    d[i] = r + i;
    i32[i] = r + i;
    u32[i] = static_cast<std::uint32_t>(r + i);
  }
  const Array xf = Array::from_vector(f, Shape{5}, Device::cpu());
  for (int i = 0; i < 5; ++i) {
    expect(c.all_reduce(xf, dist::ReduceOp::sum).to_vector<float>()[i] == sum_of(i), "f32 sum");
    expect(c.all_reduce(xf, dist::ReduceOp::max).to_vector<float>()[i] == static_cast<float>(n - 1 + i), "f32 max");
    expect(c.all_reduce(xf, dist::ReduceOp::mean).to_vector<float>()[i] ==
               sum_of(i) / static_cast<float>(n),
           "f32 mean");
  }
  expect(c.all_reduce(Array::from_vector(d, Shape{5}, Device::cpu()), dist::ReduceOp::sum)
                 .to_vector<double>()[4] == static_cast<double>(sum_of(4)),
         "f64 sum");
  expect(c.all_reduce(Array::from_vector(i32, Shape{5}, Device::cpu()), dist::ReduceOp::max)
                 .to_vector<std::int32_t>()[2] == n + 1,
         "i32 max");
  expect(c.all_reduce(Array::from_vector(u32, Shape{5}, Device::cpu()), dist::ReduceOp::sum)
                 .to_vector<std::uint32_t>()[1] == static_cast<std::uint32_t>(sum_of(1)),
         "u32 sum");
  const Array flag = Array::from_vector(std::vector<bool>{r == 1, false}, Shape{2}, Device::cpu());
  expect(c.all_reduce(flag, dist::ReduceOp::max).to_vector<bool>() == std::vector<bool>{true, false},
         "bool max (any)");
  // 16-bit floats: small integers are exact in bf16 and f16.
  for (const DType half : {DType::bf16, DType::f16}) {
    const Array h = Array::full(Shape{3}, r + 1.0, half, Device::cpu());
    const Array back = c.all_reduce(h, dist::ReduceOp::sum);
    expect(back.dtype() == half, "16-bit sum keeps its dtype");
    const Array bits = Array::full(Shape{3}, n * (n + 1) / 2.0, half, Device::cpu());
    std::vector<std::uint8_t> a(6), b(6);
    back.buffer().backend().copy_to_host(back.buffer(), a.data(), 6);
    bits.buffer().backend().copy_to_host(bits.buffer(), b.data(), 6);
    expect(a == b, "16-bit sum");
  }
  const Array root_value = Array::full(Shape{2, 2}, r == 0 ? 42.0 : -1.0, DType::f32, Device::cpu());
  expect(c.broadcast(root_value, 0).to_vector<float>() == std::vector<float>(4, 42.0f),
         "broadcast from 0");
  const Array g = c.all_gather(Array::full(Shape{2}, r, DType::i32, Device::cpu()));
  expect(g.shape() == Shape{n, 2}, "all_gather shape");
  expect(g.to_vector<std::int32_t>()[2 * (n - 1)] == n - 1, "all_gather order");
  c.barrier();
  std::cout << "rank " << r << ": " << checks - failures << " of " << checks << " checks passed\n";
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string mode = argc > 1 ? argv[1] : "collectives";
  dist::init();
  if (mode == "collectives") return collectives();
  if (mode == "stall" || mode == "die") {
    if (dist::rank() == 1) {
      if (mode == "die") std::raise(SIGKILL);
      std::this_thread::sleep_for(std::chrono::seconds(120));  // stops taking part
      return 0;
    }
    try {
      (void)dist::world().all_reduce(Array::full(Shape{4}, 1.0, DType::f32, Device::cpu()),
                                     dist::ReduceOp::sum);
    } catch (const DistributedError& e) {
      std::cerr << "flaxpp: " << e.what() << "\n";
      dist::abort_job(3);
    }
    std::cerr << "rank 0: the all_reduce completed although rank 1 did not take part\n";
    return 1;
  }
  std::cerr << "dist_probe: unknown mode " << mode << "\n";
  return 2;
} catch (const Error& e) {
  std::cerr << "rank " << dist::rank() << ": " << e.what() << "\n";
  return 1;
}
