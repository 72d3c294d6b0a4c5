// flaxpp/data/npy.hpp — NumPy .npy files: an Array read from one (or from .npy bytes in
// memory), an Array written as one, and a Dataset from a features file and a labels file.
#pragma once

#include <string>
#include <string_view>

#include "flaxpp/core/array.hpp"
#include "flaxpp/data/dataset.hpp"

namespace flaxpp::data {

// Reads a NumPy .npy file (format versions 1.0, 2.0 and 3.0) in C order, any shape including
// 0-d. dtypes '<f4', '<f8', '<i4', '<u4' and '|b1' load as float32, float64, int32, uint32 and
// bool; '<i8' loads as int32 when every value fits (ParseError naming the first one that does
// not). Anything else — Fortran order, other dtypes or byte orders, a bad magic string, a
// malformed header, missing or extra data bytes — throws ParseError saying what to do.
Array load_npy(const std::string& path);
// The same from .npy bytes in memory; `source` (e.g. a file name) starts every error message.
Array parse_npy(std::string_view bytes, const std::string& source);

// Writes `a` as a .npy file NumPy reads back with np.load (format 1.0, or 2.0 when the header
// needs it). Supports the dtypes with a host storage type (float32, float64, int32, uint32,
// bool); throws ValueError otherwise, or when the file cannot be written.
void save_npy(const std::string& path, const Array& a);

// A Dataset from two .npy files: features of rank >= 1 as float32 (float64 is rounded to
// float32) and labels [N] as int32 ('<i4' or '<i8', every label >= 0).
Dataset from_npy(const std::string& x_path, const std::string& y_path);

}  // namespace flaxpp::data
