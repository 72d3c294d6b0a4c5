// flaxpp/data/csv.hpp — a Dataset read from a CSV file of numbers (or CSV text in memory), and
// the options that say which column holds the label, whether there is a header, and the scale.
#pragma once

#include <string>
#include <string_view>

#include "flaxpp/data/dataset.hpp"

namespace flaxpp::data {

struct CsvOptions {
  // The column holding the label. With a header, its name; without one, its 0-based index
  // written in decimal ("0"). Empty: the last column.
  std::string label_column = {};
  // Whether the first non-blank line names the columns (and holds no data).
  bool header = true;
  // Every feature is multiplied by this (in double, then rounded to float32); the digits data
  // set uses 1.0f / 16 to map its pixel counts 0..16 onto [0, 1].
  float scale = 1.0f;
  // How error messages name these options ("Set CsvOptions::label_column to ..."); a program
  // that takes them from its own config names its keys instead (flaxpp train: "$.data.").
  std::string option_prefix = "CsvOptions::";
};

// Reads a CSV file of numbers: one example per line, every line with the same number of
// comma-separated fields, all but the label column being features (in file order). Blank lines
// are skipped, "\r\n" line ends and a UTF-8 byte-order mark are accepted, fields may be padded
// with spaces. Labels must be integers >= 0 that fit int32. Malformed input throws ParseError
// naming file:line and what was expected; a label_column the file lacks throws ValueError. A
// file whose numbers would need more host memory than is available is refused (ParseError)
// before they are stored.
Dataset load_csv(const std::string& path, CsvOptions opts = {});
// The same from CSV text in memory; `source` (e.g. a file name) starts every error message.
Dataset parse_csv(std::string_view text, const std::string& source, CsvOptions opts = {});

}  // namespace flaxpp::data
