// The on-disk cache protocol shared by the CPU and CUDA JITs (src/core/disk_cache.h): a miss
// builds, a hit does not, a corrupted entry is rebuilt, and concurrent builders of one entry
// build it once while every one of them gets the finished file.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "core/disk_cache.h"
#include "sol/error.h"

namespace sol {
namespace {

std::string fresh_dir(const char* name) {
  const std::string d = ::testing::TempDir() + "sol_disk_cache_" + name + "_" + std::to_string(::getpid());
  std::system(("rm -rf '" + d + "'").c_str());
  return d;
}

bool starts_with_entry(const std::string& path) { return disk_cache::read_file(path).rfind("entry:", 0) == 0; }

TEST(DiskCache, MissBuildsThenHitReads) {
  const std::string dir = fresh_dir("hit");
  int builds = 0;
  const auto build = [&](const std::string& tmp) {
    ++builds;
    std::ofstream(tmp) << "entry: one";
  };
  const disk_cache::Entry miss = disk_cache::get_or_build(dir, "k1.bin", "test", build, starts_with_entry);
  EXPECT_FALSE(miss.hit);
  EXPECT_EQ(miss.path, dir + "/k1.bin");
  const disk_cache::Entry hit = disk_cache::get_or_build(dir, "k1.bin", "test", build, starts_with_entry);
  EXPECT_TRUE(hit.hit);
  EXPECT_EQ(builds, 1);
  EXPECT_EQ(disk_cache::read_file(hit.path), "entry: one");
}

TEST(DiskCache, CorruptedEntryIsRebuilt) {
  const std::string dir = fresh_dir("corrupt");
  int builds = 0;
  const auto build = [&](const std::string& tmp) {
    ++builds;
    std::ofstream(tmp) << "entry: good";
  };
  disk_cache::get_or_build(dir, "k.bin", "test", build, starts_with_entry);
  std::ofstream(dir + "/k.bin") << "garbage";
  const disk_cache::Entry again = disk_cache::get_or_build(dir, "k.bin", "test", build, starts_with_entry);
  EXPECT_FALSE(again.hit);
  EXPECT_EQ(builds, 2);
  EXPECT_EQ(disk_cache::read_file(again.path), "entry: good");
}

TEST(DiskCache, FailedBuildLeavesNothingBehind) {
  const std::string dir = fresh_dir("fail");
  const auto build = [&](const std::string& tmp) {
    std::ofstream(tmp) << "entry: half";
    fail("test", "compiler failed");
  };
  EXPECT_THROW(disk_cache::get_or_build(dir, "k.bin", "test", build, starts_with_entry), Error);
  EXPECT_NE(::access((dir + "/k.bin").c_str(), F_OK), 0);
  const auto invalid = [&](const std::string& tmp) { std::ofstream(tmp) << "not an entry"; };
  EXPECT_THROW(disk_cache::get_or_build(dir, "k.bin", "test", invalid, starts_with_entry), Error);
  EXPECT_NE(::access((dir + "/k.bin").c_str(), F_OK), 0);
  // Only the lock file remains: no temporaries.
  EXPECT_EQ(std::system(("test $(ls '" + dir + "' | wc -l) -eq 1").c_str()), 0);
}

TEST(DiskCache, ConcurrentBuildersBuildOnce) {
  const std::string dir = fresh_dir("race");
  disk_cache::make_dirs(dir, "test");
  const std::string log = dir + "/builds.log";
  constexpr int kProcs = 6;
  pid_t pids[kProcs];
  for (int p = 0; p < kProcs; ++p) {
    pids[p] = ::fork();
    if (pids[p] == 0) {
      const auto build = [&](const std::string& tmp) {
        std::ofstream(log, std::ios::app) << "built\n";
        ::usleep(300000);  // a slow compiler: the other builders arrive while this one works
        std::ofstream out(tmp);
        for (int i = 0; i < 20000; ++i) out << "entry: a long entry written slowly\n";
      };
      const disk_cache::Entry e = disk_cache::get_or_build(dir, "shared.bin", "test", build, starts_with_entry);
      const std::string text = disk_cache::read_file(e.path);
      ::_exit(text.size() == 20000u * 35u ? 0 : 1);
    }
  }
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a builder saw an incomplete entry";
  }
  EXPECT_EQ(disk_cache::read_file(log), "built\n");
}

TEST(DiskCache, DigestSeparatesTexts) {
  EXPECT_EQ(disk_cache::digest("abc").size(), 32u);
  EXPECT_EQ(disk_cache::digest("abc"), disk_cache::digest("abc"));
  EXPECT_NE(disk_cache::digest("abc"), disk_cache::digest("abd"));
  EXPECT_NE(disk_cache::digest(""), disk_cache::digest(std::string(1, '\0')));
}

TEST(DiskCache, ElfCheckRejectsTruncatedObjects) {
  const std::string dir = fresh_dir("elf");
  disk_cache::make_dirs(dir, "test");
  const std::string self = disk_cache::read_file("/proc/self/exe");
  ASSERT_GT(self.size(), 4096u);
  disk_cache::publish_file(dir + "/whole", self, "test");
  disk_cache::publish_file(dir + "/cut", self.substr(0, self.size() / 2), "test");
  disk_cache::publish_file(dir + "/text", "not an object", "test");
  EXPECT_TRUE(disk_cache::elf_looks_complete(dir + "/whole"));
  EXPECT_FALSE(disk_cache::elf_looks_complete(dir + "/cut"));
  EXPECT_FALSE(disk_cache::elf_looks_complete(dir + "/text"));
  EXPECT_FALSE(disk_cache::elf_looks_complete(dir + "/missing"));
}

}  // namespace
}  // namespace sol
