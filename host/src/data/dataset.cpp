#include "data/dataset.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <system_error>
#include <unordered_map>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/pickle.hpp"
#include "data/text.hpp"
#include "util/error.hpp"
#include "util/file_text.hpp"
#include "util/splitmix.hpp"

namespace altgrad::host::data {
namespace fs = std::filesystem;

namespace {

constexpr int64_t max_vocab = 65536;               // uint16 token ids
constexpr uintmax_t max_meta_bytes = 64ull << 20;  // meta.pkl is a few kB in practice

std::string prefix(const std::string& where) { return where.empty() ? std::string() : where + ": "; }

[[noreturn]] void fail(const std::string& where, const std::string& what) {
    throw error(prefix(where) + what);
}

std::string with_commas(uint64_t n) {
    std::string digits = std::to_string(n), out;
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

std::string number(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", x);
    return buf;
}

std::string percent(double fraction) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g%%", fraction * 100.0);
    return buf;
}

double entropy_nats(const uint16_t* ids, size_t n, int64_t vocab) {
    if (n == 0) return 0.0;
    std::vector<uint64_t> counts(static_cast<size_t>(vocab), 0);
    for (size_t i = 0; i < n; ++i) ++counts[ids[i]];
    double h = 0.0;
    for (uint64_t c : counts) {
        if (c == 0) continue;
        const double p = static_cast<double>(c) / static_cast<double>(n);
        h -= p * std::log(p);
    }
    return h;
}

// A read-only private mapping of a whole file; empty files are not mapped.
class mapped_file {
public:
    mapped_file() = default;
    mapped_file(const mapped_file&) = delete;
    mapped_file& operator=(const mapped_file&) = delete;
    mapped_file(mapped_file&& o) noexcept
        : addr_(std::exchange(o.addr_, nullptr)), len_(std::exchange(o.len_, 0)) {}
    mapped_file& operator=(mapped_file&& o) noexcept {
        if (this != &o) {
            reset();
            addr_ = std::exchange(o.addr_, nullptr);
            len_ = std::exchange(o.len_, 0);
        }
        return *this;
    }
    ~mapped_file() { reset(); }

    // Maps `file`; errors are prefixed by `where`.
    static mapped_file open(const fs::path& file, const std::string& where) {
        const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) fail(where, file.string() + ": cannot open: " + std::strerror(errno));
        struct stat st {};
        if (::fstat(fd, &st) != 0) {
            const int e = errno;
            ::close(fd);
            fail(where, file.string() + ": cannot stat: " + std::strerror(e));
        }
        mapped_file m;
        m.len_ = static_cast<size_t>(st.st_size);
        if (m.len_ > 0) {
            void* a = ::mmap(nullptr, m.len_, PROT_READ, MAP_PRIVATE, fd, 0);
            if (a == MAP_FAILED) {
                const int e = errno;
                ::close(fd);
                fail(where, file.string() + ": cannot memory-map: " + std::strerror(e));
            }
            m.addr_ = a;
        }
        ::close(fd);
        return m;
    }

    const void* data() const { return addr_; }
    size_t size() const { return len_; }

private:
    void reset() {
        if (addr_ != nullptr) ::munmap(addr_, len_);
        addr_ = nullptr;
        len_ = 0;
    }
    void* addr_ = nullptr;
    size_t len_ = 0;
};

}  // namespace

struct dataset::impl {
    std::vector<uint16_t> owned;  // text: the whole token stream; nanogpt on a big-endian host: both splits
    mapped_file maps[2];          // nanogpt: train.bin, val.bin
    const uint16_t* ptr[2] = {nullptr, nullptr};
    size_t n[2] = {0, 0};
    int64_t vocab = 0;
    std::vector<std::string> itos;
    std::string description;
    double entropy = 0.0;
};

const char* split_name(split s) { return s == split::train ? "training" : "validation"; }

dataset::dataset(std::unique_ptr<impl> p) : p_(std::move(p)) {}
dataset::dataset(dataset&&) noexcept = default;
dataset& dataset::operator=(dataset&&) noexcept = default;
dataset::~dataset() = default;

const uint16_t* dataset::tokens(split s) const { return p_->ptr[s == split::val]; }
size_t dataset::size(split s) const { return p_->n[s == split::val]; }
int64_t dataset::vocab_size() const { return p_->vocab; }
const std::vector<std::string>& dataset::itos() const { return p_->itos; }
const std::string& dataset::description() const { return p_->description; }
double dataset::unigram_entropy_nats() const { return p_->entropy; }

std::string dataset::decode(const uint16_t* ids, size_t n) const {
    std::string out;
    for (size_t i = 0; i < n; ++i) {
        const uint16_t id = ids[i];
        if (p_->itos.empty()) out += "<" + std::to_string(id) + ">";
        else if (id < p_->itos.size()) out += p_->itos[id];
        else out += "\xEF\xBF\xBD";  // U+FFFD
    }
    return out;
}

std::vector<uint16_t> dataset::encode(const std::string& text) const {
    if (p_->itos.empty())
        throw error("data: cannot encode text: the vocabulary's characters are unknown (no meta.pkl)");
    std::unordered_map<std::string, uint16_t> stoi;
    for (size_t i = 0; i < p_->itos.size(); ++i) stoi.emplace(p_->itos[i], static_cast<uint16_t>(i));
    std::vector<uint32_t> cps;
    decode_utf8_latin1(text, cps);
    std::vector<uint16_t> ids;
    ids.reserve(cps.size());
    for (size_t i = 0; i < cps.size(); ++i) {
        const auto it = stoi.find(encode_utf8(cps[i]));
        if (it == stoi.end())
            throw error("data: cannot encode text: character " + std::to_string(i) + " (U+" + [&] {
                char b[16];
                std::snprintf(b, sizeof b, "%04X", cps[i]);
                return std::string(b);
            }() + ") is not in the vocabulary");
        ids.push_back(it->second);
    }
    return ids;
}

namespace {

// ---- text -------------------------------------------------------------------

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string read_file(const fs::path& file, const std::string& where) {
    std::ifstream probe(file, std::ios::binary);
    if (!probe) fail(where, file.string() + ": cannot open: " + std::strerror(errno));
    try {
        return read_file_text(file, kCorpusFileLimit, "a corpus file");
    } catch (const error& e) {
        fail(where, e.what());
    }
}

// The files a text folder contributes: regular files directly in it, by name.
std::vector<fs::path> text_files(const fs::path& folder, const std::string& where, std::string& skipped) {
    std::vector<fs::path> files;
    size_t hidden = 0, links = 0, dat = 0, folders = 0, other = 0;
    std::error_code ec;
    fs::directory_iterator it(folder, ec), end;
    if (ec) fail(where, folder.string() + ": cannot list the folder: " + ec.message());
    for (; it != end; it.increment(ec)) {
        if (ec) fail(where, folder.string() + ": cannot list the folder: " + ec.message());
        const std::string name = it->path().filename().string();
        std::error_code e2;
        if (!name.empty() && name[0] == '.') ++hidden;
        else if (it->is_symlink(e2)) ++links;
        else if (ends_with(name, ".dat")) ++dat;
        else if (it->is_directory(e2)) ++folders;
        else if (it->is_regular_file(e2)) files.push_back(it->path());
        else ++other;
    }
    if (ec) fail(where, folder.string() + ": cannot list the folder: " + ec.message());
    std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
        return a.filename().string() < b.filename().string();
    });
    std::vector<std::string> parts;
    if (links) parts.push_back(std::to_string(links) + " symlinks");
    if (dat) parts.push_back(std::to_string(dat) + " .dat files");
    if (hidden) parts.push_back(std::to_string(hidden) + " hidden");
    if (folders) parts.push_back(std::to_string(folders) + " sub-folders");
    if (other) parts.push_back(std::to_string(other) + " special files");
    for (size_t i = 0; i < parts.size(); ++i) skipped += (i ? ", " : "") + parts[i];
    return files;
}

dataset load_text(const data_options& o, const std::string& where) {
    const fs::path& path = o.path;
    const std::string ps = path.string();
    if (!(o.val_fraction > 0.0 && o.val_fraction < 1.0))
        fail(where, ps + ": data.val_fraction is " + number(o.val_fraction) +
                        "; expected a fraction strictly between 0 and 1 (both splits must have tokens)");

    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    std::vector<fs::path> files;
    bool folder = false;
    if (fs::is_directory(st)) {
        folder = true;
        std::string skipped;
        files = text_files(path, where, skipped);
        if (files.empty())
            fail(where, ps + ": no text files in the folder" +
                            (skipped.empty() ? "" : " (skipped: " + skipped + ")"));
    } else if (fs::is_regular_file(st)) {
        files.push_back(path);
    } else {
        fail(where, ps + ": not a regular file or a folder");
    }

    std::vector<uint32_t> cps;
    for (const fs::path& f : files) decode_utf8_latin1(read_file(f, where), cps);
    if (cps.empty())
        fail(where,
             folder ? ps + ": no text: the folder's " + std::to_string(files.size()) + " files are all empty"
                    : ps + ": the file is empty");

    // Vocabulary: the sorted distinct code points.
    std::vector<bool> present(0x110000, false);
    for (uint32_t c : cps) present[c] = true;
    std::vector<uint16_t> id_of(0x110000, 0);
    auto p = std::make_unique<dataset::impl>();
    for (uint32_t c = 0; c < 0x110000; ++c) {
        if (!present[c]) continue;
        if (static_cast<int64_t>(p->itos.size()) >= max_vocab)
            fail(where, ps + ": the text has more than " + std::to_string(max_vocab) +
                            " distinct characters; token ids are uint16");
        id_of[c] = static_cast<uint16_t>(p->itos.size());
        p->itos.push_back(encode_utf8(c));
    }
    p->vocab = static_cast<int64_t>(p->itos.size());

    const size_t n = cps.size();
    p->owned.resize(n);
    for (size_t i = 0; i < n; ++i) p->owned[i] = id_of[cps[i]];
    // nanoGPT's prepare.py: train = data[:int(n * 0.9)].
    const size_t n_train = static_cast<size_t>(static_cast<double>(n) * (1.0 - o.val_fraction));
    if (n_train == 0 || n_train >= n)
        fail(where, ps + ": data.val_fraction " + number(o.val_fraction) + " of " + with_commas(n) +
                        " characters leaves the " + (n_train == 0 ? "training" : "validation") +
                        " split empty");
    p->ptr[0] = p->owned.data();
    p->n[0] = n_train;
    p->ptr[1] = p->owned.data() + n_train;
    p->n[1] = n - n_train;
    p->entropy = entropy_nats(p->ptr[0], p->n[0], p->vocab);
    p->description = "text: " + std::to_string(files.size()) + (files.size() == 1 ? " file, " : " files, ") +
                     with_commas(n) + " characters, vocabulary " + std::to_string(p->vocab) + ", val " +
                     percent(o.val_fraction);
    return dataset(std::move(p));
}

// ---- nanoGPT ----------------------------------------------------------------

dataset load_nanogpt(const data_options& o, const std::string& where) {
    const fs::path& dir = o.path;
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        fail(where, dir.string() + ": expected a folder holding nanoGPT's train.bin and val.bin");
    auto p = std::make_unique<dataset::impl>();

    const char* names[2] = {"train.bin", "val.bin"};
    for (int s = 0; s < 2; ++s) {
        const fs::path file = dir / names[s];
        const fs::file_status st = fs::status(file, ec);
        if (!fs::exists(st))
            fail(where, file.string() + ": missing (a nanoGPT folder has train.bin and val.bin)");
        if (!fs::is_regular_file(st)) fail(where, file.string() + ": not a regular file");
        p->maps[s] = mapped_file::open(file, where);
        const size_t bytes = p->maps[s].size();
        if (bytes == 0) fail(where, file.string() + ": empty (no tokens)");
        if (bytes % 2 != 0)
            fail(where, file.string() + ": " + with_commas(bytes) +
                            " bytes, an odd size; expected little-endian uint16 token ids");
        p->ptr[s] = static_cast<const uint16_t*>(p->maps[s].data());
        p->n[s] = bytes / 2;
    }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    // The files are little-endian: swap into memory of our own.
    p->owned.resize(p->n[0] + p->n[1]);
    for (int s = 0; s < 2; ++s) {
        uint16_t* dst = p->owned.data() + (s ? p->n[0] : 0);
        for (size_t i = 0; i < p->n[s]; ++i)
            dst[i] = static_cast<uint16_t>((p->ptr[s][i] >> 8) | (p->ptr[s][i] << 8));
        p->ptr[s] = dst;
    }
    p->maps[0] = mapped_file();
    p->maps[1] = mapped_file();
#endif

    const fs::path meta_file = dir / "meta.pkl";
    const fs::file_status mst = fs::status(meta_file, ec);
    std::string vocab_from;
    if (fs::exists(mst)) {
        if (!fs::is_regular_file(mst)) fail(where, meta_file.string() + ": not a regular file");
        const uintmax_t bytes = fs::file_size(meta_file, ec);
        if (ec) fail(where, meta_file.string() + ": cannot read its size: " + ec.message());
        if (bytes > max_meta_bytes)
            fail(where, meta_file.string() + ": " + with_commas(bytes) +
                            " bytes; a character vocabulary's meta.pkl " + "is far smaller (at most " +
                            with_commas(max_meta_bytes) + " read)");
        nanogpt_meta meta =
            parse_nanogpt_meta(read_file(meta_file, where), prefix(where) + meta_file.string());
        if (o.vocab_size > 0 && o.vocab_size != meta.vocab_size)
            fail(where, dir.string() + ": data.vocab_size " + std::to_string(o.vocab_size) +
                            " disagrees with meta.pkl's vocab_size " + std::to_string(meta.vocab_size));
        p->vocab = meta.vocab_size;
        p->itos = std::move(meta.itos);
        vocab_from = "meta.pkl";
    } else {
        if (o.vocab_size <= 0)
            fail(where,
                 dir.string() + ": no meta.pkl, so data.vocab_size must be given (the number of token ids)");
        if (o.vocab_size > max_vocab)
            fail(where, dir.string() + ": data.vocab_size " + std::to_string(o.vocab_size) +
                            " is larger than 65536; token ids are uint16");
        p->vocab = o.vocab_size;
        vocab_from = "data.vocab_size, no meta.pkl";
    }

    for (int s = 0; s < 2; ++s)
        for (size_t i = 0; i < p->n[s]; ++i)
            if (p->ptr[s][i] >= p->vocab)
                fail(where, (dir / names[s]).string() + ": token " + with_commas(i) + " (byte " +
                                with_commas(2 * i) + ") is " + std::to_string(p->ptr[s][i]) +
                                ", not below the vocabulary size " + std::to_string(p->vocab) + " (" +
                                vocab_from + ")");

    p->entropy = entropy_nats(p->ptr[0], p->n[0], p->vocab);
    p->description = "nanogpt: train " + with_commas(p->n[0]) + " tokens, val " + with_commas(p->n[1]) +
                     " tokens, vocabulary " + std::to_string(p->vocab) + " (" + vocab_from + ")";
    return dataset(std::move(p));
}

}  // namespace

dataset load_dataset(const data_options& o, const std::string& where) {
    if (o.vocab_size < 0)
        fail(where, "data.vocab_size is " + std::to_string(o.vocab_size) + "; expected > 0");
    if (o.path.empty()) fail(where, "no data path given");
    std::error_code ec;
    const fs::file_status st = fs::status(o.path, ec);
    if (!fs::exists(st)) fail(where, o.path.string() + ": no such file or folder");
    using config::data_format;
    data_format format = o.format;
    if (format == data_format::auto_detect)
        format = fs::is_directory(st) && fs::exists(o.path / "train.bin", ec) ? data_format::nanogpt
                                                                              : data_format::text;
    return format == data_format::nanogpt ? load_nanogpt(o, where) : load_text(o, where);
}

uint64_t batch_offset(uint64_t seed, uint64_t step, split s, uint64_t row, uint64_t range) {
    const uint64_t u =
        splitmix64(splitmix64(splitmix64(seed) ^ step) ^ (2 * row + (s == split::val ? 1 : 0)));
    __extension__ typedef unsigned __int128 u128;
    return static_cast<uint64_t>((static_cast<u128>(u) * range) >> 64);
}

void fill_batch(const dataset& d, split s, uint64_t seed, uint64_t step, uint64_t first_row,
                int64_t batch_size, int64_t block_size, int64_t* x, int64_t* y) {
    if (batch_size < 1) throw error("data: batch_size is " + std::to_string(batch_size) + "; expected >= 1");
    if (block_size < 1) throw error("data: block_size is " + std::to_string(block_size) + "; expected >= 1");
    const size_t n = d.size(s);
    const uint64_t block = static_cast<uint64_t>(block_size);
    if (n < block + 1)
        throw error("data: the " + std::string(split_name(s)) + " split has " + with_commas(n) +
                    " tokens; need at least block_size + 1 = " + std::to_string(block + 1));
    const uint16_t* t = d.tokens(s);
    const uint64_t range = n - block;  // offsets 0 .. n - block - 1
    for (int64_t r = 0; r < batch_size; ++r) {
        const uint16_t* src = t + batch_offset(seed, step, s, first_row + static_cast<uint64_t>(r), range);
        int64_t* xr = x + r * block_size;
        int64_t* yr = y + r * block_size;
        for (int64_t i = 0; i < block_size; ++i) {
            xr[i] = src[i];
            yr[i] = src[i + 1];
        }
    }
}

void check_block_size(const dataset& d, int64_t block_size, int64_t model_vocab_size,
                      const std::string& where) {
    if (block_size < 1) fail(where, "block_size is " + std::to_string(block_size) + "; expected >= 1");
    for (split s : {split::train, split::val})
        if (d.size(s) < static_cast<uint64_t>(block_size) + 1)
            fail(where, std::string("the ") + split_name(s) + " split has " + with_commas(d.size(s)) +
                            " tokens; need at least block_size + 1 = " + std::to_string(block_size + 1));
    if (model_vocab_size > 0 && d.vocab_size() > model_vocab_size)
        fail(where, "the data's vocabulary has " + std::to_string(d.vocab_size()) +
                        " tokens, more than the model's vocab_size " + std::to_string(model_vocab_size));
}

}  // namespace altgrad::host::data
