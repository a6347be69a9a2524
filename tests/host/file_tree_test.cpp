// util/file_tree.hpp: remove_tree, the host's replacement of std::filesystem::remove_all.
#include "util/file_tree.hpp"

#include <unistd.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace altgrad::host {
namespace {

namespace fs = std::filesystem;

class RemoveTree : public ::testing::Test {
protected:
    void SetUp() override {
        root_ = fs::temp_directory_path() / ("altgrad-file-tree-" + std::to_string(::getpid()) + "-" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::create_directories(root_);
    }
    void TearDown() override {
        std::error_code ec;
        remove_tree(root_, ec);
    }
    static void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }
    fs::path root_;
};

TEST_F(RemoveTree, RemovesAFolderWithEverythingBelowIt) {
    const fs::path tree = root_ / "tree";
    fs::create_directories(tree / "a" / "b" / "c");
    fs::create_directories(tree / "empty");
    write(tree / "top.txt", "1");
    write(tree / ".hidden", "2");
    write(tree / "a" / "b" / "c" / "deep.bin", "3");
    std::error_code ec;
    remove_tree(tree, ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_FALSE(fs::exists(fs::symlink_status(tree)));
    EXPECT_TRUE(fs::is_directory(root_));  // its parent stays
}

TEST_F(RemoveTree, RemovesSymbolicLinksWithoutFollowingThem) {
    const fs::path outside = root_ / "outside", tree = root_ / "tree";
    fs::create_directories(outside);
    write(outside / "keep.txt", "kept");
    fs::create_directories(tree);
    fs::create_directory_symlink(outside, tree / "link");
    remove_tree(tree);
    EXPECT_FALSE(fs::exists(fs::symlink_status(tree)));
    EXPECT_TRUE(fs::exists(outside / "keep.txt"));
}

TEST_F(RemoveTree, RemovesAPlainFileAndASymbolicLinkItself) {
    write(root_ / "file.txt", "x");
    fs::create_symlink(root_ / "file.txt", root_ / "to_file");
    remove_tree(root_ / "to_file");
    EXPECT_FALSE(fs::exists(fs::symlink_status(root_ / "to_file")));
    EXPECT_TRUE(fs::exists(root_ / "file.txt"));
    remove_tree(root_ / "file.txt");
    EXPECT_FALSE(fs::exists(root_ / "file.txt"));
}

TEST_F(RemoveTree, AMissingPathIsNoError) {
    std::error_code ec = std::make_error_code(std::errc::io_error);
    remove_tree(root_ / "never-made", ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_NO_THROW(remove_tree(root_ / "never-made" / "below"));
}

TEST_F(RemoveTree, AnImpossiblePathIsAnErrorNamingIt) {
    write(root_ / "file.txt", "x");
    const fs::path below_a_file = root_ / "file.txt" / "sub";  // a file cannot have entries: ENOTDIR
    std::error_code ec;
    remove_tree(below_a_file, ec);
    EXPECT_EQ(ec, std::errc::not_a_directory);
    try {
        remove_tree(below_a_file);
        ADD_FAILURE() << "no exception";
    } catch (const fs::filesystem_error& e) {
        EXPECT_EQ(e.path1(), below_a_file);
        EXPECT_NE(std::string(e.what()).find("cannot remove"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(fs::exists(root_ / "file.txt"));
}

}  // namespace
}  // namespace altgrad::host
