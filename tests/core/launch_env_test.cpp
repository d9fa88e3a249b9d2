// The launchers' environments (REFERENCE §8) as torchrun and srun set them, and every malformed
// or missing variable as one error naming it.
#include <filesystem>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "core/dir_lock.h"
#include "core/launch_env.h"

using namespace normlab::core;

namespace {

std::optional<LaunchEnv> read(const std::map<std::string, std::string>& vars) {
  return read_launch_env([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    read(vars);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(LaunchEnv, NoneWithoutALauncher) {
  EXPECT_FALSE(read({}).has_value());
  EXPECT_FALSE(read({{"MASTER_ADDR", "10.0.0.1"}, {"WORLD_SIZE", "4"}}).has_value());
}

TEST(LaunchEnv, Torchrun) {
  const auto env = read({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                         {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29500"},
                         {"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"TORCHELASTIC_RESTART_COUNT", "2"}});
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->world_size, 4);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_world_size, 2);
  EXPECT_EQ(env->master_addr, "node7");
  EXPECT_EQ(env->master_port, 29500);
  EXPECT_TRUE(env->agent_store);
  EXPECT_EQ(env->restart_count, 2);
  EXPECT_EQ(env->launcher, "torchrun");
}

TEST(LaunchEnv, Srun) {
  const auto env = read({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"},
                         {"SLURM_NTASKS_PER_NODE", "4"}, {"MASTER_ADDR", "n1"}, {"MASTER_PORT", "1234"}});
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_world_size, 4);
  EXPECT_FALSE(env->agent_store);
  EXPECT_EQ(env->launcher, "srun");
}

TEST(LaunchEnv, BadVariablesAreNamed) {
  const std::map<std::string, std::string> ok = {
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}};
  auto with = [&](const std::string& name, const std::string& value) {
    auto vars = ok;
    vars[name] = value;
    return vars;
  };
  auto without = [&](const std::string& name) {
    auto vars = ok;
    vars.erase(name);
    return vars;
  };
  EXPECT_NE(error_of(with("RANK", "2")).find("RANK=2: expected a whole number in [0, 1]"), std::string::npos);
  EXPECT_NE(error_of(with("WORLD_SIZE", "two")).find("WORLD_SIZE=two"), std::string::npos);
  EXPECT_NE(error_of(with("WORLD_SIZE", "0")).find("WORLD_SIZE=0"), std::string::npos);
  EXPECT_NE(error_of(with("MASTER_PORT", "70000")).find("MASTER_PORT=70000"), std::string::npos);
  EXPECT_NE(error_of(with("LOCAL_RANK", "-1")).find("LOCAL_RANK=-1"), std::string::npos);
  EXPECT_NE(error_of(without("MASTER_ADDR")).find("MASTER_ADDR is not set"), std::string::npos);
  EXPECT_NE(error_of(without("WORLD_SIZE")).find("WORLD_SIZE is not set"), std::string::npos);
  EXPECT_NE(error_of({{"SLURM_PROCID", "0"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}}).find("SLURM_NTASKS is not set"),
            std::string::npos);
}

// flock(2) excludes another open file description, in this process as in another one.
TEST(DirLock, SecondHolderIsRefusedNamingThePid) {
  const auto dir = (std::filesystem::temp_directory_path() / ("normlab_lock_" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  {
    DirLock first(dir, "normlab train");
    try {
      DirLock second(dir, "normlab train");
      FAIL() << "a second lock on " << dir << " was granted";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(dir + " is in use by another normlab process (pid " +
                                           std::to_string(::getpid()) + ")"),
                std::string::npos)
          << e.what();
    }
  }
  DirLock again(dir, "normlab train");  // released with its holder
  std::filesystem::remove_all(dir);
}
