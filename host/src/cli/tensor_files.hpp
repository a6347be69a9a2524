// Float32 tensors in files, for `quantize --input/--output`: NumPy's .npy
// (dtype '<f4', any shape, C or Fortran order) and raw little-endian float32
// (.f32, no header). Errors name the file and what is wrong, in one line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace altgrad::host::cli {

enum class tensor_file_kind { text, npy, raw_f32 };

// By the file's extension: ".npy", ".f32"; anything else is text.
tensor_file_kind tensor_file_kind_of(const std::filesystem::path& file);

struct float_tensor {
    std::vector<float> values;
    std::vector<uint64_t> shape;  // .npy's shape; {n} for other sources
    bool fortran_order = false;   // .npy's element order, kept on output
};

float_tensor read_npy(const std::filesystem::path& file);
void write_npy(const std::filesystem::path& file, const float_tensor& t);

std::vector<float> read_raw_f32(const std::filesystem::path& file);
void write_raw_f32(const std::filesystem::path& file, const std::vector<float>& values);

}  // namespace altgrad::host::cli
