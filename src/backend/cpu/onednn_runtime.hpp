// Private to the CPU backend's oneDNN files (cpu_onednn.cpp, cpu_onednn_conv.cpp) and the
// parallel loop of its own kernels, which runs on oneDNN's threads (cpu_parallel.cpp): the CPU
// engine, the OpenMP thread count set before each primitive runs, a parallel loop on those
// threads, and the table of primitives kept by what they were made for.
//
// flaxpp keeps the primitives it made. oneDNN caches primitives too (1024 by default), but
// finding one there still costs a full primitive descriptor: the walk over its implementations
// that picks a kernel for the shape, which takes longer than a small product. flaxpp's table
// skips that walk.
//
// Threads: Debian's oneDNN runs on OpenMP (libgomp). A primitive asks OpenMP for the threads of
// cpu::num_threads() (0: OpenMP's default, one per core or OMP_NUM_THREADS), on the calling
// thread, before it runs. flaxpp's own parallel kernels run on the same OpenMP team
// (parallel_for), found in the process as oneDNN's runtime, so that no second set of threads
// spins beside it.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>

namespace flaxpp::cpu::onednn {

const dnnl::engine& engine();

// This thread's stream on engine().
dnnl::stream& stream();

// Asks OpenMP for `threads` (0: its default) on this thread; returns what it will use (0 where
// oneDNN does not run on OpenMP). A primitive's split over threads is fixed when it is made,
// so the result belongs in its key.
int use_threads(int threads);

// body(begin, end) over consecutive shares of [0, units), one per thread of an OpenMP parallel
// region of up to `threads` (0: OpenMP's default) on the runtime oneDNN runs on, so that the
// CPU's own kernels and oneDNN's share one set of threads; no share has fewer than `min_share`
// units, and all of [0, units) runs on the calling thread where that leaves one share or the
// runtime is not OpenMP. A unit always runs whole on one thread. body must not throw. Returns
// the number of shares.
std::int64_t parallel_for(std::int64_t units, int threads, std::int64_t min_share,
                          const std::function<void(std::int64_t begin, std::int64_t end)>& body);

// Whether oneDNN's implementation of a primitive (its impl_info_str) is its reference one,
// which is correct but slow (plain loops).
inline bool is_reference(const std::string& impl) {
  return impl.find("ref") != std::string::npos;
}

// The primitives made so far, by key. A program runs a few shapes again and again; one that
// keeps making new shapes (a growing sequence) starts over past kCapacity.
template <class Key, class Value, class Hash>
class Table {
 public:
  template <class Make>
  Value get(const Key& key, Make&& make) {
    std::lock_guard lock(mutex_);
    if (const auto it = table_.find(key); it != table_.end()) return it->second;
    if (table_.size() >= kCapacity) table_.clear();
    return table_.emplace(key, make()).first->second;
  }

 private:
  static constexpr std::size_t kCapacity = 1024;
  std::mutex mutex_;
  std::unordered_map<Key, Value, Hash> table_;
};

}  // namespace flaxpp::cpu::onednn
