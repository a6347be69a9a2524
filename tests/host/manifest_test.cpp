// Manifests: every way one can be wrong gives an error naming the file and key.
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "plugins/manifest.hpp"
#include "test_support.hpp"
#include "util/error.hpp"

namespace altgrad::test {
namespace {

using host::read_manifest;

// The error read_manifest throws for `text` (with fp32's library copied in as
// lib.so), or "" if it accepts it.
std::string manifest_error(const scratch_dir& dir, const std::string& text) {
    const fs::path m = dir.add_plugin("p", text, bundled_library("fp32"), "lib.so");
    try {
        read_manifest(m);
        return "";
    } catch (const host::error& e) {
        return e.what();
    }
}

void expect_error(const std::string& error, const std::string& key, const std::string& what) {
    EXPECT_NE(error.find("manifest.toml"), std::string::npos) << error;
    EXPECT_NE(error.find("key '" + key + "'"), std::string::npos) << error;
    EXPECT_NE(error.find(what), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << "one line: " << error;
}

TEST(Manifest, ValidManifestIsRead) {
    scratch_dir dir;
    const fs::path m =
        dir.add_plugin("p",
                       format_manifest("my_fmt", "lib.so", "1.2.3") +
                           "\n[parameters.bits]\ntype = \"int\"\ndefault = 4\nmin = 1\nmax = 8\n",
                       bundled_library("fp32"), "lib.so");
    const host::manifest got = read_manifest(m);
    EXPECT_EQ(got.name, "my_fmt");
    EXPECT_EQ(got.kind, ALTGRAD_KIND_FORMAT);
    EXPECT_EQ(got.version.major, 1u);
    EXPECT_EQ(got.version.minor, 2u);
    EXPECT_EQ(got.version.patch, 3u);
    EXPECT_EQ(got.abi_version.major, 1u);
    EXPECT_EQ(got.library.filename(), "lib.so");
    ASSERT_EQ(got.params.size(), 1u);
    EXPECT_EQ(got.params[0].key, "bits");
    EXPECT_EQ(got.params[0].default_int, 4);
    EXPECT_EQ(*got.params[0].max, 8.0);
}

TEST(Manifest, MissingKey) {
    scratch_dir dir;
    expect_error(manifest_error(dir,
                                "[plugin]\nkind = \"format\"\nversion = \"1.0.0\"\nabi_version = \"1.0\"\n"
                                "library = \"lib.so\"\ndescription = \"x\"\n"),
                 "plugin.name", "missing");
}

TEST(Manifest, WrongType) {
    scratch_dir dir;
    std::string text = format_manifest("x", "lib.so");
    text.replace(text.find("name = \"x\""), 10, "name = 5");
    expect_error(manifest_error(dir, text), "plugin.name", "expected a string");
}

TEST(Manifest, UnknownKind) {
    scratch_dir dir;
    std::string text = format_manifest("x", "lib.so");
    text.replace(text.find("\"format\""), 8, "\"codec\"");
    expect_error(manifest_error(dir, text), "plugin.kind", "unknown kind \"codec\"");
}

TEST(Manifest, UnknownKeyIsATypo) {
    scratch_dir dir;
    expect_error(manifest_error(dir, format_manifest("x", "lib.so") + "libary = \"lib.so\"\n"),
                 "plugin.libary", "unknown key");
}

TEST(Manifest, MissingLibrary) {
    scratch_dir dir;
    expect_error(manifest_error(dir, format_manifest("x", "missing.so")), "plugin.library", "does not exist");
}

TEST(Manifest, LibraryEscapingTheFolder) {
    scratch_dir dir;
    dir.add_plugin("other", format_manifest("other", "lib.so"), bundled_library("fp32"), "lib.so");
    expect_error(manifest_error(dir, format_manifest("x", "../other/lib.so")), "plugin.library",
                 "resolves outside the plugin's folder");
}

TEST(Manifest, SymlinkEscapingTheFolder) {
    scratch_dir dir;
    dir.add_plugin("p", format_manifest("x", "link.so"), bundled_library("fp32"), "lib.so");
    fs::create_symlink(bundled_library("fp32"), dir.path() / "p" / "link.so");
    try {
        read_manifest(dir.path() / "p" / "manifest.toml");
        FAIL() << "accepted a symlink to a library outside the folder";
    } catch (const host::error& e) {
        expect_error(e.what(), "plugin.library", "resolves outside");
    }
}

TEST(Manifest, AbsoluteLibraryPath) {
    scratch_dir dir;
    expect_error(manifest_error(dir, format_manifest("x", bundled_library("fp32").string())),
                 "plugin.library", "relative");
}

TEST(Manifest, BadVersion) {
    scratch_dir dir;
    expect_error(manifest_error(dir, format_manifest("x", "lib.so", "1.0")), "plugin.version", "\"1.0\"");
    expect_error(manifest_error(dir, format_manifest("x", "lib.so", "1.0.0", "one")), "plugin.abi_version",
                 "\"one\"");
}

TEST(Manifest, BadName) {
    scratch_dir dir;
    expect_error(manifest_error(dir, format_manifest("E5M2", "lib.so")), "plugin.name", "not a valid name");
}

TEST(Manifest, InvalidTomlNamesTheLine) {
    scratch_dir dir;
    const std::string e = manifest_error(dir, "[plugin]\nkind = \"format\"\nname = \n");
    EXPECT_NE(e.find("manifest.toml:3: not valid TOML"), std::string::npos) << e;
}

TEST(Manifest, ParameterChecks) {
    scratch_dir dir;
    const std::string base = format_manifest("x", "lib.so");
    expect_error(manifest_error(dir, base + "[parameters.bits]\ntype = \"integer\"\ndefault = 1\n"),
                 "parameters.bits.type", "expected one of bool, int, float, string");
    expect_error(manifest_error(dir, base + "[parameters.bits]\ntype = \"int\"\ndefault = 9\nmax = 8\n"),
                 "parameters.bits.default", "outside [min, max]");
    expect_error(manifest_error(dir, base + "[parameters.bits]\ntype = \"int\"\ndefault = 1.5\n"),
                 "parameters.bits.default", "expected an integer");
    expect_error(manifest_error(dir, base + "[parameters.bits]\ntype = \"int\"\n"), "parameters.bits.default",
                 "missing");
    expect_error(
        manifest_error(dir, base + "[parameters.mode]\ntype = \"string\"\ndefault = \"c\"\nchoices = "
                                   "[\"a\", \"b\"]\n"),
        "parameters.mode.default", "not one of the choices");
    expect_error(manifest_error(dir, base + "[parameters.bits]\ntype = \"int\"\ndefault = 1\nstep = 1\n"),
                 "parameters.bits.step", "unknown key");
}

}  // namespace
}  // namespace altgrad::test
