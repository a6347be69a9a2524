#include "cli/tensor_files.hpp"

#include <cstring>
#include <fstream>
#include <iterator>

#include "util/error.hpp"
#include "util/file_text.hpp"

// Both formats store float32 little-endian; the host's own floats are written as they are.
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tensor_files.cpp assumes a little-endian host"
#endif

namespace altgrad::host::cli {
namespace fs = std::filesystem;

namespace {

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicSize = 6;

std::string read_bytes(const fs::path& file) {
    return read_file_text(file, kTensorFileLimit, "a tensor file");
}

void write_bytes(const fs::path& file, const std::string& bytes) {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) throw error(file.string() + ": cannot write");
}

std::vector<float> floats_of(const fs::path& file, const std::string& bytes, size_t offset,
                             const char* what) {
    if ((bytes.size() - offset) % 4 != 0)
        throw error(file.string() + ": " + what + " of " + std::to_string(bytes.size() - offset) +
                    " bytes is not a whole number of float32 values (4 bytes each)");
    std::vector<float> values((bytes.size() - offset) / 4);
    if (!values.empty()) std::memcpy(values.data(), bytes.data() + offset, values.size() * 4);
    return values;
}

// The value text after "'key':" in a .npy header dict, up to the next ',' at depth 0 (or '}').
std::string npy_field(const fs::path& file, const std::string& header, const std::string& key) {
    const std::string quoted = "'" + key + "'";
    size_t at = header.find(quoted);
    if (at == std::string::npos || (at = header.find(':', at + quoted.size())) == std::string::npos)
        throw error(file.string() + ": .npy header has no " + quoted + " (header: " + header + ")");
    size_t end = at + 1;
    for (int depth = 0; end < header.size(); ++end) {
        const char c = header[end];
        if (c == '(') ++depth;
        else if (c == ')') --depth;
        else if ((c == ',' || c == '}') && depth == 0) break;
    }
    std::string v = header.substr(at + 1, end - at - 1);
    v.erase(0, v.find_first_not_of(' '));
    v.erase(v.find_last_not_of(' ') + 1);
    return v;
}

std::vector<uint64_t> npy_shape(const fs::path& file, const std::string& text) {
    if (text.size() < 2 || text.front() != '(' || text.back() != ')')
        throw error(file.string() + ": .npy 'shape' " + text + " is not a tuple");
    std::vector<uint64_t> shape;
    std::string digits;
    for (size_t i = 1; i < text.size(); ++i) {
        const char c = text[i];
        if (c >= '0' && c <= '9') {
            if (digits.size() >= 15) throw error(file.string() + ": .npy 'shape' " + text + " is too large");
            digits += c;
        } else if (c == ',' || c == ')') {
            if (!digits.empty()) shape.push_back(std::stoull(digits));
            digits.clear();
        } else if (c != ' ' && c != 'L') {
            throw error(file.string() + ": .npy 'shape' " + text + " is not a tuple of integers");
        }
    }
    return shape;
}

}  // namespace

tensor_file_kind tensor_file_kind_of(const fs::path& file) {
    const std::string ext = file.extension().string();
    if (ext == ".npy") return tensor_file_kind::npy;
    if (ext == ".f32") return tensor_file_kind::raw_f32;
    return tensor_file_kind::text;
}

float_tensor read_npy(const fs::path& file) {
    const std::string bytes = read_bytes(file);
    if (bytes.size() < 10 || bytes.compare(0, kNpyMagicSize, kNpyMagic) != 0)
        throw error(file.string() + ": not a NumPy .npy file (no \\x93NUMPY magic)");
    const auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])); };
    const uint32_t major = byte(6);
    if (major < 1 || major > 3)
        throw error(file.string() + ": .npy version " + std::to_string(major) + " is not 1, 2 or 3");
    const size_t len_size = major == 1 ? 2 : 4;
    if (bytes.size() < 8 + len_size) throw error(file.string() + ": .npy header is cut short");
    size_t header_len = 0;
    for (size_t i = 0; i < len_size; ++i) header_len |= static_cast<size_t>(byte(8 + i)) << (8 * i);
    const size_t data_at = 8 + len_size + header_len;
    if (data_at > bytes.size()) throw error(file.string() + ": .npy header is cut short");
    const std::string header = bytes.substr(8 + len_size, header_len);

    const std::string descr = npy_field(file, header, "descr");
    if (descr != "'<f4'")
        throw error(file.string() + ": .npy dtype " + descr +
                    " is not float32 ('<f4'): convert it first, e.g. numpy.save(f, a.astype('<f4'))");
    const std::string order = npy_field(file, header, "fortran_order");
    if (order != "False" && order != "True")
        throw error(file.string() + ": .npy 'fortran_order' " + order + " is not True or False");
    float_tensor t;
    t.fortran_order = order == "True";
    t.shape = npy_shape(file, npy_field(file, header, "shape"));
    uint64_t count = 1;
    for (const uint64_t d : t.shape) {
        if (d != 0 && count > UINT64_MAX / 4 / d) throw error(file.string() + ": .npy shape is too large");
        count *= d;
    }
    t.values = floats_of(file, bytes, data_at, ".npy data");
    if (t.values.size() != count)
        throw error(file.string() + ": .npy shape holds " + std::to_string(count) + " values, the file " +
                    std::to_string(t.values.size()));
    return t;
}

void write_npy(const fs::path& file, const float_tensor& t) {
    std::string shape = "(";
    for (const uint64_t d : t.shape) shape += std::to_string(d) + (t.shape.size() == 1 ? "," : ", ");
    if (t.shape.size() > 1) shape.resize(shape.size() - 2);
    shape += ")";
    std::string header =
        "{'descr': '<f4', 'fortran_order': " + std::string(t.fortran_order ? "True" : "False") +
        ", 'shape': " + shape + ", }";
    // Version 1.0: magic, 2 version bytes, 2 length bytes, then the header padded
    // with spaces and ended by '\n' so the data starts at a multiple of 64 (as
    // numpy.save pads: 1..64 spaces).
    header.append(64 - (10 + header.size() + 1) % 64, ' ');
    header += '\n';
    if (header.size() > 0xffff) throw error(file.string() + ": too many dimensions for a .npy 1.0 header");
    std::string bytes(kNpyMagic, kNpyMagicSize);
    bytes += '\x01';
    bytes += '\x00';
    bytes += static_cast<char>(header.size() & 0xff);
    bytes += static_cast<char>(header.size() >> 8);
    bytes += header;
    bytes.append(reinterpret_cast<const char*>(t.values.data()), t.values.size() * 4);
    write_bytes(file, bytes);
}

std::vector<float> read_raw_f32(const fs::path& file) {
    return floats_of(file, read_bytes(file), 0, "raw float32 data");
}

void write_raw_f32(const fs::path& file, const std::vector<float>& values) {
    write_bytes(file, std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
}

}  // namespace altgrad::host::cli
