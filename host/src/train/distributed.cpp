#include "train/distributed.hpp"

// Debian's LibTorch logs through glog; PyTorch's wheels through c10's own
// logging, without glog's headers.
#if __has_include(<glog/logging.h>)
#include <glog/logging.h>
#define ALTGRAD_HAS_GLOG 1
#endif
// PyTorch's wheels ship neither Gloo's headers nor NCCL's: a backend whose
// headers are missing is refused at run time, saying so.
#if __has_include(<gloo/algorithm.h>)
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#define ALTGRAD_HAS_GLOO 1
#endif
#if defined(USE_C10D_NCCL) && !__has_include(<nccl.h>)
#undef USE_C10D_NCCL
#endif
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL  // a LibTorch with CUDA (host/CMakeLists.txt)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <cstdlib>
#include <optional>

#include "util/error.hpp"
#include "util/numbers.hpp"

namespace altgrad::host::train {

namespace {

std::optional<std::string> env(const char* name) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
}

int64_t env_integer(const char* name, int64_t lo, int64_t hi) {
    const std::optional<std::string> v = env(name);
    if (!v) throw error(std::string("distributed run: the environment variable ") + name + " is not set");
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(v->c_str(), &end, 10);
    if (errno != 0 || end == v->c_str() || *end != '\0' || n < lo || n > hi)
        throw error(std::string("distributed run: ") + name + "=" + *v + ": expected an integer in " +
                    std::to_string(lo) + ".." + std::to_string(hi));
    return n;
}

// "rank 1 of 2 (RANK)": who is speaking, in every error.
std::string who(const rank_place& p) {
    return "rank " + std::to_string(p.rank) + " of " + std::to_string(p.world_size);
}

std::string address(const rank_place& p) { return p.master_addr + ":" + std::to_string(p.master_port); }

bool loopback(const std::string& host) { return host == "localhost" || host.rfind("127.", 0) == 0; }

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
    // The first entry: up to the first comma outside brackets.
    size_t end = 0;
    for (int depth = 0; end < nodelist.size(); ++end) {
        if (nodelist[end] == '[') ++depth;
        else if (nodelist[end] == ']') --depth;
        else if (nodelist[end] == ',' && depth == 0) break;
    }
    const std::string first = nodelist.substr(0, end);
    const size_t open = first.find('[');
    if (open == std::string::npos) return first;
    // prefix[a-b,c]suffix: the first number of the range, its zero padding kept.
    const size_t stop = first.find_first_of(",-]", open + 1);
    const size_t close = first.find(']', open);
    if (stop == std::string::npos || close == std::string::npos) return first;
    return first.substr(0, open) + first.substr(open + 1, stop - open - 1) + first.substr(close + 1);
}

rank_place place_from_environment() {
    rank_place p;
    if (env("RANK") || env("WORLD_SIZE")) {
        p.launcher = "RANK, WORLD_SIZE";
        p.world_size = static_cast<int>(env_integer("WORLD_SIZE", 1, 65536));
        p.rank = static_cast<int>(env_integer("RANK", 0, p.world_size - 1));
        p.local_rank = env("LOCAL_RANK") ? static_cast<int>(env_integer("LOCAL_RANK", 0, 65535)) : p.rank;
        p.master_addr = env("MASTER_ADDR").value_or("");
        if (p.master_addr.empty() && p.world_size > 1)
            throw error("distributed run: the environment variable MASTER_ADDR is not set");
        if (p.world_size > 1) p.master_port = static_cast<uint16_t>(env_integer("MASTER_PORT", 1, 65535));
        return p;
    }
    if (env("SLURM_PROCID") && env("SLURM_NTASKS")) {
        p.launcher = "SLURM_PROCID, SLURM_NTASKS";
        p.world_size = static_cast<int>(env_integer("SLURM_NTASKS", 1, 65536));
        p.rank = static_cast<int>(env_integer("SLURM_PROCID", 0, p.world_size - 1));
        p.local_rank = env("SLURM_LOCALID") ? static_cast<int>(env_integer("SLURM_LOCALID", 0, 65535)) : 0;
        if (p.world_size == 1) return p;
        const std::optional<std::string> nodes =
            env("SLURM_STEP_NODELIST") ? env("SLURM_STEP_NODELIST") : env("SLURM_JOB_NODELIST");
        p.master_addr = env("MASTER_ADDR").value_or(nodes ? first_slurm_host(*nodes) : "");
        if (p.master_addr.empty())
            throw error("distributed run: neither MASTER_ADDR nor SLURM_JOB_NODELIST is set");
        p.master_port =
            env("MASTER_PORT")
                ? static_cast<uint16_t>(env_integer("MASTER_PORT", 1, 65535))
                : static_cast<uint16_t>(20000 + env_integer("SLURM_JOB_ID", 0, INT64_MAX) % 20000);
        return p;
    }
    return p;
}

// One of the two groups is made (each a Backend, not a ProcessGroup, in
// LibTorch 2.x); the collectives run on `device`: the CPU for Gloo, this
// rank's GPU for NCCL.
struct rank_group::backend {
    c10::intrusive_ptr<c10d::Store> store;
#ifdef ALTGRAD_HAS_GLOO
    c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
#endif
#ifdef USE_C10D_NCCL
    c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl;
#endif
    torch::Device device{torch::kCPU};

    // Runs call(group) on whichever group this is and waits for its work; a
    // failure is one line naming the rank and `what`.
    template <class Call>
    void run(const rank_place& p, const std::string& what, Call&& call) const;
};

template <class Call>
void rank_group::backend::run(const rank_place& p, const std::string& what, Call&& call) const {
    try {
#ifdef USE_C10D_NCCL
        if (nccl) {
            call(*nccl)->wait();
            return;
        }
#endif
#ifdef ALTGRAD_HAS_GLOO
        call(*gloo)->wait();
#endif
    } catch (const std::exception& e) {
        throw error(who(p) + ": " + what +
                    " with the other ranks failed (one of them stopped, or did not answer within "
                    "training.distributed.timeout_s): " +
                    first_line(e.what()));
    }
}

namespace {

// Whether the run asks for NCCL (backend "nccl", or "auto" on a GPU), refusing
// what cannot work: NCCL in a host built without it, or NCCL on the CPU.
bool wants_nccl(const config::run_config& c) {
    const std::string key = c.source.string() + ": key 'training.distributed.backend'";
    const bool cuda = c.training.device == config::compute_device::cuda;
    const bool nccl = c.distributed.backend == config::distributed_backend::nccl ||
                      (c.distributed.backend == config::distributed_backend::automatic && cuda);
    if (nccl && !cuda)
        throw error(key +
                    ": nccl: NCCL moves GPU memory; it needs training.device = \"cuda\" (use \"gloo\" on "
                    "the CPU)");
#ifndef USE_C10D_NCCL
    if (nccl)
        throw error(key +
                    ": nccl: this host was built without NCCL (its LibTorch has no CUDA: Debian's is built "
                    "for the CPU; docs/distributed.md, \"On GPUs\"); use \"gloo\", on the CPU");
#endif
    return nccl;
}

}  // namespace

rank_group::rank_group(const rank_place& where, const config::run_config& c) : place_(where) {
    if (!where.distributed()) return;
    const bool nccl = wants_nccl(c);
    const std::chrono::milliseconds timeout(c.distributed.timeout_s * 1000);
    // c10d logs its failures through glog, several lines each; the errors
    // below say them in one line, naming the rank. (Without glog, c10's
    // logging prints them.)
#ifdef ALTGRAD_HAS_GLOG
    FLAGS_minloglevel = google::GLOG_FATAL;
#endif
    backend_ = std::make_shared<backend>();
    c10d::TCPStoreOptions o;
    o.port = where.master_port;
    // Under torchrun its agent serves the store already and says so; rank 0 is then a client too.
    o.isServer = where.rank == 0 && env("TORCHELASTIC_USE_AGENT_STORE").value_or("") != "True";
    o.numWorkers = static_cast<size_t>(where.world_size);
    o.waitWorkers = true;  // every rank counts itself in; the server waits for all
    o.timeout = timeout;
    try {
        backend_->store = c10::make_intrusive<c10d::TCPStore>(where.master_addr, o);
    } catch (const std::exception& e) {
        const std::string what = where.rank == 0 ? "cannot serve the rendezvous at " + address(where) +
                                                       " (MASTER_PORT: is the port taken?)"
                                                 : "cannot reach the rendezvous at " + address(where) +
                                                       " (MASTER_ADDR, MASTER_PORT) within "
                                                       "training.distributed.timeout_s = " +
                                                       std::to_string(c.distributed.timeout_s) + " s";
        throw error(who(where) + ": " + what + ": " + first_line(e.what()));
    }
    if (nccl) {
        make_nccl_group(timeout);
        return;
    }
#ifndef ALTGRAD_HAS_GLOO
    throw error(who(where) +
                ": gloo: this host was built against a LibTorch without Gloo's headers "
                "(PyTorch's wheels ship none); use training.distributed.backend = \"nccl\" on GPUs");
#else
    try {
        auto options = c10d::ProcessGroupGloo::Options::create(timeout);
        if (const std::optional<std::string> iface = env("GLOO_SOCKET_IFNAME"))
            options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(*iface));
        else if (loopback(where.master_addr))
            options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
        else options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
        options->threads = 1;
        backend_->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(backend_->store, where.rank,
                                                                     where.world_size, options);
    } catch (const std::exception& e) {
        throw error(who(where) + ": the Gloo group of " + std::to_string(where.world_size) + " ranks at " +
                    address(where) + " did not form: " + first_line(e.what()));
    }
#endif
}

// NCCL between the ranks' GPUs: rank r on GPU local_rank (training_device's
// choice), its collectives on that GPU. Never run here (no GPU, no NCCL in
// Debian's LibTorch): compiled by scripts/cuda_compile_check.sh.
void rank_group::make_nccl_group([[maybe_unused]] std::chrono::milliseconds timeout) {
#ifdef USE_C10D_NCCL
    backend_->device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(place_.local_rank));
    try {
        auto options = c10d::ProcessGroupNCCL::Options::create();
        options->timeout = timeout;
        backend_->nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(backend_->store, place_.rank,
                                                                     place_.world_size, options);
    } catch (const std::exception& e) {
        throw error(who(place_) + ": the NCCL group of " + std::to_string(place_.world_size) + " ranks at " +
                    address(place_) + " did not form: " + first_line(e.what()));
    }
#endif
}

std::vector<torch::Tensor> rank_group::all_gather(const torch::Tensor& mine, const std::string& what) const {
    std::vector<torch::Tensor> input{mine.to(backend_->device)};
    std::vector<std::vector<torch::Tensor>> output(1);
    for (int r = 0; r < size(); ++r) output[0].push_back(torch::empty_like(input[0]));
    backend_->run(place_, what, [&](auto& group) { return group.allgather(output, input); });
    return output[0];
}

std::vector<std::vector<double>> rank_group::gather(const std::vector<double>& mine) const {
    if (!backend_) return {mine};
    const auto n = static_cast<int64_t>(mine.size());
    const auto opts = torch::TensorOptions().dtype(torch::kDouble);
    std::vector<std::vector<double>> out;
    for (const torch::Tensor& t :
         all_gather(torch::from_blob(const_cast<double*>(mine.data()), {n}, opts).clone(), "a collective")) {
        const torch::Tensor host = t.cpu();
        out.emplace_back(host.data_ptr<double>(), host.data_ptr<double>() + n);
    }
    return out;
}

double rank_group::sum(double mine) const {
    if (!backend_) return mine;
    double total = 0;
    for (const std::vector<double>& r : gather({mine})) total += r[0];
    return total;
}

bool rank_group::any(bool mine) const {
    if (!backend_) return mine;
    for (const std::vector<double>& r : gather({mine ? 1.0 : 0.0}))
        if (r[0] != 0) return true;
    return false;
}

std::vector<torch::Tensor> rank_group::all_to_all(const torch::Tensor& mine, const std::string& what) const {
    torch::Tensor input = mine.to(backend_->device);
    torch::Tensor output = torch::empty_like(input);
    std::vector<int64_t> equal;  // empty: equal splits, one per rank
    backend_->run(place_, what,
                  [&](auto& group) { return group.alltoall_base(output, input, equal, equal); });
    return output.chunk(size());
}

void rank_group::sum_gradients(const std::vector<torch::Tensor>& parameters) const {
    if (!backend_) return;
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> grads;
    for (const torch::Tensor& p : parameters)
        if (p.grad().defined()) grads.push_back(p.grad().reshape({-1}));
    const torch::Tensor flat = torch::cat(grads);
    // A reduce-scatter in rank order, then a gather: rank r receives shard r
    // of every rank's gradients and adds them rank 0's + rank 1's + ... (what
    // one process's micro-batches leave in .grad: ((g0 + g1) + g2) ...), and
    // the summed shards are gathered. Every element gets the same adds in the
    // same order on every rank, and a rank moves 2 (N - 1) / N of the
    // gradients' bytes each way, not N - 1 times them.
    const int64_t n = size(), length = flat.numel(), shard = (length + n - 1) / n;
    torch::Tensor padded = torch::zeros({n * shard}, flat.options());
    padded.narrow(0, 0, length).copy_(flat);
    const std::vector<torch::Tensor> from_each = all_to_all(padded, "summing the gradients");
    torch::Tensor summed = from_each[0].clone();
    for (size_t r = 1; r < from_each.size(); ++r) summed.add_(from_each[r]);
    const torch::Tensor total =
        torch::cat(all_gather(summed, "gathering the summed gradients")).narrow(0, 0, length);
    int64_t offset = 0;
    for (const torch::Tensor& p : parameters) {
        if (!p.grad().defined()) continue;
        const int64_t n_p = p.grad().numel();
        p.grad().copy_(total.narrow(0, offset, n_p).view_as(p.grad()));
        offset += n_p;
    }
}

std::string rank_group::from_root(const std::string& key, const std::string& value) const {
    if (!backend_) return value;
    const std::string k = "altgrad/" + key;
    try {
        if (root()) backend_->store->set(k, std::vector<uint8_t>(value.begin(), value.end()));
        const std::vector<uint8_t> got = backend_->store->get(k);  // waits for rank 0's
        return std::string(got.begin(), got.end());
    } catch (const std::exception& e) {
        throw error(who(place_) + ": rank 0's " + key + " did not arrive: " + first_line(e.what()));
    }
}

void rank_group::check_same(const std::string& what, uint64_t fingerprint) const {
    if (!backend_) return;
    // Two exact halves: a double holds 32 bits exactly.
    const std::vector<std::vector<double>> all =
        gather({static_cast<double>(fingerprint >> 32), static_cast<double>(fingerprint & 0xffffffffu)});
    for (int r = 1; r < size(); ++r)
        if (all[static_cast<size_t>(r)] != all[0])
            throw error(who(place_) + ": " + what + " differs between rank 0 and rank " + std::to_string(r) +
                        ": every rank must run the same (the same config file, --set and plugins)");
}

}  // namespace altgrad::host::train
