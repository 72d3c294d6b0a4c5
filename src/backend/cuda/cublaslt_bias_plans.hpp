// The CUDA backend's cache of cuBLASLt bias-epilogue plans, one per product key
// (cublaslt_bias_key.hpp): the matmul descriptor, the three layouts and the algorithm the
// heuristic chose, or its answer that there is none. An eager dot_general_bias then neither
// rebuilds the descriptors nor re-runs the heuristic on every call (desk review 2 #13). Owned by
// the CudaBackend, whose device and cuBLAS handle the algorithms were chosen for; the
// descriptors are destroyed with it. Building a plan is cuda_dot_general.cpp's.
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "backend/cuda/cublaslt_bias_key.hpp"

namespace flaxpp::cuda {

// Owners of cuBLASLt's descriptors.
struct LtDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* p) const { (void)cublasLtMatmulDescDestroy(p); }
  void operator()(cublasLtMatrixLayoutOpaque_t* p) const { (void)cublasLtMatrixLayoutDestroy(p); }
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const {
    (void)cublasLtMatmulPreferenceDestroy(p);
  }
};
template <class T>
using LtOwned = std::unique_ptr<T, LtDeleter>;

struct LtBiasPlan {
  // False where the heuristic had no algorithm: such products take the GEMM and a bias kernel.
  bool usable = false;
  LtOwned<cublasLtMatmulDescOpaque_t> desc;  // its bias pointer is the last user's
  LtOwned<cublasLtMatrixLayoutOpaque_t> first, second, out;
  cublasLtMatmulAlgo_t algo{};
};

class LtBiasPlans {
 public:
  // Calls `use(plan)` with the plan for `key`, made by `make()` on first use. Under the cache's
  // lock: a cached descriptor carries the bias pointer of the call using it, from setting it to
  // queuing the matmul, so two threads' products must not interleave there (cuBLASLt calls are
  // host-side only; the lock is never held across a wait for the GPU).
  template <class Make, class Use>
  auto with_plan(const LtBiasKey& key, Make&& make, Use&& use) {
    std::lock_guard lock(mutex_);
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      // A long run of new shapes (every batch size of an eager evaluation) must not grow the
      // cache for ever; a step's shapes are a handful, made again after a clear.
      if (plans_.size() >= kMaxPlans) plans_.clear();
      it = plans_.emplace(key, std::forward<Make>(make)()).first;
    }
    return std::forward<Use>(use)(it->second);
  }
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return plans_.size();
  }

  static constexpr std::size_t kMaxPlans = 256;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<LtBiasKey, LtBiasPlan, LtBiasKeyHash> plans_;
};

}  // namespace flaxpp::cuda
