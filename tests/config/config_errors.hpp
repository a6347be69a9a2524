// What the config tests share: a config text's error, and the check that an
// error is one line naming the file first, then the key.
#pragma once

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "config/recipe.hpp"
#include "config/run_config.hpp"
#include "config/writer.hpp"
#include "util/error.hpp"

namespace altgrad::test {

inline const char* const kFile = "cfgs/my_run.toml";

// One layer of a config's quantization as resolve() hands it to the trainer:
// among the default GPT's linear layers when it is one of them (a rule may
// take layers by place, last = N), else alone.
inline host::config::layer_recipe recipe_of(const host::config::quantization_config& q,
                                            const std::string& layer) {
    std::vector<std::string> layers = host::config::layer_names(host::config::model_config{});
    if (std::find(layers.begin(), layers.end(), layer) == layers.end()) layers = {layer};
    return host::config::resolve(q, layers).at(layer);
}

// The error parse_config throws, or "" when it accepts the text.
inline std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
    try {
        host::config::parse_config(text, kFile, overrides);
        return "";
    } catch (const host::error& e) {
        return e.what();
    }
}

// One line, naming the file and the key, saying `what`.
inline void expect_error(const std::string& error, const std::string& key, const std::string& what) {
    EXPECT_EQ(error.rfind(std::string(kFile) + ":", 0), 0u) << "names the file first: " << error;
    EXPECT_NE(error.find("key '" + key + "'"), std::string::npos) << error;
    EXPECT_NE(error.find(what), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << "one line: " << error;
}

// A config file in the repository loads, validates and round-trips through
// to_toml, its name its file's stem; the loaded config, or nullopt (and a
// failure) when it does not load.
inline std::optional<host::config::run_config> expect_config_file_loads(const std::filesystem::path& file) {
    host::config::run_config c;
    try {
        c = host::config::load_config(file);
    } catch (const host::error& e) {
        ADD_FAILURE() << e.what();
        return std::nullopt;
    }
    EXPECT_EQ(c.name, file.stem().string()) << "a config's name is its file's stem";
    EXPECT_TRUE(host::config::parse_config(host::config::to_toml(c), "config.toml") == c);
    return c;
}

}  // namespace altgrad::test
