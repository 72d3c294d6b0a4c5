// curves.png of `flaxpp train`: loss and accuracy per epoch (train and test), drawn with cairo
// when flaxpp was built with it (libcairo2-dev at configure time).
#pragma once

#include <string>
#include <vector>

#include "cli/train_metrics.hpp"

namespace flaxpp::cli {

// Whether this build draws plots; when not, why_no_plots() says what to install.
bool plots_available();
std::string why_no_plots();

// Replaces `file` atomically with a PNG of two panels (loss, accuracy) over the epochs of
// `rows`. Non-finite values are left out of the lines and of the axis ranges. Does nothing
// when !plots_available().
void write_curves(const std::string& file, const std::vector<EpochMetrics>& rows);

}  // namespace flaxpp::cli
