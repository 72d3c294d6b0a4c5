// metrics.csv of `flaxpp train`.
#include "cli/train_metrics.hpp"

#include <charconv>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "flaxpp/io/checkpoint.hpp"

namespace flaxpp::cli {
namespace {
constexpr const char* kHeader =
    "epoch,step,train_loss,train_accuracy,test_loss,test_accuracy,seconds";
}  // namespace

std::vector<EpochMetrics> read_metrics(const std::string& file, std::int64_t up_to_step,
                                       std::int64_t* skipped) {
  std::vector<EpochMetrics> rows;
  std::ifstream in(file);
  std::string line;
  std::int64_t bad = 0;
  while (std::getline(in, line)) {
    if (line == kHeader) continue;
    EpochMetrics m;
    // from_chars also reads back the "nan" and "inf" of a run that went on with
    // on_nonfinite "continue" (operator>> does not).
    const char* p = line.data();
    const char* const end = p + line.size();
    bool ok = true;
    auto field = [&](auto& value, bool last) {
      const auto [next, ec] = std::from_chars(p, end, value);
      ok = ok && ec == std::errc() && (last ? next == end : next != end && *next == ',');
      p = ok && !last ? next + 1 : next;
    };
    field(m.epoch, false);
    field(m.step, false);
    field(m.train_loss, false);
    field(m.train_accuracy, false);
    field(m.test_loss, false);
    field(m.test_accuracy, false);
    field(m.seconds, true);
    if (!ok) {
      ++bad;
      continue;
    }
    if (m.step <= up_to_step) rows.push_back(m);
  }
  if (skipped) *skipped = bad;
  return rows;
}

void write_metrics(const std::string& file, const std::vector<EpochMetrics>& rows) {
  std::ostringstream out;
  out << kHeader << "\n" << std::setprecision(9);
  // NaN as "nan" whatever its sign bit (the stream writes "-nan" for some).
  const auto value = [](float v) {
    std::ostringstream s;
    s << std::setprecision(9) << v;
    return std::isnan(v) ? std::string("nan") : s.str();
  };
  for (const auto& r : rows)
    out << r.epoch << "," << r.step << "," << value(r.train_loss) << "," << value(r.train_accuracy)
        << "," << value(r.test_loss) << "," << value(r.test_accuracy) << "," << r.seconds << "\n";
  io::write_file_atomically(file, out.str());
}

}  // namespace flaxpp::cli
