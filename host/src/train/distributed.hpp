// A data-parallel run's ranks (docs/distributed.md): where this process is
// among them, and the few collectives the trainer calls. Each collective
// gathers every rank's values and combines them in rank order, on every rank
// alike, so the result does not depend on the backend's algorithm: N ranks
// at micro-batch b give the bits of one process with training.grad_accum = N.
// LibTorch's c10d does the talking (its TCPStore for the rendezvous, Gloo
// between CPUs, NCCL between GPUs where LibTorch has CUDA); its headers stay
// in distributed.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "config/run_config.hpp"

namespace altgrad::host::train {

// Where this process is, from its launcher's environment:
//   RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT   torchrun, and run --nproc
//   SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, the first host of
//   SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST), MASTER_PORT or
//   20000 + SLURM_JOB_ID % 20000                             srun
// Neither: one process (rank 0 of 1).
struct rank_place {
    int rank = 0, world_size = 1, local_rank = 0;
    std::string master_addr;
    uint16_t master_port = 0;
    std::string launcher;  // the variables it came from ("RANK, WORLD_SIZE"); empty: one process
    bool distributed() const { return world_size > 1; }
};
// Throws host::error naming the variable that is missing or malformed.
rank_place place_from_environment();

// The first host of a Slurm host list: "node[07-09,12],gpu1" gives "node07".
std::string first_slurm_host(const std::string& nodelist);

// The ranks of this run, joined. One process (the default): every
// collective returns this process's own values.
class rank_group {
public:
    rank_group() = default;
    // Meets the other ranks at where.master_addr:master_port (rank 0 serves the
    // rendezvous) and builds the backend's group; waits at most the config's
    // timeout for them (training.distributed.timeout_s), and so does every
    // collective after. Errors name the rank, the address and the variable.
    rank_group(const rank_place& where, const config::run_config& c);

    int rank() const { return place_.rank; }
    int size() const { return place_.world_size; }
    bool root() const { return place_.rank == 0; }

    // Every rank's `mine` (the same length on every rank), in rank order.
    std::vector<std::vector<double>> gather(const std::vector<double>& mine) const;
    // Every rank's value summed in rank order from 0 (one process: `mine`).
    double sum(double mine) const;
    // Whether any rank says yes.
    bool any(bool mine) const;
    // The parameters' gradients replaced by their sum over the ranks, added in
    // rank order (rank 0's + rank 1's + ...): what one process's backward
    // passes leave in .grad, micro-batch after micro-batch. A reduce-scatter
    // in that order (each rank sums one shard), then a gather of the shards.
    void sum_gradients(const std::vector<torch::Tensor>& parameters) const;
    // Rank 0's `value` of `key`, on every rank (through the rendezvous store).
    std::string from_root(const std::string& key, const std::string& value) const;
    // Refuses to go on unless every rank has the same `fingerprint` of `what`.
    void check_same(const std::string& what, uint64_t fingerprint) const;

private:
    // Every rank's `mine` (one shape on every rank), in rank order, on the
    // collectives' device; `what` names it in errors.
    std::vector<torch::Tensor> all_gather(const torch::Tensor& mine, const std::string& what) const;
    // Rank r's part of every rank's `mine` (N equal parts, N dividing its
    // length): part r of rank 0's, of rank 1's, ..., in rank order.
    std::vector<torch::Tensor> all_to_all(const torch::Tensor& mine, const std::string& what) const;
    void make_nccl_group(std::chrono::milliseconds timeout);

    struct backend;  // c10d's store and process group
    rank_place place_;
    std::shared_ptr<backend> backend_;
};

}  // namespace altgrad::host::train
