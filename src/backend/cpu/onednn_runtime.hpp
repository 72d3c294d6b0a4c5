// Private to the CPU backend's oneDNN files (cpu_onednn.cpp, cpu_onednn_conv.cpp): the CPU
// engine, the OpenMP thread count set before each primitive runs, and the table of primitives
// kept by what they were made for.
//
// flaxpp keeps the primitives it made. oneDNN caches primitives too (1024 by default), but
// finding one there still costs a full primitive descriptor: the walk over its implementations
// that picks a kernel for the shape, which takes longer than a small product. flaxpp's table
// skips that walk.
//
// Threads: Debian's oneDNN runs on OpenMP (libgomp). A primitive asks OpenMP for the threads of
// cpu::num_threads() (0: OpenMP's default, one per core or OMP_NUM_THREADS), on the calling
// thread, before it runs.
#pragma once

#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

namespace flaxpp::cpu::onednn {

const dnnl::engine& engine();

// This thread's stream on engine().
dnnl::stream& stream();

// Asks OpenMP for `threads` (0: its default) on this thread; returns what it will use (0 where
// oneDNN does not run on OpenMP). A primitive's split over threads is fixed when it is made,
// so the result belongs in its key.
int use_threads(int threads);

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
