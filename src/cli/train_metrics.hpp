// The metrics file of `flaxpp train` (output_dir/metrics.csv): one row per finished epoch,
// written (atomically, the whole file) before that epoch's checkpoint, so that no row is ever
// lost; a resumed run drops the rows past its checkpoint and writes them again.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flaxpp/train/fit.hpp"

namespace flaxpp::cli {

using train::EpochMetrics;

// The rows of `file` whose step is at most `up_to_step`, in file order; none when the file does
// not exist. Lines that are not rows (a torn or edited line) are skipped and counted in
// *skipped when given.
std::vector<EpochMetrics> read_metrics(const std::string& file, std::int64_t up_to_step,
                                       std::int64_t* skipped = nullptr);

// Replaces `file` atomically with a header and `rows`.
void write_metrics(const std::string& file, const std::vector<EpochMetrics>& rows);

}  // namespace flaxpp::cli
