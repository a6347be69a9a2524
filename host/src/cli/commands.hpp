// The subcommands of altgrad-host. Each parses its own options (with --help)
// from the arguments after its name and returns the process exit code.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace altgrad::host::cli {

struct context {
    std::filesystem::path plugins;  // --plugins DIR
};

using args = std::vector<std::string>;

int list_command(const context& ctx, const args& a);
int describe_command(const context& ctx, const args& a);
int quantize_command(const context& ctx, const args& a);
int gemm_command(const context& ctx, const args& a);
int conformance_command(const context& ctx, const args& a);
int run_command(const context& ctx, const args& a);
int parity_command(const context& ctx, const args& a);
int sweep_command(const context& ctx, const args& a);
int report_command(const context& ctx, const args& a);
int new_plugin_command(const context& ctx, const args& a);

}  // namespace altgrad::host::cli
